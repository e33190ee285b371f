package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import org.jspecify.annotations.NullUnmarked;

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
 * children  null, the only child (a TreeNode), or a ChildTable once there were two (children may
 *           leave it again; it is dropped when the last one does). Published with a release
 *           store, read with an acquire load: a reader sees either a node or a table that was
 *           complete when published, so it finds a child in exactly one place. A second child
 *           replaces the only child with a new table holding both.
 *
 * With IndexNode's fields a node is 40 bytes (12-byte header, compressed references); there is
 * no depth or child count: whether a node has children is whether children is set. A bounded
 * tree's nodes are BoundedTreeNodes (the subclass adds the used bit, 48 bytes), made by newChild
 * from a BoundedTreeNode root, so an unbounded tree pays nothing for the bound.
 *
 * Invariant: every worker's connected set is prefix-closed, and writers change it one block at a
 * time (leaf-first when shrinking, root-first when growing). A lock-free walk therefore reports
 * a score the worker had at some instant of the walk (docs/concurrency.md).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
class TreeNode extends IndexNode<TreeNode> {
  private static final VarHandle CHILDREN;

  static {
    try {
      CHILDREN = MethodHandles.lookup().findVarHandle(TreeNode.class, "children", Object.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  @SuppressWarnings("unused") // through CHILDREN
  private Object children;

  TreeNode(long seq, long local, TreeNode parent) {
    super(seq, local, parent);
  }

  // ---- reader side ----

  final TreeNode child(long localHash) {
    Object c = CHILDREN.getAcquire(this);
    // ChildTable is final: an exact class check, cheaper than a subtype check against TreeNode
    if (c instanceof ChildTable t) return t.get(localHash);
    TreeNode only = (TreeNode) c;
    return only != null && only.local == localHash ? only : null;
  }

  // ---- writer side ----

  /** A node of this node's class, to be its child. */
  TreeNode newChild(long localHash, long seq) {
    return new TreeNode(seq, localHash, this);
  }

  /** A new child with this local hash, first stored under {@code seq}. */
  final TreeNode addChild(long localHash, long seq) {
    TreeNode c = newChild(localHash, seq);
    Object cur = CHILDREN.get(this);
    if (cur == null) {
      CHILDREN.setRelease(this, c);
    } else if (cur instanceof TreeNode only) {
      CHILDREN.setRelease(this, ChildTable.of(only, c));
    } else {
      ChildTable t = (ChildTable) cur;
      ChildTable grown = t.put(c);
      if (grown != t) CHILDREN.setRelease(this, grown);
    }
    return c;
  }

  final void removeChild(TreeNode c) {
    Object cur = CHILDREN.get(this);
    if (cur == c) {
      CHILDREN.setRelease(this, null);
    } else if (cur instanceof ChildTable t && t.remove(c)) {
      if (t.isEmpty()) CHILDREN.setRelease(this, null);
    } else {
      throw new IllegalStateException("not a child");
    }
  }

  final boolean hasChildren() {
    return CHILDREN.get(this) != null;
  }

  /** Appends every child to {@code out}; writer-side (or a quiescent tree). */
  final void addChildrenTo(List<TreeNode> out) {
    Object c = CHILDREN.getAcquire(this);
    if (c instanceof TreeNode only) out.add(only);
    else if (c != null) ((ChildTable) c).addTo(out);
  }
}
