package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;

/**
 * An open-addressing table of child nodes keyed by their local hash, written by one writer and read
 * by any number of lock-free readers.
 *
 * <pre>
 * Implementation notes
 *
 * slots[] holds nodes (the key is node.local) with linear probing; capacity is a power of two,
 * at most 2/3 full counting tombstones. A removed child becomes TOMBSTONE so probe chains stay
 * intact. The writer stores a slot with a release store; readers load with acquire and compare
 * the node's own final key, so a slot reused for another key can never answer for the old one.
 * Growing builds a new table and returns it; the owner publishes it, and the old one is never
 * written again, so a reader on it sees a consistent, older set of children.
 * </pre>
 */
final class ChildTable {
  private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(TreeNode[].class);
  private static final TreeNode TOMBSTONE = new TreeNode(0L, 0L, null);

  private final TreeNode[] slots;
  private final int mask;
  private int live;
  private int used; // live + tombstones

  private ChildTable(int capacity) {
    slots = new TreeNode[capacity];
    mask = capacity - 1;
  }

  static ChildTable of(TreeNode first, TreeNode second) {
    ChildTable t = new ChildTable(4);
    t.insert(first);
    t.insert(second);
    return t;
  }

  private static int spread(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32));
  }

  TreeNode get(long key) {
    final TreeNode[] s = slots;
    final int m = mask;
    for (int i = spread(key) & m; ; i = (i + 1) & m) {
      TreeNode n = (TreeNode) SLOT.getAcquire(s, i);
      if (n == null) return null;
      if (n != TOMBSTONE && n.local == key) return n;
    }
  }

  /** Adds {@code child}; returns this table or, when full, a grown copy that holds it. */
  ChildTable put(TreeNode child) {
    if ((used + 1) * 3 > slots.length * 2) {
      int capacity = slots.length;
      while ((live + 1) * 3 > capacity) capacity <<= 1; // at most 1/3 full after growing
      ChildTable grown = new ChildTable(capacity);
      for (TreeNode n : slots) {
        if (n != null && n != TOMBSTONE) grown.insert(n);
      }
      grown.insert(child);
      return grown;
    }
    insert(child);
    return this;
  }

  private void insert(TreeNode child) {
    final int m = mask;
    int i = spread(child.local) & m;
    while (true) {
      TreeNode n = slots[i];
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

  boolean remove(TreeNode child) {
    final int m = mask;
    for (int i = spread(child.local) & m; ; i = (i + 1) & m) {
      TreeNode n = slots[i];
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

  /** Appends every child to {@code out}. */
  void addTo(List<TreeNode> out) {
    for (int i = 0; i < slots.length; i++) {
      TreeNode n = (TreeNode) SLOT.getAcquire(slots, i);
      if (n != null && n != TOMBSTONE) out.add(n);
    }
  }
}
