package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.AdmissionSimulation.Mode;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Eviction of in-flight lower-band work in {@code simulate --admission --evict-lower-bands}
 * (docs/routing.md, "Evicting lower-band work in flight"): only lower bands are evicted, each
 * request at most the configured number of times, nothing is lost, and the high band gains. Seeded
 * synthetic traces, simulated time only.
 */
class AdmissionEvictionTest {
  // 40 conversations of 6 turns (240 requests), two engines that hold every prompt
  private static final List<TraceRequest> TRACE = SyntheticTrace.conversations(40, 6, 4000);
  private static final SimConfig FLEET =
      SimConfig.builder().workers(2).gpuBlocks(16384).verifyPrompts(0).build();
  private static final TenantRule.Assignment A = new TenantRule(2, 1, 0.3, false, 1).assign(TRACE);
  private static final AdmissionSimulation.Settings LIMITS =
      new AdmissionSimulation.Settings(8, 4096, true, 10, 1024, 1000);

  private static AdmissionSimulation sim(AdmissionSimulation.Settings s) {
    SimConfig cfg = FLEET.withSpeedup(LoadFactor.speedup(TRACE, FLEET.timing(), FLEET.ranks(), 2));
    return new AdmissionSimulation(A, 2, cfg, s, Mode.FAIR_COST, "fair-cost");
  }

  @Test
  void evictsOnlyLowerBandsAtMostTheLimitAndLosesNothing() {
    for (int max : new int[] {1, 2}) {
      AdmissionSimulation sim = sim(LIMITS.withEvictions(max));
      AdmissionResult r = sim.run();
      AdmissionResult.Evictions e = r.evictions();
      assertThat(r.nothingLost()).isTrue();
      assertThat(r.answered() + r.refused() + r.engineRejected()).isEqualTo(TRACE.size());
      assertThat(e.total()).isPositive();
      int evicted = 0;
      int total = 0;
      for (int i = 0; i < TRACE.size(); i++) {
        int n = sim.evictedTimes(i);
        assertThat(n).isBetween(0, max);
        if (n > 0) {
          evicted++;
          total += n;
          // only the normal band is ever evicted (the high band has nothing below it waiting)
          assertThat(A.band()[i]).isEqualTo(1);
          // an evicted request ends answered or refused, never pending
          assertThat(sim.outcome(i))
              .isIn(AdmissionSimulation.ANSWERED, AdmissionSimulation.REFUSED);
        }
      }
      assertThat(e.requests()).isEqualTo(evicted);
      assertThat(e.total()).isEqualTo(total);
      assertThat(e.of(0, 0) + e.of(1, 0)).isZero();
      assertThat(e.answered() + e.refused()).isEqualTo(e.requests());
      assertThat(e.wastedPrefillTokens()).isNotNegative();
      if (max == 2) assertThat(total).isGreaterThan(evicted); // some were evicted twice
    }
  }

  /**
   * One rank that is busy at two requests, prefill 0.1 ms per token, decode 10 ms per token: two
   * normal requests A (t = 0) and B (t = 1 ms) fill it, high H comes at 2 ms, high H2 at 1,103 ms.
   * Every prompt is 1,024 uncached tokens (102.4 ms of prefill), every answer 101 tokens (1 s of
   * decode). Hand-computed times below.
   */
  private static AdmissionSimulation handMade(int maxEvictions) {
    List<TraceRequest> trace =
        List.of(
            new TraceRequest(1, 0, 1024, 101, new long[] {1, 2}),
            new TraceRequest(2, 1, 1024, 101, new long[] {3, 4}),
            new TraceRequest(3, 2, 1024, 101, new long[] {5, 6}),
            new TraceRequest(4, 1103, 1024, 101, new long[] {7, 8}));
    TenantRule.Assignment a =
        new TenantRule.Assignment(trace, new int[] {0, 0, 0, 0}, new int[] {1, 1, 0, 0});
    SimConfig cfg =
        SimConfig.builder()
            .workers(1)
            .gpuBlocks(4096)
            .timing(new TimingModel(0, 100, 10, 64))
            .verifyPrompts(0)
            .build();
    AdmissionSimulation.Settings s =
        new AdmissionSimulation.Settings(2, -1, false, 30, 1024, 1000).withEvictions(maxEvictions);
    return new AdmissionSimulation(a, 1, cfg, s, Mode.FAIR_COST, "fair-cost");
  }

