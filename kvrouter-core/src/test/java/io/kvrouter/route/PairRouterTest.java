package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * The pair choice and the conditional rule (docs/routing.md, Disaggregated serving): workers 1 and
 * 2 are prefill engines, 3 and 4 decode engines, block size 4; every expected value below is worked
 * out by hand from the fleet each test builds.
 */
class PairRouterTest {
  private static final int BS = 4;
  private static final Set<Long> PREFILL = Set.of(1L, 2L);
  private static final Set<Long> DECODE = Set.of(3L, 4L);
  private long eventId;

  static int[] tokens(int from, int n) {
    return IntStream.range(from, from + n).toArray();
  }

  void cache(KvRouter router, long worker, int[] tokens) {
    long[] local = BlockHasher.of(BS).localHashes(tokens);
    long[] seq = SequenceHasher.sequenceHashes(local);
    router.applyEvent(
        new RouterEvent(Worker.of(worker), eventId++, CacheEvent.storedAtRoot(seq, local)));
  }

  static KvRouter fleet(KvRouter.Builder b, long kvBlocks) {
    KvRouter r = b.build();
    for (int i = 1; i <= 4; i++) r.registerWorker(i, 1, BS, kvBlocks);
    return r;
  }

  static KvRouter fleet() {
    return fleet(KvRouter.builder(BS), 0);
  }

  static RouteOptions only(long... ids) {
    return RouteOptions.defaults().withAllowedWorkers(ids);
  }

  @Test
  void prefillGoesToTheOverlapAndDecodeToTheLighterLoad() {
    KvRouter router = fleet();
    PairRouter pairs = new PairRouter(router, new PairRouter.Config(8, Long.MAX_VALUE));
    int[] prompt = tokens(1, 32); // 8 blocks
    cache(router, 2, tokens(1, 24)); // prefill engine 2 caches 6 of them
    // decode engine 3 holds 3 active blocks of another request
    assertThat(router.route("other", tokens(500, 12), only(3)))
        .isInstanceOf(RouteDecision.Routed.class);

    PairDecision d = pairs.route("r", prompt, RouteOptions.defaults(), PREFILL, DECODE);

    assertThat(d).isInstanceOf(PairDecision.Disaggregated.class);
    PairDecision.Disaggregated x = (PairDecision.Disaggregated) d;
    assertThat(x.prefill().worker()).isEqualTo(Worker.of(2));
    assertThat(x.prefill().overlapTokens()).isEqualTo(24);
    assertThat(x.decode().worker()).isEqualTo(Worker.of(4));
    assertThat(x.prefillRequestId()).isEqualTo("r#prefill");
    assertThat(x.uncachedTokens()).isEqualTo(32); // no decode-capable engine caches any of it
    assertThat(d.path()).isEqualTo("disaggregated");
    assertThat(d.why())
        .isEqualTo(
            "disaggregated: 32 uncached prompt tokens >= threshold 8; prefill on 2 (overlap 24"
                + " tokens), decode on 4");
    // the prefill is charged to engine 2, the decode to engine 4
    assertThat(router.load(Worker.of(2)).requests()).isEqualTo(1);
    assertThat(router.load(Worker.of(2)).activePrefillTokens()).isEqualTo(8);
    assertThat(router.load(Worker.of(4)).requests()).isEqualTo(1);
    assertThat(router.load(Worker.of(1)).requests()).isZero();
    assertThat(router.free("r#prefill")).isTrue();
    assertThat(router.free("r")).isTrue();
    assertThat(router.inFlight()).isEqualTo(1); // "other"
  }

  @Test
  void equalDecodeLoadsGoToTheLargerOverlap() {
    KvRouter router = fleet();
    PairRouter pairs = new PairRouter(router, new PairRouter.Config(8, Long.MAX_VALUE));
    cache(router, 4, tokens(1, 8)); // decode engine 4 caches 2 of 8 blocks: 24 uncached >= 8
    PairDecision d = pairs.route("r", tokens(1, 32), RouteOptions.defaults(), PREFILL, DECODE);
    PairDecision.Disaggregated x = (PairDecision.Disaggregated) d;
    assertThat(x.decode().worker()).isEqualTo(Worker.of(4));
    assertThat(x.uncachedTokens()).isEqualTo(24);
    // both prefill engines are idle and cache nothing: the router's tie-break picks one of them
    assertThat(PREFILL).contains(x.prefill().worker().workerId());
  }

