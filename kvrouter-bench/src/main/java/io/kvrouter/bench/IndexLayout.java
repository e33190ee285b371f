package io.kvrouter.bench;

import io.kvrouter.index.KvIndex;
import org.openjdk.jol.info.GraphLayout;

/**
 * Where an index's bytes go: JOL's class histogram of every object reachable from an index that
 * holds a whole workload (objects shared with the rest of the heap, such as the {@code Worker}
 * records, are counted too), and the total per distinct (worker, block) pair. A structural count,
 * not a heap measurement: {@link IndexFootprint} measures the heap after full GC.
 *
 * <pre>
 * java -Xmx3g -Djdk.attach.allowAttachSelf -Djol.magicFieldOffset=true \
 *     -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.IndexLayout B positional32
 * </pre>
 *
 * The two properties let JOL read field offsets of records on JDK 25. A kind may carry a bound
 * after {@code @} ({@code positional32@never}), as in IndexFootprint.
 */
public final class IndexLayout {
  private IndexLayout() {}

  public static void main(String[] args) {
    String config = args.length > 0 ? args[0] : "B";
    IndexWorkload w = IndexWorkload.of(config);
    for (int k = 1; k < Math.max(2, args.length); k++) {
      String kind = args.length > 1 ? args[k] : "positional32";
      int at = kind.indexOf('@');
      KvIndex index =
          at < 0
              ? IndexWorkload.newIndex(kind)
              : IndexWorkload.newIndex(kind.substring(0, at), kind.substring(at + 1), w.pairs());
      w.storeEvents().forEach(index::apply);
      index.flush();
      long held = index.stats().blocksIndexed();
      GraphLayout layout = GraphLayout.parseInstance(index);
      System.out.printf("config %s kind %s%n%s", config, kind, layout.toFootprint());
      System.out.printf(
          "config %s kind %-12s distinct (worker, block) pairs held %,d  reachable %,d bytes"
              + "  %.2f bytes/pair%n",
          config, kind, held, layout.totalSize(), layout.totalSize() / (double) held);
      index.close();
    }
  }
}
