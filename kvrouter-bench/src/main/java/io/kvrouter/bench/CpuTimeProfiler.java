package io.kvrouter.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;
import org.openjdk.jmh.profile.InternalProfiler;
import org.openjdk.jmh.results.AggregationPolicy;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.ScalarResult;

/**
 * A JMH profiler that reports the CPU time the benchmark threads spent per operation ({@code
 * cpu.worker.norm}, ns/op), beside the wall-clock score. On a shared machine the wall clock also
 * counts the time other processes held the core; CPU time does not, so it estimates what an
 * operation costs on a core of its own (cache and SMT interference from neighbours remain).
 *
 * <p>Counts the CPU time of threads whose name contains {@code jmh-worker} over the iteration,
 * divided by every operation they ran in it (JMH's all-ops count, which includes the few operations
 * outside the timed window). Use: {@code -prof io.kvrouter.bench.CpuTimeProfiler}.
 */
public class CpuTimeProfiler implements InternalProfiler {
  private final ThreadMXBean threads = ManagementFactory.getThreadMXBean();
  private Map<Long, Long> before = Map.of();

  @Override
  public String getDescription() {
    return "CPU time of the JMH worker threads per operation";
  }

  @Override
  public void beforeIteration(BenchmarkParams benchmarkParams, IterationParams iterationParams) {
    before = workerCpuTimes();
  }

  @Override
  public List<? extends Result<?>> afterIteration(
      BenchmarkParams benchmarkParams, IterationParams iterationParams, IterationResult result) {
    Map<Long, Long> after = workerCpuTimes();
    long cpu = 0;
    for (Map.Entry<Long, Long> e : after.entrySet()) {
      cpu += e.getValue() - before.getOrDefault(e.getKey(), 0L);
    }
    long ops = result.getMetadata().getAllOps();
    double perOp = ops == 0 ? Double.NaN : (double) cpu / ops;
    return List.of(new ScalarResult("cpu.worker.norm", perOp, "ns/op", AggregationPolicy.AVG));
  }

  private Map<Long, Long> workerCpuTimes() {
    Map<Long, Long> out = new HashMap<>();
    for (ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds())) {
      if (info == null || !info.getThreadName().contains("jmh-worker")) continue;
      long t = threads.getThreadCpuTime(info.getThreadId());
      if (t >= 0) out.put(info.getThreadId(), t);
    }
    return out;
  }
}