  @Test
  void fewUncachedTokensOnADecodeEngineServeTheRequestThereWhole() {
    KvRouter router = fleet();
    PairRouter pairs = new PairRouter(router, new PairRouter.Config(8, Long.MAX_VALUE));
    cache(router, 3, tokens(1, 28)); // 7 of 8 blocks: 4 tokens uncached, below 8
    cache(router, 1, tokens(1, 32)); // a prefill engine caches all of it: irrelevant here

    PairDecision d = pairs.route("r", tokens(1, 32), RouteOptions.defaults(), PREFILL, DECODE);

    assertThat(d).isInstanceOf(PairDecision.Aggregated.class);
    PairDecision.Aggregated a = (PairDecision.Aggregated) d;
    assertThat(a.reason()).isEqualTo(PairDecision.Reason.FEW_UNCACHED_TOKENS);
    assertThat(a.routed().worker()).isEqualTo(Worker.of(3));
    assertThat(d.why()).isEqualTo("aggregated on 3: 4 uncached prompt tokens < threshold 8");
    assertThat(router.inFlight()).isEqualTo(1); // no prefill recorded
    assertThat(router.load(Worker.of(1)).requests()).isZero();

    // the boundary: 4 uncached < 5 stays whole; 4 < 4 does not
    assertThat(
            new PairRouter(router, new PairRouter.Config(5, Long.MAX_VALUE))
                .route("t", tokens(1, 32), RouteOptions.defaults(), PREFILL, DECODE))
        .isInstanceOf(PairDecision.Aggregated.class);
    PairRouter strict = new PairRouter(router, new PairRouter.Config(4, Long.MAX_VALUE));
    assertThat(strict.route("s", tokens(1, 32), RouteOptions.defaults(), PREFILL, DECODE))
        .isInstanceOf(PairDecision.Disaggregated.class);
  }

  @Test
  void withoutAnAllowedPrefillEngineTheRequestIsServedWhole() {
    KvRouter router = fleet();
    PairRouter pairs = new PairRouter(router, PairRouter.Config.defaults());
    PairDecision d = pairs.route("r", tokens(1, 4000), only(3, 4), PREFILL, DECODE);
    assertThat(((PairDecision.Aggregated) d).reason())
        .isEqualTo(PairDecision.Reason.NO_PREFILL_ENGINE);
    assertThat(d.why()).endsWith("no prefill engine can take it");
    assertThat(DECODE).contains(((PairDecision.Aggregated) d).routed().worker().workerId());
  }

  @Test
  void fullPrefillQueuesServeTheRequestWhole() {
    KvRouter router = fleet();
    // 16 prefill tokens queued on each prefill engine
    router.route("q1", tokens(100, 16), only(1));
    router.route("q2", tokens(200, 16), only(2));
    PairDecision full =
        new PairRouter(router, new PairRouter.Config(0, 15))
            .route("r", tokens(1, 32), RouteOptions.defaults(), PREFILL, DECODE);
    assertThat(((PairDecision.Aggregated) full).reason())
        .isEqualTo(PairDecision.Reason.PREFILL_QUEUE_FULL);
    router.free("r");
    PairDecision room =
        new PairRouter(router, new PairRouter.Config(0, 16))
            .route("r", tokens(1, 32), RouteOptions.defaults(), PREFILL, DECODE);
    assertThat(room).isInstanceOf(PairDecision.Disaggregated.class);
  }

  @Test
  void busyDecodeEnginesRefuseAndFreeThePrefill() {
    // capacity 10 blocks a rank, busy above half of it
    KvRouter router = fleet(KvRouter.builder(BS).busyBlockFraction(0.5), 10);
    router.route("d3", tokens(100, 24), only(3)); // 6 active blocks > 5
    router.route("d4", tokens(200, 24), only(4));
    PairRouter pairs = new PairRouter(router, new PairRouter.Config(0, Long.MAX_VALUE));

    PairDecision d = pairs.route("r", tokens(1, 8), RouteOptions.defaults(), PREFILL, DECODE);

    assertThat(d).isInstanceOf(PairDecision.Refused.class);
    assertThat(((PairDecision.Refused) d).decision()).isInstanceOf(RouteDecision.AllBusy.class);
    assertThat(d.why()).isEqualTo("refused: every decode engine is busy");
    assertThat(router.inFlight()).isEqualTo(2); // the prefill it recorded was freed again
    assertThat(router.load(Worker.of(1)).requests() + router.load(Worker.of(2)).requests())
        .isZero();
    assertThat(pairs.route("n", tokens(1, 8), RouteOptions.defaults(), PREFILL, Set.of()))
        .isInstanceOfSatisfying(
            PairDecision.Refused.class,
            r -> assertThat(r.decision()).isInstanceOf(RouteDecision.NoWorkers.class));
  }

  @Test
  void aRequestIdInFlightThrowsAndLeavesNothingBehind() {
    KvRouter router = fleet();
    PairRouter pairs = new PairRouter(router, new PairRouter.Config(0, Long.MAX_VALUE));
    router.route("r", tokens(100, 8), only(3));
    assertThatThrownBy(
            () -> pairs.route("r", tokens(1, 32), RouteOptions.defaults(), PREFILL, DECODE))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(router.inFlight()).isEqualTo(1);
    assertThat(router.load(Worker.of(1)).requests() + router.load(Worker.of(2)).requests())
        .isZero();
  }

  @Test
  void theConfigRefusesNegativeLimits() {
    assertThatThrownBy(() -> new PairRouter.Config(-1, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new PairRouter.Config(0, -1))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
