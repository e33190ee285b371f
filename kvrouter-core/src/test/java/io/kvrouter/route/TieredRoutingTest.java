package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import java.util.Arrays;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * Routing with a {@link TieredIndex}: a block the device misses but a slower tier holds costs
 * {@code 1 − weight} of a recompute (docs/routing.md, "Blocks beyond the GPU").
 */
class TieredRoutingTest {
  private static final int BS = 4;
  private static final Worker W1 = Worker.of(1);
  private static final Worker W2 = Worker.of(2);
  private static final int[] PROMPT = IntStream.range(1, 33).toArray(); // 8 blocks
  private static final long[] LOCAL = BlockHasher.of(BS).localHashes(PROMPT);
  private static final long[] SEQ = SequenceHasher.sequenceHashes(LOCAL);

  private static RouterEvent stored(Worker w, int from, int to) {
    long[] s = Arrays.copyOfRange(SEQ, from, to);
    long[] l = Arrays.copyOfRange(LOCAL, from, to);
    return new RouterEvent(
        w, 0, from == 0 ? CacheEvent.storedAtRoot(s, l) : CacheEvent.stored(SEQ[from - 1], s, l));
  }

  private static KvRouter router(KvIndex index, TierWeights weights) {
    KvRouter r = KvRouter.builder(BS).index(index).tierWeights(weights).pressureWeight(0).build();
    r.registerWorker(1, 1, BS);
    r.registerWorker(2, 1, BS);
    return r;
  }

  /** W1: 2 leading blocks on the device; W2: all 8 on the host only. */
  private static TieredIndex fleet() {
    TieredIndex t = TieredIndex.of(KvIndexes::concurrentRadixTree);
    t.apply(Tier.DEVICE, stored(W1, 0, 2));
    t.apply(Tier.HOST, stored(W2, 0, 8));
    return t;
  }

  @Test
  void aHostCopyCostsAQuarterOfARecomputeAtTheDefaultWeight() {
    KvRouter router = router(fleet(), TierWeights.DEFAULTS);
    RouteDecision.Routed r = (RouteDecision.Routed) router.route("a", PROMPT);
    // W1: 32 − 2·4 = 24 tokens = 6 blocks of prefill; W2: 32 − 8·0.75·4 = 8 tokens = 2 blocks
    assertThat(r.worker()).isEqualTo(W2);
    assertThat(r.overlapBlocks()).isZero(); // on the device
    assertThat(r.tierOverlap()).isEqualTo(new TierOverlap(0, 8, 0, 0, 6.0));
    assertThat(r.tierOverlapOf(W1)).isEqualTo(new TierOverlap(2, 0, 0, 0, 2.0));
    assertThat(r.candidates().get(0).candidate().prefillBlocks()).isEqualTo(6.0);
    assertThat(r.candidates().get(1).candidate().prefillBlocks()).isEqualTo(2.0);
    // the prefill charged to W2 is what it computes: the host blocks at a quarter each
    assertThat(router.load(W2).activePrefillTokens()).isEqualTo(8);
  }

  @Test
  void withoutTiersOrWithWeightZeroTheDeviceCopyWins() {
    // the same events into a device-only index: the host store is dropped, as before tiers
    KvIndex deviceOnly = KvIndexes.concurrentRadixTree();
    deviceOnly.apply(stored(W1, 0, 2));
    RouteDecision.Routed plain =
        (RouteDecision.Routed) router(deviceOnly, TierWeights.DEFAULTS).route("a", PROMPT);
    assertThat(plain.worker()).isEqualTo(W1);
    assertThat(plain.tierOverlap()).isNull();

    RouteDecision.Routed zero =
        (RouteDecision.Routed) router(fleet(), new TierWeights(0, 0, 0)).route("a", PROMPT);
    assertThat(zero.worker()).isEqualTo(W1);
    assertThat(zero.tierOverlap()).isEqualTo(new TierOverlap(2, 0, 0, 0, 2.0));
    assertThat(zero.tierOverlapOf(W2)).isEqualTo(new TierOverlap(0, 8, 0, 0, 0.0));
  }

  @Test
  void aDeviceHoleFilledFromTheHostCountsAtTheHostWeight() {
    TieredIndex t = TieredIndex.of(KvIndexes::concurrentRadixTree);
    t.apply(Tier.DEVICE, stored(W1, 0, 8));
    t.apply(Tier.HOST, stored(W1, 0, 4));
    t.apply(Tier.DEVICE, new RouterEvent(W1, 0, CacheEvent.removed(SEQ[2]))); // device hole at 2
    RouteDecision.Routed r =
        (RouteDecision.Routed) router(t, TierWeights.DEFAULTS).route("a", PROMPT);
    // device prefix 2; with the host 8 (the host fills the hole; blocks 3..7 are on the device
    // but counted at the host weight: a lower bound, never more than the best tier of each)
    assertThat(r.tierOverlapOf(W1)).isEqualTo(new TierOverlap(2, 6, 0, 0, 2 + 6 * 0.75));
  }

  @Test
  void aDeviceClearKeepsTheHostCopiesAndAnUntieredClearDropsEveryTier() {
    TieredIndex t = fleet();
    t.apply(Tier.DEVICE, new RouterEvent(W2, 0, CacheEvent.cleared()));
    assertThat(t.findTiered(LOCAL).blocks(W2, Tier.HOST)).isEqualTo(8);
    t.apply(new RouterEvent(W2, 0, CacheEvent.cleared()));
    assertThat(t.findTiered(LOCAL).blocks(W2, Tier.EXTERNAL)).isZero();
    assertThat(t.blockCount(W2, Tier.HOST)).isZero();
  }

  @Test
  void weightsOutsideZeroToOneAreRefused() {
    assertThatThrownBy(() -> new TierWeights(1.5, 0, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("host tier weight must be in [0, 1]");
  }
}
