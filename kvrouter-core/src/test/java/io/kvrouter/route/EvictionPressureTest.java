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
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
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

  /**
   * The counts are scaled to an epoch that moves every 50 windows: across several moves they stay
   * the decayed sums, computed here directly; a rank silent for two moves reads 0 (e^-50 of it).
   */
  @Test
  void countsStayExactAcrossEpochs() {
    long w = 10 * S;
    EvictionPressure p = new EvictionPressure(w, 0);
    p.evicted(W1, 100, 0);
    p.evicted(W2, 40, 3 * S);
    Worker w3 = Worker.of(3);
    p.evicted(w3, 1_000_000, 5 * S);
    assertThat(p.of(W1, 499 * S)).isCloseTo(100 * Math.exp(-49.9), within(1e-30));
    p.evicted(W1, 7, 600 * S); // a new epoch: W1 rescaled on its way
    assertThat(p.of(W1, 600 * S)).isCloseTo(100 * Math.exp(-60) + 7, within(1e-9));
    assertThat(p.of(W1, 605 * S))
        .isCloseTo((100 * Math.exp(-60) + 7) * Math.exp(-0.5), within(1e-9));
    // W2 is one epoch behind: converted when read
    assertThat(p.of(W2, 601 * S) / (40 * Math.exp(-59.8))).isCloseTo(1.0, within(1e-9));
    p.evicted(W1, 3, 1_200 * S); // another: W2 is one behind, w3 two (untouched since 5 s)
    assertThat(p.of(W1, 1_210 * S))
        .isCloseTo(((100 * Math.exp(-60) + 7) * Math.exp(-60) + 3) * Math.exp(-1), within(1e-9));
    assertThat(p.of(W2, 1_210 * S) / (40 * Math.exp(-120.7))).isCloseTo(1.0, within(1e-9));
    assertThat(p.of(w3, 1_210 * S)).isZero(); // exactly: 10^6 × e^-120.5 is below any use
    p.evicted(w3, 5, 1_210 * S);
    assertThat(p.of(w3, 1_210 * S)).isCloseTo(5, within(1e-9));
    p.reset(W1);
    assertThat(p.of(W1, 1_210 * S)).isZero();
  }

  /**
   * The interleaving behind a CI failure of the race below ("count Infinity"): a reader takes the
   * generation, then a writer opens two more before the reader has scaled its count. With the
   * epochs kept in two slots by generation parity, the reader's generation's slot then held the
   * epoch two generations on, and a count scaled by it came out e^(windows between) too large
   * (e^1000 in the race: Infinity). Each generation now carries its own epoch: the reader's decay
   * is still its generation's, and its read is the count at the meter's last add.
   */
  @Test
  void aReaderStalledAcrossTwoNewGenerationsReadsTheCountAtTheLastAdd() {
    EvictionPressure p = new EvictionPressure(1_000, 0);
    p.evicted(W1, 100, 0);
    EvictionPressure.Meter m = p.meter(W1);
    long readerNow = 10;
    EvictionPressure.Epoch e = p.epoch(readerNow); // the reader's generation (0)
    double decay = p.decay(e, readerNow);
    // meanwhile the writer moves 60 and then 120 windows on: two new generations
    p.evicted(W1, 100, 60_000);
    p.evicted(W1, 100, 120_000);
    // the reader's generation still scales by its own epoch (0), not the newest (120,000)
    assertThat(p.decay(e, 5)).isCloseTo(Math.exp(-5 / 1_000.0), within(1e-12));
    assertThat(p.decay(e, readerNow)).isEqualTo(decay);
    double v = p.read(m, e, decay, readerNow);
    // read before the meter's last add: the count at that add, 100 + 100 e^-60 + 100 e^-120
    assertThat(v).isCloseTo(100 + 100 * Math.exp(-60) + 100 * Math.exp(-120), within(1e-9));
    assertThat(p.of(W1, 120_000)).isCloseTo(v, within(1e-9));
  }

  /**
   * A reader racing a writer across 400 epochs never sees a count of one epoch read with another's
   * scale (that would be off by e^50): 100 blocks every 100 ns with a 1 µs window keep the count
   * between one add and the steady 100 / (1 − e^−0.1) ≈ 1,051.
   */
  @Test
  void aRacingReaderSeesNoTornCount() throws Exception {
    EvictionPressure p = new EvictionPressure(1_000, 0);
    AtomicLong latest = new AtomicLong();
    AtomicBoolean done = new AtomicBoolean();
    CountDownLatch started = new CountDownLatch(1);
    Thread writer =
        new Thread(
            () -> {
              try {
                started.await();
              } catch (InterruptedException e) {
                return;
              }
              for (long t = 100; t <= 20_000_000; t += 100) {
                p.evicted(W1, 100, t);
                latest.set(t);
              }
              done.set(true);
            });
    writer.start();
    p.evicted(W1, 100, 0);
    started.countDown();
    long reads = 0;
    while (!done.get() || reads < 1_000) {
      long t = latest.get();
      double v = p.of(W1, t);
      // read at the last add the reader knows of; later adds (a few ns ahead) add a little
      if (!(v >= 50 && v <= 3_000)) {
        writer.join();
        throw new AssertionError("count " + v + " at " + t + " after " + reads + " reads");
      }
      reads++;
    }
    writer.join();
    assertThat(p.of(W1, 20_000_000)).isCloseTo(100 / (1 - Math.exp(-0.1)), within(1e-6));
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
    for (int i = 0; i < blocks; i++) hashes[i] = 1_000L + i;
    r.applyEvent(new RouterEvent(w, eventId++, CacheEvent.removed(hashes)));
  }

  /**
   * W1 evicted 300 blocks, W2 none: W1's count is twice the mean, so a 4-block prompt neither
   * caches costs 20 × 4 × 2 = 160 more there, and goes to W2. W2 evicting as much evens them out
   * again; a Cleared event forgets a rank's count; cached blocks are not charged; weight 0 is
   * DESIGN.md §6's cost.
   */
  @Test
  void newBlocksCostMoreWhereTheCacheEvictsFaster() {
    KvRouter r = router(20);
    now = 100 * S;
    evict(r, W1, 300);
    RouteDecision.Routed d = KvRouterTest.routed(r.route("a", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W2);
    // §6 parts: prefill 16/4 = 4 blocks, decode 0 + 4 on both
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(8.0 + 160, 8.0);
    r.free("a");

    evict(r, W2, 300); // the same count now (same instant): each pays 20 × 4 × 1
    d = KvRouterTest.routed(r.route("b", KvRouterTest.tokens(1, 16)));
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(88.0, 88.0);
    r.free("b");

    r.applyEvent(new RouterEvent(W2, eventId++, CacheEvent.cleared()));
    d = KvRouterTest.routed(r.route("c", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W2);
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(168.0, 8.0);
    r.free("c");

    long[] local = BlockHasher.of(KvRouterTest.BS).localHashes(KvRouterTest.tokens(1, 16));
    r.applyEvent(
        new RouterEvent(
            W1, eventId++, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
    d = KvRouterTest.routed(r.route("d", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W1);
    // W1: prefill 0, decode 4, no new blocks; W2: 8, its count forgotten (0)
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(4.0, 8.0);

    KvRouter plain = router(0);
    evict(plain, W1, 300);
    d = KvRouterTest.routed(plain.route("a", KvRouterTest.tokens(1, 16)));
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(8.0, 8.0);
  }

  /**
   * The mean is at least PRESSURE_FLOOR_BLOCKS (one block): a rank that evicted a single block
   * while the other evicted none pays one mean's worth (20 × 4 × 1), not twice it.
   */
  @Test
  void theMeanHasAFloorOfOneBlock() {
    KvRouter r = router(20);
    now = 100 * S;
    evict(r, W1, 1);
    RouteDecision.Routed d = KvRouterTest.routed(r.route("a", KvRouterTest.tokens(1, 16)));
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(8.0 + 80, 8.0);
  }

  /**
   * The counts decay: evictions long ago weigh almost nothing now, whether or not another rank
   * evicted since.
   */
  @Test
  void oldEvictionsFadeAway() {
    KvRouter r = router(20);
    now = 0;
    evict(r, W1, 300);
    now = 600 * S; // 20 windows later, nothing evicted since
    RouteDecision.Routed d = KvRouterTest.routed(r.route("a", KvRouterTest.tokens(1, 16)));
    // 300 × e^-20 ≈ 6e-7 blocks left, over the floor of one block
    assertThat(d.candidates().get(0).cost()).isCloseTo(8.0, within(1e-3));
    r.free("a");
    evict(r, W2, 200);
    d = KvRouterTest.routed(r.route("b", KvRouterTest.tokens(1, 16)));
    assertThat(d.worker()).isEqualTo(W1);
  }

  /**
   * The mean is over the ranks allowed for this request, and each candidate gets its own count when
   * a rank before it was left out (W1 evicts most but is not allowed).
   */
  @Test
  void theMeanIsOverTheAllowedRanks() {
    KvRouter r = KvRouter.builder(KvRouterTest.BS).pressureWeight(20).nanoClock(() -> now).build();
    for (int w = 1; w <= 3; w++) r.registerWorker(w, 1, KvRouterTest.BS);
    now = 100 * S;
    evict(r, W1, 1_000);
    evict(r, W2, 300);
    RouteDecision.Routed d =
        KvRouterTest.routed(
            r.route(
                "a", KvRouterTest.tokens(1, 16), RouteOptions.defaults().withAllowedWorkers(2, 3)));
    assertThat(d.candidates())
        .extracting(c -> c.candidate().worker())
        .containsExactly(W2, Worker.of(3));
    // mean of W2 and W3: 150; W2 at 2, W3 at 0
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(168.0, 8.0);
  }

  /** Unregistering a worker (or a rank) forgets its count: registered again, it starts at 0. */
  @Test
  void unregisteringForgetsTheCount() {
    KvRouter r = router(20);
    now = 100 * S;
    evict(r, W1, 300);
    evict(r, W2, 100);
    assertThat(r.unregisterWorker(1)).isTrue();
    r.registerWorker(1, 1, KvRouterTest.BS);
    RouteDecision.Routed d = KvRouterTest.routed(r.route("a", KvRouterTest.tokens(1, 16)));
    // W1 0, W2 100: mean 50, so W2 is at 2 and pays 20 × 4 × 2
    assertThat(d.worker()).isEqualTo(W1);
    assertThat(d.candidates()).extracting(CandidateCost::cost).containsExactly(8.0, 168.0);
  }
}
