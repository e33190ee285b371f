package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import org.jspecify.annotations.NullUnmarked;
import org.jspecify.annotations.Nullable;

/**
 * An open-addressing hash table of positional entries keyed by (sequence hash, local hash), written
 * by one writer and read by any number of lock-free readers.
 *
 * <pre>
 * Implementation notes
 *
 * slots holds entries (the key is the entry's own final seq and local) with linear probing
 * from a home slot derived from seq; any capacity works (the home is the high half of a multiply,
 * "fastrange", as in NameTable), at most 3/4 full counting tombstones. A removed entry's slot
 * becomes TOMBSTONE so probe chains stay intact.
 *
 * The slots are kept in segments of 2^15 (128 KB with compressed references), not one array: G1
 * gives an object of half a region or more (a humongous one) whole regions of its own, and config
 * B's 756,574 slots (3 MB) took two 2 MB regions, about 1.9 bytes per pair of heap held for
 * nothing (BENCHMARKS.md, "Issue 37: positional memory, session 16"). A probe loads its segment
 * from the small, cached array of segments first.
 *
 * Each slot also has a 4-bit tag in tags[] (16 to a long), as in NameTable: EMPTY (0) exactly
 * where the slot is null, TAG_TOMBSTONE where it is TOMBSTONE, else 4 bits of the key's hash
 * other than those of its home slot. A probe loads an entry (a likely cache miss: the table's
 * entries are tens of MB) only where the tag matches, so a probe past other keys and a miss load
 * almost none. That keeps lookups as cheap at 3/4 full as they were at 3/8 to 3/4 with a
 * power-of-two capacity, for half a byte per slot.
 *
 * Publication: the writer stores the slot with a release store and then its tag word with a
 * release store; readers load the tag word with acquire and then the slot with acquire, and
 * compare the entry's own final key. So a reader that sees a slot's tag sees that slot's entry
 * (or a later one: TOMBSTONE or another key's entry, which the key compare rejects), a slot reused
 * for another key can never answer for the old one, and a stale or colliding tag costs at most
 * one wasted entry load. A tag still empty for a slot just filled ends the probe there: that
 * entry's insert is under way, and no key lies beyond a slot that was empty (a null slot is never
 * null again in the same table). Two other read paths were measured and were not faster on
 * IndexWorkload's configs (BENCHMARKS.md): loading the slot first and its tag after (the writer
 * storing the tag first), and scanning 16 tags at a time (SWAR).
 *
 * When an insert would pass 3/4, put builds a new table of twice the live count (half full
 * afterwards; it may shrink, and it drops every tombstone) and returns it; the owner publishes it
 * with a release store, and the old table is never written again, so a reader still on it sees a
 * consistent, older set of entries. Likewise, when removals leave it under 1/8 full, shrunk()
 * returns a table of twice the live count. So the table is between 1/2 and 3/4 full after it
 * grew (a power-of-two capacity, as before, was 3/8 to 3/4 full: 4 MB for config B's half a
 * million entries). Amortized O(1): after a rebuild the next one needs capacity/4 inserts or
 * capacity * 3/8 removals.
 *
 * Used bits (a bounded index only; null otherwise): one bit per slot in usedBits[], the used bit of
 * the entry in that slot for the bound's CLOCK order (ClockBound), so an entry needs no field of
 * its own (a byte would round the 40-byte entry up to 48). A reader that matched an entry finds
 * its slot again (a probe by reference from its home; the slots are in cache from the lookup) and
 * sets the bit with an atomic OR, only when a plain load saw it clear; the writer reads and clears
 * it the same way, and clears it whenever a slot is filled or emptied. A rebuild copies the bits
 * of the entries it moves. Races cost at most a lost or a stray mark, which only changes which
 * cold block goes first, never a score: a reader that marks in a table already replaced (its mark
 * is lost), or a mark that lands after the writer emptied and refilled that slot (the new entry
 * starts used).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PositionalTable {
  private static final VarHandle SLOT =
      MethodHandles.arrayElementVarHandle(PositionalEntry[].class);
  private static final VarHandle TAG_WORD = MethodHandles.arrayElementVarHandle(long[].class);
  private static final VarHandle USED_WORD = MethodHandles.arrayElementVarHandle(long[].class);
  private static final int EMPTY = 0;
  private static final int TAG_TOMBSTONE = 15;
  private static final PositionalEntry TOMBSTONE = new PositionalEntry(0L, 0L, null);
  static final int MIN_CAPACITY = 64;
  private static final int SEGMENT_SHIFT = 15;
  private static final int SEGMENT = 1 << SEGMENT_SHIFT;
  private static final int SEGMENT_MASK = SEGMENT - 1;
  private static final long PHI = 0x9E3779B97F4A7C15L;

  /** The slots in segments of SEGMENT slots (the last one shorter): none is humongous. */
  private final PositionalEntry[][] slots;

  private final int capacity;
  private final long[] tags;
  private final long @Nullable [] usedBits;
  private int live;
  private int used; // live + tombstones

  PositionalTable() {
    this(MIN_CAPACITY, false);
  }

  /** An empty table; with a used bit per slot when {@code withUsedBits} (a bounded index's). */
  PositionalTable(boolean withUsedBits) {
    this(MIN_CAPACITY, withUsedBits);
  }

  private PositionalTable(int capacity, boolean withUsedBits) {
    this.capacity = capacity;
    final int n = (capacity + SEGMENT_MASK) >>> SEGMENT_SHIFT;
    slots = new PositionalEntry[n][];
    for (int k = 0; k < n; k++) {
      slots[k] = new PositionalEntry[Math.min(SEGMENT, capacity - (k << SEGMENT_SHIFT))];
    }
    tags = new long[(capacity + 15) >>> 4];
    this.usedBits = withUsedBits ? new long[(capacity + 63) >>> 6] : null;
  }

  /** Slot {@code i} (plain load). Writer-side. */
  private static PositionalEntry at(PositionalEntry[][] s, int i) {
    return s[i >>> SEGMENT_SHIFT][i & SEGMENT_MASK];
  }

  /** Slot {@code i}, loaded with acquire. Safe for lock-free readers. */
  private static PositionalEntry acquireAt(PositionalEntry[][] s, int i) {
    return (PositionalEntry) SLOT.getAcquire(s[i >>> SEGMENT_SHIFT], i & SEGMENT_MASK);
  }

  /** Stores {@code e} in slot {@code i} with release. Writer-only. */
  private static void releaseAt(PositionalEntry[][] s, int i, PositionalEntry e) {
    SLOT.setRelease(s[i >>> SEGMENT_SHIFT], i & SEGMENT_MASK, e);
  }

  private static int home(long seq, int capacity) {
    return (int) ((((seq * PHI) >>> 32) * capacity) >>> 32);
  }

  /** Four bits of the key's hash apart from those of its home slot: 1 to 14. */
  private static int tag(long seq) {
    return 1 + (int) (((seq * PHI) >>> 8) & 0xF) % 14;
  }

  private static int tagAt(long[] g, int i) {
    return (int) ((long) TAG_WORD.getAcquire(g, i >>> 4) >>> ((i & 15) << 2)) & 0xF;
  }

  /** Sets slot {@code i}'s tag; published with a release store. Writer-only. */
  private void setTag(int i, int tag) {
    final long[] g = tags;
    final int shift = (i & 15) << 2;
    final int w = i >>> 4;
    TAG_WORD.setRelease(g, w, (g[w] & ~(0xFL << shift)) | ((long) tag << shift));
  }

  /** The capacity of a rebuilt table that holds {@code n} entries: half full. */
  private static int capacityFor(int n) {
    return Math.max(MIN_CAPACITY, 2 * n);
  }

  /** The entry with this key, or null. Safe for lock-free readers. */
  PositionalEntry get(long seq, long local) {
    final PositionalEntry[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    final int tag = tag(seq);
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return null;
      if (x == tag) {
        final PositionalEntry e = acquireAt(s, i);
        // a slot whose tag is set holds an entry; TOMBSTONE's key is never compared equal here
        if (e.seq == seq && e.local == local && e != TOMBSTONE) return e;
      }
    }
  }

  /**
   * The first entry keyed {@code seq} (any local hash) that {@code names}'s worker names by that
   * key, or null: the lookup of a name that is a block's own key (PositionalNames). Writer-only.
   */
  PositionalEntry ownNamed(long seq, PositionalNames names) {
    final PositionalEntry[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    final int tag = tag(seq);
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return null;
      if (x == tag) {
        final PositionalEntry e = at(s, i);
        if (e.seq == seq && e != TOMBSTONE && names.namesByKey(e)) return e;
      }
    }
  }

  /** Appends every entry {@code names}'s worker names by its key to {@code out}. Writer-only. */
  void addOwnNamed(PositionalNames names, List<PositionalEntry> out) {
    // through the tags, 16 slots a word: an empty slot costs no read of its own (a loop of
    // identical reads of empty slots is also what Lincheck's model checker takes for a spin)
    final PositionalEntry[][] s = slots;
    final long[] g = tags;
    for (int w = 0; w < g.length; w++) {
      long word = g[w];
      while (word != 0) {
        final int shift = Long.numberOfTrailingZeros(word) & ~3;
        final int tag = (int) (word >>> shift) & 0xF;
        word &= ~(0xFL << shift);
        if (tag == TAG_TOMBSTONE) continue;
        final PositionalEntry e = at(s, (w << 4) + (shift >>> 2));
        if (names.namesByKey(e)) out.add(e);
      }
    }
  }

  /**
   * Adds {@code entry}, whose key is not in the table; returns this table or, when full, a rebuilt
   * copy that holds it. Writer-only.
   */
  PositionalTable put(PositionalEntry entry) {
    if ((used + 1) * 4L > capacity * 3L) {
      PositionalTable rebuilt = rebuilt(capacityFor(live + 1));
      rebuilt.insert(entry);
      return rebuilt;
    }
    insert(entry);
    return this;
  }

  private PositionalTable rebuilt(int newCapacity) {
    final long[] u = this.usedBits;
    final PositionalTable t = new PositionalTable(newCapacity, u != null);
    // first load every key: independent loads the CPU overlaps (the entries are mostly not in
    // cache); then insert in the same order without touching the entries again
    final PositionalEntry[][] old = slots;
    final int cap = capacity;
    final long[] keys = new long[live];
    int k = 0;
    for (PositionalEntry[] seg : old) {
      for (PositionalEntry e : seg) {
        if (e != null && e != TOMBSTONE) keys[k++] = e.seq;
      }
    }
    k = 0;
    for (int j = 0; j < cap; j++) {
      final PositionalEntry e = at(old, j);
      if (e == null || e == TOMBSTONE) continue;
      final int at = t.insert(keys[k++], e);
      if (u != null && usedAt(u, j)) t.setUsed(at);
    }
    return t;
  }

  private void insert(PositionalEntry entry) {
    insert(entry.seq, entry);
  }

  /**
   * Puts {@code entry}, keyed {@code seq}, in the first free slot of its probe run; returns that
   * slot (its used bit clear).
   */
  private int insert(long seq, PositionalEntry entry) {
    final PositionalEntry[][] s = slots;
    final int cap = capacity;
    int i = home(seq, cap);
    while (true) {
      PositionalEntry e = at(s, i);
      if (e == null) {
        used++;
        break;
      }
      if (e == TOMBSTONE) break;
      i = i + 1 < cap ? i + 1 : 0;
    }
    if (usedBits != null) clearUsed(i);
    releaseAt(s, i, entry);
    setTag(i, tag(seq));
    live++;
    return i;
  }

  /** Removes {@code entry}; false when it is not in the table. Writer-only. */
  boolean remove(PositionalEntry entry) {
    final PositionalEntry[][] s = slots;
    final int cap = capacity;
    for (int i = home(entry.seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      PositionalEntry e = at(s, i);
      if (e == null) return false;
      if (e == entry) {
        releaseAt(s, i, TOMBSTONE);
        setTag(i, TAG_TOMBSTONE);
        if (usedBits != null) clearUsed(i);
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
    if (capacity <= MIN_CAPACITY || live * 8L >= capacity) return this;
    return rebuilt(capacityFor(live));
  }

  // ---- used bits (a bounded index's table only)

  /**
   * The slot that holds {@code entry}, or -1 (not in this table). Safe for lock-free readers: a
   * reference compare along the entry's probe run, through the tags.
   */
  private int slotOf(PositionalEntry entry) {
    final PositionalEntry[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    final long seq = entry.seq;
    final int tag = tag(seq);
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return -1;
      if (x == tag && acquireAt(s, i) == entry) return i;
    }
  }

  private static boolean usedAt(long[] u, int i) {
    return ((long) USED_WORD.getOpaque(u, i >>> 6) & (1L << i)) != 0;
  }

  private void setUsed(int i) {
    USED_WORD.getAndBitwiseOr(usedBits, i >>> 6, 1L << i);
  }

  private void clearUsed(int i) {
    final long[] u = this.usedBits;
    if (usedAt(u, i)) USED_WORD.getAndBitwiseAnd(u, i >>> 6, ~(1L << i));
  }

  /**
   * Sets {@code entry}'s used bit, if it is in this table and the bit is clear; a no-op for a table
   * without used bits. Safe for lock-free readers (class notes: a mark may be lost).
   */
  void markUsed(PositionalEntry entry) {
    final long[] u = this.usedBits;
    if (u == null) return;
    final int i = slotOf(entry);
    if (i >= 0 && !usedAt(u, i)) setUsed(i);
  }

  /** Whether {@code entry} is in this table with its used bit set. Writer-side. */
  boolean isUsed(PositionalEntry entry) {
    final long[] u = this.usedBits;
    if (u == null) return false;
    final int i = slotOf(entry);
    return i >= 0 && usedAt(u, i);
  }

  /** Clears {@code entry}'s used bit (if it is in this table). Writer-side. */
  void clearUsed(PositionalEntry entry) {
    if (usedBits == null) return;
    final int i = slotOf(entry);
    if (i >= 0) clearUsed(i);
  }

  int size() {
    return live;
  }

  int capacity() {
    return capacity;
  }
}
