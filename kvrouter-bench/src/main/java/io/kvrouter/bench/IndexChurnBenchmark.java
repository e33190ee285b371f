package io.kvrouter.bench;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.OverlapScores;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
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
 * {@code findMatches} (hit queries of config A or B) while a producer thread streams store and
 * remove churn of other sequences through {@code threadPool(kind, 2)} without pause. Reports the
 * query latency under churn; the churn rate reached is printed at the end of each trial.
 *
 * <pre>
 * java -jar kvrouter-bench/target/benchmarks.jar IndexChurnBenchmark -bm sample -tu us \
 *     -f 1 -wi 3 -i 5 -w 1 -r 1 -p config=A,B
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class IndexChurnBenchmark {
  @Param({"concurrent", "positional32", "concurrentCompressed"})
  public String kind;

  @Param({"A"})
  public String config;

  private KvIndex index;
  private long[][] queries;
  private int next;
  private Thread producer;
  private volatile boolean running;
  private final AtomicLong churnBlocks = new AtomicLong();
  private long started;

  @Setup(Level.Trial)
  public void setUp() {
    IndexWorkload w = IndexWorkload.of(config);
    index = KvIndexes.threadPool(IndexWorkload.newIndex(kind), 2);
    List<RouterEvent> stores = w.storeEvents();
    stores.forEach(index::apply);
    index.flush();
    queries = new long[256][];
    for (int i = 0; i < queries.length; i++) queries[i] = w.query("hit", i * 7919 % w.sequences);
    running = true;
    producer =
        new Thread(
            () -> {
              SplittableRandom rnd = new SplittableRandom(7);
              long id = 0;
              while (running) {
                long[] locals = new long[w.blocks];
                for (int i = 0; i < locals.length; i++) locals[i] = rnd.nextLong();
                long[] seqs = SequenceHasher.sequenceHashes(locals);
                Worker worker = new Worker(rnd.nextInt(w.workers), 0);
                index.apply(new RouterEvent(worker, id++, CacheEvent.storedAtRoot(seqs, locals)));
                long[] reversed = new long[seqs.length];
                for (int i = 0; i < seqs.length; i++) reversed[i] = seqs[seqs.length - 1 - i];
                index.apply(new RouterEvent(worker, id++, CacheEvent.removed(reversed)));
                churnBlocks.addAndGet(2L * w.blocks);
              }
            },
            "churn");
    producer.setDaemon(true);
    started = System.nanoTime();
    producer.start();
  }

  @TearDown(Level.Trial)
  public void tearDown() throws InterruptedException {
    running = false;
    producer.join();
    index.flush();
    double seconds = (System.nanoTime() - started) / 1e9;
    System.out.printf(
        "%nchurn: %.2f M block ops/s applied alongside the queries%n",
        churnBlocks.get() / seconds / 1e6);
    index.close();
  }

  @Benchmark
  public OverlapScores findMatchesUnderChurn() {
    return index.findMatches(queries[next++ & 255], false);
  }
}
