package io.kvrouter.index;

import java.util.List;

/**
 * The children of a positional entry that has two or more: a writer-only set of entries.
 *
 * <pre>
 * Implementation notes
 *
 * slots[] holds the children with linear probing from the entry's hashCode (IndexNode mixes its
 * final hashes); capacity a power of two, at most 3/4 full, doubled when full, halved when under
 * 1/8 full. Removal shifts the rest of the probe run back (no tombstones), which needs no reader
 * to see a consistent table: readers never touch it (they find entries through PositionalTable).
 * Adding and removing a child are O(1) expected, so a block under which a thousand sequences
 * branch (a shared system prompt) costs no scan of its siblings.
 * </pre>
 */
final class PositionalChildren {
  private static final int MIN_CAPACITY = 4;

  private PositionalEntry[] slots = new PositionalEntry[MIN_CAPACITY];
  private int size;

  static PositionalChildren of(PositionalEntry first, PositionalEntry second) {
    PositionalChildren s = new PositionalChildren();
    s.add(first);
    s.add(second);
    return s;
  }

  int size() {
    return size;
  }

  /** A child; the only one when size() is 1. */
  PositionalEntry any() {
    for (PositionalEntry e : slots) {
      if (e != null) return e;
    }
    throw new IllegalStateException("empty");
  }

  void add(PositionalEntry e) {
    if ((size + 1) * 4 > slots.length * 3) resize(slots.length * 2);
    insert(slots, e);
    size++;
  }

  private static void insert(PositionalEntry[] s, PositionalEntry e) {
    final int m = s.length - 1;
    int i = e.hashCode() & m;
    while (s[i] != null) i = (i + 1) & m;
    s[i] = e;
  }

  /** Removes {@code e}; false when it is not here. */
  boolean remove(PositionalEntry e) {
    final PositionalEntry[] s = slots;
    final int m = s.length - 1;
    int i = e.hashCode() & m;
    while (s[i] != e) {
      if (s[i] == null) return false;
      i = (i + 1) & m;
    }
    // backward-shift deletion: move later members of the run into the gap when their home
    // slot allows it
    int gap = i;
    for (int j = (gap + 1) & m; s[j] != null; j = (j + 1) & m) {
      final int home = s[j].hashCode() & m;
      // s[j] may move to gap unless its home lies cyclically in (gap, j]
      if (((j - home) & m) >= ((j - gap) & m)) {
        s[gap] = s[j];
        gap = j;
      }
    }
    s[gap] = null;
    size--;
    if (size * 8 < s.length && s.length > MIN_CAPACITY) resize(s.length / 2);
    return true;
  }

  private void resize(int capacity) {
    final PositionalEntry[] old = slots;
    final PositionalEntry[] s = new PositionalEntry[capacity];
    for (PositionalEntry e : old) {
      if (e != null) insert(s, e);
    }
    slots = s;
  }

  void addTo(List<PositionalEntry> out) {
    for (PositionalEntry e : slots) {
      if (e != null) out.add(e);
    }
  }
}
