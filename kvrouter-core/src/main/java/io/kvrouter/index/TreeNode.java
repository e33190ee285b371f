package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;

/**
 * One block position of the block tree: the block reached from the root by a path of local hashes,
 * with the workers that hold it (see {@link IndexNode}) and its children.
 *
 * <pre>
 * Implementation notes
 *
 * Written by one writer at a time (the index's writer thread or lock holder); read by any number
 * of readers without locks.
 *
 * children  at most one child in (onlyChild), the others in a ChildTable; a child stays in the
 *           place it was put until it is removed, so a reader finds it in exactly one place.
 *           Both are published with release stores and read with acquire loads.
 * depth     writer-only. Whether a node has children is whether either place is set (an emptied
 *           ChildTable is dropped), so no count is kept.
 *
 * Invariant: every worker's connected set is prefix-closed, and writers change it one block at a
 * time (leaf-first when shrinking, root-first when growing). A lock-free walk therefore reports
 * a score the worker had at some instant of the walk (docs/concurrency.md).
 * </pre>
 */
final class TreeNode extends IndexNode<TreeNode> {
  private static final VarHandle ONLY_CHILD;
  private static final VarHandle TABLE;

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      ONLY_CHILD = l.findVarHandle(TreeNode.class, "onlyChild", TreeNode.class);
      TABLE = l.findVarHandle(TreeNode.class, "table", ChildTable.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  final int depth; // root 0, first block 1

  @SuppressWarnings("unused") // through ONLY_CHILD
  private TreeNode onlyChild;

  @SuppressWarnings("unused") // through TABLE
  private ChildTable table;

  TreeNode(long local, TreeNode parent) {
    super(local, parent);
    this.depth = parent == null ? 0 : parent.depth + 1;
  }

  // ---- reader side ----

  TreeNode child(long localHash) {
    TreeNode only = (TreeNode) ONLY_CHILD.getAcquire(this);
    if (only != null && only.local == localHash) return only;
    ChildTable t = (ChildTable) TABLE.getAcquire(this);
    return t == null ? null : t.get(localHash);
  }

  // ---- writer side ----

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
  }

  /** Writer-side. */
  boolean hasChildren() {
    return ONLY_CHILD.get(this) != null || TABLE.get(this) != null;
  }

  /** Appends every child to {@code out}; writer-side (or a quiescent tree). */
  void addChildrenTo(List<TreeNode> out) {
    TreeNode only = (TreeNode) ONLY_CHILD.getAcquire(this);
    if (only != null) out.add(only);
    ChildTable t = (ChildTable) TABLE.getAcquire(this);
    if (t != null) t.addTo(out);
  }
}