  @Test
  void aWaitingHighRequestTakesThePlaceOfTheLastSentNormalOneOnHandComputedTimes() {
    // without eviction: H waits for A's end (1,102.4 ms), then prefills after B: 1,102.4 ..
    // 1,204.8; H2 waits for B's end (204.8 + 1,000) and prefills 1,204.8 .. 1,307.2
    AdmissionSimulation off = handMade(0);
    AdmissionResult r0 = off.run();
    assertThat(ttfts(off)).containsExactly(102.4, 203.8, 1202.8, 204.2);
    assertThat(r0.evictions()).isSameAs(AdmissionResult.Evictions.NONE);

    // with eviction: H takes B's place at 2 ms (B had not started: nothing wasted) and prefills
    // after A, 102.4 .. 204.8; B waits at the head of the normal band and is sent at A's end,
    // 1,102.4, prefilling to 1,204.8. H2 finds B (evicted once: no more) and H: it waits for
    // H's end, 1,204.8, and prefills to 1,307.2
    AdmissionSimulation once = handMade(1);
    AdmissionResult r1 = once.run();
    assertThat(ttfts(once)).containsExactly(102.4, 1203.8, 202.8, 204.2);
    assertThat(once.evictedTimes(1)).isEqualTo(1);
    assertThat(r1.evictions().total()).isEqualTo(1);
    assertThat(r1.evictions().of(0, 1)).isEqualTo(1);
    assertThat(r1.evictions().answered()).isEqualTo(1);
    assertThat(r1.evictions().wastedPrefillTokens()).isZero();
    assertThat(r1.nothingLost()).isTrue();

    // at most two: H2 takes B's place again at 1,103 ms, 0.6 ms into B's prefill (6 of its 1,024
    // tokens wasted) and prefills 1,103 .. 1,205.4; B is sent again at H's end, 1,204.8, and
    // prefills after H2, 1,205.4 .. 1,307.8
    AdmissionSimulation twice = handMade(2);
    AdmissionResult r2 = twice.run();
    assertThat(ttfts(twice)).containsExactly(102.4, 1306.8, 202.8, 102.4);
    assertThat(twice.evictedTimes(1)).isEqualTo(2);
    assertThat(r2.evictions().total()).isEqualTo(2);
    assertThat(r2.evictions().requests()).isEqualTo(1);
    assertThat(r2.evictions().wastedPrefillTokens()).isEqualTo(6);
    assertThat(r2.nothingLost()).isTrue();
    assertThat(r2.answered()).isEqualTo(4);
  }

  /**
   * The hand-made run with a 0.5-s wait bound: B, evicted at 2 ms after 1 ms on the engine, waits
   * again at the head of the normal band; no place frees before A's end (1,102.4 ms), so B's bound
   * runs out at 1 + 500 + 1 = 502 ms (from its arrival, its engine time not counted) and it is
   * refused there, counted once as a timeout and as an evicted request refused.
   */
  @Test
  void anEvictedRequestWhoseBoundRunsOutWhileItWaitsAgainIsRefusedOnce() {
    List<TraceRequest> trace = handTrace(1103);
    AdmissionSimulation sim = handSim(trace, 0.5, 1);
    AdmissionResult r = sim.run();
    assertThat(sim.evictedTimes(1)).isEqualTo(1);
    assertThat(sim.outcome(1)).isEqualTo(AdmissionSimulation.REFUSED);
    assertThat(r.refusedTimeout()).isEqualTo(1);
    assertThat(r.refused()).isEqualTo(1);
    assertThat(r.answered()).isEqualTo(3);
    assertThat(r.evictions().refused()).isEqualTo(1);
    assertThat(r.evictions().answered()).isZero();
    assertThat(r.evictions().of(0, 1)).isEqualTo(1);
    assertThat(r.nothingLost()).isTrue();
    // A and H as before; H2 comes at 1,103 ms to a rank holding only H (B was refused, A ended)
    // and prefills at once, 1,103 .. 1,205.4
    double[] t = ttfts(sim);
    assertThat(new double[] {t[0], t[2], t[3]}).containsExactly(102.4, 202.8, 102.4);
  }

