package io.kvrouter.route;

import static io.kvrouter.route.KvRouterTest.routed;
import static io.kvrouter.route.KvRouterTest.tokens;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndexes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Approximate mode: the router's own decisions as predicted cache contents with a TTL. */
class ApproximateModeTest {
  private static final long MS = 1_000_000L;
  private static final Worker W0 = Worker.of(0);
  private static final Worker W1 = Worker.of(1);

  private final AtomicLong clock = new AtomicLong(7_000 * MS);

  private KvRouter router(int blockSize, Duration ttl, int maxEntries, int workers) {
    KvRouter r =
        KvRouter.builder(blockSize).approximate(ttl, maxEntries).nanoClock(clock::get).build();
    for (int i = 0; i < workers; i++) r.registerWorker(i, 1, blockSize);
    return r;
  }

  private static Map<Worker, Integer> matches(KvRouter router, int[] tokens) {
    return router.overlaps(tokens, RouteOptions.defaults()).scores();
  }

  @Test
  void goldenPredictionLivesForTheTtl() {
    KvRouter router = router(4, Duration.ofMillis(200), 1 << 20, 1);
    int[] prompt = {1, 2, 3, 4};
    assertThat(matches(router, prompt)).isEmpty();
    RouteDecision.Routed d = routed(router.route("r", prompt));
    assertThat(d.worker()).isEqualTo(W0);
    assertThat(d.overlapBlocks()).isZero();
    assertThat(matches(router, prompt)).isEqualTo(Map.of(W0, 1));
    clock.addAndGet(199 * MS);
    assertThat(matches(router, prompt)).isEqualTo(Map.of(W0, 1));
    clock.addAndGet(1 * MS);
    assertThat(matches(router, prompt)).isEmpty();
    assertThat(router.predictedEntries()).isZero();
  }

  @Test
  void unregisteringOneRankDropsItsPredictionsOnly() {
    KvRouter router =
        KvRouter.builder(4)
            .approximate(Duration.ofSeconds(120), 1 << 20)
            .nanoClock(clock::get)
            .build();
    Worker r0 = new Worker(5, 0);
    Worker r1 = new Worker(5, 1);
    router.registerRank(r0, 4, 0);
    router.registerRank(r1, 4, 0);
    Worker first = routed(router.route("a", tokens(1, 8))).worker();
    Worker second = routed(router.route("b", tokens(100, 8))).worker();
    assertThat(second).isNotEqualTo(first);
    assertThat(router.predictedEntries()).isEqualTo(4);
    router.unregisterRank(first);
    assertThat(router.predictedEntries()).isEqualTo(2);
    assertThat(matches(router, tokens(1, 8))).isEmpty();
    assertThat(matches(router, tokens(100, 8))).isEqualTo(Map.of(second, 2));
  }

  @Test
  void predictionsAttractTheSamePrefixWithinTheTtl() {
    KvRouter router = router(4, Duration.ofSeconds(120), 1 << 20, 2);
    int[] prompt = tokens(1, 32);
    Worker first = routed(router.route("a", prompt)).worker();
    router.free("a");
    RouteDecision.Routed again = routed(router.route("b", prompt));
    assertThat(again.worker()).isEqualTo(first);
    assertThat(again.overlapBlocks()).isEqualTo(8);
    assertThat(again.overlapTokens()).isEqualTo(32);
  }

  @Test
  void aRepeatedPredictionRefreshesTheTtlInsteadOfExpiringAtTheOldDeadline() {
    KvRouter router = router(4, Duration.ofMillis(200), 1 << 20, 1);
    int[] prompt = tokens(1, 8);
    routed(router.route("a", prompt)); // t = 0
    clock.addAndGet(150 * MS);
    routed(router.route("b", prompt)); // t = 150: deadline moves to 350
    clock.addAndGet(100 * MS); // t = 250: past the first deadline
    assertThat(matches(router, prompt)).isEqualTo(Map.of(W0, 2));
    clock.addAndGet(99 * MS); // t = 349
    assertThat(matches(router, prompt)).isEqualTo(Map.of(W0, 2));
    clock.addAndGet(1 * MS); // t = 350
    assertThat(matches(router, prompt)).isEmpty();
  }

  @Test
  void aLongerPromptRefreshesItsSharedPrefixOnly() {
    KvRouter router = router(4, Duration.ofMillis(200), 1 << 20, 1);
    routed(router.route("a", tokens(1, 16))); // blocks A B C D at t = 0
    clock.addAndGet(100 * MS);
    routed(router.route("b", tokens(1, 8))); // A B again at t = 100
    assertThat(router.predictedEntries()).isEqualTo(4);
    clock.addAndGet(100 * MS); // t = 200: C, D expire; A, B live until 300
    assertThat(matches(router, tokens(1, 16))).isEqualTo(Map.of(W0, 2));
    assertThat(router.predictedEntries()).isEqualTo(2);
  }

  @Test
  void theBoundIsSharedAmongTheRanksAndTrimsEachByItsLruLeavesFirst() {
    KvRouter router = router(4, Duration.ofSeconds(120), 10, 1);
    int[] p1 = tokens(100, 16); // 4 blocks each
    int[] p2 = tokens(200, 16);
    int[] p3 = tokens(300, 12); // 3 blocks
    routed(router.route("1", p1));
    clock.addAndGet(MS);
    routed(router.route("2", p2));
    clock.addAndGet(MS);
    assertThat(router.predictedEntries()).isEqualTo(8);
    routed(router.route("3", p3)); // 11 > 10 (one rank: its share is all 10): p1's leaf goes
    assertThat(router.predictedEntries()).isEqualTo(10);
    assertThat(matches(router, p1)).as("p1 keeps its prefix: no hole").isEqualTo(Map.of(W0, 3));
    assertThat(matches(router, p2)).isEqualTo(Map.of(W0, 4));
    assertThat(matches(router, p3)).isEqualTo(Map.of(W0, 3));
  }

