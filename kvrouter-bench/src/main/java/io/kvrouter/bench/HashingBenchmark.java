package io.kvrouter.bench;

import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * Measures the time and allocation of the request-side hashing of DESIGN.md §2: the local block
 * hashes of a 1,024-token prompt ({@link BlockHasher#localHashes(int[])}, block sizes 16 and 64,
 * i.e. 64 and 16 blocks) and the sequence-hash chain over 64 local hashes ({@link
 * SequenceHasher#sequenceHashes(long[])}). {@code localHashesOld} runs the serialisation the hasher
 * had before issue 21 (a copy, {@link OldBlockHasher}) on the same input, so that old and new are
 * compared in one run; setup checks that both give the same hashes.
 *
 * <p>Each operation should allocate only its result array: 16 + 8 × 64 = 528 bytes for 64 hashes,
 * 16 + 8 × 16 = 144 bytes for 16 (compressed class pointers), which {@code -prof gc} reports as
 * {@code gc.alloc.rate.norm}. Inputs are fixed random tokens and hashes (seed 42), built once.
 *
 * <p>Run (short, for a shared machine):
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar Hashing -f 1 -wi 3 -i 5 -w 1 -r 1 -prof gc
 * </pre>
 *
 * Results are recorded in {@code docs/BENCHMARKS.md}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class HashingBenchmark {
  /** Prompt length in tokens. */
  static final int PROMPT_TOKENS = 1024;

  /** Length of the sequence-hash chain. */
  static final int CHAIN_LENGTH = 64;

  /** A 1,024-token prompt and a hasher for one block size. */
  @State(Scope.Benchmark)
  public static class Prompt {
    @Param({"16", "64"})
    public int blockSize;

    int[] tokens;
    BlockHasher hasher;
    OldBlockHasher oldHasher;

    @Setup
    public void setUp() {
      SplittableRandom r = new SplittableRandom(42);
      tokens = new int[PROMPT_TOKENS];
      for (int i = 0; i < tokens.length; i++) {
        tokens[i] = r.nextInt(152_064); // a typical vocabulary size; ids are u32 anyway
      }
      hasher = BlockHasher.of(blockSize);
      oldHasher = new OldBlockHasher(blockSize);
      if (!Arrays.equals(hasher.localHashes(tokens), oldHasher.localHashes(tokens))) {
        throw new IllegalStateException("the old and the new hasher disagree");
      }
    }
  }

  /** 64 local hashes to chain. */
  @State(Scope.Benchmark)
  public static class Chain {
    long[] localHashes;

    @Setup
    public void setUp() {
      SplittableRandom r = new SplittableRandom(42);
      localHashes = new long[CHAIN_LENGTH];
      for (int i = 0; i < localHashes.length; i++) {
        localHashes[i] = r.nextLong();
      }
    }
  }

  /** Local hashes of every full block of a 1,024-token prompt. */
  @Benchmark
  public long[] localHashes(Prompt p) {
    return p.hasher.localHashes(p.tokens);
  }

  /**
   * The same with the serialisation {@code BlockHasher} had before issue 21 (one byte at a time;
   * {@link OldBlockHasher}), for the side-by-side.
   */
  @Benchmark
  public long[] localHashesOld(Prompt p) {
    return p.oldHasher.localHashes(p.tokens);
  }

  /** Sequence hashes of a 64-block chain from the root, default chain seed. */
  @Benchmark
  public long[] sequenceHashes(Chain c) {
    return SequenceHasher.sequenceHashes(c.localHashes);
  }
}
