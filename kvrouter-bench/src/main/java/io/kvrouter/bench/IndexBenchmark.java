package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The router-side indexes on Dynamo's workloads ({@link IndexWorkload} configs A and B).
 *
 * <ul>
 *   <li>{@code findMatches}: latency of one query (hit, partial, miss) against a built index; run
 *       in SampleTime mode for p50/p99 and with {@code -prof gc} for allocation.
 *   <li>{@code storeAll} / {@code removeAll}: the whole config stored into an empty index, or
 *       removed from a full one, by one writer; blocks/s = pairs / time.
 *   <li>{@code storeAllThreadPool2}: the same store through {@code threadPool(kind, 2)}, flushed.
 * </ul>
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar 'IndexBenchmark.findMatches' -bm sample -tu us \
 *     -f 1 -wi 3 -i 5 -w 1 -r 1 -p config=A,B -prof gc
 * java -jar kvrouter-bench/target/benchmarks.jar 'IndexBenchmark.findMatches' -bm avgt -tu ns \
 *     -f 1 -wi 2 -i 3 -w 1 -r 1 -p config=A,B -prof gc
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class IndexBenchmark {
  @Param({"radix", "concurrent", "positional32", "compressed", "concurrentCompressed"})
  public String kind;

  @Param({"A"})
  public String config;

  @Param({"hit", "partial", "miss"})
  public String query;

  /** none, never (bounded far above the workload) or quarter (IndexWorkload.newIndex). */
  @Param({"none"})
  public String bound;

  private IndexWorkload workload;
  private KvIndex built;
  private long[][] queries;
  private int next;
  private List<RouterEvent> stores;

  @Setup(Level.Trial)
  public void setUp() {
    workload = IndexWorkload.of(config);
    stores = workload.storeEvents();
    built = IndexWorkload.newIndex(kind, bound, workload.pairs());
    stores.forEach(built::apply);
    built.flush();
    queries = new long[256][];
    for (int i = 0; i < queries.length; i++) {
      queries[i] = workload.query(query, i * 7919 % workload.sequences);
    }
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    built.close();
  }

  @Benchmark
  public OverlapScores findMatches() {
    long[] q = queries[next++ & 255];
    return built.findMatches(q, false);
  }
}
