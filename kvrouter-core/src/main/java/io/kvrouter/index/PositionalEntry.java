package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One slot of the positional index: the block at {@code position} reached from the root by the path
 * of local hashes whose §2 sequence hash is {@code seq}, with the workers that hold it.
 *
 * <pre>
 * Implementation notes
 *
 * Key (final): seq, the router's own §2 sequence hash of the path (seq = local at position 0,
 * else SequenceHasher.next(parent.seq, local)), plus position and local. Lookups compare all
 * three, so the slot names (position, whole path) and a reader can check it against the query's
 * own sequence hash at that position (DESIGN.md §4 rule 8).
 *
 * Written by one writer at a time (the index's lock holder); readers touch only the final key
 * fields and holders.
 *
 * holders   sorted worker ids that hold this block AND every ancestor (connected): what readers
 *           score. Copy-on-write; published with a release store, read with an acquire load.
 * detached  sorted ids of workers that hold this block while missing an ancestor (a hole above
 *           it, DESIGN.md §4 rule 4). Writer-only; null when none.
 * parent, firstChild / nextSibling / prevSibling
 *           the block tree on the writer side: an intrusive doubly linked list of the children,
 *           so adding and unlinking a child is O(1) and walking below a block (detach,
 *           reconnect) needs no other index. Writer-only (parent is final).
 * linked    whether the entry is in the table and its parent's child list. Writer-only; once
 *           unlinked an entry is never linked or written again (a new entry takes its key).
 *
 * Invariant: every worker's connected set is prefix-closed; writers change it one entry at a
 * time, leaf first when shrinking, root first when growing (see PositionalIndex).
 * </pre>
 */
final class PositionalEntry {
  private static final VarHandle HOLDERS;

  static {
    try {
      HOLDERS = MethodHandles.lookup().findVarHandle(PositionalEntry.class, "holders", int[].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  final long seq;
  final int position;
  final long local;
  final PositionalEntry parent; // null at position 0

  @SuppressWarnings("unused") // through HOLDERS
  private int[] holders = SortedIds.NONE;

  int[] detached;

  PositionalEntry firstChild;
  PositionalEntry nextSibling;
  PositionalEntry prevSibling;
  int childCount;
  boolean linked;

  PositionalEntry(long seq, int position, long local, PositionalEntry parent) {
    this.seq = seq;
    this.position = position;
    this.local = local;
    this.parent = parent;
  }

  /** Whether this entry names the block at {@code position} with these hashes. */
  boolean is(long seq, int position, long local) {
    return this.seq == seq && this.position == position && this.local == local;
  }

  // ---- reader side ----

  int[] holders() {
    return (int[]) HOLDERS.getAcquire(this);
  }

  // ---- writer side ----

  boolean isHolder(int id) {
    return SortedIds.contains(holders(), id);
  }

  boolean isDetached(int id) {
    return detached != null && SortedIds.contains(detached, id);
  }

  void addHolder(int id) {
    HOLDERS.setRelease(this, SortedIds.with(holders(), id));
  }

  void removeHolder(int id) {
    HOLDERS.setRelease(this, SortedIds.without(holders(), id));
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

  void linkChild(PositionalEntry c) {
    c.prevSibling = null;
    c.nextSibling = firstChild;
    if (firstChild != null) firstChild.prevSibling = c;
    firstChild = c;
    childCount++;
  }

  void unlinkChild(PositionalEntry c) {
    if (c.prevSibling != null) c.prevSibling.nextSibling = c.nextSibling;
    else firstChild = c.nextSibling;
    if (c.nextSibling != null) c.nextSibling.prevSibling = c.prevSibling;
    c.prevSibling = null;
    c.nextSibling = null;
    childCount--;
  }
}
