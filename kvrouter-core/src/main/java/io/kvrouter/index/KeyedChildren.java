package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import org.jspecify.annotations.NullUnmarked;

/**
 * An open-addressing table of child nodes keyed by a long (the local hash a child starts with),
 * written by one writer and read by any number of lock-free readers. {@link ChildTable} keys the
 * tree kinds' {@link TreeNode}s, {@link RunChildren} the compressed tree's {@link RunNode}s.
 *
 * <pre>
 * Implementation notes
 *
 * slots[] holds nodes (the key is keyOf(node), a final field of the node) with linear probing;
 * capacity is a power of two, at most 2/3 full counting tombstones. A removed child becomes
 * TOMBSTONE so probe chains stay intact. The writer stores a slot with a release store; readers
 * load with acquire and compare the node's own final key, so a slot reused for another key can
 * never answer for the old one. Growing builds a new table and returns it; the owner publishes
 * it, and the old one is never written again, so a reader on it sees a consistent, older set of
 * children.
 *
 * The subclasses are final and their callers test for them by exact class, so on the read path
 * (get, inlined into the node's child lookup) the JIT knows which keyOf runs: no virtual call.
 * </pre>
 *
 * @param <N> the node type
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
abstract class KeyedChildren<N> {
  private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(Object[].class);
  private static final Object TOMBSTONE = new Object();

  private final Object[] slots;
  private final int mask;
  private int live;
  private int used; // live + tombstones

  KeyedChildren(int capacity) {
    slots = new Object[capacity];
    mask = capacity - 1;
  }

  /** The key of {@code node}: a final field, so a reader may compare it without a fence. */
  abstract long keyOf(N node);

  /** An empty table of this kind with {@code capacity} slots (a power of two). */
  abstract KeyedChildren<N> empty(int capacity);

  /** Fills a new table with its first two children. */
  final void insertBoth(N first, N second) {
    insert(first);
    insert(second);
  }

  private static int spread(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32));
  }

  /** The child whose key is {@code key}, or null. */
  @SuppressWarnings("unchecked")
  final N get(long key) {
    final Object[] s = slots;
    final int m = mask;
    for (int i = spread(key) & m; ; i = (i + 1) & m) {
      Object n = SLOT.getAcquire(s, i);
      if (n == null) return null;
      if (n != TOMBSTONE && keyOf((N) n) == key) return (N) n;
    }
  }

  /** Adds {@code child}; returns this table or, when full, a grown copy that holds it. */
  @SuppressWarnings("unchecked")
  final KeyedChildren<N> putChild(N child) {
    if ((used + 1) * 3 > slots.length * 2) {
      int capacity = slots.length;
      while ((live + 1) * 3 > capacity) capacity <<= 1; // at most 1/3 full after growing
      KeyedChildren<N> grown = empty(capacity);
      for (Object n : slots) {
        if (n != null && n != TOMBSTONE) grown.insert((N) n);
      }
      grown.insert(child);
      return grown;
    }
    insert(child);
    return this;
  }

  private void insert(N child) {
    final Object[] s = slots;
    final int m = mask;
    int i = spread(keyOf(child)) & m;
    while (true) {
      Object n = s[i];
      if (n == null) {
        used++;
        break;
      }
      if (n == TOMBSTONE) break;
      i = (i + 1) & m;
    }
    SLOT.setRelease(s, i, child);
    live++;
  }

  /** Removes {@code child} (by identity); false when it is not here. */
  final boolean remove(N child) {
    final Object[] s = slots;
    final int m = mask;
    for (int i = spread(keyOf(child)) & m; ; i = (i + 1) & m) {
      Object n = s[i];
      if (n == null) return false;
      if (n == child) {
        SLOT.setRelease(s, i, TOMBSTONE);
        live--;
        return true;
      }
    }
  }

  final boolean isEmpty() {
    return live == 0;
  }

  final int capacity() {
    return slots.length;
  }

  final int size() {
    return live;
  }

  /** The one child left; only when size() == 1. */
  @SuppressWarnings("unchecked")
  final N only() {
    for (Object n : slots) {
      if (n != null && n != TOMBSTONE) return (N) n;
    }
    throw new IllegalStateException("empty");
  }

  /** Appends every child to {@code out}. */
  @SuppressWarnings("unchecked")
  final void addTo(List<N> out) {
    final Object[] s = slots;
    for (int i = 0; i < s.length; i++) {
      Object n = SLOT.getAcquire(s, i);
      if (n != null && n != TOMBSTONE) out.add((N) n);
    }
  }
}
