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
 * Layout: one int[] of 12-byte slots, the key's low and high halves at 3s and 3s + 1 and its count
 * at 3s + 2, so that a probe reads one cache line (two for the one slot in eight that straddles a
 * line) where a map with separate key and value arrays reads two (the rank's table is cold at
 * fleet scale: every route adds to one rank and frees from another, out of hundreds), in the 12
 * bytes a slot such a map takes (a held block's heap is bounded: HeldBlocksMemoryTest). A count of
 * 0 marks an empty slot, so every key is allowed, 0 included. Open addressing with
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
  private static final int MAX_SLOTS = 1 << 29; // 3 ints a slot: the largest int[] below 2^31
  private static final long PHI = 0x9E3779B97F4A7C15L; // 2^64 / golden ratio, odd

  private int[] table = new int[3 * MIN_SLOTS];
  private int shift = 64 - Integer.numberOfTrailingZeros(MIN_SLOTS); // slot = (key * PHI) >>> shift
  private int mask = MIN_SLOTS - 1;
  private int size;

  /** Distinct keys held. */
  int size() {
    return size;
  }

  /** Whether {@code key} is held (its count is at least 1). */
  boolean contains(long key) {
    final int[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      final int b = 3 * s;
      if (t[b + 2] == 0) return false;
      if (key(t, b) == key) return true;
    }
  }

  /** Adds one to {@code key}'s count; returns true when it was not held before. */
  boolean increment(long key) {
    final int[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      final int b = 3 * s;
      if (t[b + 2] == 0) {
        t[b] = (int) key;
        t[b + 1] = (int) (key >>> 32);
        t[b + 2] = 1;
        if (++size > (m + 1) >>> 1) resize(2 * (m + 1));
        return true;
      }
      if (key(t, b) == key) {
        if (t[b + 2] == Integer.MAX_VALUE) {
          throw new IllegalStateException("block " + Long.toHexString(key) + " held 2^31 times");
        }
        t[b + 2]++;
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
    final int[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      final int b = 3 * s;
      if (t[b + 2] == 0) {
        throw new IllegalStateException("block " + Long.toHexString(key) + " is not held");
      }
      if (key(t, b) == key) {
        if (--t[b + 2] > 0) return false;
        removeAt(s);
        size--;
        if (size < (m + 1) >>> 3 && m + 1 > MIN_SLOTS) resize((m + 1) >>> 1);
        return true;
      }
    }
  }

  private static long key(int[] t, int b) {
    return ((long) t[b + 1] << 32) | (t[b] & 0xFFFF_FFFFL);
  }

  private int home(long key) {
    return (int) ((key * PHI) >>> shift);
  }

  /** Empties slot {@code s} (whose count reached 0), shifting back the entries probed past it. */
  private void removeAt(int s) {
    final int[] t = table;
    final int m = mask;
    int gap = s;
    for (int j = (s + 1) & m; t[3 * j + 2] != 0; j = (j + 1) & m) {
      final int h = home(key(t, 3 * j));
      // the entry at j may move to the gap unless its home lies cyclically in (gap, j]
      final boolean stays = gap <= j ? gap < h && h <= j : gap < h || h <= j;
      if (!stays) {
        t[3 * gap] = t[3 * j];
        t[3 * gap + 1] = t[3 * j + 1];
        t[3 * gap + 2] = t[3 * j + 2];
        gap = j;
      }
    }
    t[3 * gap] = 0;
    t[3 * gap + 1] = 0;
    t[3 * gap + 2] = 0;
  }

  private void resize(int slots) {
    if (slots > MAX_SLOTS) {
      throw new IllegalStateException("a rank holds more than " + MAX_SLOTS / 2 + " blocks");
    }
    final int[] old = table;
    final int[] t = new int[3 * slots];
    final int m = slots - 1;
    final int sh = 64 - Integer.numberOfTrailingZeros(slots);
    for (int b = 0; b < old.length; b += 3) {
      if (old[b + 2] == 0) continue;
      final long key = key(old, b);
      int s = (int) ((key * PHI) >>> sh);
      while (t[3 * s + 2] != 0) s = (s + 1) & m;
      t[3 * s] = old[b];
      t[3 * s + 1] = old[b + 1];
      t[3 * s + 2] = old[b + 2];
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
    for (int b = 0; b < table.length; b += 3) if (table[b + 2] != 0) out[k++] = key(table, b);
    return Arrays.copyOf(out, k);
  }

  /** {@code key}'s count, 0 when not held (for tests). */
  int count(long key) {
    final int[] t = table;
    final int m = mask;
    for (int s = home(key); ; s = (s + 1) & m) {
      final int b = 3 * s;
      if (t[b + 2] == 0) return 0;
      if (key(t, b) == key) return t[b + 2];
    }
  }
}
