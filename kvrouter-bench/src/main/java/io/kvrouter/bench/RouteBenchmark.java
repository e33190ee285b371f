package io.kvrouter.bench;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import java.util.SplittableRandom;
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
 * {@link KvRouter#route} end to end on one thread: hashing a 1,024-token prompt (64 blocks of 16
 * tokens), {@code findMatches} on the index, the cost of every worker rank, the choice, and the
 * bookkeeping of the request in flight; each operation also frees the request routed {@code 4 ×
 * workers} operations earlier, so the router holds a steady {@code 4 × workers} requests in flight
 * (one request's whole life through the router: route + free).
 *
 * <p>Workload: 64 shared 512-token system prompts, each cached by 3 random workers (event mode:
 * Stored events applied in setup; approximate mode: warmed by routing), followed by 512 random
 * tokens, so every prompt has a 32-block cached prefix somewhere and a 32-block fresh suffix.
 * {@code route} times the decision alone (the free runs untimed); {@code hash} and {@code overlaps}
 * isolate the first two stages. Every rank is registered with 16,384 KV blocks: in approximate mode
 * each rank's predictions fill up to that (each route adds 32 new blocks) and then evict 32 blocks
 * per route, at 256 workers bounded by the 2^20 predictions in all first; in event mode the index
 * does not change after setup (no events arrive during the measurement).
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar Route -f 1 -wi 3 -i 5 -w 1 -r 1 -prof gc
 * </pre>
 *
 * Results and the machine they were taken on: {@code docs/BENCHMARKS.md}, section Routing.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class RouteBenchmark {
  static final int BLOCK_SIZE = 16;
  static final int PROMPT_TOKENS = 1024;
  static final int PREFIX_TOKENS = 512;
  static final int PREFIXES = 64;
  static final int PROMPTS = 4096; // a power of two
  static final long KV_BLOCKS = 16_384; // per rank: 256k tokens, an 8B model's cache on one GPU

  @Param({"16", "256"})
  public int workers;

  @Param({"events", "approximate"})
  public String mode;

  private final BlockHasher hasher = BlockHasher.of(BLOCK_SIZE);
  private KvRouter router;
  private int[][] prompts;
  private String[] ids;
  private int window;
  private long next;

  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(42);
    KvRouter.Builder b = KvRouter.builder(BLOCK_SIZE);
    if (mode.equals("approximate")) b.approximate();
    router = b.build();
    for (int w = 0; w < workers; w++) router.registerWorker(w, 1, BLOCK_SIZE, KV_BLOCKS);

    int[][] prefixes = new int[PREFIXES][PREFIX_TOKENS];
    for (int[] p : prefixes) {
      for (int i = 0; i < p.length; i++) p[i] = rnd.nextInt(32_000);
    }
    prompts = new int[PROMPTS][];
    for (int k = 0; k < PROMPTS; k++) {
      int[] t = new int[PROMPT_TOKENS];
      System.arraycopy(prefixes[rnd.nextInt(PREFIXES)], 0, t, 0, PREFIX_TOKENS);
      for (int i = PREFIX_TOKENS; i < PROMPT_TOKENS; i++) t[i] = rnd.nextInt(32_000);
      prompts[k] = t;
    }

    long eventId = 0;
    for (int p = 0; p < PREFIXES; p++) {
      for (int copy = 0; copy < 3; copy++) {
        int w = rnd.nextInt(workers);
        if (mode.equals("events")) {
          long[] local = hasher.localHashes(prefixes[p]);
          long[] seq = SequenceHasher.sequenceHashes(local);
          router.applyEvent(
              new RouterEvent(Worker.of(w), eventId++, CacheEvent.storedAtRoot(seq, local)));
        } else {
          String id = "warm-" + p + "-" + copy;
          router.route(id, prefixes[p], RouteOptions.defaults().withAllowedWorkers(w));
          router.free(id);
        }
      }
    }

    window = 4 * workers;
    ids = new String[2 * window];
    for (int i = 0; i < ids.length; i++) ids[i] = "req-" + i;
    next = 0;
    for (int i = 0; i < window; i++) routeOne();
  }

  private RouteDecision routeOne() {
    long k = next++;
    return router.route(
        ids[(int) (k % ids.length)], prompts[(int) (k & (PROMPTS - 1))], RouteOptions.defaults());
  }

  /** Routes one request and frees the one routed {@code window} operations before it. */
  @Benchmark
  public RouteDecision routeAndFree() {
    RouteDecision d = routeOne();
    freeOldest();
    return d;
  }

  /**
   * The decision alone: {@link #routeAndFree} with the free moved out of the timed region into an
   * invocation-level teardown (whose timestamps cost a few tens of ns per operation).
   */
  @Benchmark
  public RouteDecision route(FreeAfterEachCall untimed) {
    return routeOne();
  }

  /** Frees, untimed, the request routed {@code window} operations before the last one. */
  @State(Scope.Thread)
  public static class FreeAfterEachCall {
    @TearDown(Level.Invocation)
    public void free(RouteBenchmark b) {
      b.freeOldest();
    }
  }

  void freeOldest() {
    router.free(ids[(int) ((next - 1 - window) % ids.length)]);
  }

  /** Hashing alone: local and sequence hashes of one prompt. */
  @Benchmark
  public long[] hash() {
    long[] local = hasher.localHashes(prompts[(int) (next++ & (PROMPTS - 1))]);
    return SequenceHasher.sequenceHashes(local);
  }

  /** {@link #hash} in one pass ({@link BlockHasher#hashes}), as routing hashes a prompt. */
  @Benchmark
  public long[] hashes() {
    int[] tokens = prompts[(int) (next++ & (PROMPTS - 1))];
    long[] local = new long[tokens.length / BLOCK_SIZE];
    long[] seq = new long[local.length];
    hasher.hashes(tokens, local, seq);
    return seq;
  }

  /** Hashing and {@code findMatches}, as routing sees them, without cost or bookkeeping. */
  @Benchmark
  public OverlapScores overlaps() {
    return router.overlaps(prompts[(int) (next++ & (PROMPTS - 1))], RouteOptions.defaults());
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    router.close();
  }
}
