package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.List;

/**
 * The writer thread's CPU time to store a whole workload ({@link IndexWorkload}) into an empty
 * index and then remove it (one {@code Removed} per sequence, deepest block first), per kind: the
 * minimum over the second half of {@code rounds} rounds. CPU time rather than wall time, so that
 * other processes on a shared machine do not count; garbage collection runs on other threads and is
 * not counted either (IndexWriteBenchmark's wall-clock figures include it). A kind may carry a
 * bound after {@code @} ({@code concurrentCompressed@quarter}, as in IndexFootprint); the rates are
 * then the workload's pairs over the time, though a bounded index keeps and removes fewer.
 *
 * <pre>
 * java -Xms3g -Xmx3g -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.IndexWriteCpu \
 *     B 16 radix concurrent compressed concurrentCompressed
 * </pre>
 */
public final class IndexWriteCpu {
  private IndexWriteCpu() {}

  public static void main(String[] args) {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    IndexWorkload w = IndexWorkload.of(args.length > 0 ? args[0] : "B");
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 16;
    List<RouterEvent> stores = w.storeEvents();
    List<RouterEvent> removes = w.removeEvents();
    for (int k = 2; k < Math.max(3, args.length); k++) {
      String kind = args.length > k ? args[k] : "concurrent";
      long store = Long.MAX_VALUE;
      long remove = Long.MAX_VALUE;
      for (int r = 0; r < rounds; r++) {
        try (KvIndex index = newIndex(kind, w)) {
          long t0 = mx.getCurrentThreadCpuTime();
          for (RouterEvent e : stores) index.apply(e);
          long t1 = mx.getCurrentThreadCpuTime();
          for (RouterEvent e : removes) index.apply(e);
          long t2 = mx.getCurrentThreadCpuTime();
          if (r >= rounds / 2) {
            store = Math.min(store, t1 - t0);
            remove = Math.min(remove, t2 - t1);
          }
        }
      }
      System.out.printf(
          "config %s kind %-20s writer CPU: store %.1f ms (%.1f M blocks/s), remove %.1f ms"
              + " (%.1f M blocks/s)%n",
          args.length > 0 ? args[0] : "B",
          kind,
          store / 1e6,
          w.pairs() / (store / 1e3),
          remove / 1e6,
          w.pairs() / (remove / 1e3));
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
