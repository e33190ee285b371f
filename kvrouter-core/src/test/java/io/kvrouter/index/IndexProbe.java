package io.kvrouter.index;

/** What tests read of an index's insides, under its writers' lock; none of it is on a hot path. */
final class IndexProbe {
  private IndexProbe() {}

  /** The bounded index's running count of linked nodes (0 when unbounded). */
  static long linkedNodes(BlockIndex<?> index) {
    if (index.writeLock != null) index.writeLock.lock();
    try {
      return index.bound == null ? 0 : index.bound.linkedNodes;
    } finally {
      if (index.writeLock != null) index.writeLock.unlock();
    }
  }

  /** Blocks in the structure now, counted from scratch. */
  static int nodeCount(BlockIndex<?> index) {
    if (index.writeLock != null) index.writeLock.lock();
    try {
      return index.countNodes();
    } finally {
      if (index.writeLock != null) index.writeLock.unlock();
    }
  }

  /** References in the bounded index's clock queue (0 when unbounded). */
  static int clockSize(BlockIndex<?> index) {
    if (index.writeLock != null) index.writeLock.lock();
    try {
      return index.bound == null ? 0 : index.bound.clockSize();
    } finally {
      if (index.writeLock != null) index.writeLock.unlock();
    }
  }

  /** The bounded index's running count of linked nodes (0 when unbounded); a tree kind. */
  static long linkedNodes(KvIndex index) {
    if (index instanceof PackedPositionalIndex p) return locked(p, () -> p.blocks.size());
    return index instanceof CompressedTreeIndex c
        ? c.linkedNodes()
        : linkedNodes((BlockIndex<?>) index);
  }

  /** Nodes in the structure now (runs for the compressed tree), counted from scratch. */
  static int nodeCount(KvIndex index) {
    if (index instanceof PackedPositionalIndex p) return entryCount(p);
    return index instanceof CompressedTreeIndex c
        ? c.nodeCount()
        : nodeCount((BlockIndex<?>) index);
  }

  /**
   * Blocks in the structure now: nodes of a block tree (entries of the positional index), the sum
   * of the runs' lengths of a compressed tree (held or not).
   */
  static long structureBlocks(KvIndex index) {
    if (index instanceof CompressedTreeIndex c) return c.structureBlocks();
    if (index instanceof PackedPositionalIndex p) return entryCount(p);
    return nodeCount((BlockIndex<?>) index);
  }

  /** References in the bounded index's clock queue (0 when unbounded); a tree kind. */
  static int clockSize(KvIndex index) {
    if (index instanceof PackedPositionalIndex p) {
      return (int) locked(p, () -> p.bound == null ? 0 : p.bound.clockSize());
    }
    return index instanceof CompressedTreeIndex c
        ? c.clockSize()
        : clockSize((BlockIndex<?>) index);
  }

  /**
   * For an eviction listener (on the writer's thread): the position in the running store of the
   * block a tree or positional index makes room for, whose store comes after this eviction; -1 when
   * the eviction comes after the whole event (always so for the compressed kinds).
   */
  static int storeStep(KvIndex index) {
    if (index instanceof PackedPositionalIndex p) return p.bound.storeStep;
    return index instanceof BlockIndex<?> b ? b.bound.storeStep : -1;
  }

  /** Sets a bounded index's eviction listener (the tests' reference model applies evictions). */
  static void setEvictionListener(KvIndex index, ClockBound.EvictionListener listener) {
    if (index instanceof PackedPositionalIndex p) p.bound.evictionListener = listener;
    else if (index instanceof CompressedTreeIndex c) c.bound.evictionListener = listener;
    else ((BlockIndex<?>) index).bound.evictionListener = listener;
  }

  /** {@code read} under the packed index's writers' lock. */
  private static long locked(PackedPositionalIndex index, java.util.function.LongSupplier read) {
    index.writeLock.lock();
    try {
      return read.getAsLong();
    } finally {
      index.writeLock.unlock();
    }
  }

  /** Freed ids of a bounded packed index that wait for the clock queue to drop them. */
  static int parked(PackedPositionalIndex index) {
    return (int) locked(index, index.blocks::parked);
  }

  /** Block ids the packed index handed out so far (its high-water mark). */
  static int idsHandedOut(PackedPositionalIndex index) {
    return (int) locked(index, index.blocks::handedOut);
  }

  /** Slots of the positional table now. */
  static int tableCapacity(PositionalIndex index) {
    index.writeLock.lock();
    try {
      return index.table().capacity();
    } finally {
      index.writeLock.unlock();
    }
  }

  /** Slots of the packed positional table now. */
  static int tableCapacity(PackedPositionalIndex index) {
    index.writeLock.lock();
    try {
      return index.table().capacity();
    } finally {
      index.writeLock.unlock();
    }
  }

  /** Blocks in the packed positional table now (and in its records: the same count). */
  static int entryCount(PackedPositionalIndex index) {
    index.writeLock.lock();
    try {
      int n = index.table().size();
      if (index.blocks.size() != n) {
        throw new AssertionError("table " + n + " but records " + index.blocks.size());
      }
      return n;
    } finally {
      index.writeLock.unlock();
    }
  }

  /** Entries in the positional table now. */
  static int entryCount(PositionalIndex index) {
    index.writeLock.lock();
    try {
      return index.table().size();
    } finally {
      index.writeLock.unlock();
    }
  }
}
