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

  /** Slots of the positional table now. */
  static int tableCapacity(PositionalIndex index) {
    index.writeLock.lock();
    try {
      return index.table().capacity();
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
