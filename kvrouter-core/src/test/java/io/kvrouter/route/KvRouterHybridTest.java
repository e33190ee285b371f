package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvCacheGroups;
import java.util.Arrays;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * KvRouter with a hybrid model (docs/routing.md, "Hybrid models"): routing scores each rank by the
 * longest prefix every KV cache group can serve, a model without groups routes as before.
 */
class KvRouterHybridTest {
  private static final int BS = 4;
  private static final Worker A = Worker.of(1);
  private static final Worker B = Worker.of(2);
  private static final KvCacheGroup WINDOW = KvCacheGroup.slidingWindow(9); // 2 blocks

  private static final int[] PROMPT = IntStream.range(100, 100 + 33).toArray(); // 8 blocks + 1
  private static final long[] LOCAL = BlockHasher.of(BS).localHashes(PROMPT);
  private static final long[] SEQ = SequenceHasher.sequenceHashes(LOCAL);

  private long eventId;

  private KvRouter router(KvRouter.Builder b) {
    KvRouter r = b.build();
    r.registerWorker(1, 1, BS);
    r.registerWorker(2, 1, BS);
    return r;
  }

  private void cacheMain(KvRouter r, Worker w, int blocks) {
    r.applyEvent(
        new RouterEvent(
            w,
            eventId++,
            CacheEvent.storedAtRoot(Arrays.copyOf(SEQ, blocks), Arrays.copyOf(LOCAL, blocks))));
  }

  private boolean group(KvRouter r, int g, KvCacheGroup kind, Worker w, CacheEvent e) {
    return r.applyGroupEvent(g, kind, new RouterEvent(w, eventId++, e));
  }

  private static long[] positions(int from, int to) {
    return Arrays.copyOfRange(SEQ, from, to);
  }

  @Test
  void aSlidingWindowEvictionSendsTheRequestWhereTheEngineWillHitIt() {
    KvRouter r = router(KvRouter.builder(BS));
    cacheMain(r, A, 8);
    cacheMain(r, B, 6);
    // A's window lost blocks 4..7 (freed early by the engine), B's still holds 4..5
    group(r, 1, WINDOW, A, CacheEvent.storedAtRoot(positions(0, 4), positions(0, 4)));
    group(r, 1, WINDOW, B, CacheEvent.storedAtRoot(positions(0, 6), positions(0, 6)));
    assertThat(r.overlaps(PROMPT, RouteOptions.defaults()).scores()).isEqualTo(Map.of(A, 4, B, 6));
    RouteDecision.Routed d = (RouteDecision.Routed) r.route("r1", PROMPT);
    assertThat(d.worker()).isEqualTo(B);
    assertThat(d.overlapTokens()).isEqualTo(6 * BS);
  }

  /**
   * A hybrid model served by engines with events and by engines tracked by predictions (no events,
   * so no group ever says what they hold): the groups cut the event rank's score, while the
   * predicted rank keeps its prediction of the main group, capped below the prompt's last token as
   * the engine caps a hit. Cut by groups it knows nothing of, it would score 0 and never be chosen
   * for its prefix.
   */
  @Test
  void predictedRanksKeepTheirPredictionWhileTheGroupsCutTheEventRanks() {
    KvRouter r = KvRouter.builder(BS).build();
    r.registerRank(A, BS, 0, KvSource.EVENTS);
    r.registerRank(B, BS, 0, KvSource.PREDICTED);
    cacheMain(r, A, 8);
    group(r, 1, WINDOW, A, CacheEvent.storedAtRoot(positions(0, 4), positions(0, 4)));
    assertThat(r.kvCacheGroups().active()).isTrue();
    // B is predicted to hold the whole prompt once a request went there
    RouteDecision.Routed first =
        (RouteDecision.Routed)
            r.route("to-b", PROMPT, RouteOptions.defaults().withAllowedWorkers(B.workerId()));
    assertThat(first.worker()).isEqualTo(B);
    r.free("to-b");
    // A: main 8 blocks, its window holds 0..3 only: 4; B: its prediction, 8 blocks (33 tokens,
    // capped at (33 - 1) / 4 = 8)
    assertThat(r.overlaps(PROMPT, RouteOptions.defaults()).scores()).isEqualTo(Map.of(A, 4, B, 8));
    RouteDecision.Routed again = (RouteDecision.Routed) r.route("r2", PROMPT);
    assertThat(again.worker()).isEqualTo(B);
    assertThat(again.overlapTokens()).isEqualTo(8 * BS);
  }

