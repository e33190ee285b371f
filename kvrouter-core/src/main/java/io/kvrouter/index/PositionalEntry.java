package io.kvrouter.index;

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
 *
 * Invariant: every worker's connected set is prefix-closed; writers change it one entry at a
 * time, leaf first when shrinking, root first when growing (see BlockIndex).
 * </pre>
 */
final class PositionalEntry extends IndexNode<PositionalEntry> {
  final int position;

  PositionalEntry firstChild;
  PositionalEntry nextSibling;
  PositionalEntry prevSibling;
  boolean linked;

  PositionalEntry(long seq, int position, long local, PositionalEntry parent) {
    super(seq, local, parent);
    this.position = position;
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
