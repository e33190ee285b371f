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
 * seq       the sequence hash the block is keyed by: for a tree node the hash it was first stored
 *           under, for a positional entry the router's own §2 hash of its path. A worker that
 *           names the block by this hash keeps no key of its own for the name (NameTable). Final.
 * local     the block's local hash. Final; read by lock-free readers.
 * parent    the block before it on its path; null at the top. Final; writer-side.
 * holders   sorted ids (SortedIds) of the workers that hold this block. An id >= 0 holds it AND
 *           every ancestor (connected): what readers score. A worker that holds the block while
 *           missing an ancestor (detached: a hole above it, DESIGN.md §4 rule 4) is there as
 *           ~id, which is negative, so all detached entries sort before the connected ones and
 *           never match an id a reader looks for; readers score only the part from
 *           connectedFrom(). Holes are rare, so this costs nothing in the usual case and needs no
 *           field or side map. Copy-on-write; published with a release store, read with an
 *           acquire load. A node whose array equals its parent's uses the parent's array: chains
 *           stored by the same workers then share one array (less memory, and readers skip the
 *           intersection on identical arrays).
 *
 * equals is identity; hashCode mixes the final hashes, so maps keyed by nodes (aliases, the
 * writer's scratch maps) need no identity hash in the object header.
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

  final long seq;
  final long local;
  final N parent;

  @SuppressWarnings("unused") // through HOLDERS
  private int[] holders = SortedIds.NONE;

  IndexNode(long seq, long local, N parent) {
    this.seq = seq;
    this.local = local;
    this.parent = parent;
  }

  // ---- reader side ----

  final int[] holders() {
    return (int[]) HOLDERS.getAcquire(this);
  }

  /** Where the connected ids (>= 0) of {@code holders} start; before it are detached ones. */
  static int connectedFrom(int[] holders) {
    if (holders.length == 0 || holders[0] >= 0) return 0;
    int i = Arrays.binarySearch(holders, 0);
    return i >= 0 ? i : -i - 1;
  }

  /**
   * Records that a query matched this block, for a bounded index's eviction order: sets the used
   * bit unless it is already set, so a reader writes only after the writer cleared it. A no-op for
   * nodes that keep no bit.
   */
  void markUsed() {}

  // ---- writer side ----

  /** The used bit ({@link #markUsed()}); false for nodes that keep none. */
  boolean isUsed() {
    return false;
  }

  /** Clears the used bit. Writer-only. */
  void clearUsed() {}

  /** Whether worker {@code id} holds this block connected. */
  final boolean isHolder(int id) {
    return SortedIds.contains(holders(), id);
  }

  /** Whether worker {@code id} holds this block detached. */
  final boolean isDetached(int id) {
    return SortedIds.contains(holders(), ~id);
  }

  /** Whether no worker holds this block, connected or detached. */
  final boolean isUnheld() {
    return holders().length == 0;
  }

  final void addHolder(int id) {
    publish(SortedIds.with(holders(), id));
  }

  final void removeHolder(int id) {
    publish(SortedIds.without(holders(), id));
  }

  final void addDetached(int id) {
    publish(SortedIds.with(holders(), ~id));
  }

  final void removeDetached(int id) {
    publish(SortedIds.without(holders(), ~id));
  }

  /** Turns connected {@code id} into detached, in one change. */
  final void detach(int id) {
    publish(SortedIds.replaced(holders(), id, ~id));
  }

  /** Turns detached {@code id} into connected, in one change. */
  final void reconnect(int id) {
    publish(SortedIds.replaced(holders(), ~id, id));
  }

  private void publish(int[] a) {
    final N p = parent;
    if (p != null && a.length > 0) {
      int[] ph = p.holders();
      if (ph != a && Arrays.equals(ph, a)) a = ph;
    }
    HOLDERS.setRelease(this, a);
  }

  @Override
  public final boolean equals(Object o) {
    return this == o;
  }

  @Override
  public final int hashCode() {
    long h = (seq ^ Long.rotateLeft(local, 32)) * 0x9E3779B97F4A7C15L;
    return (int) (h >>> 32);
  }
}
