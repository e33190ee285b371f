package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
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
 * What a {@link TieredIndex} costs the device-only path (docs/routing.md, "Blocks beyond the GPU"),
 * on Dynamo's workload A ({@link IndexWorkload}) with the concurrent radix tree:
 *
 * <ul>
 *   <li>{@code storeAll}: every sequence stored as a device event by one writer into a fresh index;
 *       {@code wrap=plain} is the tree itself, {@code off} a TieredIndex before any non-device
 *       event (the device path), {@code on} a TieredIndex with its cumulative indexes made ({@code
 *       withTiers}: every device store also goes to three more indexes, under the writer lock).
 *   <li>{@code findMatches}: one exact query (a hit) against the built index, through the wrapper;
 *       {@code findTiered}: the same query on every cumulative index ({@code on} only).
 * </ul>
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar TieredIndexBenchmark -f 1 -wi 3 -i 5 \
 *     -p wrap=plain,off,on -prof gc
 * </pre>
 */
@State(Scope.Benchmark)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class TieredIndexBenchmark {
  @Param({"plain", "off", "on"})
  public String wrap;

  private List<RouterEvent> stores;
  private KvIndex built;
  private long[][] queries;
  private int next;

  KvIndex newIndex() {
    return switch (wrap) {
      case "plain" -> KvIndexes.concurrentRadixTree();
      case "off" -> TieredIndex.of(KvIndexes::concurrentRadixTree);
      case "on" -> TieredIndex.withTiers(KvIndexes::concurrentRadixTree, Tier.EXTERNAL);
      default -> throw new IllegalArgumentException("wrap " + wrap);
    };
  }

  @Setup(Level.Trial)
  public void setUp() {
    IndexWorkload workload = IndexWorkload.of("A");
    stores = workload.storeEvents();
    built = newIndex();
    stores.forEach(built::apply);
    queries = new long[256][];
    for (int i = 0; i < queries.length; i++) {
      queries[i] = workload.query("hit", i * 7919 % workload.sequences);
    }
  }

  /**
   * A fresh empty index before each storeAll invocation. A state of its own: an invocation-level
   * setup on the benchmark's state would run before every findMatches call too, and its new index
   * was counted in findMatches' allocation (832 bytes for one tree, 3.6 KB with tiers, before
   * 2026-12-01 18:30).
   */
  @State(Scope.Thread)
  public static class Scratch {
    KvIndex index;

    @Setup(Level.Invocation)
    public void freshIndex(TieredIndexBenchmark b) {
      if (index != null) index.close();
      index = b.newIndex();
    }

    @TearDown(Level.Trial)
    public void close() {
      if (index != null) index.close();
    }
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    built.close();
  }

  @Benchmark
  @BenchmarkMode(Mode.SingleShotTime)
  @OutputTimeUnit(TimeUnit.MILLISECONDS)
  public KvIndex storeAll(Scratch scratch) {
    KvIndex idx = scratch.index;
    for (RouterEvent e : stores) idx.apply(e);
    return idx;
  }

  @Benchmark
  @BenchmarkMode(Mode.AverageTime)
  @OutputTimeUnit(TimeUnit.NANOSECONDS)
  public OverlapScores findMatches() {
    return built.findMatches(queries[next++ & 255], false);
  }

  @Benchmark
  @BenchmarkMode(Mode.AverageTime)
  @OutputTimeUnit(TimeUnit.NANOSECONDS)
  public Object findTiered() {
    if (!(built instanceof TieredIndex t)) return null;
    return t.findTiered(queries[next++ & 255]);
  }
}
