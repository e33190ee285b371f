package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;

/**
 * A cached block as both indexes store it: its key hashes, its parent block and the workers that
 * hold it; {@link TreeNode} and {@link PositionalEntry} add how they are found.
 *
 * <pre>
 * Implementation notes
 *
 * local     the block's local hash. Final; read by lock-free readers.
 * parent    the block before it on its path; null at the top. Final; writer-side.
 * holders   sorted worker ids (SortedIds) that hold this block AND every ancestor (connected):
 *           what readers score. Copy-on-write; published with a release store, read with an
 *           acquire load. A node whose set equals its parent's uses the parent's array: chains
 *           stored by the same workers then share one array (less memory, and readers skip
 *           the intersection on identical arrays).
 *
 * Who holds the block while missing an ancestor (detached, DESIGN.md §4 rule 4) is not kept here
 * but in the index's side map (BlockIndex): holes are rare, and most nodes never need the field.
 *
 * Written by one writer at a time (the index's writer thread or lock holder); readers touch only
 * the final hashes and holders.
 * </pre>
 */
abstract class IndexNode<N extends IndexNode<N>> {
  private static final VarHandle HOLDERS;

  static {
    try {
      HOLDERS = MethodHandles.lookup().findVarHandle(IndexNode.class, "holders", int[].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  final long local;
  final N parent;

  @SuppressWarnings("unused") // through HOLDERS
  private int[] holders = SortedIds.NONE;

  IndexNode(long local, N parent) {
    this.local = local;
    this.parent = parent;
  }

  // ---- reader side ----

  final int[] holders() {
    return (int[]) HOLDERS.getAcquire(this);
  }

  // ---- writer side ----

  final boolean isHolder(int id) {
    return SortedIds.contains(holders(), id);
  }

  final void addHolder(int id) {
    publish(SortedIds.with(holders(), id));
  }

  final void removeHolder(int id) {
    publish(SortedIds.without(holders(), id));
  }

  private void publish(int[] a) {
    final N p = parent;
    if (p != null && a.length > 0) {
      int[] ph = p.holders();
      if (ph != a && Arrays.equals(ph, a)) a = ph;
    }
    HOLDERS.setRelease(this, a);
  }
}
