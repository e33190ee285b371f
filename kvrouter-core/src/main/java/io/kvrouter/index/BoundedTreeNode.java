package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A node of a bounded block tree: a {@link TreeNode} with the used bit of the index's eviction
 * order (see {@link BlockIndex}).
 *
 * <pre>
 * Implementation notes
 *
 * used      1 once a query matched the block (or a store used it again) since the writer last
 *           cleared it. Readers set it with an opaque store, and only after an opaque load saw 0,
 *           so a block that stays hot costs readers one load and no write until the writer's
 *           clock hand clears it again; the writer reads and clears it (opaque). A lost or late
 *           mark only changes which cold block goes first, never a score.
 *
 * 48 bytes instead of TreeNode's 40 (the byte rounds the object up); only bounded trees pay it.
 * </pre>
 */
final class BoundedTreeNode extends TreeNode {
  private static final VarHandle USED;

  static {
    try {
      USED = MethodHandles.lookup().findVarHandle(BoundedTreeNode.class, "used", byte.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  @SuppressWarnings("unused") // through USED
  private byte used;

  BoundedTreeNode(long seq, long local, TreeNode parent) {
    super(seq, local, parent);
  }

  @Override
  TreeNode newChild(long localHash, long seq) {
    return new BoundedTreeNode(seq, localHash, this);
  }

  @Override
  void markUsed() {
    if ((byte) USED.getOpaque(this) == 0) USED.setOpaque(this, (byte) 1);
  }

  @Override
  boolean isUsed() {
    return (byte) USED.getOpaque(this) != 0;
  }

  @Override
  void clearUsed() {
    USED.setOpaque(this, (byte) 0);
  }
}
