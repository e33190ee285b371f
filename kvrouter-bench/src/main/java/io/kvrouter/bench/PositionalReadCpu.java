package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Constructor;
import java.util.Arrays;
import java.util.List;

/**
 * The reader's CPU time per {@code findMatches} on the unbounded positional index's two layouts in
 * one JVM, alternated: the object per block ({@code PositionalIndex}, which the bounded kinds still
 * use, made here without a bound through reflection) and the records on int ids that {@link
 * KvIndexes#positional(int)} returns ({@code PackedPositionalIndex}). Both hold the same workload
 * ({@link IndexWorkload}); each round times {@code 100,000} queries on each (the queries of
 * IndexBenchmark), the order swapped every round, and the median, least and most of the rounds
 * after five warm-up ones are printed. One process and thread CPU time: a shared machine slows both
 * layouts alike, where two JMH processes side by side drift apart by 10 to 30 %.
 *
 * <pre>
 * java -Xmx3g -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.PositionalReadCpu B 20
 * </pre>
 */
public final class PositionalReadCpu {
  private static final int QUERIES = 100_000;
  private static long sink;

  private PositionalReadCpu() {}

  public static void main(String[] args) throws ReflectiveOperationException {
    String config = args.length > 0 ? args[0] : "B";
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 20;
    int jump = args.length > 2 ? Integer.parseInt(args[2]) : 32;
    IndexWorkload w = IndexWorkload.of(config);
    List<RouterEvent> stores = w.storeEvents();
    Constructor<?> objects =
        Class.forName("io.kvrouter.index.PositionalIndex").getDeclaredConstructor(int.class);
    objects.setAccessible(true);
    KvIndex[] index = {(KvIndex) objects.newInstance(jump), KvIndexes.positional(jump)};
    String[] names = {"objects", "records"};
    for (KvIndex i : index) stores.forEach(i::apply);
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    for (String query : new String[] {"hit", "partial"}) {
      long[][] q = new long[256][];
      for (int i = 0; i < q.length; i++) q[i] = w.query(query, i * 7919 % w.sequences);
      double[][] ns = new double[2][rounds];
      for (int r = -5; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
          int j = (r & 1) == 0 ? k : 1 - k;
          long t0 = mx.getCurrentThreadCpuTime();
          long s = 0;
          for (int i = 0; i < QUERIES; i++) s += index[j].findMatches(q[i & 255], false).size();
          long t = mx.getCurrentThreadCpuTime() - t0;
          sink += s;
          if (r >= 0) ns[j][r] = (double) t / QUERIES;
        }
      }
      for (int j = 0; j < 2; j++) {
        double[] v = ns[j].clone();
        Arrays.sort(v);
        System.out.printf(
            "config %s positional%d %-7s %-7s reader CPU: median %.1f ns/query (least %.1f, most"
                + " %.1f; %d rounds)%n",
            config, jump, query, names[j], v[rounds / 2], v[0], v[rounds - 1], rounds);
      }
    }
    if (sink == 42) System.out.println();
  }
}
