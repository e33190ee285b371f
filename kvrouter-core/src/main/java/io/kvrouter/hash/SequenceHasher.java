package io.kvrouter.hash;

import com.dynatrace.hash4j.hashing.Hasher64;
import com.dynatrace.hash4j.hashing.Hashing;

/**
 * Chains local block hashes into sequence hashes, each of which names a whole prefix: {@code seq[0]
 * = local[0]}, {@code seq[i] = XXH3-64(le64(seq[i-1]) ‖ le64(local[i]), chainSeed)}.
 *
 * <p>Stateless; the default-seed hasher is shared.
 */
public final class SequenceHasher {
  /** The chain seed Dynamo uses by default; some releases use 0. */
  public static final long DEFAULT_CHAIN_SEED = 1337;

  private static final Hasher64 DEFAULT = Hashing.xxh3_64(DEFAULT_CHAIN_SEED);

  private SequenceHasher() {}

  /** The sequence hash of a block whose parent has {@code previousSequenceHash}. */
  public static long next(long previousSequenceHash, long localHash) {
    return DEFAULT.hashLongLongToLong(previousSequenceHash, localHash);
  }

  /** The sequence hash of a block with an explicit chain seed. */
  public static long next(long previousSequenceHash, long localHash, long chainSeed) {
    return hasherFor(chainSeed).hashLongLongToLong(previousSequenceHash, localHash);
  }

  /** Sequence hashes of a chain that starts at the root, with the default chain seed. */
  public static long[] sequenceHashes(long[] localHashes) {
    return sequenceHashes(localHashes, DEFAULT_CHAIN_SEED);
  }

  /** Sequence hashes of a chain that starts at the root. */
  public static long[] sequenceHashes(long[] localHashes, long chainSeed) {
    if (localHashes == null) {
      throw new IllegalArgumentException("localHashes must not be null");
    }
    final long[] out = new long[localHashes.length];
    if (out.length == 0) {
      return out;
    }
    final Hasher64 h = hasherFor(chainSeed);
    long prev = localHashes[0];
    out[0] = prev;
    for (int i = 1; i < out.length; i++) {
      prev = h.hashLongLongToLong(prev, localHashes[i]);
      out[i] = prev;
    }
    return out;
  }

  /**
   * Fills {@code out[from..to)} with the sequence hashes of {@code localHashes[from..to)}, given
   * the sequence hash of the block before {@code from} (ignored when {@code from == 0}). Default
   * chain seed; allocates nothing.
   */
  public static void sequenceHashes(
      long[] localHashes, int from, int to, long previous, long[] out) {
    long prev = previous;
    for (int i = from; i < to; i++) {
      prev = i == 0 ? localHashes[0] : DEFAULT.hashLongLongToLong(prev, localHashes[i]);
      out[i] = prev;
    }
  }

  private static Hasher64 hasherFor(long chainSeed) {
    return chainSeed == DEFAULT_CHAIN_SEED ? DEFAULT : Hashing.xxh3_64(chainSeed);
  }
}
