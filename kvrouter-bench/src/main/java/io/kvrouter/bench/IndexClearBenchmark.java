package io.kvrouter.bench;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Readers' latency while a worker holding {@code blocks} blocks (1 M by default) is stored and
 * cleared over and over: group {@code clear}, one writer thread ({@code writer}: one Stored of the
 * whole chain, then {@code clearWorker}) and one reader thread ({@code reader}: {@code findMatches}
 * of 64-block queries, half of them along the big worker's chain, which 8 other workers share for
 * its first 32 blocks, half along those workers' own chains). Run in SampleTime mode: the reader's
 * p99.99 and max show whether a reader waits for the clear. The fork runs ZGC (its pauses stay
 * under a millisecond; G1's on this heap reached hundreds of ms and hid the index); on a shared
 * machine the scheduler still sets the maximum (docs/BENCHMARKS.md).
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar IndexClearBenchmark -bm sample -tu us \
 *     -f 1 -wi 1 -i 5 -w 5 -r 10 -jvmArgsAppend "-Xmx4g -XX:+UseZGC"
 * </pre>
 */
@State(Scope.Group)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Xmx4g", "-XX:+UseZGC"})
public class IndexClearBenchmark {
  @Param({"concurrent", "positional32"})
  public String kind;

  @Param({"1000000"})
  public int blocks;

  private static final Worker BIG = new Worker(1_000, 0);
  private static final int OTHERS = 8;
  private static final int QUERY = 64;

  private KvIndex index;
  private RouterEvent storeBig;
  private long[][] queries;
  private int next;
  private long eventId;

  @Setup(Level.Trial)
  public void setUp() {
    index = IndexWorkload.newIndex(kind);
    long[] local = new long[blocks];
    long[] seq = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      local[i] = 0x9E3779B97F4A7C15L * (i + 1);
      seq[i] = 0xC2B2AE3D27D4EB4FL * (i + 1);
    }
    storeBig = new RouterEvent(BIG, 0, CacheEvent.storedAtRoot(seq, local));
    queries = new long[2 * OTHERS][];
    for (int w = 0; w < OTHERS; w++) {
      // the big chain's first 32 blocks, then 32 of the worker's own
      long[] q = new long[QUERY];
      long[] s = new long[QUERY];
      for (int i = 0; i < QUERY; i++) {
        q[i] = i < 32 ? local[i] : 0x632BE59BD9B4E019L * (w * 1_000 + i + 1);
        s[i] = i < 32 ? seq[i] : 0x85EBCA77C2B2AE63L * (w * 1_000 + i + 1);
      }
      index.apply(new RouterEvent(new Worker(w, 0), 0, CacheEvent.storedAtRoot(s, q)));
      queries[2 * w] = q;
      queries[2 * w + 1] = Arrays.copyOf(local, QUERY);
    }
    index.flush();
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    index.close();
  }

  /** One cycle: the big worker's whole chain stored in one event, then the worker cleared. */
  @Benchmark
  @Group("clear")
  @GroupThreads(1)
  public void writer() {
    index.apply(new RouterEvent(BIG, ++eventId, storeBig.data()));
    index.clearWorker(BIG.workerId());
  }

  @Benchmark
  @Group("clear")
  @GroupThreads(1)
  public OverlapScores reader() {
    long[] q = queries[next++ & (queries.length - 1)];
    return index.findMatches(q, false);
  }
}
