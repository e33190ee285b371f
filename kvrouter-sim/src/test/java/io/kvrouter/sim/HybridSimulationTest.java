package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.mockengine.HybridKvCache;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.route.KvRouter;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceTokens;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A hybrid model in the simulator (docs/SIMULATION.md, "Hybrid models"): 300 requests (50
 * conversations of 6 turns) on 4 workers whose pages cannot hold every conversation. Scoring every
 * group, the router predicts exactly what each engine serves at admission and its index equals the
 * caches group by group; scoring the main group alone, it over-predicts once windows or states are
 * evicted.
 */
class HybridSimulationTest {
  private static final List<TraceRequest> TRACE = SyntheticTrace.conversations(50, 6, 2_000);

  private static SimConfig config(String groups, int pages) {
    return SimConfig.builder()
        .workers(4)
        .gpuBlocks(pages)
        .blockSize(64)
        .timing(new TimingModel(5, 50, 20, 16))
        .seed(7)
        .verifyPrompts(300)
        .loadSamples(50)
        .kvGroups(KvCacheGroups.parse(groups))
        .build();
  }

  private static PolicyResult run(Policy p, SimConfig cfg) {
    return new FleetSimulation(TRACE, cfg, p, () -> {}, e -> true).run();
  }

  @ParameterizedTest
  @ValueSource(strings = {"full,sliding:512", "sliding:1024,full,state", "full,state"})
  void exactScoringPredictsEveryHitAndMainOnlyScoringOverPredicts(String groups) {
    SimConfig cfg = config(groups, 600);
    PolicyResult kv = run(Policy.KV, cfg);
    PolicyResult main = run(Policy.KV_MAIN, cfg);
    for (PolicyResult r : List.of(kv, main)) {
      assertThat(r.completed()).isEqualTo(300);
      assertThat(r.verification().problems()).as(r.policy().cliName()).isEmpty();
      assertThat(r.prediction()).isNotNull();
    }
    assertThat(kv.cachedTokens()).as("some prompts hit").isPositive();
    assertThat(kv.prediction().admissionErrorTokens()).as("kv at admission").isZero();
    assertThat(kv.prediction().admissionPredictedTokens()).isEqualTo(kv.cachedTokens());
    assertThat(main.prediction().admissionPredictedTokens())
        .as("main-only scoring predicts more than the engines serve")
        .isGreaterThan(main.cachedTokens());
    assertThat(main.prediction().admissionErrorTokens()).isPositive();
  }

  @Test
  void theFinalCheckSeesALostGroupEvent() {
    KvCacheGroups groups = KvCacheGroups.parse("full,sliding:128");
    KvRouter router = KvRouter.builder(64).kvCacheGroups(groups).build();
    router.registerWorker(0, 1, 64);
    Worker w = new Worker(0, 0);
    boolean[] dropped = {false};
    HybridKvCache cache =
        new HybridKvCache(
            w,
            64,
            200,
            groups,
            new HybridKvCache.Listener() {
              long id;

              @Override
              public void stored(
                  int group,
                  KvCacheGroup kind,
                  int[] positions,
                  long[] hashes,
                  long[] locals,
                  long[] seq,
                  int fromBlock,
                  int toBlock) {
                CacheEvent e =
                    fromBlock == 0 || group != 0
                        ? CacheEvent.storedAtRoot(hashes, locals)
                        : CacheEvent.stored(seq[fromBlock - 1], hashes, locals);
                if (group == 0) router.applyEvent(new RouterEvent(w, id++, e));
                else if (dropped[0])
                  router.applyGroupEvent(group, kind, new RouterEvent(w, id++, e));
                else dropped[0] = true; // the first window store never arrives
              }

              @Override
              public void removed(int group, long hash) {}
            });
    List<TraceRequest> trace = TRACE.subList(0, 3);
    for (TraceRequest t : trace) cache.admit(t.line(), TraceTokens.tokens(t));
    Verification v =
        IndexCheck.verifyHybrid(router.index(), router, List.of(cache), trace, trace.size());
    assertThat(v.ok()).isFalse();
    assertThat(v.problems())
        .anyMatch(p -> p.contains("group 1") && p.contains("lacks"))
        .anyMatch(p -> p.contains("would reuse"));
  }

  @Test
  void theGroupsRefuseWhatTheyCannotSimulate() {
    assertThatThrownBy(
            () ->
                SimConfig.builder()
                    .kvGroups(KvCacheGroups.parse("full,state"))
                    .hostBlocks(100)
                    .build())
        .hasMessageContaining("--host-blocks");
    SimConfig cfg = config("full,state", 600);
    assertThatThrownBy(() -> Policy.check(List.of(Policy.APPROX), cfg))
        .hasMessageContaining("approx");
    assertThat(Policy.defaults(cfg)).contains(Policy.KV_MAIN).doesNotContain(Policy.APPROX);
    SimConfig plain = SimConfig.builder().build();
    assertThat(Policy.defaults(plain)).doesNotContain(Policy.KV_MAIN);
    assertThat(SimConfig.builder().kvGroups(KvCacheGroups.parse("full")).build().hybrid())
        .as("one group is not hybrid")
        .isFalse();
  }
}
