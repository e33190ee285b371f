package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import it.unimi.dsi.fastutil.longs.Long2ObjectMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link NameTable} against a plain map from name to node, on seeded random streams that grow and
 * shrink it through several resizes, with names that are mostly the node's own key and sometimes
 * not, and nodes that share a key.
 */
class NameTableTest {

  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1, 2, 3, 4})
  void behavesLikeAMap(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    // keys from a small range (with seed 4: a tiny one), so nodes share keys and probe runs touch
    long keyRange = seed == 4 ? 40 : 5_000;
    List<PositionalEntry> nodes = new ArrayList<>();
    NameTable<PositionalEntry> table = new NameTable<>(false);
    Long2ObjectOpenHashMap<PositionalEntry> ref = new Long2ObjectOpenHashMap<>();
    int maxSize = 0;
    for (int op = 0; op < 200_000; op++) {
      // phases: grow to a few thousand names, shrink to almost none, grow again
      boolean growing = (op / 25_000) % 2 == 0;
      int kind = rnd.nextInt(100);
      long name;
      if (kind < (growing ? 60 : 25)) {
        PositionalEntry node;
        if (rnd.nextInt(10) < 8 || nodes.isEmpty()) {
          // a name that is the node's own key: a new node, or one already made with that key
          name = rnd.nextLong(keyRange) * 0x100000001L;
          node = rnd.nextBoolean() ? nodeWithKey(nodes, name) : null;
          if (node == null) {
            node = new PositionalEntry(name, rnd.nextLong(), null);
            nodes.add(node);
          }
        } else {
          // any other name, for any node
          name = rnd.nextLong(keyRange) * 0x100000001L + rnd.nextInt(3);
          node = nodes.get(rnd.nextInt(nodes.size()));
        }
        assertThat(table.put(name, node))
            .as("put %d, op %d", name, op)
            .isSameAs(ref.put(name, node));
      } else if (kind < 90) {
        name = pickName(rnd, ref, keyRange);
        assertThat(table.remove(name)).as("remove %d, op %d", name, op).isSameAs(ref.remove(name));
      } else {
        name = pickName(rnd, ref, keyRange);
        assertThat(table.get(name)).as("get %d, op %d", name, op).isSameAs(ref.get(name));
      }
      assertThat(table.size()).isEqualTo(ref.size());
      maxSize = Math.max(maxSize, ref.size());
      if (op % 5_000 == 0) checkAll(table, ref);
    }
    checkAll(table, ref);
    assertThat(maxSize).as("the stream must grow the table").isGreaterThan(seed == 4 ? 40 : 1_000);
    table.clear();
    assertThat(table.isEmpty()).isTrue();
    for (long name : ref.keySet()) assertThat(table.get(name)).isNull();
  }

  /**
   * removeOtherNamesOf, with the backward index of a bounded index and without: on a stream that
   * gives many nodes two or three names besides their own key, it returns and removes exactly the
   * node's names other than its key, and the table stays equal to the map.
   */
  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1, 2, 3})
  void removeOtherNamesOfFindsExactlyTheOtherNames(long seed) {
    for (boolean indexed : new boolean[] {false, true}) {
      SplittableRandom rnd = new SplittableRandom(seed);
      List<PositionalEntry> nodes = new ArrayList<>();
      NameTable<PositionalEntry> table = new NameTable<>(indexed);
      Long2ObjectOpenHashMap<PositionalEntry> ref = new Long2ObjectOpenHashMap<>();
      long removedNames = 0;
      for (int op = 0; op < 40_000; op++) {
        int kind = rnd.nextInt(100);
        if (kind < 50 || nodes.isEmpty()) {
          PositionalEntry node;
          long name;
          if (rnd.nextInt(3) == 0 || nodes.isEmpty()) {
            name = rnd.nextLong(3_000) * 0x100000001L;
            node = new PositionalEntry(name, rnd.nextLong(), null);
            nodes.add(node);
          } else {
            node = nodes.get(rnd.nextInt(nodes.size()));
            name = rnd.nextLong(3_000) * 0x100000001L + 1 + rnd.nextInt(3);
          }
          assertThat(table.put(name, node)).isSameAs(ref.put(name, node));
        } else if (kind < 80) {
          long name = pickName(rnd, ref, 3_000);
          assertThat(table.remove(name)).isSameAs(ref.remove(name));
        } else {
          PositionalEntry node = nodes.get(rnd.nextInt(nodes.size()));
          LongArrayList want = new LongArrayList();
          for (Long2ObjectMap.Entry<PositionalEntry> e : ref.long2ObjectEntrySet()) {
            if (e.getValue() == node && e.getLongKey() != node.seq) want.add(e.getLongKey());
          }
          LongArrayList got = table.removeOtherNamesOf(node);
          if (want.isEmpty()) {
            assertThat((Object) got).as("op %d", op).isNull();
          } else {
            assertThat(got == null ? null : got.toLongArray())
                .as("op %d", op)
                .containsExactlyInAnyOrder(want.toLongArray());
            for (int i = 0; i < want.size(); i++) ref.remove(want.getLong(i));
            removedNames += want.size();
          }
        }
        assertThat(table.size()).isEqualTo(ref.size());
        if (op % 2_000 == 0) checkAll(table, ref);
      }
      checkAll(table, ref);
      assertThat(removedNames).as("the stream must exercise it").isGreaterThan(1_000);
    }
  }

  private static PositionalEntry nodeWithKey(List<PositionalEntry> nodes, long key) {
    for (int i = nodes.size() - 1; i >= Math.max(0, nodes.size() - 50); i--) {
      if (nodes.get(i).seq == key) return nodes.get(i);
    }
    return null;
  }

  private static long pickName(
      SplittableRandom rnd, Long2ObjectOpenHashMap<PositionalEntry> ref, long keyRange) {
    if (!ref.isEmpty() && rnd.nextBoolean()) {
      // a name that is there: walk to a random one
      int skip = rnd.nextInt(Math.min(ref.size(), 64));
      for (long k : ref.keySet()) {
        if (skip-- == 0) return k;
      }
    }
    return rnd.nextLong(keyRange) * 0x100000001L + rnd.nextInt(3);
  }

  private static void checkAll(
      NameTable<PositionalEntry> table, Long2ObjectOpenHashMap<PositionalEntry> ref) {
    for (Long2ObjectMap.Entry<PositionalEntry> e : ref.long2ObjectEntrySet()) {
      assertThat(table.get(e.getLongKey())).isSameAs(e.getValue());
    }
    // every name's block, once per name
    List<PositionalEntry> blocks = new ArrayList<>();
    table.addBlocksTo(blocks);
    assertThat(blocks).hasSize(ref.size());
    Map<PositionalEntry, Integer> want = new HashMap<>();
    for (PositionalEntry n : ref.values()) want.merge(n, 1, Integer::sum);
    Map<PositionalEntry, Integer> got = new HashMap<>();
    for (PositionalEntry n : blocks) got.merge(n, 1, Integer::sum);
    assertThat(got).isEqualTo(want);
    // every block with one of its names
    Object2LongOpenHashMap<PositionalEntry> names = new Object2LongOpenHashMap<>();
    table.addNamesTo(names);
    assertThat(names.keySet()).isEqualTo(want.keySet());
    for (PositionalEntry n : names.keySet()) {
      assertThat(ref.get(names.getLong(n))).isSameAs(n);
    }
  }
}
