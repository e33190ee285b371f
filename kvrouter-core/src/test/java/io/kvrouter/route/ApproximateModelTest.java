package io.kvrouter.route;

import static io.kvrouter.route.KvRouterTest.routed;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Approximate mode against a naive reference model: seeded random routes, clock steps and
 * cached-token reports on a few ranks with small capacities; after every step the router's
 * predictions (what {@code overlaps} and the decisions see, and the count per rank) must equal the
 * reference's. The reference keeps, per rank, a plain list of (block, touch order, touch time) and
 * finds the least recently used block by a linear scan: capacity eviction, TTL, refresh on touch,
 * and the correction written out the slow way.
 */
class ApproximateModelTest {
  private static final int BS = 4;
  private static final long MS = 1_000_000L;

  /** The naive model of one rank. */
  private static final class RefRank {
    final long registered;
    long capacity;
    // seq hash -> {order, time, prevTime}; LinkedHashMap only for stable iteration
    final Map<Long, long[]> blocks = new LinkedHashMap<>();

    RefRank(long registered) {
      this.registered = registered;
      this.capacity = registered > 0 ? registered : Long.MAX_VALUE;
    }
  }

  private static final class Reference {
    final Map<Worker, RefRank> ranks = new HashMap<>();
    final long ttl;
    long order;

    Reference(long ttl) {
      this.ttl = ttl;
    }

    void expire(long now) {
      for (RefRank r : ranks.values()) r.blocks.values().removeIf(v -> v[1] <= now - ttl);
    }

    int overlap(Worker w, long[] seq) {
      RefRank r = ranks.get(w);
      int k = 0;
      while (r != null && k < seq.length && r.blocks.containsKey(seq[k])) k++;
      return k;
    }

    void touch(RefRank r, long[] seq, int n, long now) {
      for (int i = n - 1; i >= 0; i--) {
        long[] v = r.blocks.get(seq[i]);
        if (v == null) r.blocks.put(seq[i], new long[] {++order, now, now});
        else {
          v[2] = v[1];
          v[0] = ++order;
          v[1] = now;
        }
      }
    }

    void fit(RefRank r) {
      while (r.blocks.size() > r.capacity) {
        Long lru = null;
        long best = Long.MAX_VALUE;
        for (Map.Entry<Long, long[]> e : r.blocks.entrySet()) {
          if (e.getValue()[0] < best) {
            best = e.getValue()[0];
            lru = e.getKey();
          }
        }
        r.blocks.remove(lru);
      }
    }

    void record(Worker w, long[] seq, long now) {
      RefRank r = ranks.get(w);
      touch(r, seq, seq.length, now);
      fit(r);
    }

    void observe(Worker w, long[] seq, int predicted, int cached, long now) {
      RefRank r = ref(w);
      int n = seq.length;
      int k = Math.min(cached, n);
      int p = Math.min(predicted, n);
      if (k < p) {
        long from = r.capacity == Long.MAX_VALUE ? r.blocks.size() : r.capacity;
        r.capacity = Math.max(1, from - (p - k));
      } else if (k > p && r.capacity != Long.MAX_VALUE) {
        r.capacity += k - p;
        if (r.registered > 0) r.capacity = Math.min(r.capacity, r.registered);
      }
      int missing = 0;
      for (int i = 0; i < k; i++) if (!r.blocks.containsKey(seq[i])) missing++;
      if (missing > 0) touch(r, seq, k, now);
      fit(r);
    }

    RefRank ref(Worker w) {
      return ranks.get(w);
    }
  }

  /** A prompt: a random walk down a small tree of blocks, so that prompts share prefixes. */
  private static int[] prompt(SplittableRandom rnd) {
    int depth = 1 + rnd.nextInt(8);
    int[] t = new int[depth * BS + rnd.nextInt(BS)]; // a partial last block now and then
    int node = 0;
    for (int b = 0; b < depth; b++) {
      node = node * 3 + 1 + rnd.nextInt(3);
      for (int j = 0; j < BS; j++) t[b * BS + j] = node * BS + j;
    }
    for (int j = depth * BS; j < t.length; j++) t[j] = 1_000_000 + rnd.nextInt(1000);
    return t;
  }

