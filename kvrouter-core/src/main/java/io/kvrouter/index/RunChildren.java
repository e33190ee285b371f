package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;

/**
 * An open-addressing table of child nodes keyed by their local hash, written by one writer and read
 * by any number of lock-free readers: {@link ChildTable}'s layout for {@link RunNode}s.
 *
 * <pre>
 * Implementation notes
 *
 * slots[] holds nodes (the key is node.first, the local hash of its run's first block) with linear probing; capacity is a power of two,
 * at most 2/3 full counting tombstones. A removed child becomes TOMBSTONE so probe chains stay
 * intact. The writer stores a slot with a release store; readers load with acquire and compare
 * the node's own final key, so a slot reused for another key can never answer for the old one.
 * Growing builds a new table and returns it; the owner publishes it, and the old one is never
 * written again, so a reader on it sees a consistent, older set of children.
 * </pre>
 */
final class RunChildren {
  private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(RunNode[].class);
  private static final RunNode TOMBSTONE = new RunNode(0L, null, null);

  private final RunNode[] slots;
  private final int mask;
  private int live;
  private int used; // live + tombstones

  private RunChildren(int capacity) {
    slots = new RunNode[capacity];
    mask = capacity - 1;
  }

  static RunChildren of(RunNode first, RunNode second) {
    RunChildren t = new RunChildren(4);
    t.insert(first);
    t.insert(second);
    return t;
  }

  private static int spread(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32));
  }

  RunNode get(long key) {
    final RunNode[] s = slots;
    final int m = mask;
    for (int i = spread(key) & m; ; i = (i + 1) & m) {
      RunNode n = (RunNode) SLOT.getAcquire(s, i);
      if (n == null) return null;
      if (n != TOMBSTONE && n.first == key) return n;
    }
  }

  /** Adds {@code child}; returns this table or, when full, a grown copy that holds it. */
  RunChildren put(RunNode child) {
    if ((used + 1) * 3 > slots.length * 2) {
      int capacity = slots.length;
      while ((live + 1) * 3 > capacity) capacity <<= 1; // at most 1/3 full after growing
      RunChildren grown = new RunChildren(capacity);
      for (RunNode n : slots) {
        if (n != null && n != TOMBSTONE) grown.insert(n);
      }
      grown.insert(child);
      return grown;
    }
    insert(child);
    return this;
  }

  private void insert(RunNode child) {
    final int m = mask;
    int i = spread(child.first) & m;
    while (true) {
      RunNode n = slots[i];
      if (n == null) {
        used++;
        break;
      }
      if (n == TOMBSTONE) break;
      i = (i + 1) & m;
    }
    SLOT.setRelease(slots, i, child);
    live++;
  }

  boolean remove(RunNode child) {
    final int m = mask;
    for (int i = spread(child.first) & m; ; i = (i + 1) & m) {
      RunNode n = slots[i];
      if (n == null) return false;
      if (n == child) {
        SLOT.setRelease(slots, i, TOMBSTONE);
        live--;
        return true;
      }
    }
  }

  boolean isEmpty() {
    return live == 0;
  }

  int capacity() {
    return slots.length;
  }

  int size() {
    return live;
  }

  /** The one child left; only when size() == 1. */
  RunNode only() {
    for (RunNode n : slots) {
      if (n != null && n != TOMBSTONE) return n;
    }
    throw new IllegalStateException("empty");
  }

  /** Appends every child to {@code out}. */
  void addTo(List<RunNode> out) {
    for (int i = 0; i < slots.length; i++) {
      RunNode n = (RunNode) SLOT.getAcquire(slots, i);
      if (n != null && n != TOMBSTONE) out.add(n);
    }
  }
}
