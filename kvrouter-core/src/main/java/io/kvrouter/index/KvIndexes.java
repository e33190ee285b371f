package io.kvrouter.index;

import java.time.Duration;

/** Factory of the index kinds (DESIGN.md §4). */
public final class KvIndexes {
  private KvIndexes() {}

  /** A block tree for one thread at a time: writes and reads must not overlap across threads. */
  public static KvIndex radixTree() {
    return new TreeIndex(false);
  }

  /**
   * A single-threaded block tree that also tracks recent-use frequencies along each query's matched
   * path ({@link OverlapScores#frequencies()}) over a sliding {@code window}.
   */
  public static KvIndex radixTree(Duration window) {
    if (window == null || window.isNegative() || window.isZero()) {
      throw new IllegalArgumentException("window must be positive, got " + window);
    }
    return new TreeIndex(false, window.toNanos(), System::nanoTime);
  }

  /**
   * Like {@link #radixTree()}, holding at most {@code maxBlocks} (worker rank, block) pairs: past
   * that, the least recently used leaves of workers' chains are dropped first (stored or matched by
   * {@code findMatches} counts as used, approximated by a CLOCK bit), and {@link
   * IndexStats#evictedBlocks()} counts them. Dropping a worker's leaf is what its {@code Removed}
   * would do, so scores stay exact for what is left: a dropped block only costs a cache miss.
   *
   * @throws IllegalArgumentException when {@code maxBlocks < 1}
   */
  public static KvIndex radixTree(long maxBlocks) {
    return new TreeIndex(false, checkMaxBlocks(maxBlocks));
  }

  /**
   * A block tree that readers query without locks while writers of any workers apply events
   * (writers take turns on one lock).
   */
  public static KvIndex concurrentRadixTree() {
    return new TreeIndex(true);
  }

  /**
   * Like {@link #concurrentRadixTree()}, holding at most {@code maxBlocks} (worker rank, block)
   * pairs, as {@link #radixTree(long)} describes; readers still take no lock.
   *
   * @throws IllegalArgumentException when {@code maxBlocks < 1}
   */
  public static KvIndex concurrentRadixTree(long maxBlocks) {
    return new TreeIndex(true, checkMaxBlocks(maxBlocks));
  }

  /**
   * A compressed block tree for one thread at a time (as {@link #radixTree()}): one node per run of
   * blocks that the same workers hold, with per-worker cutoffs for workers that hold a prefix of a
   * run; runs split where workers diverge and merge again when a split is no longer needed, so the
   * node count follows the live set, not its history. {@link #compressedTree(long)} is its bounded
   * form.
   */
  public static KvIndex compressedTree() {
    return new CompressedTreeIndex(false);
  }

  /**
   * Like {@link #compressedTree()}, holding at most {@code maxBlocks} (worker rank, block) pairs,
   * as {@link #radixTree(long)} describes: past that, the least recently used leaves of workers'
   * chains are dropped first (a CLOCK over runs: a run a query ended in counts as used), dropping
   * is what the worker's {@code Removed} of those leaves would do, scores stay exact for what is
   * left, and {@link IndexStats#evictedBlocks()} counts them.
   *
   * @throws IllegalArgumentException when {@code maxBlocks < 1}
   */
  public static KvIndex compressedTree(long maxBlocks) {
    return new CompressedTreeIndex(false, checkMaxBlocks(maxBlocks));
  }

  /**
   * Like {@link #compressedTree()}, read without locks while writers of any workers apply events
   * (writers take turns on one lock), as {@link #concurrentRadixTree()}.
   */
  public static KvIndex concurrentCompressedTree() {
    return new CompressedTreeIndex(true);
  }

  /**
   * Like {@link #concurrentCompressedTree()}, holding at most {@code maxBlocks} (worker rank,
   * block) pairs, as {@link #compressedTree(long)} describes; readers still take no lock and never
   * wait.
   *
   * @throws IllegalArgumentException when {@code maxBlocks < 1}
   */
  public static KvIndex concurrentCompressedTree(long maxBlocks) {
    return new CompressedTreeIndex(true, checkMaxBlocks(maxBlocks));
  }

  /**
   * A position-first index, one table of blocks keyed by the §2 sequence hash of their path (which
   * fixes the position) and their local hash, that probes {@code jumpSize} positions ahead and
   * scans back only where workers drop out.
   */
  public static KvIndex positional(int jumpSize) {
    if (jumpSize < 1) {
      throw new IllegalArgumentException("jumpSize must be >= 1, got " + jumpSize);
    }
    return new PackedPositionalIndex(jumpSize);
  }

  /**
   * Like {@link #positional(int)}, holding at most {@code maxBlocks} (worker rank, block) pairs, as
   * {@link #radixTree(long)} describes; readers still take no lock.
   *
   * @throws IllegalArgumentException when {@code jumpSize < 1} or {@code maxBlocks < 1}
   */
  public static KvIndex positional(int jumpSize, long maxBlocks) {
    if (jumpSize < 1) {
      throw new IllegalArgumentException("jumpSize must be >= 1, got " + jumpSize);
    }
    return new PackedPositionalIndex(
        jumpSize, null, PackedPositionalIndex.REUSE_BATCH, checkMaxBlocks(maxBlocks));
  }

  private static long checkMaxBlocks(long maxBlocks) {
    if (maxBlocks < 1 || maxBlocks == Long.MAX_VALUE) {
      throw new IllegalArgumentException(
          "maxBlocks must be in 1.." + (Long.MAX_VALUE - 1) + ", got " + maxBlocks);
    }
    return maxBlocks;
  }

  /**
   * Applies events on {@code threads} background threads, every event of one worker id on the same
   * thread and in order; reads go straight to {@code concurrentIndex} on the caller's thread. A
   * bound of {@code concurrentIndex} ({@link #concurrentRadixTree(long)}, {@link
   * #concurrentCompressedTree(long)}, {@link #positional(int, long)}) applies as it is, and {@link
   * KvIndex#stats()} reports its counters.
   *
   * @throws IllegalArgumentException when the index is not safe for concurrent use
   */
  public static KvIndex threadPool(KvIndex concurrentIndex, int threads) {
    if (concurrentIndex == null) {
      throw new IllegalArgumentException("concurrentIndex must not be null");
    }
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    }
    if (!(concurrentIndex instanceof TreeIndex t && t.isConcurrent()
        || concurrentIndex instanceof PositionalIndex
        || concurrentIndex instanceof PackedPositionalIndex
        || concurrentIndex instanceof CompressedTreeIndex c && c.isConcurrent())) {
      throw new IllegalArgumentException(
          "threadPool needs a concurrent index (concurrentRadixTree(), concurrentCompressedTree() or"
              + " positional(j)), got "
              + concurrentIndex.getClass().getSimpleName()
              + (concurrentIndex instanceof TreeIndex ? " made by radixTree()" : ""));
    }
    return new ThreadPoolIndexer(concurrentIndex, threads);
  }
}
