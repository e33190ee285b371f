package io.kvrouter.bench;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The index workloads used to measure Dynamo's indexers: sequences of random local hashes whose
 * first part is shared within prefix groups, spread round-robin over workers, named by rolling §2
 * sequence hashes.
 *
 * <ul>
 *   <li>{@code A}: 1,562 sequences × 64 blocks (~100k pairs), 4 workers, 25 % prefix in 4 groups
 *   <li>{@code B}: 7,812 sequences × 128 blocks (~1M pairs), 16 workers, 50 % prefix in 8 groups
 * </ul>
 */
final class IndexWorkload {
  final int sequences;
  final int blocks;
  final int workers;
  final int prefixBlocks;
  final int groups;
  final long[][] locals;
  final long[][] seqs;

  private IndexWorkload(int sequences, int blocks, int workers, double prefix, int groups) {
    this.sequences = sequences;
    this.blocks = blocks;
    this.workers = workers;
    this.prefixBlocks = (int) Math.round(blocks * prefix);
    this.groups = groups;
    SplittableRandom rnd = new SplittableRandom(20261129L);
    long[][] groupPrefix = new long[groups][prefixBlocks];
    for (long[] g : groupPrefix) for (int i = 0; i < g.length; i++) g[i] = rnd.nextLong();
    locals = new long[sequences][blocks];
    seqs = new long[sequences][];
    for (int s = 0; s < sequences; s++) {
      long[] l = locals[s];
      System.arraycopy(groupPrefix[(s / workers) % groups], 0, l, 0, prefixBlocks);
      for (int i = prefixBlocks; i < blocks; i++) l[i] = rnd.nextLong();
      seqs[s] = SequenceHasher.sequenceHashes(l);
    }
  }

  static IndexWorkload of(String config) {
    return switch (config) {
      case "A" -> new IndexWorkload(1562, 64, 4, 0.25, 4);
      case "B" -> new IndexWorkload(7812, 128, 16, 0.50, 8);
      default -> throw new IllegalArgumentException("unknown config " + config + " (A or B)");
    };
  }

  long pairs() {
    return (long) sequences * blocks;
  }

  Worker workerOf(int sequence) {
    return new Worker(sequence % workers, 0);
  }

  /** One Stored event per sequence, all blocks at once. */
  List<RouterEvent> storeEvents() {
    List<RouterEvent> out = new ArrayList<>(sequences);
    for (int s = 0; s < sequences; s++) {
      out.add(
          new RouterEvent(
              workerOf(s), s, CacheEvent.storedAtRoot(seqs[s].clone(), locals[s].clone())));
    }
    return out;
  }

  /** One Removed event per sequence, deepest block first. */
  List<RouterEvent> removeEvents() {
    List<RouterEvent> out = new ArrayList<>(sequences);
    for (int s = 0; s < sequences; s++) {
      long[] h = new long[blocks];
      for (int i = 0; i < blocks; i++) h[i] = seqs[s][blocks - 1 - i];
      out.add(new RouterEvent(workerOf(s), sequences + s, CacheEvent.removed(h)));
    }
    return out;
  }

  /** One Stored event per block (the first at the root, each next under the one before). */
  List<RouterEvent> storeEventsPerBlock() {
    List<RouterEvent> out = new ArrayList<>(sequences * blocks);
    for (int s = 0; s < sequences; s++) {
      for (int i = 0; i < blocks; i++) {
        long[] h = {seqs[s][i]};
        long[] l = {locals[s][i]};
        CacheEvent e =
            i == 0 ? CacheEvent.storedAtRoot(h, l) : CacheEvent.stored(seqs[s][i - 1], h, l);
        out.add(new RouterEvent(workerOf(s), out.size(), e));
      }
    }
    return out;
  }

  /** One Removed event per block, deepest first (vLLM's eviction shape). */
  List<RouterEvent> removeEventsPerBlock() {
    List<RouterEvent> out = new ArrayList<>(sequences * blocks);
    for (int s = 0; s < sequences; s++) {
      for (int i = blocks - 1; i >= 0; i--) {
        out.add(
            new RouterEvent(
                workerOf(s),
                (long) sequences * blocks + out.size(),
                CacheEvent.removed(seqs[s][i])));
      }
    }
    return out;
  }

  /** A query of kind hit (a stored sequence), partial (first half stored) or miss. */
  long[] query(String kind, int s) {
    long[] q = locals[s % sequences].clone();
    SplittableRandom rnd = new SplittableRandom(s);
    switch (kind) {
      case "hit" -> {}
      case "partial" -> {
        for (int i = blocks / 2; i < blocks; i++) q[i] = rnd.nextLong();
      }
      case "miss" -> {
        for (int i = 0; i < blocks; i++) q[i] = rnd.nextLong();
      }
      default -> throw new IllegalArgumentException("unknown query kind " + kind);
    }
    return q;
  }

  /**
   * Like {@link #newIndex(String)} with a bound: {@code none} (unbounded), {@code never} (bounded
   * far above the workload: the bound's bookkeeping only) or {@code quarter} (a quarter of the
   * workload's {@code pairs}: eviction on every store past it).
   */
  static KvIndex newIndex(String kind, String bound, long pairs) {
    long max =
        switch (bound) {
          case "none" -> 0;
          case "never" -> 1L << 40;
          case "quarter" -> Math.max(1, pairs / 4);
          default -> throw new IllegalArgumentException("unknown bound " + bound);
        };
    if (max == 0) return newIndex(kind);
    if (kind.startsWith("positional")) {
      return KvIndexes.positional(Integer.parseInt(kind.substring("positional".length())), max);
    }
    return switch (kind) {
      case "radix" -> KvIndexes.radixTree(max);
      case "concurrent" -> KvIndexes.concurrentRadixTree(max);
      case "compressed" -> KvIndexes.compressedTree(max);
      case "concurrentCompressed" -> KvIndexes.concurrentCompressedTree(max);
      default -> throw new IllegalArgumentException("unknown index kind " + kind);
    };
  }

  static KvIndex newIndex(String kind) {
    if (kind.startsWith("positional")) {
      return KvIndexes.positional(Integer.parseInt(kind.substring("positional".length())));
    }
    return switch (kind) {
      case "radix" -> KvIndexes.radixTree();
      case "concurrent" -> KvIndexes.concurrentRadixTree();
      case "compressed" -> KvIndexes.compressedTree();
      case "concurrentCompressed" -> KvIndexes.concurrentCompressedTree();
      default -> throw new IllegalArgumentException("unknown index kind " + kind);
    };
  }
}
