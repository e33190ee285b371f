package io.kvrouter.bench;

import com.sun.management.ThreadMXBean;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import java.lang.management.ManagementFactory;
import java.util.List;

/**
 * The writer thread's allocation, in bytes per block, to store a whole workload ({@link
 * IndexWorkload}) into an empty index and then remove it (one {@code Removed} per sequence, deepest
 * block first), per kind. Counted by the JVM per thread ({@link
 * ThreadMXBean#getCurrentThreadAllocatedBytes}), so it does not depend on the machine's load: the
 * same build gives the same figures to a fraction of a byte. The last of {@code rounds} rounds is
 * printed (the first ones include the JIT's warm-up, whose interpreter and C1 code may allocate
 * what escape analysis later removes). A kind may carry a bound after {@code @}, as in
 * IndexFootprint. Config {@code B/1} (or {@code A/1}) sends the same workload as one event per
 * block (a Stored under its parent, a Removed deepest first), the shape of vLLM's events and of a
 * trace replay.
 *
 * <pre>
 * java -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.IndexWriteAlloc \
 *     B 6 concurrentCompressed positional32
 * java -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.IndexWriteAlloc \
 *     B/1 6 concurrentCompressed
 * </pre>
 */
public final class IndexWriteAlloc {
  private IndexWriteAlloc() {}

  public static void main(String[] args) {
    ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    String config = args.length > 0 ? args[0] : "B";
    boolean perBlock = config.endsWith("/1");
    IndexWorkload w =
        IndexWorkload.of(perBlock ? config.substring(0, config.length() - 2) : config);
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 6;
    List<RouterEvent> stores = perBlock ? w.storeEventsPerBlock() : w.storeEvents();
    List<RouterEvent> removes = perBlock ? w.removeEventsPerBlock() : w.removeEvents();
    for (int k = 2; k < Math.max(3, args.length); k++) {
      String kind = args.length > k ? args[k] : "concurrentCompressed";
      long store = 0;
      long remove = 0;
      for (int r = 0; r < rounds; r++) {
        try (KvIndex index = newIndex(kind, w)) {
          long a0 = mx.getCurrentThreadAllocatedBytes();
          for (RouterEvent e : stores) index.apply(e);
          long a1 = mx.getCurrentThreadAllocatedBytes();
          for (RouterEvent e : removes) index.apply(e);
          long a2 = mx.getCurrentThreadAllocatedBytes();
          store = a1 - a0;
          remove = a2 - a1;
        }
      }
      System.out.printf(
          "config %s kind %-20s writer allocation: store %,d B (%.2f B/block, %.1f B/event),"
              + " remove %,d B (%.2f B/block, %.1f B/event)%n",
          config,
          kind,
          store,
          store / (double) w.pairs(),
          store / (double) stores.size(),
          remove,
          remove / (double) w.pairs(),
          remove / (double) removes.size());
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
