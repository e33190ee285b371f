package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One slot of the positional index: the block at {@code position} reached from the root by the path
 * of local hashes whose §2 sequence hash is {@code seq}, with the workers that hold it (see {@link
 * IndexNode}).
 *
 * <pre>
 * Implementation notes
 *
 * Key (final): seq (IndexNode's), the router's own §2 sequence hash of the path (seq = local at
 * position 0, else SequenceHasher.next(parent.seq, local)), plus position and local. Lookups
 * compare all three, so the slot names (position, whole path) and a reader can check it against the
 * query's own sequence hash at that position (DESIGN.md §4 rule 8).
 *
 * Written by one writer at a time (the index's lock holder); readers touch only the final key
 * fields and holders.
 *
 * firstChild / nextSibling / prevSibling
 *           the block tree on the writer side: an intrusive doubly linked list of the children,
 *           so adding and unlinking a child is O(1) and walking below a block (detach,
 *           reconnect) needs no other index. Writer-only (parent is final).
 * linked    whether the entry is in the table and its parent's child list. Writer-only; once
 *           unlinked an entry is never linked or written again (a new entry takes its key).
 * used      the used bit of a bounded index's eviction order, as in BoundedTreeNode: readers set
 *           it (opaque, only after seeing 0) on entries a query matched, the writer clears it.
 *           Unbounded indexes never touch it. With linked it fits in the object's padding
 *           (56 bytes either way).
 *
 * Invariant: every worker's connected set is prefix-closed; writers change it one entry at a
 * time, leaf first when shrinking, root first when growing (see BlockIndex).
 * </pre>
 */
final class PositionalEntry extends IndexNode<PositionalEntry> {
  private static final VarHandle USED;

  static {
    try {
      USED = MethodHandles.lookup().findVarHandle(PositionalEntry.class, "used", byte.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  final int position;

  PositionalEntry firstChild;
  PositionalEntry nextSibling;
  PositionalEntry prevSibling;
  boolean linked;

  @SuppressWarnings("unused") // through USED
  private byte used;

  PositionalEntry(long seq, int position, long local, PositionalEntry parent) {
    super(seq, local, parent);
    this.position = position;
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

  void linkChild(PositionalEntry c) {
    c.prevSibling = null;
    c.nextSibling = firstChild;
    if (firstChild != null) firstChild.prevSibling = c;
    firstChild = c;
  }

  void unlinkChild(PositionalEntry c) {
    if (c.prevSibling != null) c.prevSibling.nextSibling = c.nextSibling;
    else firstChild = c.nextSibling;
    if (c.nextSibling != null) c.nextSibling.prevSibling = c.prevSibling;
    c.prevSibling = null;
    c.nextSibling = null;
  }
}
