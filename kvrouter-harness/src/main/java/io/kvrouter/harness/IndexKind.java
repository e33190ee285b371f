package io.kvrouter.harness;

import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import java.util.Arrays;
import java.util.stream.Collectors;

/** The index kinds {@code bench trace} replays against, by command-line name. */
enum IndexKind {
  /** {@code KvIndexes.radixTree()} behind one lock (single-threaded). */
  RADIX_TREE("radix-tree"),
  /** {@code KvIndexes.concurrentRadixTree()}, events through {@code threadPool} lanes. */
  CONCURRENT_RADIX_TREE("concurrent-radix-tree"),
  /** {@code KvIndexes.positional(jump)}, events through {@code threadPool} lanes. */
  POSITIONAL("positional"),
  /**
   * {@code KvIndexes.concurrentCompressedTree()} (one node per run of blocks), events through
   * {@code threadPool} lanes.
   */
  COMPRESSED_TREE("compressed-tree");

  private final String cliName;

  IndexKind(String cliName) {
    this.cliName = cliName;
  }

  public String cliName() {
    return cliName;
  }

  public boolean concurrent() {
    return this != RADIX_TREE;
  }

  /**
   * A fresh index of this kind; concurrent kinds get {@code eventThreads} thread-pool lanes (0:
   * events applied on the caller's thread).
   */
  public KvIndex create(int eventThreads, int jumpSize) {
    return create(eventThreads, jumpSize, 0);
  }

  /** Like {@link #create(int, int)}, bounded to {@code maxBlocks} pairs when that is > 0. */
  public KvIndex create(int eventThreads, int jumpSize, long maxBlocks) {
    if (maxBlocks > 0) {
      return switch (this) {
        case RADIX_TREE -> new LockedIndex(KvIndexes.radixTree(maxBlocks));
        case CONCURRENT_RADIX_TREE ->
            pooled(KvIndexes.concurrentRadixTree(maxBlocks), eventThreads);
        case POSITIONAL -> pooled(KvIndexes.positional(jumpSize, maxBlocks), eventThreads);
        case COMPRESSED_TREE -> pooled(KvIndexes.concurrentCompressedTree(maxBlocks), eventThreads);
      };
    }
    return switch (this) {
      case RADIX_TREE -> new LockedIndex(KvIndexes.radixTree());
      case CONCURRENT_RADIX_TREE -> pooled(KvIndexes.concurrentRadixTree(), eventThreads);
      case POSITIONAL -> pooled(KvIndexes.positional(jumpSize), eventThreads);
      case COMPRESSED_TREE -> pooled(KvIndexes.concurrentCompressedTree(), eventThreads);
    };
  }

  private static KvIndex pooled(KvIndex inner, int threads) {
    return threads > 0 ? KvIndexes.threadPool(inner, threads) : inner;
  }

  public static String known() {
    return Arrays.stream(values()).map(IndexKind::cliName).collect(Collectors.joining(", "));
  }

  public static IndexKind parse(String name) {
    for (IndexKind k : values()) {
      if (k.cliName.equals(name.trim())) return k;
    }
    throw new IllegalArgumentException("unknown index '" + name + "'; known indexes: " + known());
  }
}
