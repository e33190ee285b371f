package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * An open-addressing hash table of positional entries keyed by (sequence hash, local hash), written
 * by one writer and read by any number of lock-free readers.
 *
 * <pre>
 * Implementation notes
 *
 * slots[] holds entries (the key is the entry's own final seq and local) with linear probing
 * from a home slot derived from seq; any capacity works (the home is the high half of a multiply,
 * "fastrange", as in NameTable), at most 3/4 full counting tombstones. A removed entry's slot
 * becomes TOMBSTONE so probe chains stay intact. The writer stores a slot with a release store;
 * readers load with acquire and compare the entry's own final key, so a slot reused for another
 * key can never answer for the old one.
 *
 * When an insert would pass 3/4, put builds a new table of twice the live count (half full
 * afterwards; it may shrink, and it drops every tombstone) and returns it; the owner publishes it
 * with a release store, and the old table is never written again, so a reader still on it sees a
 * consistent, older set of entries. Likewise, when removals leave it under 1/8 full, shrunk()
 * returns a table of twice the live count. So the table is between 1/2 and 3/4 full after it
 * grew (a power-of-two capacity, as before, was 3/8 to 3/4 full: 4 MB for config B's half a
 * million entries). Amortized O(1): after a rebuild the next one needs capacity/4 inserts or
 * capacity * 3/8 removals.
 * </pre>
 */
final class PositionalTable {
  private static final VarHandle SLOT =
      MethodHandles.arrayElementVarHandle(PositionalEntry[].class);
  private static final PositionalEntry TOMBSTONE = new PositionalEntry(0L, 0L, null);
  static final int MIN_CAPACITY = 64;
  private static final long PHI = 0x9E3779B97F4A7C15L;

  private final PositionalEntry[] slots;
  private int live;
  private int used; // live + tombstones

  PositionalTable() {
    this(MIN_CAPACITY);
  }

  private PositionalTable(int capacity) {
    slots = new PositionalEntry[capacity];
  }

  private static int home(long seq, int capacity) {
    return (int) ((((seq * PHI) >>> 32) * capacity) >>> 32);
  }

  /** The capacity of a rebuilt table that holds {@code n} entries: half full. */
  private static int capacityFor(int n) {
    return Math.max(MIN_CAPACITY, 2 * n);
  }

  /** The entry with this key, or null. Safe for lock-free readers. */
  PositionalEntry get(long seq, long local) {
    final PositionalEntry[] s = slots;
    final int cap = s.length;
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      PositionalEntry e = (PositionalEntry) SLOT.getAcquire(s, i);
      if (e == null) return null;
      if (e.seq == seq && e.local == local && e != TOMBSTONE) return e;
    }
  }

  /**
   * Adds {@code entry}, whose key is not in the table; returns this table or, when full, a rebuilt
   * copy that holds it. Writer-only.
   */
  PositionalTable put(PositionalEntry entry) {
    if ((used + 1) * 4L > slots.length * 3L) {
      PositionalTable rebuilt = rebuilt(capacityFor(live + 1));
      rebuilt.insert(entry);
      return rebuilt;
    }
    insert(entry);
    return this;
  }

  private PositionalTable rebuilt(int capacity) {
    final PositionalTable t = new PositionalTable(capacity);
    for (PositionalEntry e : slots) {
      if (e != null && e != TOMBSTONE) t.insert(e);
    }
    return t;
  }

  private void insert(PositionalEntry entry) {
    final PositionalEntry[] s = slots;
    final int cap = s.length;
    int i = home(entry.seq, cap);
    while (true) {
      PositionalEntry e = s[i];
      if (e == null) {
        used++;
        break;
      }
      if (e == TOMBSTONE) break;
      i = i + 1 < cap ? i + 1 : 0;
    }
    SLOT.setRelease(s, i, entry);
    live++;
  }

  /** Removes {@code entry}; false when it is not in the table. Writer-only. */
  boolean remove(PositionalEntry entry) {
    final PositionalEntry[] s = slots;
    final int cap = s.length;
    for (int i = home(entry.seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
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
    if (slots.length <= MIN_CAPACITY || live * 8L >= slots.length) return this;
    return rebuilt(capacityFor(live));
  }

  int size() {
    return live;
  }

  int capacity() {
    return slots.length;
  }
}
