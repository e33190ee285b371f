package io.kvrouter.prefixcache;

import static io.kvrouter.prefixcache.RadixTree.ROOT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Seeded random operations on a {@link RadixTree} checked step by step against a naive model: a map
 * of every stored granule-aligned prefix to its value, with a stamp and a lock count per prefix.
 *
 * <p>The model knows nothing of nodes. It predicts matches and handed-back values from the prefix
 * map alone; it takes node boundaries from the tree's public accessors only after checking that
 * they cover exactly the model's prefixes, and then predicts lock counts, the LRU order and every
 * eviction from its own stamps and locks (a node's stamp is the stamp of its first prefix, since
 * any walk that reaches a prefix passes through the earlier ones, and a walk that stops inside an
 * edge splits it). Override the seeds with {@code -Dkvrouter.radix.seeds=1,2,3}.
 */
@Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RadixTreeModelTest {
  private static final int STEPS = 2_500;

  private static long[] seeds() {
    String prop = System.getProperty("kvrouter.radix.seeds");
    if (prop == null || prop.isBlank()) {
      return new long[] {1L, 7L, 42L, 20_250_611L};
    }
    return Arrays.stream(prop.split(",")).mapToLong(s -> Long.parseLong(s.trim())).toArray();
  }

  @Test
  void modelBasedAgainstANaiveMap() {
    for (long seed : seeds()) {
      for (int granule : new int[] {1, 2}) {
        Run run = new Run(seed, granule);
        try {
          run.go();
        } catch (AssertionError | RuntimeException e) {
          throw new AssertionError(
              "model-based run failed: seed="
                  + seed
                  + " granule="
                  + granule
                  + " step="
                  + run.step
                  + " op="
                  + run.op
                  + " (rerun with -Dkvrouter.radix.seeds="
                  + seed
                  + ")",
              e);
        }
      }
    }
  }

  private record Held(int node, List<Integer> fullKey) {}

  private record NodeView(
      int id, int parent, int start, List<Integer> fullKey, List<Integer> vals) {
    List<Integer> firstPrefix(int granule) {
      return fullKey.subList(0, start + granule);
    }
  }

  private static final class Run {
    final int g;
    final Random rnd;
    final RadixTree<Integer> tree;

    final Map<List<Integer>, Integer> stored = new HashMap<>();
    final Map<List<Integer>, Long> stamps = new HashMap<>();
    final Map<List<Integer>, Integer> locks = new HashMap<>();
    final Map<Integer, List<Integer>> prefixOf = new HashMap<>();
    final List<Held> held = new ArrayList<>();
    final List<int[]> recentKeys = new ArrayList<>();

    final Set<Integer> given = new HashSet<>();
    final Set<Integer> handedBack = new HashSet<>();
    final Set<Integer> evicted = new HashSet<>();
    int nextValue;
    long clock;

    int step;
    String op = "none";

    Run(long seed, int granule) {
      this.g = granule;
      this.rnd = new Random(seed * 31 + granule);
      this.tree = new RadixTree<>(granule);
    }

    void go() {
      for (step = 0; step < STEPS; step++) {
        int dice = rnd.nextInt(100);
        if (dice < 35) {
          insert();
        } else if (dice < 60) {
          match();
        } else if (dice < 70) {
          lock();
        } else if (dice < 80) {
          unlock();
        } else if (dice < 83) {
          badUnlock();
        } else {
          evict(1 + rnd.nextInt(6));
        }
        if (tree.size() > 80) {
          evict(30);
        }
        verify();
      }
      // values conserved: each one given is stored, handed back or evicted, exactly once
      Set<Integer> accounted = new HashSet<>(stored.values());
      assertThat(accounted).hasSize(stored.size()).doesNotContainAnyElementsOf(handedBack);
      assertThat(evicted)
          .doesNotContainAnyElementsOf(handedBack)
          .doesNotContainAnyElementsOf(accounted);
      accounted.addAll(handedBack);
      accounted.addAll(evicted);
      assertThat(accounted).isEqualTo(given);
    }

    // ------------------------------------------------------------ key generation

    int token() {
      int r = rnd.nextInt(20);
      return r < 19 ? r % 4 : rnd.nextInt(); // a small alphabet for sharing, some wide ids
    }

    /** A key of whole granules, usually a cut of a recent key plus a few fresh granules. */
    int[] granuleKey() {
      int[] base = new int[0];
      if (!recentKeys.isEmpty() && rnd.nextInt(10) < 7) {
        int[] k = recentKeys.get(rnd.nextInt(recentKeys.size()));
        int cut = rnd.nextInt(k.length / g + 1) * g;
        base = Arrays.copyOf(k, cut);
      }
      int extra = rnd.nextInt(base.length == 0 ? 6 : 4) + (base.length == 0 ? 1 : 0);
      int[] key = Arrays.copyOf(base, base.length + extra * g);
      for (int i = base.length; i < key.length; i++) {
        key[i] = token();
      }
      return key;
    }

    // ------------------------------------------------------------ operations

    void insert() {
      int[] key = rnd.nextInt(50) == 0 ? new int[0] : granuleKey();
      op = "insert " + Arrays.toString(key);
      List<Integer> values = new ArrayList<>();
      for (int i = 0; i < key.length / g; i++) {
        values.add(nextValue);
        given.add(nextValue++);
      }
      List<Integer> expectBack = new ArrayList<>();
      long now = ++clock;
      for (int i = 1; i <= key.length / g; i++) {
        List<Integer> p = prefix(key, i * g);
        stamps.put(p, now);
        Integer v = values.get(i - 1);
        if (stored.containsKey(p)) {
          expectBack.add(v);
        } else {
          stored.put(p, v);
          prefixOf.put(v, p);
          locks.put(p, 0);
        }
      }
      RadixTree.Insert<Integer> ins = tree.insert(key, values);
      assertThat(ins.handedBack()).as("handed back").isEqualTo(expectBack);
      handedBack.addAll(ins.handedBack());
      assertThat(fullKey(ins.node())).as("node of insert").isEqualTo(prefix(key, key.length));
      if (key.length > 0) {
        recentKeys.add(key);
        if (recentKeys.size() > 30) {
          recentKeys.remove(0);
        }
      }
    }

    void match() {
      int[] key = granuleKey();
      if (g > 1 && rnd.nextBoolean()) {
        key = Arrays.copyOf(key, key.length + 1 + rnd.nextInt(g - 1)); // a partial run at the end
        key[key.length - 1] = token();
      }
      op = "match " + Arrays.toString(key);
      int expect = 0;
      while (expect + g <= key.length && stored.containsKey(prefix(key, expect + g))) {
        expect += g;
      }
      long now = ++clock;
      for (int len = g; len <= expect; len += g) {
        stamps.put(prefix(key, len), now);
      }
      RadixTree.Match m = tree.matchPrefix(key);
      assertThat(m.matchedTokens()).as("matched tokens").isEqualTo(expect);
      List<Integer> walked = new ArrayList<>();
      int prev = ROOT;
      for (int node : m.path()) {
        assertThat(tree.parent(node).getAsInt()).as("path is a chain").isEqualTo(prev);
        for (int tok : tree.key(node)) {
          walked.add(tok);
        }
        prev = node;
      }
      assertThat(walked).as("path labels").isEqualTo(prefix(key, expect));
    }

    void lock() {
      List<NodeView> nodes = nodes();
      if (nodes.isEmpty()) {
        return;
      }
      NodeView n = nodes.get(rnd.nextInt(nodes.size()));
      op = "lock " + n.id;
      tree.lock(n.id);
      for (int len = g; len <= n.fullKey.size(); len += g) {
        locks.merge(n.fullKey.subList(0, len), 1, Integer::sum);
      }
      held.add(new Held(n.id, n.fullKey));
    }

    void unlock() {
      if (held.isEmpty()) {
        return;
      }
      Held h = held.remove(rnd.nextInt(held.size()));
      op = "unlock " + h.node;
      assertThat(fullKey(h.node)).as("a locked node keeps its id and end").isEqualTo(h.fullKey);
      tree.unlock(h.node);
      for (int len = g; len <= h.fullKey.size(); len += g) {
        locks.merge(h.fullKey.subList(0, len), -1, Integer::sum);
      }
    }

    void badUnlock() {
      List<NodeView> free = nodes().stream().filter(n -> locks.get(n.firstPrefix(g)) == 0).toList();
      if (free.isEmpty()) {
        return;
      }
      int node = free.get(rnd.nextInt(free.size())).id;
      op = "unlock unlocked " + node;
      assertThatThrownBy(() -> tree.unlock(node)).isInstanceOf(IllegalStateException.class);
    }

    void evict(int n) {
      op = "evict " + n;
      // predict from the model's stamps and locks over the tree's (already verified) nodes
      List<NodeView> nodes = nodes();
      Map<Integer, Integer> kids = new HashMap<>();
      for (NodeView v : nodes) {
        kids.merge(v.parent, 1, Integer::sum);
      }
      List<NodeView> alive = new ArrayList<>(nodes);
      List<Integer> expected = new ArrayList<>();
      while (expected.size() < n) {
        NodeView oldest =
            alive.stream()
                .filter(v -> kids.getOrDefault(v.id, 0) == 0 && locks.get(v.firstPrefix(g)) == 0)
                .min(Comparator.comparingLong(v -> stamps.get(v.firstPrefix(g))))
                .orElse(null);
        if (oldest == null) {
          break;
        }
        alive.remove(oldest);
        kids.merge(oldest.parent, -1, Integer::sum);
        expected.addAll(oldest.vals);
      }
      List<Integer> actual = new ArrayList<>();
      int freed = tree.evict(n, actual::add);
      assertThat(actual).as("evicted values, in order").isEqualTo(expected);
      assertThat(freed).isEqualTo(actual.size());
      for (Integer v : actual) {
        List<Integer> p = prefixOf.remove(v);
        assertThat(p).as("evicted value %s was stored", v).isNotNull();
        assertThat(locks.get(p)).as("evicted prefix %s is unlocked", p).isZero();
        stored.remove(p);
        stamps.remove(p);
        locks.remove(p);
        evicted.add(v);
      }
    }

    // ------------------------------------------------------------ checks

    void verify() {
      tree.checkInvariants();
      List<NodeView> nodes = nodes();
      assertThat(tree.nodeCount()).isEqualTo(nodes.size());
      Map<List<Integer>, Integer> seen = new HashMap<>();
      for (NodeView v : nodes) {
        assertThat(v.fullKey.size() - v.start).isPositive();
        assertThat((v.fullKey.size() - v.start) % g).isZero();
        assertThat(v.vals.size() * g).isEqualTo(v.fullKey.size() - v.start);
        Integer lock = null;
        for (int i = 0; i < v.vals.size(); i++) {
          List<Integer> p = v.fullKey.subList(0, v.start + (i + 1) * g);
          assertThat(seen.put(p, v.vals.get(i))).as("prefix %s twice", p).isNull();
          assertThat(locks.get(p)).as("model lock of %s", p).isNotNull();
          if (lock == null) {
            lock = locks.get(p);
          }
          assertThat(locks.get(p)).as("one lock count per node").isEqualTo(lock);
        }
        assertThat(tree.lockCount(v.id)).as("lock count of %s", v.id).isEqualTo(lock);
        // children are keyed by distinct first runs
        Set<List<Integer>> firstRuns = new HashSet<>();
        for (int c : tree.children(v.id)) {
          int[] k = tree.key(c);
          assertThat(firstRuns.add(prefix(k, g))).isTrue();
        }
      }
      assertThat(seen).isEqualTo(stored);
      assertThat(tree.size()).isEqualTo(stored.size());
      assertThat(tree.isEmpty()).isEqualTo(stored.isEmpty());

      List<NodeView> leaves =
          nodes.stream()
              .filter(v -> tree.childCount(v.id) == 0 && locks.get(v.firstPrefix(g)) == 0)
              .sorted(Comparator.comparingLong(v -> stamps.get(v.firstPrefix(g))))
              .toList();
      assertThat(leaves.stream().map(v -> stamps.get(v.firstPrefix(g))).distinct().count())
          .as("leaf stamps are distinct")
          .isEqualTo(leaves.size());
      assertThat(tree.lruOrder())
          .as("LRU order")
          .containsExactly(leaves.stream().mapToInt(NodeView::id).toArray());
    }

    List<NodeView> nodes() {
      List<NodeView> out = new ArrayList<>();
      collect(ROOT, List.of(), out);
      return out;
    }

    void collect(int node, List<Integer> above, List<NodeView> out) {
      for (int c : tree.children(node)) {
        List<Integer> full = new ArrayList<>(above);
        for (int tok : tree.key(c)) {
          full.add(tok);
        }
        full = List.copyOf(full);
        out.add(new NodeView(c, node, above.size(), full, tree.values(c)));
        collect(c, full, out);
      }
    }

    List<Integer> fullKey(int node) {
      List<Integer> out = new ArrayList<>();
      for (int n = node; n != ROOT; n = tree.parent(n).getAsInt()) {
        int[] k = tree.key(n);
        for (int i = k.length - 1; i >= 0; i--) {
          out.add(0, k[i]);
        }
      }
      return out;
    }

    static List<Integer> prefix(int[] key, int len) {
      return IntStream.of(key).limit(len).boxed().toList();
    }
  }
}
