package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndexes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** KvRouter end to end in event mode: hashing, index, cost, bookkeeping (DESIGN.md §6). */
class KvRouterTest {
  static final int BS = 4;
  private static final Worker W1 = Worker.of(1);
  private static final Worker W2 = Worker.of(2);
  private static final Worker W3 = Worker.of(3);

  private long eventId;

  /** Tokens {@code from, from+1, ..., from+n-1}. */
  static int[] tokens(int from, int n) {
    return IntStream.range(from, from + n).toArray();
  }

  /** Applies a Stored event: {@code worker} caches the full blocks of {@code tokens}. */
  void cache(KvRouter router, Worker worker, int[] tokens) {
    long[] local = BlockHasher.of(router.blockSize()).localHashes(tokens);
    long[] seq = SequenceHasher.sequenceHashes(local);
    router.applyEvent(new RouterEvent(worker, eventId++, CacheEvent.storedAtRoot(seq, local)));
  }

  static KvRouter router(int workers) {
    KvRouter r = KvRouter.builder(BS).build();
    for (int i = 1; i <= workers; i++) r.registerWorker(i, 1, BS);
    return r;
  }

  static RouteDecision.Routed routed(RouteDecision d) {
    assertThat(d).isInstanceOf(RouteDecision.Routed.class);
    return (RouteDecision.Routed) d;
  }

  @Test
  void theDocumentedExampleEndToEnd() {
    KvRouter router = router(3);
    int[] prompt = tokens(1, 16); // 4 blocks
    cache(router, W3, tokens(1, 8)); // W3 caches the first 2 blocks
    // W1: 6 active blocks, 16 prefill tokens in flight
    routed(router.route("a1", tokens(1000, 16), only(1)));
    routed(router.route("b1", tokens(2000, 8), only(1)));
    router.markPrefillCompleted("b1");
    // W2: 1 active block, 4 prefill tokens
    routed(router.route("a2", tokens(3000, 4), only(2)));
    // W3: 5 active blocks, prefill done
    routed(router.route("a3", tokens(4000, 20), only(3)));
    router.markPrefillCompleted("a3");

    RouteDecision.Routed d = routed(router.route("req", prompt));

    assertThat(d.candidates())
        .extracting(CandidateCost::candidate)
        .containsExactly(
            // prefill (16 + 16 - 0) / 4 = 8, decode 6 + 4 = 10
            new Candidate(W1, 0, 0, 8.0, 10),
            // prefill (4 + 16 - 0) / 4 = 5, decode 1 + 4 = 5
            new Candidate(W2, 0, 0, 5.0, 5),
            // prefill (0 + 16 - 2*4) / 4 = 2, decode 5 + 4 = 9; W3 caches 2 blocks in all
            new Candidate(W3, 2, 2, 2.0, 9));
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(18.0, 10.0, 11.0);
    assertThat(d.worker()).isEqualTo(W2);
    assertThat(d.cost()).isEqualTo(10.0);
    assertThat(d.overlapBlocks()).isZero();
    assertThat(d.overlapTokens()).isZero();
    assertThat(d.busy()).isEmpty();
    assertThat(router.load(W2)).isEqualTo(new WorkerLoad(W2, 5, 20, 2));
  }

  @Test
  void cacheAffinityReportsOverlapInBlocksAndTokens() {
    KvRouter router = router(3);
    cache(router, W2, tokens(1, 12)); // 3 blocks
    RouteDecision.Routed d = routed(router.route("r", tokens(1, 22))); // 5 full blocks
    assertThat(d.worker()).isEqualTo(W2);
    assertThat(d.overlapBlocks()).isEqualTo(3);
    assertThat(d.overlapTokens()).isEqualTo(12);
    // 22 tokens, 12 cached → 10 prefill tokens charged; 5 blocks held
    assertThat(router.load(W2)).isEqualTo(new WorkerLoad(W2, 5, 10, 1));
    assertThat(router.overlaps(tokens(1, 22), RouteOptions.defaults()).score(W2)).isEqualTo(3);
  }

