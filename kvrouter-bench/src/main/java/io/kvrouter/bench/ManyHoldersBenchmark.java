package io.kvrouter.bench;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
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
 * {@code findMatches} when one system prompt is held by many ranks: {@code holders} workers (500 by
 * default) each store the same 16-block prompt followed by 16 blocks of their own; the query is the
 * prompt and one worker's tail, so every holder scores 16 and one scores 32. What it shows is the
 * allocation per query ({@code -prof gc}, gc.alloc.rate.norm), with and without early exit.
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar ManyHoldersBenchmark -bm avgt -tu ns \
 *     -f 1 -wi 3 -i 5 -w 1 -r 1 -prof gc
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class ManyHoldersBenchmark {
  @Param({"concurrent", "positional32"})
  public String kind;

  @Param({"500"})
  public int holders;

  @Param({"false", "true"})
  public boolean earlyExit;

  private static final int PROMPT = 16;
  private static final int TAIL = 16;

  private KvIndex index;
  private long[][] queries;
  private int next;

  @Setup(Level.Trial)
  public void setUp() {
    index = IndexWorkload.newIndex(kind);
    queries = new long[16][];
    for (int w = 0; w < holders; w++) {
      long[] local = new long[PROMPT + TAIL];
      long[] seq = new long[PROMPT + TAIL];
      for (int i = 0; i < local.length; i++) {
        long key = i < PROMPT ? i + 1 : (long) (w + 1) * 1_000 + i;
        local[i] = 0x9E3779B97F4A7C15L * key;
        seq[i] = 0xC2B2AE3D27D4EB4FL * key;
      }
      index.apply(new RouterEvent(new Worker(w, 0), 0, CacheEvent.storedAtRoot(seq, local)));
      if (w < queries.length) queries[w] = local;
    }
    index.flush();
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    index.close();
  }

  @Benchmark
  public OverlapScores findMatches() {
    return index.findMatches(queries[next++ & (queries.length - 1)], earlyExit);
  }
}
