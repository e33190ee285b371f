package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The policies (and the pooled ceiling) of one simulate run go to several threads at once
 * (SimulationResult.run): every result must equal a run on one thread, field by field and sample by
 * sample (only the wall times differ), and come back in the order of the policies given.
 */
class ParallelRunTest {
  private static final List<TraceRequest> TRACE = SyntheticTrace.conversations(40, 6, 1_500);

  private static SimConfig.Builder small() {
    // 4 ranks of 512 blocks: caches too small for the trace, so every run evicts
    return SimConfig.builder()
        .workers(4)
        .gpuBlocks(512)
        .blockSize(64)
        .timing(new TimingModel(5, 50, 20, 16))
        .seed(3)
        .verifyPrompts(60)
        .loadSamples(40);
  }

  @Test
  void aParallelRunEqualsASequentialOne() {
    List<Policy> policies =
        List.of(Policy.APPROX, Policy.KV, Policy.ROUND_ROBIN, Policy.RANDOM, Policy.LEAST_LOADED);
    check(small().removedEvents(RemovedEvents.PER_EVICTION).build(), policies);
  }

  @Test
  void withAHostTierAndPerBlockRemovals() {
    check(
        small().hostBlocks(1_024).removedEvents(RemovedEvents.PER_BLOCK).build(),
        List.of(Policy.KV, Policy.KV_DEVICE, Policy.LEAST_LOADED));
  }

  @Test
  void threadsMustBePositive() {
    assertThatThrownBy(
            () ->
                SimulationResult.run(
                    "synthetic",
                    TRACE,
                    small().build(),
                    List.of(Policy.KV),
                    Progress.off(),
                    null,
                    0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("threads must be >= 1, got 0");
  }

  private static void check(SimConfig cfg, List<Policy> policies) {
    SimulationResult one =
        SimulationResult.run("synthetic", TRACE, cfg, policies, Progress.off(), null, 1);
    SimulationResult three =
        SimulationResult.run("synthetic", TRACE, cfg, policies, Progress.off(), null, 3);
    assertThat(three.policies()).extracting(PolicyResult::policy).isEqualTo(policies);
    for (int i = 0; i < policies.size(); i++) {
      PolicyResult a = one.policies().get(i);
      assertThat(a.verification().ok()).as("%s verified", a.policy()).isTrue();
      assertThat(a.completed()).isEqualTo(TRACE.size());
      assertThat(describe(three.policies().get(i))).isEqualTo(describe(a));
    }
    // the runs did something worth comparing: kv found cached prefixes, the caches evicted
    assertThat(one.of(Policy.KV).cachedTokens()).isPositive();
    assertThat(one.pooled().cachedTokens()).isPositive();
    assertThat(describe(three.pooled())).isEqualTo(describe(one.pooled()));
  }

  /** Every field of a policy's result but its wall time, as text. */
  private static String describe(PolicyResult r) {
    return String.join(
        "\n",
        "policy " + r.policy(),
        "requests " + r.requests() + " completed " + r.completed() + " rejected " + r.rejected(),
        "prompt " + r.promptTokens() + " cached " + r.cachedTokens(),
        "routed " + r.routedOverlapTokens() + " output " + r.outputTokens(),
        "ttft " + Arrays.toString(r.ttftMs()),
        "makespan " + r.makespanSec(),
        "load " + Arrays.toString(r.meanLoad()),
        "prefill " + Arrays.toString(r.prefillUtilisation()),
        "series " + r.load().ranks() + " " + Arrays.toString(r.load().timesSec()),
        "in flight " + Arrays.deepToString(r.load().inFlight()),
        "hits " + describe(r.hits()),
        "events " + r.eventsPublished() + " " + r.eventsApplied(),
        "verification " + r.verification());
  }

  private static String describe(PooledCeiling p) {
    return p.capacityBlocks()
        + " "
        + p.promptTokens()
        + " "
        + p.cachedTokens()
        + " "
        + p.rejected()
        + " "
        + describe(p.hits());
  }

  private static String describe(HitSeries h) {
    StringBuilder sb = new StringBuilder();
    for (int b = 0; b < h.buckets(); b++) {
      sb.append(h.requests(b))
          .append('/')
          .append(h.promptTokens(b))
          .append('/')
          .append(h.cachedTokens(b))
          .append(' ');
    }
    return sb.toString();
  }
}
