package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;
import java.util.List;

/**
 * The writer thread's CPU time to store a whole workload ({@link IndexWorkload}) into an empty
 * index and then remove it (one {@code Removed} per sequence, deepest block first), per kind: the
 * minimum and the median over the second half of {@code rounds} rounds. Config {@code B/1} (or
 * {@code A/1}) sends the workload as one event per block, as in IndexWriteAlloc. CPU time rather
 * than wall time, so that other processes on a shared machine do not count; garbage collection runs
 * on other threads and is not counted either (IndexWriteBenchmark's wall-clock figures include it).
 * A kind may carry a bound after {@code @} ({@code concurrentCompressed@quarter}, as in
 * IndexFootprint); the rates are then the workload's pairs over the time, though a bounded index
 * keeps and removes fewer.
 *
 * <pre>
 * java -Xms3g -Xmx3g -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.IndexWriteCpu \
 *     B 16 radix concurrent compressed concurrentCompressed
 * java -Xms3g -Xmx3g -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.IndexWriteCpu \
 *     B/1 16 concurrentCompressed
 * </pre>
 */
public final class IndexWriteCpu {
  private IndexWriteCpu() {}

  public static void main(String[] args) {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    String config = args.length > 0 ? args[0] : "B";
    boolean perBlock = config.endsWith("/1");
    IndexWorkload w =
        IndexWorkload.of(perBlock ? config.substring(0, config.length() - 2) : config);
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 16;
    List<RouterEvent> stores = perBlock ? w.storeEventsPerBlock() : w.storeEvents();
    List<RouterEvent> removes = perBlock ? w.removeEventsPerBlock() : w.removeEvents();
    for (int k = 2; k < Math.max(3, args.length); k++) {
      String kind = args.length > k ? args[k] : "concurrent";
      int kept = rounds - rounds / 2;
      long[] stored = new long[kept];
      long[] removed = new long[kept];
      for (int r = 0; r < rounds; r++) {
        try (KvIndex index = newIndex(kind, w)) {
          long t0 = mx.getCurrentThreadCpuTime();
          for (RouterEvent e : stores) index.apply(e);
          long t1 = mx.getCurrentThreadCpuTime();
          for (RouterEvent e : removes) index.apply(e);
          long t2 = mx.getCurrentThreadCpuTime();
          if (r >= rounds / 2) {
            stored[r - rounds / 2] = t1 - t0;
            removed[r - rounds / 2] = t2 - t1;
          }
        }
      }
      Arrays.sort(stored);
      Arrays.sort(removed);
      long store = stored[0];
      long remove = removed[0];
      long storeMedian = stored[kept / 2];
      long removeMedian = removed[kept / 2];
      System.out.printf(
          "config %s kind %-20s writer CPU: store %.1f ms (%.1f M blocks/s; median %.1f ms),"
              + " remove %.1f ms (%.1f M blocks/s; median %.1f ms)%n",
          config,
          kind,
          store / 1e6,
          w.pairs() / (store / 1e3),
          storeMedian / 1e6,
          remove / 1e6,
          w.pairs() / (remove / 1e3),
          removeMedian / 1e6);
    }
  }

  /** {@code kind}, or {@code kind@bound} as in IndexFootprint (IndexWorkload.newIndex). */
  private static KvIndex newIndex(String kind, IndexWorkload w) {
    int at = kind.indexOf('@');
    return at < 0
        ? IndexWorkload.newIndex(kind)
        : IndexWorkload.newIndex(kind.substring(0, at), kind.substring(at + 1), w.pairs());
  }
}