  /**
   * A request evicted twice is bounded by its arrival plus all its engine time: its first
   * eviction's bound, which a second eviction pushed later, must not refuse it. A (11 output
   * tokens) ends at 202.4 ms; B, evicted by H at 2 ms (1 ms on the engine), is sent again then and
   * evicted by H2 at 210 ms, 5.2 ms into its prefill (52 tokens wasted; 8.6 ms on engines in all).
   * With a 1.2-s bound its wait ends at 1 + 1,200 + 8.6 = 1,209.6 ms, not 1,202 ms: H's end at
   * 1,204.8 ms gives it its place, and it prefills 1,204.8 .. 1,307.2 (TTFT 1,306.2 ms).
   */
  @Test
  void aSecondEvictionMovesTheBoundAndTheFirstOnesBoundDoesNotRefuse() {
    List<TraceRequest> trace =
        List.of(
            new TraceRequest(1, 0, 1024, 11, new long[] {1, 2}),
            new TraceRequest(2, 1, 1024, 101, new long[] {3, 4}),
            new TraceRequest(3, 2, 1024, 101, new long[] {5, 6}),
            new TraceRequest(4, 210, 1024, 101, new long[] {7, 8}));
    AdmissionSimulation sim = handSim(trace, 1.2, 2);
    AdmissionResult r = sim.run();
    assertThat(sim.evictedTimes(1)).isEqualTo(2);
    assertThat(r.evictions().wastedPrefillTokens()).isEqualTo(52);
    assertThat(sim.outcome(1)).isEqualTo(AdmissionSimulation.ANSWERED);
    assertThat(r.refused()).isZero();
    assertThat(r.answered()).isEqualTo(4);
    assertThat(r.evictions().answered()).isEqualTo(1);
    assertThat(ttfts(sim)).containsExactly(102.4, 1306.2, 202.8, 102.4);
    assertThat(r.nothingLost()).isTrue();
  }

  private static List<TraceRequest> handTrace(long h2Arrival) {
    return List.of(
        new TraceRequest(1, 0, 1024, 101, new long[] {1, 2}),
        new TraceRequest(2, 1, 1024, 101, new long[] {3, 4}),
        new TraceRequest(3, 2, 1024, 101, new long[] {5, 6}),
        new TraceRequest(4, h2Arrival, 1024, 101, new long[] {7, 8}));
  }

  /** handMade's fleet and bands (A, B normal; H, H2 high) on {@code trace}. */
  private static AdmissionSimulation handSim(
      List<TraceRequest> trace, double maxQueueTimeSec, int maxEvictions) {
    TenantRule.Assignment a =
        new TenantRule.Assignment(trace, new int[] {0, 0, 0, 0}, new int[] {1, 1, 0, 0});
    SimConfig cfg =
        SimConfig.builder()
            .workers(1)
            .gpuBlocks(4096)
            .timing(new TimingModel(0, 100, 10, 64))
            .verifyPrompts(0)
            .build();
    AdmissionSimulation.Settings s =
        new AdmissionSimulation.Settings(2, -1, false, maxQueueTimeSec, 1024, 1000)
            .withEvictions(maxEvictions);
    return new AdmissionSimulation(a, 1, cfg, s, Mode.FAIR_COST, "fair-cost");
  }

  private static double[] ttfts(AdmissionSimulation sim) {
    double[] t = new double[4];
    for (int i = 0; i < 4; i++) {
      t[i] = Math.round(sim.request(i).ttftNanos() / 1e5) / 10.0; // ms, to 0.1
    }
    return t;
  }

  @Test
  void offByDefaultAndANegativeLimitIsRefused() {
    assertThat(LIMITS.maxEvictions()).isZero();
    assertThatThrownBy(() -> LIMITS.withEvictions(-1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("--max-evictions");
  }
}