  @Test
  void withoutGroupEventsTheRouterScoresTheMainGroupAsBefore() {
    KvRouter r = router(KvRouter.builder(BS));
    int[] exact = Arrays.copyOf(PROMPT, 32); // ends on a block boundary
    cacheMain(r, A, 8);
    assertThat(r.kvCacheGroups().active()).isFalse();
    // the main score, uncapped: 8 blocks although an engine recomputes the last token's block
    assertThat(r.overlaps(exact, RouteOptions.defaults()).scores()).isEqualTo(Map.of(A, 8));
  }

  @Test
  void aHybridRouterCapsBelowThePromptsLastTokenAsTheEngineDoes() {
    KvRouter r = router(KvRouter.builder(BS).kvCacheGroups(KvCacheGroups.parse("full,state")));
    int[] exact = Arrays.copyOf(PROMPT, 32);
    cacheMain(r, A, 8);
    group(r, 1, KvCacheGroup.state(), A, CacheEvent.storedAtRoot(positions(6, 8), positions(6, 8)));
    // 32 tokens: at most 7 blocks are reused, and the state after block 6 is there
    assertThat(r.overlaps(exact, RouteOptions.defaults()).scores()).isEqualTo(Map.of(A, 7));
    group(r, 1, null, A, CacheEvent.removed(SEQ[6]));
    assertThat(r.overlaps(exact, RouteOptions.defaults()).scores()).isEmpty();
  }

  @Test
  void aClearedRankLosesItsGroupsAndUnregisteringForgetsThem() {
    KvRouter r = router(KvRouter.builder(BS));
    cacheMain(r, A, 8);
    group(r, 2, KvCacheGroup.state(), A, CacheEvent.storedAtRoot(positions(7, 8), positions(7, 8)));
    assertThat(r.overlaps(PROMPT, RouteOptions.defaults()).scores()).isEqualTo(Map.of(A, 8));
    r.applyEvent(new RouterEvent(A, eventId++, CacheEvent.cleared()));
    assertThat(r.kvCacheGroups().positions(2, A)).isEmpty();
    cacheMain(r, A, 8);
    assertThat(r.overlaps(PROMPT, RouteOptions.defaults()).scores()).isEmpty();
    group(r, 2, KvCacheGroup.state(), A, CacheEvent.storedAtRoot(positions(7, 8), positions(7, 8)));
    r.unregisterWorker(1);
    assertThat(r.kvCacheGroups().positions(2, A)).isEmpty();
  }

  @Test
  void groupEventsAreRefusedForTheMainGroupOrAnotherKind() {
    KvRouter r = router(KvRouter.builder(BS).kvCacheGroups(KvCacheGroups.parse("full,sliding:9")));
    assertThat(
            group(
                r,
                0,
                KvCacheGroup.full(),
                A,
                CacheEvent.storedAtRoot(positions(0, 1), positions(0, 1))))
        .isFalse();
    assertThat(
            group(
                r,
                1,
                KvCacheGroup.state(),
                A,
                CacheEvent.storedAtRoot(positions(0, 1), positions(0, 1))))
        .isFalse();
    assertThat(r.kvCacheGroups().refusedEvents()).isEqualTo(2);
  }

  @Test
  void approximateModeCannotModelGroups() {
    assertThatThrownBy(
            () ->
                KvRouter.builder(BS)
                    .approximate()
                    .kvCacheGroups(KvCacheGroups.parse("full,state"))
                    .build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("full,state");
    KvRouter approx = KvRouter.builder(BS).approximate().build();
    assertThatThrownBy(() -> group(approx, 1, KvCacheGroup.state(), A, CacheEvent.cleared()))
        .isInstanceOf(IllegalStateException.class);
  }
}
