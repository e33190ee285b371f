package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link PositionalTable} against a plain map, on seeded random streams of inserts and removals
 * that grow it through several rebuilds and shrink it again, so lookups run over long probe runs at
 * up to 3/4 full, across tag words, past tombstones and around the end of the array; every lookup
 * of a key that is not there must miss, also for a key that shares the sequence hash.
 */
class PositionalTableTest {

  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1, 2, 3})
  void behavesLikeAMap(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PositionalTable table = new PositionalTable();
    Long2ObjectOpenHashMap<PositionalEntry> ref = new Long2ObjectOpenHashMap<>();
    List<PositionalEntry> live = new ArrayList<>();
    int maxSize = 0;
    for (int op = 0; op < 60_000; op++) {
      // phases: grow to a few thousand entries, shrink to a few, grow again
      boolean growing = (op / 10_000) % 2 == 0;
      if (rnd.nextInt(100) < (growing ? 70 : 25) || live.isEmpty()) {
        long seq = rnd.nextLong();
        PositionalEntry e = new PositionalEntry(seq, seq >>> 7, null);
        table = table.put(e);
        ref.put(seq, e);
        live.add(e);
      } else {
        int k = rnd.nextInt(live.size());
        PositionalEntry e = live.get(k);
        live.set(k, live.get(live.size() - 1));
        live.remove(live.size() - 1);
        assertThat(table.remove(e)).as("seed %d, op %d: remove", seed, op).isTrue();
        table = table.shrunk();
        ref.remove(e.seq);
      }
      maxSize = Math.max(maxSize, ref.size());
      assertThat(table.size()).isEqualTo(ref.size());
      assertThat(table.capacity() * 3L).isGreaterThanOrEqualTo(table.size() * 4L);
      if (op % 7 == 0) {
        for (int q = 0; q < 8 && !live.isEmpty(); q++) {
          PositionalEntry e = live.get(rnd.nextInt(live.size()));
          assertThat(table.get(e.seq, e.local)).as("seed %d, op %d: hit", seed, op).isSameAs(e);
          // the same sequence hash with another local hash is another key
          assertThat(table.get(e.seq, e.local + 1)).as("seed %d, op %d", seed, op).isNull();
        }
        long absent = rnd.nextLong();
        assertThat(table.get(absent, absent >>> 7))
            .as("seed %d, op %d: miss", seed, op)
            .isSameAs(ref.get(absent));
      }
    }
    assertThat(maxSize).isGreaterThan(3_000);
    for (PositionalEntry e : live) assertThat(table.get(e.seq, e.local)).isSameAs(e);
  }

  /**
   * A table of more than two segments of slots (2^15 each, the last one shorter): probe runs cross
   * from one segment into the next and wrap from the last one to the first; every entry is found
   * and absent keys miss, as the table grows through rebuilds and shrinks again.
   */
  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {4})
  void spansSegments(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PositionalTable table = new PositionalTable();
    List<PositionalEntry> live = new ArrayList<>();
    for (int i = 0; i < 60_000; i++) {
      long seq = rnd.nextLong();
      PositionalEntry e = new PositionalEntry(seq, ~seq, null);
      table = table.put(e);
      live.add(e);
    }
    assertThat(table.capacity()).isGreaterThan(2 << 15);
    assertThat(table.capacity() % (1 << 15)).isNotZero(); // a shorter last segment
    for (PositionalEntry e : live) assertThat(table.get(e.seq, e.local)).isSameAs(e);
    for (int q = 0; q < 10_000; q++) {
      long absent = rnd.nextLong();
      assertThat(table.get(absent, ~absent)).isNull();
    }
    while (live.size() > 100) {
      PositionalEntry e = live.remove(live.size() - 1);
      assertThat(table.remove(e)).isTrue();
      table = table.shrunk();
    }
    assertThat(table.capacity()).isLessThan(1 << 15);
    for (PositionalEntry e : live) assertThat(table.get(e.seq, e.local)).isSameAs(e);
    assertThat(table.size()).isEqualTo(100);
  }

  /**
   * A bounded index's used bits, kept per slot in the table, against a plain set of the entries
   * marked: marks and clears at random while the table grows through rebuilds (which must carry the
   * bits along) and shrinks again; a new entry starts unused, also in a slot a marked entry left,
   * and an entry no longer in the table is never used.
   */
  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1, 2, 3})
  void usedBitsFollowTheirEntries(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PositionalTable table = new PositionalTable(true);
    Set<PositionalEntry> used = new HashSet<>();
    List<PositionalEntry> live = new ArrayList<>();
    List<PositionalEntry> gone = new ArrayList<>();
    int rebuilds = 0;
    for (int op = 0; op < 60_000; op++) {
      boolean growing = (op / 10_000) % 2 == 0;
      int r = rnd.nextInt(100);
      if (live.isEmpty() || r < (growing ? 45 : 15)) {
        long seq = rnd.nextLong();
        PositionalEntry e = new PositionalEntry(seq, seq >>> 7, null);
        PositionalTable next = table.put(e);
        if (next != table) rebuilds++;
        table = next;
        live.add(e);
        assertThat(table.isUsed(e)).as("seed %d, op %d: new entry", seed, op).isFalse();
      } else if (r < 60) {
        int k = rnd.nextInt(live.size());
        PositionalEntry e = live.get(k);
        live.set(k, live.get(live.size() - 1));
        live.remove(live.size() - 1);
        assertThat(table.remove(e)).isTrue();
        PositionalTable next = table.shrunk();
        if (next != table) rebuilds++;
        table = next;
        used.remove(e);
        gone.add(e);
        assertThat(table.isUsed(e)).as("seed %d, op %d: removed", seed, op).isFalse();
      } else if (r < 85) {
        PositionalEntry e = live.get(rnd.nextInt(live.size()));
        table.markUsed(e);
        used.add(e);
      } else {
        PositionalEntry e = live.get(rnd.nextInt(live.size()));
        table.clearUsed(e);
        used.remove(e);
      }
      if (op % 97 == 0) {
        for (PositionalEntry e : live) {
          assertThat(table.isUsed(e)).as("seed %d, op %d", seed, op).isEqualTo(used.contains(e));
        }
        for (int q = 0; q < 4 && !gone.isEmpty(); q++) {
          PositionalEntry e = gone.get(rnd.nextInt(gone.size()));
          table.markUsed(e); // no longer in the table: a no-op
          assertThat(table.isUsed(e)).isFalse();
        }
      }
    }
    assertThat(rebuilds).isGreaterThan(10);
    for (PositionalEntry e : live) assertThat(table.isUsed(e)).isEqualTo(used.contains(e));
  }

  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1})
  void aTableWithoutUsedBitsMarksNothing(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PositionalTable table = new PositionalTable();
    long seq = rnd.nextLong();
    PositionalEntry e = new PositionalEntry(seq, seq >>> 7, null);
    table = table.put(e);
    table.markUsed(e);
    assertThat(table.isUsed(e)).isFalse();
    assertThat(table.get(seq, seq >>> 7)).isSameAs(e);
  }
}
