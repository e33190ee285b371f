package io.kvrouter.bench;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.prefixcache.RadixTree;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Measures the engine-side prefix cache ({@link RadixTree} and {@link PrefixCache}): time per
 * operation and, with {@code -prof gc}, bytes allocated per operation ({@code gc.alloc.rate.norm}).
 * Prompts are 2,048 tokens; the granule (block size) is 16.
 *
 * <ul>
 *   <li>{@code matchOneEdgeFullHit}: {@code matchPrefix} of a 2,048-token prompt stored as one edge
 *       (a full hit: one child probe, one 2,048-token comparison, the result).
 *   <li>{@code insertOneEdgeFullHit}: {@code insert} of that prompt again (all 128 values handed
 *       back).
 *   <li>{@code insertAndEvictOneEdge}: {@code insert} of the prompt into an empty tree, as a new
 *       leaf, plus the {@code evict} that empties the tree again.
 *   <li>{@code matchSharedFullHit}: {@code matchPrefix} of one of 100 stored prompts that share a
 *       1,024-token system prompt (two edges).
 *   <li>{@code matchSharedMissAfterSystemPrompt}: {@code matchPrefix} of the system prompt plus an
 *       unseen suffix (a 1,024-token hit that stops at a node boundary).
 *   <li>{@code insertEvictSharedChurn}: in a tree holding 100 such prompts, {@code insert} of a new
 *       one (shared prefix + new 1,024-token suffix) and {@code evict} of the oldest leaf, so the
 *       tree stays at 100 prompts.
 *   <li>{@code admitReleaseChurnAtCapacity}: a {@link PrefixCache} whose pool is full (100 prompts
 *       resident): {@code admit} of a new prompt sharing the system prompt (64 cached blocks, 64
 *       new: hashing, one eviction of 64 blocks, a {@code Removed} and a {@code Stored} event) and
 *       {@code release}.
 * </ul>
 *
 * <p>Run (after {@code ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests}):
 *
 * <pre>
 * java -jar kvrouter-bench/target/benchmarks.jar PrefixCache -f 1 -wi 3 -i 5 -w 1 -r 1 -prof gc
 * </pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
@State(Scope.Thread)
public class PrefixCacheBenchmark {
  private static final int PROMPT = 2_048;
  private static final int SYSTEM = 1_024;
  private static final int RESIDENT = 100;
  private static final int RING = 256;

  /** Tokens per run (block size). */
  @Param({"16"})
  public int granule;

  private int[] prompt;
  private List<Integer> promptValues;
  private RadixTree<Integer> oneEdge;
  private RadixTree<Integer> scratchTree;

  private int[][] ring;
  private int[] missAfterSystem;
  private RadixTree<Integer> shared;
  private int sharedCursor;
  private int churnCursor;

  private PrefixCache cache;
  private int cacheCursor;
  private long requestId;

  private final Consumer<Integer> dropValue = v -> {};
  private RouterEvent lastEvent;

  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(42);
    prompt = tokens(rnd, PROMPT);
    promptValues = values(PROMPT / granule);
    oneEdge = new RadixTree<>(granule);
    oneEdge.insert(prompt, promptValues);
    scratchTree = new RadixTree<>(granule);

    int[] system = tokens(rnd, SYSTEM);
    ring = new int[RING][];
    for (int i = 0; i < RING; i++) {
      int[] p = tokens(rnd, PROMPT);
      System.arraycopy(system, 0, p, 0, SYSTEM);
      ring[i] = p;
    }
    missAfterSystem = tokens(rnd, PROMPT);
    System.arraycopy(system, 0, missAfterSystem, 0, SYSTEM);

    shared = new RadixTree<>(granule);
    for (int i = 0; i < RESIDENT; i++) {
      shared.insert(ring[i], promptValues);
    }
    churnCursor = RESIDENT;

    int blocks = PROMPT / granule;
    int capacity = SYSTEM / granule + RESIDENT * (blocks - SYSTEM / granule);
    cache = new PrefixCache(Worker.of(1), granule, capacity, e -> lastEvent = e);
    for (int i = 0; i < RESIDENT; i++) {
      cache.admit(++requestId, ring[i]);
      cache.release(requestId);
    }
    if (cache.freeBlocks() != 0) {
      throw new IllegalStateException("the cache should be full, " + cache.freeBlocks() + " free");
    }
    cacheCursor = RESIDENT;
  }

  private static int[] tokens(SplittableRandom rnd, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = rnd.nextInt(128_000);
    }
    return t;
  }

  private static List<Integer> values(int n) {
    List<Integer> v = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      v.add(i);
    }
    return v;
  }

  @Benchmark
  public RadixTree.Match matchOneEdgeFullHit() {
    return oneEdge.matchPrefix(prompt);
  }

  @Benchmark
  public RadixTree.Insert<Integer> insertOneEdgeFullHit() {
    return oneEdge.insert(prompt, promptValues);
  }

  @Benchmark
  public int insertAndEvictOneEdge() {
    scratchTree.insert(prompt, promptValues);
    return scratchTree.evict(Integer.MAX_VALUE, dropValue);
  }

  @Benchmark
  public RadixTree.Match matchSharedFullHit() {
    int i = sharedCursor;
    sharedCursor = i + 1 == RESIDENT ? 0 : i + 1;
    // the resident prompts are the last RESIDENT inserted into the ring
    return shared.matchPrefix(ring[Math.floorMod(churnCursor - 1 - i, RING)]);
  }

  @Benchmark
  public RadixTree.Match matchSharedMissAfterSystemPrompt() {
    return shared.matchPrefix(missAfterSystem);
  }

  @Benchmark
  public int insertEvictSharedChurn() {
    int i = churnCursor;
    churnCursor = i + 1 == RING ? 0 : i + 1;
    shared.insert(ring[i], promptValues);
    return shared.evict(1, dropValue);
  }

  @Benchmark
  public PrefixCache.Admission admitReleaseChurnAtCapacity() {
    int i = cacheCursor;
    cacheCursor = i + 1 == RING ? 0 : i + 1;
    PrefixCache.Admission a = cache.admit(++requestId, ring[i]);
    cache.release(requestId);
    return a;
  }
}
