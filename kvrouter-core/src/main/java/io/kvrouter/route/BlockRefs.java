package io.kvrouter.route;

import java.util.Arrays;

/**
 * The reference counts of one rank's active blocks: sequence hash to the number of (request,
 * position) pairs holding it ({@link ActiveSequences}' blockRefs). A hash map of longs to positive
 * counts with only the operations the route path needs: add one, take one away, is it there, how
 * many.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: one long[] of slot pairs, the key at 2s and its count at 2s + 1, so that a probe reads
 * one cache line where a map with separate key and value arrays reads two (the rank's table is
 * cold at fleet scale: every route adds to one rank and frees from another, out of hundreds). A
 * count of 0 marks an empty slot, so every key is allowed, 0 included. Open addressing with
 * linear probing from the slot the key's Fibonacci hash names (key × 2^64/φ, its top bits):
 * sequence hashes are XXH3 outputs already, so one multiply spreads them; a removal shifts the
 * entries after it back (Knuth's algorithm R), so there are no tombstones and a miss stops at the
 * first empty slot.
 *
 * Size: at most half the slots are used (the probes stay short, as the load factor of 0.5 kept
 * the map before); the table doubles past that and halves when a removal leaves fewer than an
 * eighth used (never below MIN_SLOTS), so a rank that once held many blocks does not keep their
 * room.
 *
 * Threading: none; its ActiveSequences is used under the router's lock.
 * </pre>
 */
final class BlockRefs {
  private static final int MIN_SLOTS = 64;
  private static final long PHI = 0x9E3779B97F4A7C15L; // 2^64 / golden ratio, odd

  private long[] table = new long[2 * MIN_SLOTS];
  private int shift = 64 - Integer.numberOfTrailingZeros(MIN_SLOTS); // slot = (key * PHI) >>> shift
  private int mask = MIN_SLOTS - 1;
  private int size;

  /** Distinct keys held. */
  int size() {
    return size;
  }

  /** Whether {@code key} is held (its count is at least 1). */
  boolean contains(long key) {
    final long[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      if (t[2 * s + 1] == 0) return false;
      if (t[2 * s] == key) return true;
    }
  }

  /** Adds one to {@code key}'s count; returns true when it was not held before. */
  boolean increment(long key) {
    final long[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      final int c = 2 * s + 1;
      if (t[c] == 0) {
        t[c - 1] = key;
        t[c] = 1;
        if (++size > (m + 1) >>> 1) resize(2 * (m + 1));
        return true;
      }
      if (t[c - 1] == key) {
        t[c]++;
        return false;
      }
    }
  }

  /**
   * Takes one from {@code key}'s count; returns true when that was its last (it is no longer held).
   *
   * @throws IllegalStateException when {@code key} is not held (the caller's bookkeeping is wrong)
   */
  boolean decrement(long key) {
    final long[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      final int c = 2 * s + 1;
      if (t[c] == 0) {
        throw new IllegalStateException("block " + Long.toHexString(key) + " is not held");
      }
      if (t[c - 1] == key) {
        if (--t[c] > 0) return false;
        removeAt(s);
        size--;
        if (size < (m + 1) >>> 3 && m + 1 > MIN_SLOTS) resize((m + 1) >>> 1);
        return true;
      }
    }
  }

  private int home(long key) {
    return (int) ((key * PHI) >>> shift);
  }

  /** Empties slot {@code s} (whose count reached 0), shifting back the entries probed past it. */
  private void removeAt(int s) {
    final long[] t = table;
    final int m = mask;
    int gap = s;
    for (int j = (s + 1) & m; t[2 * j + 1] != 0; j = (j + 1) & m) {
      final int h = home(t[2 * j]);
      // the entry at j may move to the gap unless its home lies cyclically in (gap, j]
      final boolean stays = gap <= j ? gap < h && h <= j : gap < h || h <= j;
      if (!stays) {
        t[2 * gap] = t[2 * j];
        t[2 * gap + 1] = t[2 * j + 1];
        gap = j;
      }
    }
    t[2 * gap] = 0;
    t[2 * gap + 1] = 0;
  }

  private void resize(int slots) {
    final long[] old = table;
    final long[] t = new long[2 * slots];
    final int m = slots - 1;
    final int sh = 64 - Integer.numberOfTrailingZeros(slots);
    for (int i = 1; i < old.length; i += 2) {
      if (old[i] == 0) continue;
      final long key = old[i - 1];
      int s = (int) ((key * PHI) >>> sh);
      while (t[2 * s + 1] != 0) s = (s + 1) & m;
      t[2 * s] = key;
      t[2 * s + 1] = old[i];
    }
    table = t;
    mask = m;
    shift = sh;
  }

  @Override
  public String toString() {
    return "BlockRefs[size=" + size + ", slots=" + (mask + 1) + "]";
  }

  /** The held keys, in no order (for tests). */
  long[] keys() {
    long[] out = new long[size];
    int k = 0;
    for (int i = 1; i < table.length; i += 2) if (table[i] != 0) out[k++] = table[i - 1];
    return Arrays.copyOf(out, k);
  }

  /** {@code key}'s count, 0 when not held (for tests). */
  int count(long key) {
    final long[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      if (t[2 * s + 1] == 0) return 0;
      if (t[2 * s] == key) return (int) t[2 * s + 1];
    }
  }
}
