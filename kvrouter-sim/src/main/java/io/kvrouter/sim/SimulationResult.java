package io.kvrouter.sim;

import io.kvrouter.sim.trace.TraceRequest;
import java.util.ArrayList;
import java.util.List;

/**
 * Everything one {@code simulate} run measured.
 *
 * @param trace the trace's name
 * @param requests requests replayed
 * @param traceSpanSec simulated seconds between the first and the last arrival
 * @param config the configuration
 * @param pooled the pooled-cache ceiling
 * @param policies one result per policy, in the order run
 * @param wallNanos wall-clock time of the whole run
 */
public record SimulationResult(
    String trace,
    int requests,
    double traceSpanSec,
    SimConfig config,
    PooledCeiling pooled,
    List<PolicyResult> policies,
    long wallNanos) {

  /** The result of {@code p}, or null when it was not run. */
  public PolicyResult of(Policy p) {
    for (PolicyResult r : policies) {
      if (r.policy() == p) return r;
    }
    return null;
  }

  /** Whether every policy's index-equals-caches check passed. */
  public boolean verified() {
    return policies.stream().allMatch(r -> r.verification().ok());
  }

  /** Runs the pooled ceiling and every policy, each on a fresh fleet. */
  public static SimulationResult run(
      String traceName,
      List<TraceRequest> trace,
      SimConfig cfg,
      List<Policy> policies,
      Progress progress) {
    return run(traceName, trace, cfg, policies, progress, null);
  }

  /** As above; with {@code nats}, every run's events go through NATS JetStream. */
  public static SimulationResult run(
      String traceName,
      List<TraceRequest> trace,
      SimConfig cfg,
      List<Policy> policies,
      Progress progress,
      SimNats nats) {
    long start = System.nanoTime();
    progress.total((long) trace.size() * (policies.size() + 1));
    progress.phase("pooled ceiling");
    PooledCeiling pooled = pooled(trace, cfg);
    for (int i = 0; i < trace.size(); i++) progress.advance();
    List<PolicyResult> results = new ArrayList<>();
    for (Policy p : policies) {
      progress.phase(p.cliName());
      results.add(new FleetSimulation(trace, cfg, p, progress::advance, e -> true, nats).run());
    }
    double span =
        (trace.get(trace.size() - 1).timestampMs() - trace.get(0).timestampMs())
            / 1e3
            / cfg.speedup();
    return new SimulationResult(
        traceName,
        trace.size(),
        span,
        cfg,
        pooled,
        List.copyOf(results),
        System.nanoTime() - start);
  }

  public static PooledCeiling pooled(List<TraceRequest> trace, SimConfig cfg) {
    long capacity = (long) cfg.ranks() * cfg.gpuBlocks();
    if (capacity > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("the pooled cache would exceed 2^31 blocks");
    }
    return PooledCeiling.run(
        trace, (int) capacity, cfg.blockSize(), Math.max(1, cfg.loadSamples()));
  }
}