  @Test
  void heldBlocksCountEachRequestWholeUntilFreedOrItsRankLeaves() {
    KvRouter router = router(2);
    routed(router.route("a", tokens(1, 16), only(1))); // 4 blocks
    routed(router.route("b", tokens(1, 16), only(1))); // the same 4 blocks, counted again
    routed(router.route("c", tokens(500, 8), only(2))); // 2 blocks
    assertThat(router.heldBlocks()).isEqualTo(10);
    assertThat(router.free("a")).isTrue();
    assertThat(router.heldBlocks()).isEqualTo(6);
    // a rank that leaves takes its requests' blocks with it
    assertThat(router.unregisterWorker(1)).isTrue();
    assertThat(router.heldBlocks()).isEqualTo(2);
    assertThat(router.free("c")).isTrue();
    assertThat(router.heldBlocks()).isZero();
  }

  @Test
  void aRequestIsTrackedUntilPrefillCompletesAndUntilFreed() {
    KvRouter router = router(1);
    routed(router.route("r1", tokens(1, 10))); // 2 full blocks; 10 prefill tokens
    assertThat(router.load(W1)).isEqualTo(new WorkerLoad(W1, 2, 10, 1));
    assertThat(router.inFlight()).isEqualTo(1);
    assertThat(router.markPrefillCompleted("r1")).isTrue();
    assertThat(router.load(W1)).isEqualTo(new WorkerLoad(W1, 2, 0, 1));
    assertThat(router.free("r1")).isTrue();
    assertThat(router.load(W1).isIdle()).isTrue();
    assertThat(router.free("r1")).isFalse();
    assertThat(router.markPrefillCompleted("r1")).isFalse();
    assertThat(router.free("unknown")).isFalse();
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void requestsInFlightSharingAPrefixCountItsBlocksOnce() {
    KvRouter router = router(1);
    routed(router.route("r1", tokens(1, 16)));
    routed(router.route("r2", tokens(1, 16)));
    assertThat(router.load(W1)).isEqualTo(new WorkerLoad(W1, 4, 32, 2));
    router.free("r1");
    assertThat(router.load(W1)).isEqualTo(new WorkerLoad(W1, 4, 16, 1));
  }

  @Test
  void activeBlocksOfAPromptAlreadyInFlightDoNotAddDecodeLoad() {
    KvRouter router = router(2);
    routed(router.route("r1", tokens(1, 16), only(1)));
    router.markPrefillCompleted("r1");
    // W1: 4 active blocks, all of them this prompt's → decode 4; W2: 0 + 4
    RouteDecision.Routed d = routed(router.route("r2", tokens(1, 16)));
    assertThat(d.candidates()).extracting(c -> c.candidate().decodeBlocks()).containsExactly(4, 4);
  }

  @Test
  void aDuplicateRequestIdIsRejectedWithAClearError() {
    KvRouter router = router(2);
    RouteDecision.Routed first = routed(router.route("dup", tokens(1, 8)));
    assertThatThrownBy(() -> router.route("dup", tokens(50, 8)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'dup'")
        .hasMessageContaining("already in flight on worker " + first.worker());
    assertThat(router.inFlight()).isEqualTo(1);
    router.free("dup");
    routed(router.route("dup", tokens(50, 8)));
  }

  @Test
  void overlapWeightZeroDisablesCacheAffinity() {
    for (double weight : new double[] {1.0, 0.0}) {
      KvRouter router = KvRouter.builder(BS).overlapWeight(weight).build();
      router.registerWorker(1, 1, BS);
      router.registerWorker(2, 1, BS);
      cache(router, W1, tokens(1, 16));
      RouteDecision.Routed d = routed(router.route("r", tokens(1, 16)));
      // weight 1: W1's cached prefix wins. weight 0: both cost 4 decode blocks; the tie goes to
      // the worker with fewer cached blocks.
      assertThat(d.worker()).as("weight %s", weight).isEqualTo(weight == 0 ? W2 : W1);
    }
  }

  @Test
  void tiedDecisionsAreSharedFairlyAndDoNotDependOnRegistrationOrder() {
    int k = 4;
    int n = 10_000;
    Map<Worker, Integer> counts = new HashMap<>();
    List<Worker> sequenceA = new ArrayList<>();
    List<Worker> sequenceB = new ArrayList<>();
    KvRouter a = KvRouter.builder(BS).seed(31).build();
    KvRouter b = KvRouter.builder(BS).seed(31).build();
    for (int i = 0; i < k; i++) a.registerWorker(10 + i, 1, BS);
    for (int i = k - 1; i >= 0; i--) b.registerWorker(10 + i, 1, BS); // reverse order
    for (int i = 0; i < n; i++) {
      int[] prompt = tokens(i * 8, 8); // never cached, every worker idle: all tied
      Worker wa = routed(a.route("r" + i, prompt)).worker();
      Worker wb = routed(b.route("r" + i, prompt)).worker();
      a.free("r" + i);
      b.free("r" + i);
      counts.merge(wa, 1, Integer::sum);
      if (i < 500) {
        sequenceA.add(wa);
        sequenceB.add(wb);
      }
    }
    assertThat(sequenceA).isEqualTo(sequenceB);
    double share = (double) n / k; // 5% of it is 2.9 binomial sigmas
    assertThat(counts).hasSize(k);
    counts.forEach(
        (w, c) ->
            assertThat((double) c)
                .as("%s of %s", w, counts)
                .isCloseTo(share, within(0.05 * share)));
  }

  @Test
  void theSameSeedGivesTheSameDecisionsUnderTemperature() {
    List<Worker> first = temperatureRun(5);
    assertThat(first).isEqualTo(temperatureRun(5));
    assertThat(first).isNotEqualTo(temperatureRun(6));
    assertThat(first).containsAnyOf(W1).containsAnyOf(W2).containsAnyOf(W3);
  }

  private List<Worker> temperatureRun(long seed) {
    KvRouter router = KvRouter.builder(BS).temperature(1.0).seed(seed).build();
    for (int i = 1; i <= 3; i++) router.registerWorker(i, 1, BS);
    cache(router, W1, tokens(1, 16));
    List<Worker> out = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      out.add(routed(router.route("r" + i, tokens(1, 16))).worker());
      router.free("r" + i);
    }
    return out;
  }

  @Test
  void aWorkerOverThePrefillTokenLimitIsExcluded() {
    KvRouter router = KvRouter.builder(BS).busyPrefillTokens(20).build();
    router.registerWorker(1, 1, BS);
    router.registerWorker(2, 1, BS);
    cache(router, W1, tokens(1, 16));
    routed(router.route("load", tokens(500, 24), only(1))); // W1: 24 prefill tokens > 20
    RouteDecision.Routed d = routed(router.route("r", tokens(1, 16)));
    assertThat(d.worker()).as("W1 has the cache but is busy").isEqualTo(W2);
    assertThat(d.busy()).containsExactly(W1);
    assertThat(d.candidates()).extracting(CandidateCost::worker).containsExactly(W2);
    router.markPrefillCompleted("load"); // W1 is no longer busy
    RouteDecision.Routed again = routed(router.route("r2", tokens(1, 16)));
    assertThat(again.worker()).isEqualTo(W1);
  }

  @Test
  void aWorkerAtTheRequestLimitIsBusyUntilOneIsFreed() {
    KvRouter router =
        KvRouter.builder(BS).settings(RoutingSettings.DEFAULTS.withBusyRequests(2)).build();
    router.registerWorker(1, 1, BS);
    routed(router.route("a", tokens(1, 16)));
    routed(router.route("b", tokens(100, 16)));
    RouteDecision full = router.route("c", tokens(200, 16));
    assertThat(full).as("2 requests in flight: busy").isInstanceOf(RouteDecision.AllBusy.class);
    router.markPrefillCompleted("a"); // the requests count, not their prefill
    assertThat(router.route("c", tokens(200, 16))).isInstanceOf(RouteDecision.AllBusy.class);
    router.free("a");
    assertThat(routed(router.route("c", tokens(200, 16))).worker()).isEqualTo(W1);
    assertThatThrownBy(() -> KvRouter.builder(4).busyRequests(0))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aWorkerOverTheActiveBlockFractionIsExcludedAndAllBusyIsADecision() {
    KvRouter router = KvRouter.builder(BS).busyBlockFraction(0.5).build();
    router.registerWorker(1, 1, BS, 10); // busy above 5 active blocks
    router.registerWorker(2, 1, BS, 10);
    router.registerWorker(3, 1, BS); // capacity unknown: never busy by blocks
    routed(router.route("a", tokens(100, 24), only(1))); // 6 blocks
    routed(router.route("b", tokens(200, 20), only(2))); // 5 blocks: not above 5
    RouteDecision.Routed d = routed(router.route("c", tokens(300, 4), only(1, 2)));
    assertThat(d.worker()).isEqualTo(W2);
    assertThat(d.busy()).containsExactly(W1);
    // now W2 holds 6 blocks too; only W1 and W2 allowed → all busy
    int before = router.inFlight();
    RouteDecision all = router.route("d", tokens(400, 4), only(1, 2));
    assertThat(all).isInstanceOf(RouteDecision.AllBusy.class);
    assertThat(((RouteDecision.AllBusy) all).candidates())
        .extracting(Candidate::worker)
        .containsExactly(W1, W2);
    assertThat(router.inFlight()).as("nothing recorded").isEqualTo(before);
    assertThat(router.free("d")).isFalse();
    // W3 is still free
    assertThat(routed(router.route("d", tokens(400, 4))).worker()).isEqualTo(W3);
  }

  private static RouteOptions only(long... ids) {
    return RouteOptions.defaults().withAllowedWorkers(ids);
  }

  @Test
  void noRegisteredOrAllowedWorkerIsADecision() {
    KvRouter empty = KvRouter.builder(BS).build();
    assertThat(empty.route("r", tokens(1, 8))).isInstanceOf(RouteDecision.NoWorkers.class);
    KvRouter router = router(2);
    assertThat(router.route("r", tokens(1, 8), only(7)))
        .isInstanceOf(RouteDecision.NoWorkers.class);
    assertThat(router.route("r", tokens(1, 8), new RouteOptions(null, null, Set.of())))
        .isInstanceOf(RouteDecision.NoWorkers.class);
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void allowedWorkersRestrictTheChoice() {
    KvRouter router = router(3);
    cache(router, W1, tokens(1, 16));
    RouteDecision.Routed d = routed(router.route("r", tokens(1, 16), only(2, 3, 3)));
    assertThat(d.worker()).isIn(W2, W3);
    assertThat(d.candidates()).extracting(CandidateCost::worker).containsExactly(W2, W3);
  }

  @Test
  void routeOptionsNormaliseTheirFields() {
    RouteOptions o = new RouteOptions("", "", null);
    assertThat(o).isEqualTo(RouteOptions.defaults());
    assertThat(o.allows(123)).isTrue();
    RouteOptions some = o.withLora("a").withNamespace("n").withAllowedWorkers(1, 1, 2);
    assertThat(some.allowedWorkerIds()).containsExactlyInAnyOrder(1L, 2L);
    assertThat(some.allows(2)).isTrue();
    assertThat(some.allows(3)).isFalse();
    assertThat(some.loraName()).isEqualTo("a");
    assertThat(some.namespace()).isEqualTo("n");
  }

  @Test
  void everyDpRankIsACandidate() {
    KvRouter router = KvRouter.builder(BS).build();
    router.registerWorker(7, 2, BS);
    Worker r0 = new Worker(7, 0);
    Worker r1 = new Worker(7, 1);
    assertThat(router.workers()).containsExactly(r0, r1);
    cache(router, r1, tokens(1, 8));
    RouteDecision.Routed d = routed(router.route("x", tokens(1, 8)));
    assertThat(d.worker()).isEqualTo(r1);
    assertThat(d.overlapBlocks()).isEqualTo(2);
    assertThat(d.candidates()).extracting(CandidateCost::worker).containsExactly(r0, r1);
    // the load of r1 now makes r0 the cheaper choice for another prompt
    assertThat(routed(router.route("y", tokens(100, 8))).worker()).isEqualTo(r0);
  }

  @Test
  void loraAndNamespaceSaltTheHashes() {
    KvRouter router = router(2);
    RouteOptions lora = RouteOptions.defaults().withLora("adapter-a");
    int[] prompt = tokens(1, 16);
    long[] local = BlockHasher.of(BS).withLora("adapter-a").localHashes(prompt);
    router.applyEvent(
        new RouterEvent(
            W2, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
    assertThat(router.overlaps(prompt, RouteOptions.defaults()).score(W2)).isZero();
    assertThat(router.overlaps(prompt, lora).score(W2)).isEqualTo(4);
    assertThat(router.overlaps(prompt, lora.withNamespace("ns")).score(W2)).isZero();
    RouteDecision.Routed d = routed(router.route("r", prompt, lora));
    assertThat(d.worker()).isEqualTo(W2);
    assertThat(d.overlapBlocks()).isEqualTo(4);
  }

  @Test
  void aBlockSizeThatDiffersFromTheRoutersIsRejectedAtRegistration() {
    KvRouter router = KvRouter.builder(16).build();
    assertThatThrownBy(() -> router.registerWorker(1, 1, 32))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("32")
        .hasMessageContaining("16");
    assertThat(router.workers()).isEmpty();
  }

  @Test
  void registeringAgainIsIdempotentOnlyWithTheSameParameters() {
    KvRouter router = router(1);
    router.registerWorker(1, 1, BS);
    assertThat(router.workers()).containsExactly(W1);
    assertThatThrownBy(() -> router.registerWorker(1, 2, BS))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("unregister");
    assertThatThrownBy(() -> router.registerWorker(2, 0, BS))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void unregisteringRemovesTheWorkerFromTheIndexAndFromLoadTracking() {
    KvRouter router = router(2);
    cache(router, W1, tokens(1, 16));
    RouteDecision.Routed d = routed(router.route("r", tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W1);
    assertThat(router.unregisterWorker(1)).isTrue();
    assertThat(router.unregisterWorker(1)).isFalse();
    assertThat(router.workers()).containsExactly(W2);
    assertThat(router.overlaps(tokens(1, 16), RouteOptions.defaults()).scores()).isEmpty();
    assertThat(router.index().stats().workers()).isZero();
    assertThat(router.inFlight()).isZero();
    assertThat(router.free("r")).isFalse();
    assertThatThrownBy(() -> router.load(W1)).isInstanceOf(IllegalArgumentException.class);
    assertThat(routed(router.route("r", tokens(1, 16))).worker()).isEqualTo(W2);
    // registered again, it starts empty
    router.registerWorker(1, 1, BS);
    assertThat(router.load(W1).isIdle()).isTrue();
  }

  @Test
  void ranksRegisteredOneByOneComeAndGoIndependently() {
    KvRouter router = KvRouter.builder(BS).build();
    Worker r0 = new Worker(7, 0);
    Worker r2 = new Worker(7, 2);
    assertThat(router.registerRank(r2, BS, 0)).isTrue();
    assertThat(router.registerRank(r0, BS, 0)).isTrue();
    assertThat(router.registerRank(r0, BS, 0)).isFalse();
    assertThat(router.workers()).containsExactly(r0, r2);
    cache(router, r0, tokens(1, 8));
    cache(router, r2, tokens(1, 16));
    RouteDecision.Routed d = routed(router.route("a", tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(r2);

    // dropping one rank clears its blocks and requests, and keeps the other rank's
    assertThat(router.unregisterRank(r2)).isTrue();
    assertThat(router.unregisterRank(r2)).isFalse();
    assertThat(router.workers()).containsExactly(r0);
    assertThat(router.free("a")).isFalse();
    assertThat(router.overlaps(tokens(1, 16), RouteOptions.defaults()).scores())
        .containsExactly(Map.entry(r0, 2));
    assertThat(routed(router.route("b", tokens(1, 16))).worker()).isEqualTo(r0);

    // dropping the last rank forgets the worker in the index
    assertThat(router.unregisterRank(r0)).isTrue();
    assertThat(router.workers()).isEmpty();
    assertThat(router.inFlight()).isZero();
    assertThat(router.index().stats().workers()).isZero();
    assertThat(router.route("c", tokens(1, 16))).isInstanceOf(RouteDecision.NoWorkers.class);
  }

  @Test
  void ranksOneByOneAndWholeWorkersDoNotMix() {
    KvRouter router = KvRouter.builder(BS).build();
    router.registerWorker(1, 2, BS);
    assertThat(router.registerRank(new Worker(1, 1), BS, 0)).isFalse();
    assertThatThrownBy(() -> router.registerRank(new Worker(1, 2), BS, 0))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("dpSize 2");
    router.registerRank(new Worker(2, 1), BS, 0);
    assertThatThrownBy(() -> router.registerWorker(2, 2, BS))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("one by one");
    assertThatThrownBy(() -> router.registerRank(new Worker(3, 0), 2 * BS, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blocks of " + BS);
    // unregisterWorker drops ranks registered either way
    assertThat(router.unregisterWorker(2)).isTrue();
    assertThat(router.workers()).containsExactly(new Worker(1, 0), new Worker(1, 1));
  }

  @Test
  void aRankWithAKvCapacityBecomesBusy() {
    KvRouter router = KvRouter.builder(BS).busyBlockFraction(0.5).build();
    router.registerRank(new Worker(1, 0), BS, 4);
    routed(router.route("a", tokens(1, 12))); // 3 of 4 blocks active
    assertThat(router.route("b", tokens(100, 4))).isInstanceOf(RouteDecision.AllBusy.class);
  }

  @Test
  void scoresOfUnregisteredWorkersAreIgnored() {
    KvRouter router = router(1);
    cache(router, Worker.of(99), tokens(1, 16));
    RouteDecision.Routed d = routed(router.route("r", tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W1);
    assertThat(d.candidates()).hasSize(1);
  }

  @Test
  void requestsNeverFreedExpireAfterTheConfiguredTime() {
    AtomicLong clock = new AtomicLong();
    KvRouter router =
        KvRouter.builder(BS).requestExpiry(Duration.ofSeconds(300)).nanoClock(clock::get).build();
    router.registerWorker(1, 1, BS);
    routed(router.route("leaked", tokens(1, 16)));
    clock.addAndGet(Duration.ofSeconds(299).toNanos());
    assertThat(router.load(W1).requests()).isEqualTo(1);
    clock.addAndGet(Duration.ofSeconds(1).toNanos());
    assertThat(router.load(W1).isIdle()).isTrue();
    assertThat(router.inFlight()).isZero();
    assertThat(router.free("leaked")).isFalse();
    routed(router.route("leaked", tokens(1, 16))); // the id is free again
  }

  @Test
  void pastItsDeadlineARequestIsExpiredWhicheverCallComesNext() {
    AtomicLong clock = new AtomicLong();
    KvRouter router =
        KvRouter.builder(BS).requestExpiry(Duration.ofMillis(5)).nanoClock(clock::get).build();
    router.registerWorker(1, 1, BS);
    long deadline = Duration.ofMillis(5).toNanos();

    routed(router.route("a", tokens(1, 8)));
    clock.addAndGet(deadline);
    assertThat(router.markPrefillCompleted("a")).isFalse();

    routed(router.route("b", tokens(1, 8)));
    clock.addAndGet(deadline);
    assertThat(router.free("b")).isFalse();

    routed(router.route("c", tokens(1, 8)));
    clock.addAndGet(deadline);
    RouteDecision.Routed d = routed(router.route("d", tokens(100, 8)));
    assertThat(d.candidates().get(0).candidate().decodeBlocks())
        .as("c no longer counts")
        .isEqualTo(2);
    assertThat(router.inFlight()).isEqualTo(1);

    clock.addAndGet(deadline - 1);
    router.expire();
    assertThat(router.load(W1).requests()).isEqualTo(1);
    clock.addAndGet(1);
    router.expire();
    assertThat(router.load(W1).isIdle()).isTrue();
  }

  @Test
  void aCustomSelectorIsUsedAndItsCostsAreReported() {
    WorkerSelector lastOne =
        (cands, costs) -> {
          for (int i = 0; i < cands.size(); i++) costs[i] = -i;
          return cands.size() - 1;
        };
    KvRouter router = KvRouter.builder(BS).selector(lastOne).build();
    for (int i = 1; i <= 3; i++) router.registerWorker(i, 1, BS);
    cache(router, W1, tokens(1, 16));
    RouteDecision.Routed d = routed(router.route("r", tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W3);
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(0.0, -1.0, -2.0);

    KvRouter broken = KvRouter.builder(BS).selector((c, costs) -> c.size()).build();
    broken.registerWorker(1, 1, BS);
    assertThatThrownBy(() -> broken.route("r", tokens(1, 4)))
        .isInstanceOf(IllegalStateException.class);
    assertThat(broken.inFlight()).isZero();
  }

  @Test
  void promptsShorterThanABlockHoldNoBlocksButChargePrefill() {
    KvRouter router = router(1);
    RouteDecision.Routed d = routed(router.route("r", tokens(1, 3)));
    assertThat(d.overlapBlocks()).isZero();
    assertThat(router.load(W1)).isEqualTo(new WorkerLoad(W1, 0, 3, 1));
    assertThat(d.candidates().get(0).candidate().prefillBlocks()).isEqualTo(0.75);
  }

  @Test
  void builderAndEventModeRejectMisuse() {
    assertThatThrownBy(() -> KvRouter.builder(0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvRouter.builder(4).overlapWeight(-1))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvRouter.builder(4).temperature(Double.NaN))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvRouter.builder(4).busyBlockFraction(0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvRouter.builder(4).busyPrefillTokens(-1))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvRouter.builder(4).requestExpiry(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> KvRouter.builder(4).approximate().index(KvIndexes.concurrentRadixTree()).build())
        .isInstanceOf(IllegalStateException.class);
    KvRouter router = router(1);
    assertThatThrownBy(() -> router.route(null, tokens(1, 4)))
        .isInstanceOf(NullPointerException.class);
    assertThat(Arrays.asList(router.isApproximate(), router.blockSize()))
        .containsExactly(false, BS);
  }

  /** isBusy(load) is the rule route() applies: each limit on its own, off when not set. */
  @Test
  void isBusyAppliesTheRouteRule() {
    KvRouter open = router(1);
    assertThat(open.isBusy(new WorkerLoad(W1, 1_000_000, Long.MAX_VALUE - 1, 1 << 30))).isFalse();

    KvRouter r =
        KvRouter.builder(BS).busyRequests(2).busyPrefillTokens(100).busyBlockFraction(0.5).build();
    r.registerWorker(1, 1, BS, 10); // 10 blocks of KV: busy past 5 active
    r.registerWorker(2, 1, BS); // capacity unknown: never busy by blocks
    assertThat(r.isBusy(new WorkerLoad(W1, 5, 100, 1))).isFalse();
    assertThat(r.isBusy(new WorkerLoad(W1, 6, 100, 1))).isTrue();
    assertThat(r.isBusy(new WorkerLoad(W1, 5, 101, 1))).isTrue();
    assertThat(r.isBusy(new WorkerLoad(W1, 5, 100, 2))).isTrue();
    assertThat(r.isBusy(new WorkerLoad(W2, 1_000, 100, 1))).isFalse();

    // route agrees: a rank with two requests in flight is passed over while another has room
    KvRouter two = KvRouter.builder(BS).busyRequests(2).build();
    two.registerWorker(1, 1, BS);
    two.registerWorker(2, 1, BS);
    List<RouteDecision.Routed> held = new ArrayList<>();
    for (int i = 0; i < 4; i++) held.add(routed(two.route("r" + i, tokens(100 * i, 8))));
    assertThat(held).hasSize(4);
    assertThat(two.loads()).allSatisfy(l -> assertThat(two.isBusy(l)).isTrue());
    assertThat(two.route("r9", tokens(900, 8))).isNotInstanceOf(RouteDecision.Routed.class);
  }
}
