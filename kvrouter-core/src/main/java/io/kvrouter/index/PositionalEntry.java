package io.kvrouter.index;

import java.util.List;
import org.jspecify.annotations.NullUnmarked;

/**
 * One slot of the positional index: the block reached from the root by the path of local hashes
 * whose §2 sequence hash is {@code seq}, with the workers that hold it (see {@link IndexNode}).
 *
 * <pre>
 * Implementation notes
 *
 * Key (final, IndexNode's): seq, the router's own §2 sequence hash of the path (seq = local at
 * position 0, else SequenceHasher.next(parent.seq, local)), and local. Lookups compare both. The
 * position is not stored: the sequence hash already names the whole path, so also its length,
 * and a reader that computes the query's own hash at a position and finds an entry with that
 * hash and local hash has found the entry at that position (DESIGN.md §4 rule 8), short of a
 * 64-bit collision of the §2 hash between two paths that also end in the same local hash.
 *
 * Written by one writer at a time (the index's lock holder); readers touch only the final key
 * fields and holders.
 *
 * children  the block tree on the writer side, used only to look below a block (holes, pruning,
 *           dump): null (no children), the only child (a PositionalEntry), a PositionalChildren
 *           set once there are two (dropped back to the only child or null as they leave), or
 *           UNLINKED once the entry left the table and its parent for good (an unlinked entry is
 *           never linked or written again; a new entry takes its key). Writer-only.
 *
 * Size: 40 bytes (12-byte header, holders, seq, local, parent, children; compressed
 * references), like TreeNode. A bounded index keeps the used bit in its table (one bit per slot,
 * PositionalTable), not here: a byte field would round the entry up to 48 bytes. Before, an entry was 56 bytes:
 * position, three sibling links, a linked flag and the used byte.
 *
 * Invariant: every worker's connected set is prefix-closed; writers change it one entry at a
 * time, leaf first when shrinking, root first when growing (see BlockIndex).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PositionalEntry extends IndexNode<PositionalEntry> {
  /** The children of an entry that left the structure. */
  private static final Object UNLINKED = new Object();

  private Object children;

  PositionalEntry(long seq, long local, PositionalEntry parent) {
    super(seq, local, parent);
  }

  // ---- writer side ----

  final boolean hasChildren() {
    final Object c = children;
    return c != null && c != UNLINKED;
  }

  final boolean isLinked() {
    return children != UNLINKED;
  }

  /** Marks this childless entry as gone for good (it left the table and its parent). */
  final void markUnlinked() {
    if (hasChildren()) throw new IllegalStateException("unlinking an entry with children");
    children = UNLINKED;
  }

  final void linkChild(PositionalEntry c) {
    final Object cur = children;
    if (cur == null) {
      children = c;
    } else if (cur instanceof PositionalEntry only) {
      children = PositionalChildren.of(only, c);
    } else if (cur instanceof PositionalChildren set) {
      set.add(c);
    } else {
      throw new IllegalStateException("linking below an unlinked entry");
    }
  }

  final void unlinkChild(PositionalEntry c) {
    final Object cur = children;
    if (cur == c) {
      children = null;
    } else if (cur instanceof PositionalChildren set && set.remove(c)) {
      if (set.size() == 1) children = set.any();
    } else {
      throw new IllegalStateException("not a child");
    }
  }

  /** Appends every child to {@code out}. */
  final void addChildrenTo(List<PositionalEntry> out) {
    final Object c = children;
    if (c instanceof PositionalEntry only) out.add(only);
    else if (c instanceof PositionalChildren set) set.addTo(out);
  }
}
