package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The eviction-pressure term of the default cost (docs/routing.md): the decaying count of evicted
 * blocks per rank, and how the router prices new blocks on a rank that evicts faster.
 */
class EvictionPressureTest {
  private static final long S = 1_000_000_000L;
  private static final Worker W1 = Worker.of(1);
  private static final Worker W2 = Worker.of(2);

  @Test
  void theCountDecaysWithTheWindowAndWorkersAreApart() {
    EvictionPressure p = new EvictionPressure(10 * S);
    assertThat(p.of(W1, 0)).isZero();
    p.evicted(W1, 100, 5 * S);
    assertThat(p.of(W1, 5 * S)).isEqualTo(100.0);
    // one window later: e^-1 of it
    assertThat(p.of(W1, 15 * S)).isCloseTo(100 * Math.exp(-1), within(1e-9));
    p.evicted(W1, 50, 15 * S);
    assertThat(p.of(W1, 15 * S)).isCloseTo(100 * Math.exp(-1) + 50, within(1e-9));
    // an event stamped before the last one is added without decay
    p.evicted(W1, 10, 14 * S);
    assertThat(p.of(W1, 15 * S)).isCloseTo(100 * Math.exp(-1) + 60, within(1e-9));
    assertThat(p.of(W2, 15 * S)).isZero();
    p.forget(W1);
    assertThat(p.of(W1, 15 * S)).isZero();
    assertThatThrownBy(() -> new EvictionPressure(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the pressure window must be > 0 ns, got 0");
  }

  private long eventId;
  private long now;

  private KvRouter router(double pressureWeight) {
    KvRouter r =
        KvRouter.builder(KvRouterTest.BS)
            .pressureWeight(pressureWeight)
            .pressureWindow(Duration.ofSeconds(30))
            .nanoClock(() -> now)
            .build();
    r.registerWorker(1, 1, KvRouterTest.BS);
    r.registerWorker(2, 1, KvRouterTest.BS);
    return r;
  }

  private void evict(KvRouter r, Worker w, int blocks) {
    long[] hashes = new long[blocks];
    for (int i = 0; i < blocks; i++) hashes[i] = 1_000 + i;
    r.applyEvent(new RouterEvent(w, eventId++, CacheEvent.removed(hashes)));
  }

  /**
   * W1 evicted 30 blocks, W2 none: W1's rate is twice the mean, so a 4-block prompt neither caches
   * costs 20 × 4 × 2 = 160 more there, and goes to W2. W2 evicting as much evens them out again; a
   * Cleared event forgets a rank's rate; weight 0 is DESIGN.md §6's cost.
   */
  @Test
  void newBlocksCostMoreWhereTheCacheEvictsFaster() {
    KvRouter r = router(20);
    now = 100 * S;
    evict(r, W1, 30);
    RouteDecision.Routed d = KvRouterTest.routed(r.route("a", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W2);
    // §6 parts: prefill 16/4 = 4 blocks, decode 0 + 4 on both
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(8.0 + 160, 8.0);
    r.free("a");

    evict(r, W2, 30); // the same rate now (same instant): no term differs
    d = KvRouterTest.routed(r.route("b", KvRouterTest.tokens(1, 16)));
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(88.0, 88.0);
    r.free("b");

    r.applyEvent(new RouterEvent(W2, eventId++, CacheEvent.cleared()));
    d = KvRouterTest.routed(r.route("c", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W2);
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(168.0, 8.0);
    r.free("c");

    // cached blocks are not new: a prompt W1 holds whole adds nothing to W1's cache
    long[] local = BlockHasher.of(KvRouterTest.BS).localHashes(KvRouterTest.tokens(1, 16));
    r.applyEvent(
        new RouterEvent(
            W1, eventId++, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
    d = KvRouterTest.routed(r.route("d", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W1);
    // W1: prefill 0, decode 4, no new blocks; W2: 8, its rate forgotten (0)
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(4.0, 8.0);

    KvRouter plain = router(0);
    evict(plain, W1, 30);
    d = KvRouterTest.routed(plain.route("a", KvRouterTest.tokens(1, 16)));
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(8.0, 8.0);
  }

  /** The rates decay: a burst of evictions long ago weighs almost nothing now. */
  @Test
  void oldEvictionsFadeAway() {
    KvRouter r = router(20);
    now = 0;
    evict(r, W1, 30);
    evict(r, W2, 1);
    now = 600 * S; // 20 windows later
    evict(r, W2, 1);
    RouteDecision.Routed d = KvRouterTest.routed(r.route("a", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W1);
  }
}
