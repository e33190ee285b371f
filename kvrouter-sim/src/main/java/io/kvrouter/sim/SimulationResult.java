package io.kvrouter.sim;

import io.kvrouter.sim.trace.TraceRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Everything one {@code simulate} run measured.
 *
 * <pre>
 * Implementation notes
 *
 * run() makes one task per policy (a FleetSimulation on a fresh fleet and router) and one for
 * the pooled ceiling, and runs them on a fixed pool of daemon threads (the calling thread alone
 * when threads is 1 or the events go through NATS). A task shares only the trace (never written)
 * and the configuration (immutable) with the others, and Progress, which is synchronised; so
 * each result is the same whatever ran beside it. The results are collected in task order and
 * put back in the order of the policies given.
 * </pre>
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

  /**
   * Runs the pooled ceiling and every policy, each on a fresh fleet, on as many threads as the
   * machine has cores.
   */
  public static SimulationResult run(
      String traceName,
      List<TraceRequest> trace,
      SimConfig cfg,
      List<Policy> policies,
      Progress progress) {
    return run(traceName, trace, cfg, policies, progress, null);
  }

  /** As above; with {@code nats}, every run's events go through NATS JetStream (one at a time). */
  public static SimulationResult run(
      String traceName,
      List<TraceRequest> trace,
      SimConfig cfg,
      List<Policy> policies,
      Progress progress,
      SimNats nats) {
    return run(
        traceName,
        trace,
        cfg,
        policies,
        progress,
        nats,
        Runtime.getRuntime().availableProcessors());
  }

  /**
   * As above, on up to {@code threads} threads: the policies' simulations and the pooled ceiling
   * are independent, each a pure function of the trace and the configuration on its own thread, so
   * the results do not depend on {@code threads} (only the wall times do). With {@code nats} they
   * run one after another on the calling thread, sharing its connection.
   */
  public static SimulationResult run(
      String traceName,
      List<TraceRequest> trace,
      SimConfig cfg,
      List<Policy> policies,
      Progress progress,
      SimNats nats,
      int threads) {
    if (threads < 1) throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    long start = System.nanoTime();
    pooledCapacity(cfg); // a bad capacity fails before any run starts
    progress.total((long) trace.size() * (policies.size() + 1));
    // the longest runs first, the pooled ceiling (a quick one) last, so that two threads end
    // close together
    List<Callable<Object>> runs = new ArrayList<>();
    for (Policy p : policies) {
      runs.add(
          () -> {
            progress.phase(p.cliName());
            return new FleetSimulation(trace, cfg, p, progress::advance, e -> true, nats).run();
          });
    }
    runs.add(
        () -> {
          progress.phase("pooled ceiling");
          PooledCeiling pooled = pooled(trace, cfg);
          for (int i = 0; i < trace.size(); i++) progress.advance();
          return pooled;
        });
    List<Object> done = runAll(runs, nats != null ? 1 : Math.min(threads, runs.size()));
    List<PolicyResult> results = new ArrayList<>();
    for (int i = 0; i < policies.size(); i++) results.add((PolicyResult) done.get(i));
    PooledCeiling pooled = (PooledCeiling) done.get(policies.size());
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

  /**
   * The results of {@code runs}, in their order, run on {@code threads} threads (the calling thread
   * alone when 1). The first failure, in that order, is rethrown as it was thrown.
   */
  private static List<Object> runAll(List<Callable<Object>> runs, int threads) {
    List<Object> out = new ArrayList<>(runs.size());
    if (threads <= 1) {
      for (Callable<Object> r : runs) {
        try {
          out.add(r.call());
        } catch (RuntimeException e) {
          throw e;
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
      return out;
    }
    AtomicInteger n = new AtomicInteger();
    ExecutorService pool =
        Executors.newFixedThreadPool(
            threads,
            task -> {
              Thread t = new Thread(task, "kvrouter-simulate-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    try {
      List<Future<Object>> futures = new ArrayList<>(runs.size());
      for (Callable<Object> r : runs) futures.add(pool.submit(r));
      for (Future<Object> f : futures) {
        try {
          out.add(f.get());
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          if (cause instanceof RuntimeException re) throw re;
          if (cause instanceof Error err) throw err;
          throw new IllegalStateException(cause);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted while the simulations ran", e);
        }
      }
      return out;
    } finally {
      pool.shutdownNow();
    }
  }

  /** The pooled cache's blocks: every rank's capacity. */
  private static int pooledCapacity(SimConfig cfg) {
    long capacity = (long) cfg.ranks() * cfg.gpuBlocks();
    if (capacity > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("the pooled cache would exceed 2^31 blocks");
    }
    return (int) capacity;
  }

  public static PooledCeiling pooled(List<TraceRequest> trace, SimConfig cfg) {
    return PooledCeiling.run(
        trace, pooledCapacity(cfg), cfg.blockSize(), Math.max(1, cfg.loadSamples()));
  }
}
