package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.List;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * Small deterministic simulations: 300 requests (50 conversations of 6 turns) on 4 workers whose
 * caches cannot hold every conversation at once.
 */
class FleetSimulationTest {
  private static final List<TraceRequest> TRACE = SyntheticTrace.conversations(50, 6, 2_000);

  private static SimConfig config(int workers, int dpSize, double delayMs, boolean json) {
    return config(workers, dpSize, delayMs, json, RemovedEvents.PER_EVICTION);
  }

  private static SimConfig config(
      int workers, int dpSize, double delayMs, boolean json, RemovedEvents removed) {
    return SimConfig.builder()
        .workers(workers)
        .dpSize(dpSize)
        .gpuBlocks(1024 / dpSize)
        .blockSize(64)
        .timing(new TimingModel(5, 50, 20, 16))
        .eventDelayMs(delayMs)
        .jsonEvents(json)
        .seed(7)
        .verifyPrompts(300)
        .loadSamples(50)
        .removedEvents(removed)
        .build();
  }

  private static PolicyResult run(Policy p, SimConfig cfg, Predicate<RouterEvent> filter) {
    return new FleetSimulation(TRACE, cfg, p, () -> {}, filter).run();
  }

  private static PolicyResult run(Policy p, SimConfig cfg) {
    return run(p, cfg, e -> true);
  }

  /**
   * With a host tier (docs/SIMULATION.md, "A host tier") on small device caches: kv, routing on the
   * host copies too, finds more of the prompts cached than kv-device, which routes on the device
   * alone; the device index still equals the device caches.
   */
  @Test
  void withAHostTierKvRoutesToTheHostCopiesAndBeatsDeviceOnlyRouting() {
    SimConfig c = config(4, 1, 0, false);
    SimConfig cfg =
        SimConfig.builder()
            .workers(c.workers())
            .dpSize(c.dpSize())
            .gpuBlocks(256)
            .blockSize(c.blockSize())
            .speedup(c.speedup())
            .timing(c.timing())
            .seed(7)
            .verifyPrompts(300)
            .loadSamples(50)
            .removedEvents(RemovedEvents.PER_EVICTION)
            .hostBlocks(2048)
            .hostMsPerBlock(0.6)
            .build();
    PolicyResult tiers = run(Policy.KV, cfg);
    PolicyResult device = run(Policy.KV_DEVICE, cfg);
    assertThat(tiers.completed()).isEqualTo(300);
    assertThat(device.completed()).isEqualTo(300);
    assertThat(tiers.hitRate()).isGreaterThan(device.hitRate());
    for (PolicyResult r : List.of(tiers, device)) {
      assertThat(r.verification().problems()).as(r.policy().cliName()).isEmpty();
      assertThat(r.verification().ok()).isTrue();
    }
  }

  @Test
  void kvBeatsRoundRobinAndEveryIndexEqualsTheCaches() {
    SimConfig cfg = config(4, 1, 0, false);
    PolicyResult kv = run(Policy.KV, cfg);
    PolicyResult rr = run(Policy.ROUND_ROBIN, cfg);
    assertThat(kv.completed()).isEqualTo(300);
    assertThat(rr.completed()).isEqualTo(300);
    assertThat(kv.hitRate()).isGreaterThan(rr.hitRate() + 0.2);
    assertThat(kv.ttftPercentile(90)).isLessThan(rr.ttftPercentile(90));
    // in event mode with no delay the router knows exactly what each rank caches
    assertThat(kv.routedOverlapTokens()).isEqualTo(kv.cachedTokens());
    for (PolicyResult r :
        List.of(
            kv,
            rr,
            run(Policy.RANDOM, cfg),
            run(Policy.LEAST_LOADED, cfg),
            run(Policy.APPROX, cfg))) {
      assertThat(r.verification().problems()).as(r.policy().cliName()).isEmpty();
      assertThat(r.verification().ok()).isTrue();
      assertThat(r.verification().ranks()).isEqualTo(4);
      assertThat(r.verification().prompts()).isEqualTo(300);
      assertThat(r.eventsApplied()).isEqualTo(r.eventsPublished()).isPositive();
      assertThat(r.imbalance()).isGreaterThanOrEqualTo(1.0);
      assertThat(r.ttftMs()).hasSize(300).isSorted();
    }
  }

  /**
   * One Removed event per block (vLLM's shape) only multiplies the events: every request sees the
   * same caches, so the results are identical, and the index still equals the caches.
   */
  @Test
  void perBlockRemovalsChangeOnlyTheNumberOfEvents() {
    for (Policy p : List.of(Policy.KV, Policy.ROUND_ROBIN)) {
      PolicyResult grouped = run(p, config(4, 1, 0, false, RemovedEvents.PER_EVICTION));
      PolicyResult perBlock = run(p, config(4, 1, 0, false, RemovedEvents.PER_BLOCK));
      assertThat(perBlock.verification().problems()).as(p.cliName()).isEmpty();
      assertThat(perBlock.cachedTokens()).isEqualTo(grouped.cachedTokens());
      assertThat(perBlock.ttftMs()).isEqualTo(grouped.ttftMs());
      assertThat(perBlock.eventsApplied()).isGreaterThan(grouped.eventsApplied());
    }
  }

  @Test
  void isDeterministic() {
    SimConfig cfg = config(4, 1, 0, false);
    for (Policy p : List.of(Policy.KV, Policy.RANDOM, Policy.APPROX)) {
      PolicyResult a = run(p, cfg);
      PolicyResult b = run(p, cfg);
      assertThat(a.cachedTokens()).isEqualTo(b.cachedTokens());
      assertThat(a.ttftMs()).isEqualTo(b.ttftMs());
      assertThat(a.meanLoad()).isEqualTo(b.meanLoad());
    }
  }

  @Test
  void delayedJsonEventsAndDpRanksStillEndConsistent() {
    PolicyResult r = run(Policy.KV, config(2, 2, 250, true));
    assertThat(r.verification().problems()).isEmpty();
    assertThat(r.verification().ranks()).isEqualTo(4);
    assertThat(r.load().ranks()).containsExactly("w0.0", "w0.1", "w1.0", "w1.1");
    // with events late, the router sometimes expects less than the rank holds, or more
    assertThat(r.routedOverlapTokens()).isNotEqualTo(r.cachedTokens());
  }

  @Test
  void droppedRemovedEventsFailTheCheck() {
    // one lost Removed can heal (the rank may store and evict those blocks again later), so
    // drop every Removed of rank w0 from the fourth on
    int[] seen = {0};
    PolicyResult r =
        run(
            Policy.KV,
            config(4, 1, 0, false),
            e ->
                !(e.data() instanceof CacheEvent.Removed
                    && e.worker().workerId() == 0
                    && seen[0]++ >= 3));
    assertThat(seen[0]).isGreaterThan(3);
    assertThat(r.verification().ok()).isFalse();
    assertThat(r.verification().problems())
        .anySatisfy(p -> assertThat(p).startsWith("rank w0.0:").contains("others"));
  }

  @Test
  void aDroppedStoredEventFailsTheCheck() {
    int[] seen = {0};
    PolicyResult r =
        run(
            Policy.ROUND_ROBIN,
            config(4, 1, 0, false),
            e -> !(e.data() instanceof CacheEvent.Stored && seen[0]++ == 100));
    assertThat(r.verification().ok()).isFalse();
    assertThat(r.verification().problems()).isNotEmpty();
  }
}