  @Test
  void pruningIsSpreadOverTheFollowingDecisionsAndNeverExceedsTheBound() {
    int max = 1000;
    KvRouter router = router(4, Duration.ofSeconds(120), max, 2);
    RouteOptions onW0 = RouteOptions.defaults().withAllowedWorkers(0);
    RouteOptions onW1 = RouteOptions.defaults().withAllowedWorkers(1);
    for (int p = 0; p < 63; p++) { // 1,008 blocks on w0, trimmed to its share: all 1,000
      routed(router.route("a" + p, tokens(10_000 * (p + 1), 64), onW0));
      router.free("a" + p);
    }
    assertThat(router.predictedEntries()).isEqualTo(1000);
    // w1's first record: 1,016 in all > 1,000. Each record now removes 64 of the oldest (w0's)
    // and adds 16, so 80% is reached over several decisions, not in one
    List<Integer> sizes = new ArrayList<>();
    boolean reachedTarget = false;
    for (int p = 0; p < 20; p++) {
      routed(router.route("b" + p, tokens(5_000_000 + 10_000 * p, 64), onW1));
      router.free("b" + p);
      int size = router.predictedEntries();
      sizes.add(size);
      assertThat(size).as("after w1's record %d", p).isLessThanOrEqualTo(max);
      if (size <= 800) reachedTarget = true;
    }
    assertThat(sizes.get(0)).isEqualTo(1000 + 16 - 64);
    assertThat(sizes.get(1)).isEqualTo(1000 + 32 - 128);
    assertThat(reachedTarget).isTrue();
    assertThat(router.predictedEntries(W1)).isEqualTo(20 * 16);
    // the oldest first: w0's first prompts are gone, its last one whole
    assertThat(matches(router, tokens(10_000, 64))).isEmpty();
    assertThat(matches(router, tokens(10_000 * 63, 64))).isEqualTo(Map.of(W0, 16));
  }

  @Test
  void theDefaultBoundIsTwoToTheTwentiethAndTheDefaultTtlOneHour() {
    assertThat(PredictedBlocks.DEFAULT_MAX_ENTRIES).isEqualTo(1 << 20);
    assertThat(PredictedBlocks.DEFAULT_TTL).isEqualTo(Duration.ofHours(1));
    KvRouter router =
        KvRouter.builder(4).approximate().nanoClock(clock::get).build(); // the defaults
    router.registerWorker(0, 1, 4);
    routed(router.route("r", tokens(1, 4)));
    clock.addAndGet(Duration.ofHours(1).toNanos() - 1);
    assertThat(matches(router, tokens(1, 4))).isEqualTo(Map.of(W0, 1));
    clock.addAndGet(1);
    assertThat(matches(router, tokens(1, 4))).isEmpty();
  }

  @Test
  void sharedPrefixesArePredictedOncePerWorker() {
    KvRouter router = router(4, Duration.ofSeconds(1), 1 << 20, 1);
    routed(router.route("a", tokens(1, 16)));
    int[] branch = tokens(1, 16);
    branch[12] = 999; // same first 3 blocks, different 4th
    routed(router.route("b", branch));
    assertThat(router.predictedEntries()).isEqualTo(5);
  }

  @Test
  void unregisteringDropsTheWorkersPredictions() {
    KvRouter router = router(4, Duration.ofSeconds(120), 1 << 20, 2);
    Worker w = routed(router.route("a", tokens(1, 16))).worker();
    assertThat(router.predictedEntries()).isEqualTo(4);
    router.unregisterWorker(w.workerId());
    assertThat(router.predictedEntries()).isZero();
    assertThat(matches(router, tokens(1, 16))).isEmpty();
    Worker other = w.equals(W0) ? W1 : W0;
    RouteDecision.Routed d = routed(router.route("b", tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(other);
    assertThat(d.overlapBlocks()).isZero();
  }

  @Test
  void expireDropsOverduePredictionsOnDemand() {
    KvRouter router = router(4, Duration.ofMillis(10), 1 << 20, 1);
    routed(router.route("a", tokens(1, 16)));
    clock.addAndGet(10 * MS);
    assertThat(router.predictedEntries()).isEqualTo(4);
    router.expire();
    assertThat(router.predictedEntries()).isZero();
    assertThat(router.index().stats().blocksIndexed()).isZero();
  }

  @Test
  void eventsAreRejectedInApproximateMode() {
    KvRouter router = router(4, Duration.ofSeconds(1), 16, 1);
    assertThat(router.isApproximate()).isTrue();
    long[] local = BlockHasher.of(4).localHashes(tokens(1, 4));
    RouterEvent e =
        new RouterEvent(
            W0, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local));
    assertThatThrownBy(() -> router.applyEvent(e)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> KvRouter.builder(4).approximate(Duration.ZERO, 1))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvRouter.builder(4).approximate(Duration.ofSeconds(1), 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> KvRouter.builder(4).index(KvIndexes.concurrentRadixTree()).approximate().build())
        .isInstanceOf(IllegalStateException.class);
  }
}
