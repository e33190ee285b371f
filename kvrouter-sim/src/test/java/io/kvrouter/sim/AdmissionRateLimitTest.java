package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.sim.AdmissionSimulation.Mode;
import io.kvrouter.sim.trace.TraceRequest;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code simulate --admission --tenant-token-rate}: the gateway's per-tenant token buckets in
 * simulated time. A seeded synthetic trace with a tenant that sends ten times as much as the other;
 * the rates are set against what each tenant sends, counted here from the trace.
 */
class AdmissionRateLimitTest {
  private static final List<TraceRequest> TRACE = SyntheticTrace.conversations(40, 6, 4000);
  private static final SimConfig FLEET =
      SimConfig.builder().workers(2).gpuBlocks(16384).verifyPrompts(0).build();
  private static final TenantRule.Assignment A = new TenantRule(2, 10, 0.3, false, 1).assign(TRACE);
  private static final double SPEEDUP = LoadFactor.speedup(TRACE, FLEET.timing(), FLEET.ranks(), 1);
  private static final double BURST_SEC = 2;

  /** The gateway's limits with rates per simulated second and a burst of {@code burstSec}. */
  private static TokenRateConfig rates(
      double defaultRate, Map<String, Double> tenants, double burstSec) {
    return new TokenRateConfig(
        defaultRate, tenants, Duration.ofMillis(Math.round(burstSec * 1000)), 1000);
  }

  /** Tokens per simulated second tenant {@code t} asks with nothing cached (prompt + output). */
  private static double asked(int t) {
    double tokens = 0;
    for (int i = 0; i < TRACE.size(); i++) {
      if (A.tenant()[i] == t) tokens += TRACE.get(i).inputLength() + TRACE.get(i).outputLength();
    }
    double span =
        (TRACE.get(TRACE.size() - 1).timestampMs() - TRACE.get(0).timestampMs()) / 1000 / SPEEDUP;
    return tokens / span;
  }

  private static AdmissionSimulation sim(Mode mode, TokenRateConfig rates) {
    AdmissionSimulation.Settings s =
        new AdmissionSimulation.Settings(8, 4096, true, 10, 1024, 1000, -1, 1, rates);
    return new AdmissionSimulation(A, 2, FLEET.withSpeedup(SPEEDUP), s, mode, mode.label);
  }

  @Test
  void aTenantOverItsRateIsRefusedAtOnceAndOneUnderItIsNot() {
    assertThat(A.count(0)).isGreaterThan(5 * A.count(1));
    // t0 may use a fifth of what it asks uncached; t1 ten times what it asks
    double r0 = asked(0) / 5;
    double r1 = asked(1) * 10;
    TokenRateConfig rates = rates(0, Map.of("t0", r0, "t1", r1), BURST_SEC);
    for (Mode mode : List.of(Mode.FIFO, Mode.FAIR_COST)) {
      AdmissionSimulation sim = sim(mode, rates);
      AdmissionResult r = sim.run();
      assertThat(r.rateRefused(1, 0) + r.rateRefused(1, 1)).as(mode.label).isZero();
      assertThat(r.rateRefused(0, 0)).as(mode.label).isPositive();
      assertThat(r.rateRefused(0, 1)).as(mode.label).isPositive();
      // nothing lost: answered, refused (queue or rate) or rejected by an engine, once each
      assertThat(r.nothingLost()).isTrue();
      assertThat(r.answered() + r.refused() + r.engineRejected()).isEqualTo(TRACE.size());
      // the counts per tenant and band are the requests' own outcomes; refused ones never waited
      int[][] counted = new int[2][2];
      for (int i = 0; i < TRACE.size(); i++) {
        if (sim.outcome(i) != AdmissionSimulation.RATE_LIMITED) continue;
        counted[A.tenant()[i]][A.band()[i]]++;
        assertThat(sim.waitNanos[i]).isZero();
        assertThat(sim.request(i).firstToken).isEqualTo(-1);
      }
      for (int t = 0; t < 2; t++) {
        for (int b = 0; b < 2; b++) assertThat(r.rateRefused(t, b)).isEqualTo(counted[t][b]);
      }
      assertThat(r.refusedRate()).isEqualTo(counted[0][0] + counted[0][1]);
      assertThat(r.refused()).isEqualTo(r.refusedRate() + r.refusedFull() + r.refusedTimeout());
      if (mode == Mode.FIFO) {
        // no queue: every refusal is the rate's
        assertThat(r.refused()).isEqualTo(r.refusedRate());
        // what t0's answered requests really cost stays within its bucket: the burst, the refill
        // up to its last arrival, and one request's debt (settled charges never exceed the cost
        // the engine reports, which is at most the charge when the prediction holds)
        double cost = 0;
        double biggest = 0;
        double lastArrival = 0;
        for (int i = 0; i < TRACE.size(); i++) {
          if (A.tenant()[i] != 0) continue;
          SimRequest q = sim.request(i);
          double c = TRACE.get(i).inputLength() + TRACE.get(i).outputLength();
          biggest = Math.max(biggest, c);
          lastArrival = Math.max(lastArrival, q.arrival / 1e9);
          if (sim.outcome(i) == AdmissionSimulation.ANSWERED) {
            cost +=
                Math.max(0, TRACE.get(i).inputLength() - q.cachedTokens)
                    + TRACE.get(i).outputLength();
          }
        }
        assertThat(cost).isLessThanOrEqualTo(r0 * BURST_SEC + r0 * lastArrival + biggest);
        // and the limit binds: t0 asks about five times its rate uncached
        assertThat(r.answered()).isLessThan(TRACE.size());
      }
    }
  }

  @Test
  void withoutALimitNothingIsRefusedByRate() {
    AdmissionResult r = sim(Mode.FIFO, TokenRateConfig.OFF).run();
    assertThat(r.refusedRate()).isZero();
    assertThat(r.answered()).isEqualTo(TRACE.size());
    // a default rate far above what either tenant asks refuses nothing either
    AdmissionResult generous = sim(Mode.FIFO, rates(100 * asked(0), Map.of(), BURST_SEC)).run();
    assertThat(generous.refusedRate()).isZero();
    assertThat(generous.answered()).isEqualTo(TRACE.size());
  }

  @Test
  void theUnloadedBaselineRunsWithoutTheLimit() {
    TenantRule rule = new TenantRule(2, 10, 0.3, false, 1);
    AdmissionSimulation.Settings s =
        new AdmissionSimulation.Settings(8, 4096, true, 10, 1024, 1000, -1, 1)
            .withRates(rates(asked(0) / 20, Map.of(), BURST_SEC));
    AdmissionComparison c =
        AdmissionComparison.run(
            "synthetic", TRACE, rule, FLEET.withSpeedup(SPEEDUP), s, List.of(Mode.FAIR_COST), 1, 1);
    assertThat(c.unloaded().refusedRate()).isZero();
    assertThat(c.of(Mode.FAIR_COST).refusedRate()).isPositive();
    assertThat(c.nothingLost()).isTrue();
  }
}
