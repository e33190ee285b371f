package io.kvrouter.index;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;

/**
 * The positions one KV cache group of one worker rank holds, as a set of 64-bit §2 sequence hashes
 * (docs/routing.md, "Hybrid models"): readers ask {@link #contains} without a lock while one writer
 * at a time changes it.
 *
 * <pre>
 * Implementation notes
 *
 * Open addressing with linear probing in one long[] whose length is a power of two (table, a
 * volatile reference). A slot is EMPTY (0), TOMBSTONE (1) or a key; the keys 0 and 1 themselves
 * live in two volatile flags instead. Writers (add, remove, clear, synchronized on this) change
 * slots in place with release stores: add fills an EMPTY or TOMBSTONE slot, remove turns a key
 * into TOMBSTONE; a slot never goes back to EMPTY in place, so a reader probing from a key's home
 * slot meets that key before any EMPTY slot for as long as the key is present, and stops at the
 * first EMPTY slot otherwise. Keys plus tombstones stay at most half the table (at least half the
 * slots are EMPTY, so a probe ends); past that the writer rehashes into a new table (twice as
 * large when the keys alone fill a quarter) and publishes it with one volatile write, after which
 * it never writes the old one: a reader still probing the old table sees the set as it was when
 * the rehash started, a state between its call's start and end. clear() publishes a new empty
 * table the same way.
 *
 * Readers allocate nothing and take no lock; each contains() is atomic (one state of the set), two
 * calls may see two states. size is the writer's count, read racily for statistics.
 * </pre>
 */
final class PositionSet {
  private static final long EMPTY = 0L;
  private static final long TOMBSTONE = 1L;
  private static final int MIN_CAPACITY = 16;
  private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(long[].class);

  private volatile long[] table = new long[MIN_CAPACITY];
  private volatile boolean hasEmptyKey;
  private volatile boolean hasTombstoneKey;
  private int size; // keys in the table and the flags; writers only (read racily by size())

  @GuardedBy("this")
  private int tombstones; // writers only

  /** Whether {@code key} is in the set: no lock, no allocation. */
  boolean contains(long key) {
    if (key == EMPTY) return hasEmptyKey;
    if (key == TOMBSTONE) return hasTombstoneKey;
    final long[] t = table;
    final int mask = t.length - 1;
    for (int i = home(key, mask); ; i = (i + 1) & mask) {
      long v = (long) SLOT.getAcquire(t, i);
      if (v == key) return true;
      if (v == EMPTY) return false;
    }
  }

  /** Adds {@code key}; returns whether it was absent. */
  synchronized boolean add(long key) {
    if (key == EMPTY || key == TOMBSTONE) {
      boolean had = key == EMPTY ? hasEmptyKey : hasTombstoneKey;
      if (!had) {
        if (key == EMPTY) hasEmptyKey = true;
        else hasTombstoneKey = true;
        size++;
      }
      return !had;
    }
    long[] t = table;
    int mask = t.length - 1;
    int free = -1;
    int i = home(key, mask);
    for (; ; i = (i + 1) & mask) {
      long v = t[i];
      if (v == key) return false;
      if (v == EMPTY) break;
      if (v == TOMBSTONE && free < 0) free = i;
    }
    if (free >= 0) {
      tombstones--;
      SLOT.setRelease(t, free, key);
    } else {
      SLOT.setRelease(t, i, key);
    }
    size++;
    if (2 * (size + tombstones) > t.length) rehash();
    return true;
  }

  /** Removes {@code key}; returns whether it was present. */
  synchronized boolean remove(long key) {
    if (key == EMPTY || key == TOMBSTONE) {
      boolean had = key == EMPTY ? hasEmptyKey : hasTombstoneKey;
      if (had) {
        if (key == EMPTY) hasEmptyKey = false;
        else hasTombstoneKey = false;
        size--;
      }
      return had;
    }
    long[] t = table;
    int mask = t.length - 1;
    for (int i = home(key, mask); ; i = (i + 1) & mask) {
      long v = t[i];
      if (v == key) {
        SLOT.setRelease(t, i, TOMBSTONE);
        size--;
        tombstones++;
        return true;
      }
      if (v == EMPTY) return false;
    }
  }

  /** Empties the set. */
  synchronized void clear() {
    table = new long[MIN_CAPACITY];
    hasEmptyKey = false;
    hasTombstoneKey = false;
    size = 0;
    tombstones = 0;
  }

  /** How many keys it holds (racy outside the writer). */
  int size() {
    return size;
  }

  /** Its keys, in no particular order. */
  synchronized long[] toArray() {
    long[] out = new long[size];
    int n = 0;
    if (hasEmptyKey) out[n++] = EMPTY;
    if (hasTombstoneKey) out[n++] = TOMBSTONE;
    for (long v : table) {
      if (v != EMPTY && v != TOMBSTONE) out[n++] = v;
    }
    return n == out.length ? out : Arrays.copyOf(out, n);
  }

  /** Rebuilds the table without tombstones; writers only. */
  @GuardedBy("this")
  private void rehash() {
    long[] old = table;
    int keys = size - (hasEmptyKey ? 1 : 0) - (hasTombstoneKey ? 1 : 0);
    int capacity = old.length;
    while (4 * keys > capacity) capacity <<= 1;
    long[] t = new long[capacity];
    int mask = capacity - 1;
    for (long v : old) {
      if (v == EMPTY || v == TOMBSTONE) continue;
      int i = home(v, mask);
      while (t[i] != EMPTY) i = (i + 1) & mask;
      t[i] = v;
    }
    tombstones = 0;
    table = t; // publishes the filled table
  }

  private static int home(long key, int mask) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32)) & mask;
  }
}