  private static long[] seq(int[] tokens) {
    return SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(tokens));
  }

  @Test
  void predictionsFollowTheReferenceLruWithCapacityTtlAndCorrection() {
    long seed = System.nanoTime();
    try {
      for (int trial = 0; trial < 20; trial++) runTrial(seed + trial);
    } catch (AssertionError e) {
      throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
    }
  }

  private void runTrial(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    AtomicLong clock = new AtomicLong(1_000 * MS);
    long ttl = (50 + rnd.nextInt(200)) * MS;
    KvRouter router =
        KvRouter.builder(BS)
            .approximate(Duration.ofNanos(ttl), 1 << 20)
            .nanoClock(clock::get)
            .seed(seed)
            .build();
    Reference ref = new Reference(ttl);
    List<Worker> ranks = new ArrayList<>();
    for (int w = 0; w < 3; w++) {
      long cap = w == 2 ? 0 : 6 + rnd.nextInt(20); // rank 2: capacity unknown, learned
      router.registerWorker(w, 1, BS, cap);
      ranks.add(Worker.of(w));
      ref.ranks.put(Worker.of(w), new RefRank(cap));
    }
    List<Object[]> answered = new ArrayList<>(); // {worker, tokens, predicted tokens}
    for (int step = 0; step < 300; step++) {
      clock.addAndGet(rnd.nextInt(20) * MS);
      int op = rnd.nextInt(10);
      if (op < 6) {
        int[] t = prompt(rnd);
        long[] s = seq(t);
        ref.expire(clock.get());
        RouteDecision.Routed d = routed(router.route("r" + step, t));
        Worker w = d.worker();
        assertThat(d.overlapBlocks())
            .as("step %d: predicted overlap on %s", step, w)
            .isEqualTo(ref.overlap(w, s));
        ref.record(w, s, clock.get());
        router.free("r" + step);
        answered.add(new Object[] {w, t, d.overlapTokens()});
      } else if (op < 9 && !answered.isEmpty()) {
        // an engine's report on a request answered earlier: anything from nothing to all cached
        Object[] a = answered.remove(rnd.nextInt(answered.size()));
        Worker w = (Worker) a[0];
        int[] t = (int[]) a[1];
        int predicted = (int) a[2];
        long cachedTokens = rnd.nextInt(t.length + 1);
        ref.expire(clock.get()); // observe does not expire; routing and overlaps do
        router.expire();
        router.observeCachedTokens(w, t, RouteOptions.defaults(), predicted, cachedTokens);
        int cap = (t.length - 1) / BS; // an engine never reports the last token as cached
        ref.observe(
            w,
            seq(t),
            Math.min(cap, predicted / BS),
            (int) Math.min(cap, cachedTokens / BS),
            clock.get());
      }
      // every rank's predictions, probed with fresh prompts, equal the reference's
      ref.expire(clock.get());
      for (int probe = 0; probe < 4; probe++) {
        int[] t = prompt(rnd);
        long[] s = seq(t);
        Map<Worker, Integer> got = router.overlaps(t, RouteOptions.defaults()).scores();
        for (Worker w : ranks) {
          assertThat(got.getOrDefault(w, 0))
              .as("step %d: overlap of %s", step, w)
              .isEqualTo(ref.overlap(w, s));
        }
      }
      for (Worker w : ranks) {
        RefRank r = ref.ranks.get(w);
        assertThat(router.predictedEntries(w))
            .as("step %d: blocks predicted on %s", step, w)
            .isEqualTo(r.blocks.size());
        assertThat(router.predictedCapacity(w))
            .as("step %d: capacity of %s", step, w)
            .isEqualTo(r.capacity);
        assertThat((long) r.blocks.size()).isLessThanOrEqualTo(r.capacity);
      }
    }
    router.close();
  }

  @Test
  void aRankPastItsCapacityEvictsItsLeastRecentlyUsedBlocksLeavesFirst() {
    AtomicLong clock = new AtomicLong(0);
    KvRouter router = KvRouter.builder(BS).approximate().nanoClock(clock::get).build();
    router.registerWorker(0, 1, BS, 6);
    int[] a = KvRouterTest.tokens(100, 16); // 4 blocks
    int[] b = KvRouterTest.tokens(200, 12); // 3 blocks
    routed(router.route("a", a));
    clock.addAndGet(MS);
    routed(router.route("b", b)); // 7 > 6: a's deepest block goes
    assertThat(router.predictedEntries(Worker.of(0))).isEqualTo(6);
    Map<Worker, Integer> sa = router.overlaps(a, RouteOptions.defaults()).scores();
    assertThat(sa).isEqualTo(Map.of(Worker.of(0), 3));
    clock.addAndGet(MS);
    routed(router.route("a2", KvRouterTest.tokens(100, 4))); // touches a's root only
    routed(router.route("c", KvRouterTest.tokens(300, 8))); // 2 new: a's 2 older blocks go
    assertThat(router.overlaps(a, RouteOptions.defaults()).scores())
        .isEqualTo(Map.of(Worker.of(0), 1));
    assertThat(router.overlaps(b, RouteOptions.defaults()).scores())
        .isEqualTo(Map.of(Worker.of(0), 3));
  }

  @Test
  void predictedEvictionsFeedTheEvictionPressureTerm() {
    AtomicLong clock = new AtomicLong(0);
    double[] seen = new double[2];
    WorkerSelector spy =
        (c, costs) -> {
          for (int i = 0; i < c.size(); i++) {
            seen[(int) c.worker(i).workerId()] = c.relativePressure(i);
            costs[i] = i;
          }
          return 0;
        };
    KvRouter router =
        KvRouter.builder(BS).approximate().selector(spy).nanoClock(clock::get).build();
    router.registerWorker(0, 1, BS, 8);
    router.registerWorker(1, 1, BS, 8);
    for (int i = 0; i < 4; i++) {
      routed(router.route("p" + i, KvRouterTest.tokens(1000 * (i + 1), 32))); // 8 blocks, w0
      router.free("p" + i);
    }
    routed(router.route("probe", KvRouterTest.tokens(99_000, 4)));
    assertThat(seen[0]).as("w0 evicted 3 × 8 blocks").isGreaterThan(1.0);
    assertThat(seen[1]).isZero();
  }

  @Test
  void observeCachedTokensIsForApproximateModeAndIgnoresUnknownRanks() {
    KvRouter events = KvRouter.builder(BS).build();
    events.registerWorker(0, 1, BS);
    assertThatThrownBy(
            () ->
                events.observeCachedTokens(
                    Worker.of(0), KvRouterTest.tokens(1, 8), RouteOptions.defaults(), 0, 8))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("approximate mode");
    KvRouter approx = KvRouter.builder(BS).approximate().build();
    approx.observeCachedTokens(
        Worker.of(7), KvRouterTest.tokens(1, 8), RouteOptions.defaults(), 0, 8);
    assertThat(approx.predictedEntries()).isZero();
  }

  @Test
  void anUnpredictedHitBecomesAPredictionAndADenialShrinksTheCapacityDroppingTheOldest() {
    AtomicLong clock = new AtomicLong(0);
    KvRouter router = KvRouter.builder(BS).approximate().nanoClock(clock::get).build();
    router.registerWorker(0, 1, BS, 100);
    Worker w0 = Worker.of(0);
    int[] old = KvRouterTest.tokens(500, 8); // 2 blocks, the oldest
    routed(router.route("old", old));
    clock.addAndGet(MS);
    int[] p = KvRouterTest.tokens(1, 16); // 4 blocks
    routed(router.route("a", p));
    clock.addAndGet(MS);
    int[] other = KvRouterTest.tokens(700, 8); // 2 blocks
    routed(router.route("other", other));
    // the engine held 6 blocks of a prompt nobody routed there: predicted from now on, and a
    // capacity the engine is known to have is not raised past the registered 100
    int[] seen = KvRouterTest.tokens(900, 26);
    router.observeCachedTokens(w0, seen, RouteOptions.defaults(), 0, 24);
    assertThat(router.overlaps(seen, RouteOptions.defaults()).scores()).isEqualTo(Map.of(w0, 6));
    assertThat(router.predictedCapacity(w0)).isEqualTo(100);
    assertThat(router.predictedEntries(w0)).isEqualTo(14);
    // "a" again, predicted 4 blocks, compared as 3 (an engine never reports the last token of 16
    // as cached); the engine had 1: capacity 100 - 2 = 98, still above 14
    clock.addAndGet(MS);
    RouteDecision.Routed again = routed(router.route("a2", p));
    assertThat(again.overlapBlocks()).isEqualTo(4);
    router.observeCachedTokens(w0, p, RouteOptions.defaults(), again.overlapTokens(), 4);
    assertThat(router.predictedCapacity(w0)).isEqualTo(98);
    assertThat(router.predictedEntries(w0)).isEqualTo(14);
    // a denial of 86 blocks: capacity 12, so the 2 least recently used ("old") go
    router.observeCachedTokens(w0, KvRouterTest.tokens(1, 400), RouteOptions.defaults(), 344, 0);
    assertThat(router.predictedCapacity(w0)).isEqualTo(12);
    assertThat(router.overlaps(old, RouteOptions.defaults()).scores()).isEmpty();
    assertThat(router.overlaps(p, RouteOptions.defaults()).scores()).isEqualTo(Map.of(w0, 4));
    assertThat(router.overlaps(other, RouteOptions.defaults()).scores()).isEqualTo(Map.of(w0, 2));
    assertThat(router.overlaps(seen, RouteOptions.defaults()).scores()).isEqualTo(Map.of(w0, 6));
  }

  @Test
  void aRankWithoutACapacityLearnsOneFromDenials() {
    AtomicLong clock = new AtomicLong(0);
    KvRouter router = KvRouter.builder(BS).approximate().nanoClock(clock::get).build();
    router.registerWorker(0, 1, BS); // capacity unknown
    Worker w0 = Worker.of(0);
    for (int i = 0; i < 5; i++) {
      routed(router.route("p" + i, KvRouterTest.tokens(1000 * (i + 1), 16))); // 4 blocks each
      clock.addAndGet(MS);
    }
    assertThat(router.predictedCapacity(w0)).isEqualTo(Long.MAX_VALUE);
    assertThat(router.predictedEntries(w0)).isEqualTo(20);
    // the engine had 1 of the newest's 3 reportable blocks: it holds about 20 - 2
    router.observeCachedTokens(w0, KvRouterTest.tokens(5000, 16), RouteOptions.defaults(), 16, 4);
    assertThat(router.predictedCapacity(w0)).isEqualTo(18);
    assertThat(router.predictedEntries(w0)).isEqualTo(18);
    assertThat(router.overlaps(KvRouterTest.tokens(1000, 16), RouteOptions.defaults()).scores())
        .as("the oldest prompt lost its 2 deepest blocks")
        .isEqualTo(Map.of(w0, 2));
    // more than predicted grows it again: 3 reportable blocks cached, 2 predicted
    router.observeCachedTokens(w0, KvRouterTest.tokens(4000, 16), RouteOptions.defaults(), 8, 16);
    assertThat(router.predictedCapacity(w0)).isEqualTo(19);
  }
}
