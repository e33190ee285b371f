package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The hybrid-model hit rule (docs/routing.md, "Hybrid models"): a main index of the kind under
 * test, {@link HybridIndex} for the other KV cache groups, and {@link HybridIndex#rescore} must
 * give every rank the engine's hit. A few cases by hand, then seeded random per-group store / evict
 * / clear streams checked against {@link HybridReference} after every query. Subclassed once per
 * index kind, as {@link KvIndexConformanceTest} is.
 */
abstract class HybridConformanceTest {
  private static final int BS = 4;
  private static final int OPS = Integer.getInteger("kvrouter.hybrid.ops", 3000);

  protected KvIndex main;
  private HybridIndex groups;
  private long eventId;

  /** A fresh, empty main index of the kind under test. */
  protected abstract KvIndex newMainIndex();

  @BeforeEach
  void setUp() {
    main = newMainIndex();
    groups = new HybridIndex(BS);
  }

  @AfterEach
  void tearDown() {
    main.close();
  }

  // ---------------------------------------------------------------- helpers

  private static final Worker A = new Worker(1, 0);
  private static final Worker B = new Worker(2, 0);
  private static final long[] Q = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  private static final long[] SEQ = SequenceHasher.sequenceHashes(Q);

  private void mainStore(Worker w, int blocks) {
    main.apply(
        new RouterEvent(
            w,
            eventId++,
            CacheEvent.storedAtRoot(Arrays.copyOf(SEQ, blocks), Arrays.copyOf(Q, blocks))));
  }

  private void groupStore(int g, KvCacheGroup kind, Worker w, int... positions) {
    long[] h = new long[positions.length];
    for (int i = 0; i < h.length; i++) h[i] = SEQ[positions[i]];
    groups.apply(g, kind, new RouterEvent(w, eventId++, CacheEvent.storedAtRoot(h, h.clone())));
  }

  private void groupRemove(int g, Worker w, int... positions) {
    long[] h = new long[positions.length];
    for (int i = 0; i < h.length; i++) h[i] = SEQ[positions[i]];
    groups.apply(g, null, new RouterEvent(w, eventId++, CacheEvent.removed(h)));
  }

  private static int[] range(int from, int to) {
    int[] out = new int[to - from];
    for (int i = 0; i < out.length; i++) out[i] = from + i;
    return out;
  }

  private Map<Worker, Integer> hits(int cap) {
    main.flush();
    return groups.rescore(main.findMatches(Q, false), SEQ, cap).scores();
  }

  // ---------------------------------------------------------------- by hand

  @Test
  void withoutGroupsTheMainScoresComeBackUnchanged() {
    mainStore(A, 6);
    main.flush();
    OverlapScores s = main.findMatches(Q, false);
    assertThat(groups.active()).isFalse();
    assertThat(groups.rescore(s, SEQ, 3)).isSameAs(s);
  }

  @Test
  void aSlidingWindowThatLostItsBlocksCutsTheHitBackToAWindowItHolds() {
    KvCacheGroup sw = KvCacheGroup.slidingWindow(9); // ceil(8 / 4) = 2 blocks before the cut
    mainStore(A, 8);
    mainStore(B, 8);
    groupStore(1, sw, A, range(0, 8));
    groupStore(1, sw, B, range(0, 8));
    assertThat(hits(10)).isEqualTo(Map.of(A, 8, B, 8));
    // B's window evicted blocks 6 and 7 (vLLM frees them while its full-attention copies stay)
    groupRemove(1, B, 6, 7);
    assertThat(hits(10)).isEqualTo(Map.of(A, 8, B, 6));
    groupRemove(1, B, 4);
    assertThat(hits(10)).as("blocks 4..5: only 5 left before 6").isEqualTo(Map.of(A, 8, B, 4));
    groupRemove(1, B, 0, 1, 2);
    assertThat(hits(10)).as("no two held blocks end at 4 or before").containsOnlyKeys(A);
  }

  @Test
  void aWindowNearTheStartNeedsEveryBlockBeforeTheCut() {
    KvCacheGroup sw = KvCacheGroup.slidingWindow(13); // 3 blocks
    mainStore(A, 8);
    groupStore(1, sw, A, 0, 1, 5, 6);
    // no 3 held blocks in a row; the run from block 0 is 2 blocks, shorter than the window
    assertThat(hits(10)).isEqualTo(Map.of(A, 2));
  }

  @Test
  void aStateGroupNeedsTheStateExactlyAtTheCut() {
    mainStore(A, 9);
    groupStore(2, KvCacheGroup.state(), A, 3, 6);
    assertThat(hits(10)).isEqualTo(Map.of(A, 7));
    assertThat(hits(6)).as("capped below 7: the state after block 3").isEqualTo(Map.of(A, 4));
    groupRemove(2, A, 3);
    assertThat(hits(6)).isEmpty();
  }

  @Test
  void everyGroupMustServeTheSameCut() {
    KvCacheGroup sw = KvCacheGroup.slidingWindow(5); // 1 block
    mainStore(A, 10);
    groupStore(1, sw, A, 2, 4, 7, 9);
    groupStore(2, KvCacheGroup.state(), A, 2, 6);
    // window ends at 10, 8, 5, 3; states at 3, 7: the largest cut both serve is 3
    assertThat(hits(10)).isEqualTo(Map.of(A, 3));
  }

  @Test
  void aSecondFullAttentionGroupAndChunkedLocalAttention() {
    mainStore(A, 10);
    groups.apply(
        3,
        KvCacheGroup.full(),
        new RouterEvent(
            A, eventId++, CacheEvent.storedAtRoot(Arrays.copyOf(SEQ, 7), Arrays.copyOf(Q, 7))));
    assertThat(hits(10)).isEqualTo(Map.of(A, 7));
    // chunks of 8 tokens (2 blocks): a cut of 7 needs block 6 only, 6 needs nothing
    groupStore(4, KvCacheGroup.chunkedLocal(8), A, 4, 5);
    assertThat(hits(10)).isEqualTo(Map.of(A, 6));
  }

  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void clearingTheRankEmptiesItsGroups(boolean wholeWorker) {
    mainStore(A, 4);
    groupStore(2, KvCacheGroup.state(), A, 3);
    assertThat(hits(10)).isEqualTo(Map.of(A, 4));
    if (wholeWorker) groups.clearWorker(A.workerId());
    else groups.clearRank(A);
    assertThat(hits(10)).isEmpty();
    assertThat(groups.positions(2, A)).isEmpty();
  }

  @Test
  void aGroupKeepsTheKindItWasDeclaredWith() {
    groupStore(1, KvCacheGroup.slidingWindow(8), A, 0);
    groupStore(1, KvCacheGroup.state(), A, 1);
    assertThat(groups.refusedEvents()).isEqualTo(1);
    assertThat(groups.groups()).isEqualTo(Map.of(1, KvCacheGroup.slidingWindow(8)));
    groups.declare(KvCacheGroups.parse("full,sliding:8,state"));
    assertThat(groups.groups())
        .isEqualTo(Map.of(1, KvCacheGroup.slidingWindow(8), 2, KvCacheGroup.state()));
    groupStore(0, KvCacheGroup.full(), A, 0);
    assertThat(groups.refusedEvents())
        .as("the main group's events go to the main index")
        .isEqualTo(2);
  }

  // ---------------------------------------------------------------- random streams

  @ParameterizedTest
  @ValueSource(longs = {1, 2, 3, 42, 1337})
  void randomPerGroupStreamsAgreeWithTheNaiveModel(long seed) {
    try {
      new Run(seed).go();
    } catch (AssertionError e) {
      throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
    }
  }

  /** One seeded run: its own groups, workers and alphabet. */
  private final class Run {
    final SplittableRandom rnd;
    final HybridReference ref = new HybridReference(BS);
    final Worker[] workers = {
      new Worker(0, 0), new Worker(0, 1), new Worker(1, 0), new Worker(2, 0)
    };
    final List<Integer> groupIds = new ArrayList<>();
    final Map<Integer, KvCacheGroup> kinds = new TreeMap<>();
    int queries;

    Run(long seed) {
      rnd = new SplittableRandom(seed);
      // group 0 is the main one; the others are drawn: windows of 1..4 blocks, states, chunks
      int n = 1 + rnd.nextInt(3);
      for (int g = 1; g <= n; g++) {
        KvCacheGroup k =
            switch (rnd.nextInt(5)) {
              case 0, 1 -> KvCacheGroup.slidingWindow(1 + rnd.nextInt(17));
              case 2 -> KvCacheGroup.state();
              case 3 -> KvCacheGroup.chunkedLocal(4 * (1 + rnd.nextInt(3)) + rnd.nextInt(2) * 2);
              default -> KvCacheGroup.full();
            };
        groupIds.add(g);
        kinds.put(g, k);
      }
    }

    long local() {
      return rnd.nextInt(3);
    }

    void go() {
      for (int op = 0; op < OPS; op++) {
        Worker w = workers[rnd.nextInt(workers.length)];
        int dice = rnd.nextInt(100);
        if (dice < 25) {
          mainStoreRandom(w);
        } else if (dice < 33) {
          mainRemove(w);
        } else if (dice < 58) {
          groupStoreRandom(w);
        } else if (dice < 70) {
          groupRemoveRandom(w);
        } else if (dice < 71) {
          int g = groupIds.get(rnd.nextInt(groupIds.size()));
          RouterEvent e = new RouterEvent(w, eventId++, CacheEvent.cleared());
          groups.apply(g, null, e);
          ref.applyGroup(g, null, e);
        } else if (dice < 72) {
          RouterEvent e = new RouterEvent(w, eventId++, CacheEvent.cleared());
          main.apply(e);
          groups.clearRank(w); // what the router does with a device Cleared
          ref.applyMain(e);
        } else if (dice < 73) {
          main.clearWorker(w.workerId());
          groups.clearWorker(w.workerId());
          ref.clearWorker(w.workerId());
        } else if (dice < 74) {
          main.removeWorker(w.workerId());
          groups.removeWorker(w.workerId());
          ref.removeWorker(w.workerId());
        } else {
          query();
        }
      }
      assertThat(queries).isGreaterThan(OPS / 5);
    }

    /** A path to store or query: a held one, possibly extended, or a fresh one. */
    List<Long> path(boolean extend) {
      List<Long> base = new ArrayList<>();
      Map<Long, List<Long>> mine = ref.main.blocksOf(workers[rnd.nextInt(workers.length)]);
      if (!mine.isEmpty() && rnd.nextInt(4) > 0) {
        List<List<Long>> paths = new ArrayList<>(mine.values());
        base.addAll(paths.get(rnd.nextInt(paths.size())));
      }
      int extra = extend || base.isEmpty() ? 1 + rnd.nextInt(rnd.nextInt(8) == 0 ? 24 : 6) : 0;
      for (int i = 0; i < extra; i++) base.add(local());
      return base;
    }

    void mainStoreRandom(Worker w) {
      List<Long> p = path(true);
      long[] l = new long[p.size()];
      for (int i = 0; i < l.length; i++) l[i] = p.get(i);
      RouterEvent e =
          new RouterEvent(
              w, eventId++, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(l), l));
      main.apply(e);
      ref.applyMain(e);
    }

    void mainRemove(Worker w) {
      List<Long> keys = new ArrayList<>(ref.main.blocksOf(w).keySet());
      if (keys.isEmpty()) return;
      long[] h = new long[1 + rnd.nextInt(3)];
      for (int i = 0; i < h.length; i++) h[i] = keys.get(rnd.nextInt(keys.size()));
      RouterEvent e = new RouterEvent(w, eventId++, CacheEvent.removed(h));
      main.apply(e);
      ref.applyMain(e);
    }

    void groupStoreRandom(Worker w) {
      int g = groupIds.get(rnd.nextInt(groupIds.size()));
      List<Long> p = path(rnd.nextBoolean());
      long[] l = new long[p.size()];
      for (int i = 0; i < l.length; i++) l[i] = p.get(i);
      long[] seq = SequenceHasher.sequenceHashes(l);
      // a window of positions (what a sliding window keeps), one position (a state), or a mix
      List<Long> chosen = new ArrayList<>();
      int kind = rnd.nextInt(3);
      if (kind == 0) {
        int from = rnd.nextInt(seq.length);
        int to = from + rnd.nextInt(seq.length - from + 1);
        for (int i = from; i < to; i++) chosen.add(seq[i]);
      } else if (kind == 1) {
        chosen.add(seq[rnd.nextInt(seq.length)]);
      } else {
        for (long h : seq) if (rnd.nextInt(3) > 0) chosen.add(h);
      }
      if (chosen.isEmpty()) return;
      long[] h = new long[chosen.size()];
      for (int i = 0; i < h.length; i++) h[i] = chosen.get(i);
      // the kind rides on stores, as vLLM's; a removal names the group alone
      RouterEvent e = new RouterEvent(w, eventId++, CacheEvent.storedAtRoot(h, h.clone()));
      assertThat(groups.apply(g, kinds.get(g), e)).isTrue();
      ref.applyGroup(g, kinds.get(g), e);
    }

    void groupRemoveRandom(Worker w) {
      int g = groupIds.get(rnd.nextInt(groupIds.size()));
      long[] heldNow = groups.positions(g, w);
      int n = 1 + rnd.nextInt(4);
      long[] h = new long[n];
      for (int i = 0; i < n; i++) {
        h[i] =
            heldNow.length == 0 || rnd.nextInt(6) == 0
                ? rnd.nextLong()
                : heldNow[rnd.nextInt(heldNow.length)];
      }
      RouterEvent e = new RouterEvent(w, eventId++, CacheEvent.removed(h));
      groups.apply(g, null, e);
      ref.applyGroup(g, null, e);
    }

    void query() {
      List<Long> p = path(rnd.nextInt(3) == 0);
      long[] q = new long[p.size()];
      for (int i = 0; i < q.length; i++) q[i] = p.get(i);
      long[] seq = SequenceHasher.sequenceHashes(q);
      int cap = rnd.nextInt(3) == 0 ? rnd.nextInt(q.length + 1) : q.length;
      main.flush();
      OverlapScores got = groups.rescore(main.findMatches(q, false), seq, cap);
      Map<Worker, Integer> want = ref.hits(q, seq, cap);
      assertThat(new TreeMap<>(got.scores()))
          .as("query %s cap %d, groups %s", Arrays.toString(q), cap, kinds)
          .isEqualTo(want);
      for (int i = 0; i < got.size(); i++) {
        assertThat(got.blockCountAt(i))
            .as("block count of %s", got.worker(i))
            .isEqualTo(ref.main.blockCount(got.worker(i)));
      }
      queries++;
    }
  }
}
