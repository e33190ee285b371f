package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
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

/**
 * Index write throughput on Dynamo's workloads ({@link IndexWorkload} configs A and B), one
 * invocation per whole workload on a fresh index.
 *
 * <ul>
 *   <li>{@code storeAll}: every sequence stored (one {@code Stored} event each) by one writer;
 *       blocks/s = stored blocks / time.
 *   <li>{@code storeAllThreadPool2}: the same through {@code threadPool(kind, 2)}, flushed.
 *   <li>{@code removeAll}: storeAll followed by one {@code Removed} per sequence; the removal time
 *       is removeAll minus storeAll.
 * </ul>
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar IndexWriteBenchmark -bm ss -tu ms \
 *     -f 1 -wi 5 -i 10 -p config=A,B
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class IndexWriteBenchmark {
  @Param({"radix", "concurrent", "positional32", "compressed", "concurrentCompressed"})
  public String kind;

  @Param({"A"})
  public String config;

  /** none, never (bounded far above the workload) or quarter (IndexWorkload.newIndex). */
  @Param({"none"})
  public String bound;

  private long pairs;

  private List<RouterEvent> stores;
  private List<RouterEvent> removes;
  private KvIndex scratch;

  @Setup(Level.Trial)
  public void setUp() {
    IndexWorkload workload = IndexWorkload.of(config);
    stores = workload.storeEvents();
    removes = workload.removeEvents();
    pairs = workload.pairs();
  }

  /** A fresh empty index before each invocation. */
  @Setup(Level.Invocation)
  public void freshIndex() {
    if (scratch != null) scratch.close();
    scratch = IndexWorkload.newIndex(kind, bound, pairs);
  }

  @Benchmark
  public KvIndex storeAll() {
    KvIndex idx = scratch;
    for (RouterEvent e : stores) idx.apply(e);
    return idx;
  }

  @Benchmark
  public KvIndex storeAllThreadPool2() {
    if (kind.equals("radix") || kind.equals("compressed")) return scratch; // not concurrent
    KvIndex idx = KvIndexes.threadPool(scratch, 2);
    for (RouterEvent e : stores) idx.apply(e);
    idx.flush();
    scratch = null;
    idx.close();
    return idx;
  }

  @Benchmark
  public KvIndex removeAll() {
    KvIndex idx = scratch;
    for (RouterEvent e : stores) idx.apply(e);
    for (RouterEvent e : removes) idx.apply(e);
    return idx;
  }
}
