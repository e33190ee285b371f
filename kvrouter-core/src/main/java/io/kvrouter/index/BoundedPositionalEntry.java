package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * An entry of a bounded positional index: a {@link PositionalEntry} with the used bit of the
 * index's eviction order (see {@link BlockIndex}).
 *
 * <pre>
 * Implementation notes
 *
 * used      as in BoundedTreeNode: readers set it (opaque, only after an opaque load saw 0) on
 *           entries a query matched, the writer's clock hand reads and clears it. A lost or late
 *           mark only changes which cold block goes first, never a score.
 *
 * 48 bytes instead of PositionalEntry's 40 (the byte rounds the object up); only bounded
 * indexes pay it.
 * </pre>
 */
final class BoundedPositionalEntry extends PositionalEntry {
  private static final VarHandle USED;

  static {
    try {
      USED = MethodHandles.lookup().findVarHandle(BoundedPositionalEntry.class, "used", byte.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  @SuppressWarnings("unused") // through USED
  private byte used;

  BoundedPositionalEntry(long seq, long local, PositionalEntry parent) {
    super(seq, local, parent);
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
