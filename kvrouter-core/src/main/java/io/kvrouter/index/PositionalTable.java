package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * An open-addressing hash table of positional entries keyed by (sequence hash, position, local
 * hash), written by one writer and read by any number of lock-free readers.
 *
 * <pre>
 * Implementation notes
 *
 * slots[] holds entries (the key is the entry's own final seq, position and local) with linear
 * probing from a spread of seq; capacity is a power of two, at most 3/4 full counting tombstones.
 * A removed entry's slot becomes TOMBSTONE so probe chains stay intact. The writer stores a slot
 * with a release store; readers load with acquire and compare the entry's own final key, so a
 * slot reused for another key can never answer for the old one.
 *
 * When an insert would pass 3/4, put builds a new table sized from the live count (at most half
 * full afterwards; it may shrink, and it drops every tombstone) and returns it; the owner
 * publishes it with a release store, and the old table is never written again, so a reader still
 * on it sees a consistent, older set of entries. Likewise, when removals leave it under 1/8 full,
 * shrunk() returns a table sized from the live count, so a table that once held many entries
 * does not keep their slots for good (amortized O(1): a shrink leaves it over 1/4 full, so the
 * next needs capacity/8 removals, and growing needs capacity/4 inserts).
 * </pre>
 */
final class PositionalTable {
  private static final VarHandle SLOT =
      MethodHandles.arrayElementVarHandle(PositionalEntry[].class);
  private static final PositionalEntry TOMBSTONE = new PositionalEntry(0L, -1, 0L, null);
  static final int MIN_CAPACITY = 64;

  private final PositionalEntry[] slots;
  private final int mask;
  private int live;
  private int used; // live + tombstones

  PositionalTable() {
    this(MIN_CAPACITY);
  }

  private PositionalTable(int capacity) {
    slots = new PositionalEntry[capacity];
    mask = capacity - 1;
  }

  private static int spread(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32));
  }

  /** The entry with this key, or null. Safe for lock-free readers. */
  PositionalEntry get(long seq, int position, long local) {
    final PositionalEntry[] s = slots;
    final int m = mask;
    for (int i = spread(seq) & m; ; i = (i + 1) & m) {
      PositionalEntry e = (PositionalEntry) SLOT.getAcquire(s, i);
      if (e == null) return null;
      if (e.seq == seq && e.position == position && e.local == local && e != TOMBSTONE) return e;
    }
  }

  /**
   * Adds {@code entry}, whose key is not in the table; returns this table or, when full, a rebuilt
   * copy that holds it. Writer-only.
   */
  PositionalTable put(PositionalEntry entry) {
    if ((used + 1) * 4 > slots.length * 3) {
      int capacity = MIN_CAPACITY;
      while ((live + 1) * 2 > capacity) capacity <<= 1;
      PositionalTable rebuilt = new PositionalTable(capacity);
      for (PositionalEntry e : slots) {
        if (e != null && e != TOMBSTONE) rebuilt.insert(e);
      }
      rebuilt.insert(entry);
      return rebuilt;
    }
    insert(entry);
    return this;
  }

  private void insert(PositionalEntry entry) {
    final PositionalEntry[] s = slots;
    final int m = mask;
    int i = spread(entry.seq) & m;
    while (true) {
      PositionalEntry e = s[i];
      if (e == null) {
        used++;
        break;
      }
      if (e == TOMBSTONE) break;
      i = (i + 1) & m;
    }
    SLOT.setRelease(s, i, entry);
    live++;
  }

  /** Removes {@code entry}; false when it is not in the table. Writer-only. */
  boolean remove(PositionalEntry entry) {
    final PositionalEntry[] s = slots;
    final int m = mask;
    for (int i = spread(entry.seq) & m; ; i = (i + 1) & m) {
      PositionalEntry e = s[i];
      if (e == null) return false;
      if (e == entry) {
        SLOT.setRelease(s, i, TOMBSTONE);
        live--;
        return true;
      }
    }
  }

  /**
   * This table or, when under 1/8 full (and above the least capacity), a rebuilt smaller copy of it
   * for the owner to publish. Writer-only.
   */
  PositionalTable shrunk() {
    if (slots.length <= MIN_CAPACITY || live * 8 >= slots.length) return this;
    int capacity = MIN_CAPACITY;
    while (live * 2 > capacity) capacity <<= 1;
    PositionalTable rebuilt = new PositionalTable(capacity);
    for (PositionalEntry e : slots) {
      if (e != null && e != TOMBSTONE) rebuilt.insert(e);
    }
    return rebuilt;
  }

  int size() {
    return live;
  }

  int capacity() {
    return slots.length;
  }
}
