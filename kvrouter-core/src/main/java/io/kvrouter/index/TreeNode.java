package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;

/**
 * One block position of the block tree: the block reached from the root by a path of local hashes,
 * with the workers that hold it.
 *
 * <pre>
 * Implementation notes
 *
 * Written by one writer at a time (the index's writer thread or lock holder); read by any number
 * of readers without locks.
 *
 * holders   sorted worker ids that hold this block AND every ancestor (connected): what readers
 *           score. Copy-on-write; published with a release store, read with an acquire load.
 * detached  sorted ids of workers that hold this block while missing an ancestor (a hole above
 *           it, DESIGN.md §4 rule 4). Writer-only; null when none.
 * children  at most one child in (onlyChild), the others in a ChildTable; a child stays in the
 *           place it was put until it is removed, so a reader finds it in exactly one place.
 *
 * Invariant: every worker's connected set is prefix-closed, and writers change it one block at a
 * time (leaf-first when shrinking, root-first when growing). A lock-free walk therefore reports
 * a score the worker had at some instant of the walk (docs/concurrency.md).
 * </pre>
 */
final class TreeNode {
  private static final VarHandle HOLDERS;
  private static final VarHandle ONLY_CHILD;
  private static final VarHandle TABLE;

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      HOLDERS = l.findVarHandle(TreeNode.class, "holders", int[].class);
      ONLY_CHILD = l.findVarHandle(TreeNode.class, "onlyChild", TreeNode.class);
      TABLE = l.findVarHandle(TreeNode.class, "table", ChildTable.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  final long local;
  final TreeNode parent;
  final int depth; // root 0, first block 1

  @SuppressWarnings("unused") // through HOLDERS
  private int[] holders = SortedIds.NONE;

  int[] detached;

  @SuppressWarnings("unused") // through ONLY_CHILD
  private TreeNode onlyChild;

  @SuppressWarnings("unused") // through TABLE
  private ChildTable table;

  int childCount; // writer-only

  /** Query times that matched this block; single-threaded kind with frequencies only. */
  it.unimi.dsi.fastutil.longs.LongArrayFIFOQueue recentUses;

  TreeNode(long local, TreeNode parent) {
    this.local = local;
    this.parent = parent;
    this.depth = parent == null ? 0 : parent.depth + 1;
  }

  // ---- reader side ----

  int[] holders() {
    return (int[]) HOLDERS.getAcquire(this);
  }

  TreeNode child(long localHash) {
    TreeNode only = (TreeNode) ONLY_CHILD.getAcquire(this);
    if (only != null && only.local == localHash) return only;
    ChildTable t = (ChildTable) TABLE.getAcquire(this);
    return t == null ? null : t.get(localHash);
  }

  // ---- writer side ----

  boolean isHolder(int id) {
    return SortedIds.contains(holders(), id);
  }

  boolean isDetached(int id) {
    return detached != null && SortedIds.contains(detached, id);
  }

  void addHolder(int id) {
    HOLDERS.setRelease(this, shared(SortedIds.with(holders(), id)));
  }

  void removeHolder(int id) {
    HOLDERS.setRelease(this, shared(SortedIds.without(holders(), id)));
  }

  /**
   * The parent's array when it has the same workers: chains stored by the same workers then share
   * one array (less memory, and readers skip the intersection on identical arrays).
   */
  private int[] shared(int[] a) {
    if (parent != null && a.length > 0) {
      int[] p = parent.holders();
      if (p != a && Arrays.equals(p, a)) return p;
    }
    return a;
  }

  void addDetached(int id) {
    detached = SortedIds.with(detached == null ? SortedIds.NONE : detached, id);
  }

  void removeDetached(int id) {
    int[] d = SortedIds.without(detached, id);
    detached = d.length == 0 ? null : d;
  }

  boolean isUnused() {
    return holders().length == 0 && detached == null && childCount == 0;
  }

  TreeNode addChild(long localHash) {
    TreeNode c = new TreeNode(localHash, this);
    if (ONLY_CHILD.get(this) == null) {
      ONLY_CHILD.setRelease(this, c);
    } else {
      ChildTable t = (ChildTable) TABLE.get(this);
      if (t == null) {
        TABLE.setRelease(this, ChildTable.with(c));
      } else {
        ChildTable grown = t.put(c);
        if (grown != t) TABLE.setRelease(this, grown);
      }
    }
    childCount++;
    return c;
  }

  void removeChild(TreeNode c) {
    if (ONLY_CHILD.get(this) == c) {
      ONLY_CHILD.setRelease(this, null);
    } else {
      ChildTable t = (ChildTable) TABLE.get(this);
      if (t == null || !t.remove(c)) {
        throw new IllegalStateException("not a child");
      }
      if (t.isEmpty()) TABLE.setRelease(this, null);
    }
    childCount--;
  }

  /** Calls {@code sink} on every child; writer-side (or a quiescent tree). */
  void forEachChild(java.util.function.Consumer<TreeNode> sink) {
    TreeNode only = (TreeNode) ONLY_CHILD.getAcquire(this);
    if (only != null) sink.accept(only);
    ChildTable t = (ChildTable) TABLE.getAcquire(this);
    if (t != null) t.forEach(sink);
  }
}
