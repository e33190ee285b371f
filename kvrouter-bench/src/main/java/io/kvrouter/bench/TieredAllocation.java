package io.kvrouter.bench;

import com.sun.management.ThreadMXBean;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import java.lang.management.ManagementFactory;

/**
 * The bytes one {@code findMatches} allocates on the calling thread, for the concurrent radix tree
 * alone and behind a {@link TieredIndex} with and without tiers (the {@code TieredIndexBenchmark}
 * setups, workload A, exact hits): {@code ThreadMXBean.getThreadAllocatedBytes} of this thread
 * around 200,000 queries after 200,000 of warm-up. JMH's {@code -prof gc} divides the whole JVM's
 * allocation by the operations, so it also counts what other threads allocate meanwhile; this
 * counts the query's own.
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.TieredAllocation
 * </pre>
 */
public final class TieredAllocation {
  private TieredAllocation() {}

  public static void main(String[] args) {
    ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    IndexWorkload w = IndexWorkload.of("A");
    long[][] q = new long[256][];
    for (int i = 0; i < q.length; i++) q[i] = w.query("hit", i * 7919 % w.sequences);
    final int n = 200_000;
    for (String wrap : new String[] {"plain", "off", "on"}) {
      try (KvIndex idx =
          switch (wrap) {
            case "plain" -> KvIndexes.concurrentRadixTree();
            case "off" -> TieredIndex.of(KvIndexes::concurrentRadixTree);
            default -> TieredIndex.withTiers(KvIndexes::concurrentRadixTree, Tier.EXTERNAL);
          }) {
        w.storeEvents().forEach(idx::apply);
        int workers = 0;
        for (int i = 0; i < n; i++) workers += idx.findMatches(q[i & 255], false).size();
        long me = Thread.currentThread().threadId();
        long before = mx.getThreadAllocatedBytes(me);
        for (int i = 0; i < n; i++) {
          OverlapScores s = idx.findMatches(q[i & 255], false);
          workers += s.size();
        }
        long bytes = mx.getThreadAllocatedBytes(me) - before;
        System.out.printf(
            "%-5s %7.1f bytes per findMatches (%d workers matched in all)%n",
            wrap, bytes / (double) n, workers);
      }
    }
  }
}
