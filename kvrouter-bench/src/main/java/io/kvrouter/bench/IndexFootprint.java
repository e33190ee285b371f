package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import java.util.List;

/**
 * Bytes per (worker, block) pair of an index holding a whole workload: heap after full GC with the
 * index built, minus the heap after full GC without it, divided by the pairs.
 *
 * <pre>
 * java -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.IndexFootprint B radix concurrent
 * </pre>
 *
 * A kind may carry a bound after {@code @} ({@code concurrent@never}: IndexWorkload.newIndex).
 */
public final class IndexFootprint {
  private IndexFootprint() {}

  public static void main(String[] args) throws InterruptedException {
    String config = args.length > 0 ? args[0] : "B";
    IndexWorkload w = IndexWorkload.of(config);
    List<RouterEvent> stores = w.storeEvents();
    for (int k = 1; k < Math.max(2, args.length); k++) {
      String kind = args.length > 1 ? args[k] : "concurrent";
      long before = usedAfterGc();
      int at = kind.indexOf('@');
      KvIndex index =
          at < 0
              ? IndexWorkload.newIndex(kind)
              : IndexWorkload.newIndex(kind.substring(0, at), kind.substring(at + 1), w.pairs());
      stores.forEach(index::apply);
      index.flush();
      long after = usedAfterGc();
      long held = index.stats().blocksIndexed();
      System.out.printf(
          "config %s kind %-12s stored blocks %,d  distinct (worker, block) pairs held %,d"
              + "  index %,d bytes  %.1f bytes/pair%n",
          config, kind, w.pairs(), held, after - before, (after - before) / (double) held);
      index.close();
    }
  }

  private static long usedAfterGc() throws InterruptedException {
    Runtime rt = Runtime.getRuntime();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 5; i++) {
      System.gc();
      Thread.sleep(100);
      used = Math.min(used, rt.totalMemory() - rt.freeMemory());
    }
    return used;
  }
}
