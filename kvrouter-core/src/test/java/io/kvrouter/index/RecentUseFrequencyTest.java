package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Recent-use frequencies of the single-threaded tree ({@link OverlapScores#frequencies()}): off by
 * default; when on, entry {@code i} of a query's answer counts the queries within the window (this
 * one included) whose match covered the query's block {@code i}, and a block that leaves the tree
 * starts from nothing when it comes back. Checked by hand on small cases and against a naive model
 * on seeded random streams.
 */
class RecentUseFrequencyTest {
  private static final long SECOND = 1_000_000_000L;

  private static void store(KvIndex index, long... locals) {
    index.apply(
        new RouterEvent(
            Worker.of(0),
            0,
            CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(locals), locals)));
  }

  @Test
  void offByDefault() {
    KvIndex index = KvIndexes.radixTree();
    store(index, 1, 2, 3);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies()).isEmpty();
  }

  @Test
  void countsUsesAlongTheMatchedPathWithinTheWindow() {
    AtomicLong now = new AtomicLong(100 * SECOND);
    KvIndex index = new TreeIndex(false, 10 * SECOND, now::get);
    store(index, 1, 2, 3);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(1, 1, 1);
    now.addAndGet(SECOND);
    assertThat(index.findMatches(new long[] {1, 2, 9}, false).frequencies()).containsExactly(2, 2);
    now.addAndGet(SECOND);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(3, 3, 2);
    // 10 s after the first query, it leaves the window
    now.addAndGet(9 * SECOND);
    assertThat(index.findMatches(new long[] {1}, false).frequencies()).containsExactly(3);
    now.addAndGet(20 * SECOND);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(1, 1, 1);
    assertThat(index.findMatches(new long[] {7}, false).frequencies()).isEmpty();
  }

  @Test
  void onlyTheSingleThreadedTreeTracksThem() {
    assertThatThrownBy(() -> new TreeIndex(true, SECOND, System::nanoTime))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvIndexes.radixTree(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("window must be positive");
  }

  @Test
  void theFactoryWindowCountsQueriesOnTheSystemClock() {
    // a window far longer than this test, so the real clock cannot age a use out of it
    KvIndex index = KvIndexes.radixTree(Duration.ofHours(1));
    store(index, 1, 2, 3);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(1, 1, 1);
    assertThat(index.findMatches(new long[] {1, 2}, false).frequencies()).containsExactly(2, 2);
    assertThat(index.findMatches(new long[] {1, 2, 3, 4}, false).frequencies())
        .containsExactly(3, 3, 2);
  }

  @Test
  void aBlockThatLeavesTheTreeStartsAgainFromNothing() {
    AtomicLong now = new AtomicLong(0);
    KvIndex index = new TreeIndex(false, 10 * SECOND, now::get);
    store(index, 1, 2, 3);
    index.findMatches(new long[] {1, 2, 3}, false);
    index.findMatches(new long[] {1, 2, 3}, false);
    // block 3 goes (nobody holds it, nothing below it): its uses go with it
    index.apply(
        new RouterEvent(
            Worker.of(0),
            0,
            CacheEvent.removed(SequenceHasher.sequenceHashes(new long[] {1, 2, 3})[2])));
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies()).containsExactly(3, 3);
    store(index, 1, 2, 3);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(4, 4, 1);
    // a clear takes every block of the only worker: all start again
    index.apply(new RouterEvent(Worker.of(0), 0, CacheEvent.cleared()));
    store(index, 1, 2, 3);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(1, 1, 1);
  }

  private static final long[] SEEDS = {1, 2, 3, 42, 2026};
  private static final long WINDOW = 10 * SECOND;

  @Test
  void randomStreamsAgreeWithANaiveModel() {
    for (long seed : SEEDS) {
      try {
        new ModelRun(seed).go(3000);
      } catch (AssertionError e) {
        throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
      }
    }
  }

  /**
   * The model: per worker the set of block prefixes it holds (connected or not); a block is in the
   * tree while some worker holds it or a block below it, and its uses are a plain list of query
   * times, emptied when it leaves the tree. A query's matched depth is the longest prefix some
   * worker holds every block of; entry i is the number of uses of block i, this query's included,
   * at most WINDOW old.
   */
  private static final class ModelRun {
    final SplittableRandom rnd;
    final AtomicLong now = new AtomicLong(1_000 * SECOND);
    final KvIndex index = new TreeIndex(false, WINDOW, now::get);
    final List<Set<List<Long>>> held = List.of(new HashSet<>(), new HashSet<>());
    final Map<List<Long>, List<Long>> uses = new HashMap<>();

    ModelRun(long seed) {
      rnd = new SplittableRandom(seed);
    }

    /** A path of 1..max blocks, two choices per depth, so paths share prefixes. */
    List<Long> randomPath(int max) {
      int n = 1 + rnd.nextInt(max);
      List<Long> p = new ArrayList<>();
      for (int d = 0; d < n; d++) p.add(10L * (d + 1) + rnd.nextInt(2));
      return p;
    }

    static long[] locals(List<Long> p) {
      return p.stream().mapToLong(Long::longValue).toArray();
    }

    boolean inTree(List<Long> prefix) {
      for (Set<List<Long>> h : held) {
        for (List<Long> q : h) {
          if (q.size() >= prefix.size() && q.subList(0, prefix.size()).equals(prefix)) return true;
        }
      }
      return false;
    }

    void forgetLeftBlocks() {
      uses.keySet().removeIf(p -> !inTree(p));
    }

    void go(int ops) {
      for (int step = 0; step < ops; step++) {
        int w = rnd.nextInt(2);
        int op = rnd.nextInt(10);
        if (op < 3) {
          List<Long> p = randomPath(4);
          long[] l = locals(p);
          index.apply(
              new RouterEvent(
                  Worker.of(w), 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(l), l)));
          for (int i = 1; i <= p.size(); i++) held.get(w).add(List.copyOf(p.subList(0, i)));
        } else if (op < 5) {
          List<Long> p = randomPath(4);
          long[] seqs = SequenceHasher.sequenceHashes(locals(p));
          index.apply(new RouterEvent(Worker.of(w), 0, CacheEvent.removed(seqs[p.size() - 1])));
          held.get(w).remove(p);
        } else if (op < 6) {
          index.apply(new RouterEvent(Worker.of(w), 0, CacheEvent.cleared()));
          held.get(w).clear();
        } else {
          now.addAndGet(rnd.nextLong(4 * SECOND));
          List<Long> q = randomPath(5);
          int[] got = index.findMatches(locals(q), false).frequencies();
          assertThat(got).as("step %d, query %s", step, q).containsExactly(expected(q));
        }
        forgetLeftBlocks();
      }
    }

    int[] expected(List<Long> q) {
      int depth = 0;
      for (Set<List<Long>> h : held) {
        int k = 0;
        while (k < q.size() && h.contains(q.subList(0, k + 1))) k++;
        depth = Math.max(depth, k);
      }
      int[] out = new int[depth];
      long t = now.get();
      for (int i = 0; i < depth; i++) {
        List<Long> times =
            uses.computeIfAbsent(List.copyOf(q.subList(0, i + 1)), k -> new ArrayList<>());
        times.add(t);
        out[i] = (int) times.stream().filter(u -> u >= t - WINDOW).count();
      }
      return out;
    }
  }
}
