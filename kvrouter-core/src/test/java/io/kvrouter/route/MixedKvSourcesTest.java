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
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * One router holding ranks fed by KV events and ranks tracked by predictions (docs/routing.md,
 * "Mixed fleets"), the engine's capacity set after registration, and how a cold fleet of predicted
 * ranks spreads new prompts.
 */
class MixedKvSourcesTest {
  private static final int BS = 4;
  private static final Worker EXACT = Worker.of(1);
  private static final Worker PREDICTED = Worker.of(2);

  private static void cache(KvRouter router, Worker w, int[] tokens) {
    long[] local = BlockHasher.of(BS).localHashes(tokens);
    router.applyEvent(
        new RouterEvent(
            w, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
  }

  private static Map<Worker, Integer> matches(KvRouter router, int[] tokens) {
    return router.overlaps(tokens, RouteOptions.defaults()).scores();
  }

  private static RouteOptions only(Worker w) {
    return new RouteOptions(null, null, Set.of(w.workerId()));
  }

  @Test
  void eventRanksStayExactWhilePredictedRanksArePredicted() {
    KvRouter router = KvRouter.builder(BS).build();
    router.registerRank(EXACT, BS, 0);
    router.registerRank(PREDICTED, BS, 0, KvSource.PREDICTED);
    assertThat(router.kvSource(EXACT)).isEqualTo(KvSource.EVENTS);
    assertThat(router.kvSource(PREDICTED)).isEqualTo(KvSource.PREDICTED);
    assertThat(router.kvSource(Worker.of(3))).isNull();
    assertThat(router.isApproximate()).isFalse();

    int[] p = tokens(1, 12);
    cache(router, EXACT, p);
    RouteDecision.Routed a = routed(router.route("a", p));
    assertThat(a.worker()).isEqualTo(EXACT);
    assertThat(a.overlapBlocks()).isEqualTo(3);
    router.free("a");
    // a decision for an exact rank predicts nothing: only its events say what it holds
    assertThat(router.predictedEntries()).isZero();
    assertThat(matches(router, p)).isEqualTo(Map.of(EXACT, 3));

    int[] q = tokens(100, 8);
    RouteDecision.Routed b = routed(router.route("b", q, only(PREDICTED)));
    assertThat(b.worker()).isEqualTo(PREDICTED);
    router.free("b");
    assertThat(router.predictedEntries(PREDICTED)).isEqualTo(2);
    assertThat(matches(router, q)).isEqualTo(Map.of(PREDICTED, 2));
    // and the next request of that prefix follows the prediction, the exact rank's score untouched
    RouteDecision.Routed c = routed(router.route("c", tokens(100, 12)));
    assertThat(c.worker()).isEqualTo(PREDICTED);
    assertThat(c.overlapBlocks()).isEqualTo(2);
    router.free("c");
    assertThat(matches(router, p)).isEqualTo(Map.of(EXACT, 3));

    // reports correct the predicted rank; an exact rank's events are the only word on it
    router.observeCachedTokens(PREDICTED, tokens(100, 12), RouteOptions.defaults(), 8, 0);
    assertThat(router.predictedCapacity(PREDICTED)).isEqualTo(1);
    assertThatThrownBy(() -> router.observeCachedTokens(EXACT, p, RouteOptions.defaults(), 12, 0))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("fed by KV events");

    // the predicted rank leaves: its predictions go, the exact rank's blocks stay
    router.unregisterRank(PREDICTED);
    assertThat(router.predictedEntries()).isZero();
    assertThat(matches(router, tokens(100, 12))).isEmpty();
    assertThat(matches(router, p)).isEqualTo(Map.of(EXACT, 3));
  }

  @Test
  void anApproximateRouterTakesPredictedRanksOnly() {
    KvRouter router = KvRouter.builder(BS).approximate().build();
    assertThat(router.defaultKvSource()).isEqualTo(KvSource.PREDICTED);
    router.registerRank(PREDICTED, BS, 0);
    assertThat(router.kvSource(PREDICTED)).isEqualTo(KvSource.PREDICTED);
    assertThatThrownBy(() -> router.registerRank(EXACT, BS, 0, KvSource.EVENTS))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("approximate mode");
    assertThat(KvRouter.builder(BS).build().defaultKvSource()).isEqualTo(KvSource.EVENTS);
  }

  @Test
  void theEnginesCapacitySetAfterRegistrationBoundsThePredictions() {
    KvRouter router = KvRouter.builder(BS).build();
    router.registerRank(PREDICTED, BS, 0, KvSource.PREDICTED);
    assertThat(router.kvBlocks(PREDICTED)).isZero();
    for (int i = 0; i < 5; i++) {
      routed(router.route("r" + i, tokens(1000 * (i + 1), 8)));
      router.free("r" + i);
    }
    assertThat(router.predictedEntries(PREDICTED)).isEqualTo(10);
    assertThat(router.setKvBlocks(PREDICTED, 4)).isTrue();
    assertThat(router.kvBlocks(PREDICTED)).isEqualTo(4);
    assertThat(router.predictedCapacity(PREDICTED)).isEqualTo(4);
    assertThat(router.predictedEntries(PREDICTED)).as("trimmed to the capacity").isEqualTo(4);
    // the newest two prompts are what is left (LRU)
    assertThat(matches(router, tokens(5000, 8))).isEqualTo(Map.of(PREDICTED, 2));
    assertThat(matches(router, tokens(4000, 8))).isEqualTo(Map.of(PREDICTED, 2));
    assertThat(matches(router, tokens(3000, 8))).isEmpty();
    assertThat(router.setKvBlocks(Worker.of(9), 4)).isFalse();
    assertThat(router.kvBlocks(Worker.of(9))).isEqualTo(-1);
  }

  /**
   * A cold fleet, requests one at a time (no load anywhere): every cost ties, and the tie-break
   * must spread new prompts rather than stack them. Predicted ranks break it by their predicted
   * size, so each new prompt goes to an emptier cache.
   */
  @Test
  void aColdFleetOfPredictedRanksSpreadsNewPromptsOnePerEngine() {
    for (long seed = 0; seed < 20; seed++) {
      KvRouter router = KvRouter.builder(BS).approximate().seed(seed).build();
      for (int w = 1; w <= 3; w++) router.registerRank(Worker.of(w), BS, 0);
      Map<Worker, Integer> per = new HashMap<>();
      for (int i = 0; i < 6; i++) {
        RouteDecision.Routed r = routed(router.route("c" + i, tokens(10_000 * (i + 1), 8)));
        assertThat(r.overlapBlocks()).isZero();
        router.free("c" + i);
        per.merge(r.worker(), 1, Integer::sum);
      }
      assertThat(per)
          .as("seed %d: six new prompts of the same size on three cold engines", seed)
          .isEqualTo(Map.of(Worker.of(1), 2, Worker.of(2), 2, Worker.of(3), 2));
      // and each conversation then stays where its prefix is
      for (int i = 0; i < 6; i++) {
        int[] turn2 = tokens(10_000 * (i + 1), 12);
        RouteDecision.Routed r = routed(router.route("t" + i, turn2));
        assertThat(r.overlapBlocks()).isEqualTo(2);
        router.free("t" + i);
      }
    }
  }
}
