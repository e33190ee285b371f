package io.kvrouter.index;

import it.unimi.dsi.fastutil.ints.IntArrayList;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * An open-addressing hash table of block ids ({@link PackedBlocks}) keyed by the blocks' (sequence
 * hash, local hash), written by one writer and read by any number of lock-free readers: {@link
 * PositionalTable} with int ids in place of entry references.
 *
 * <pre>
 * Implementation notes
 *
 * As PositionalTable (see there for the reasons): linear probing from a fastrange home slot of
 * the key's seq, at most 3/4 full counting tombstones, slots in segments of 2^15 ints (128 KB: no
 * humongous array), a 4-bit tag per slot in tags[] (EMPTY, TAG_TOMBSTONE, else 4 bits of the
 * key's hash), rebuilt half full when it would pass 3/4 and when under 1/8 full. The key is the
 * block's, in PackedBlocks: a probe whose tag matches loads the id and compares the block's key
 * there. A slot is 4 bytes and 4 bits, as before.
 *
 * Publication: the writer stores the slot's id with a release store and then its tag word with a
 * release store; readers load the tag word with acquire and then the slot with acquire, and
 * compare the block's key. A slot whose tag is TAG_TOMBSTONE holds TOMBSTONE (-1), which no key
 * compare reaches. A replaced table is never written again; a reader still on it sees ids of
 * blocks that were in it, which stay valid until a version bump lets them be reused
 * (PackedPositionalIndex).
 * </pre>
 */
final class PackedTable {
  /** Ids a rebuild reads ahead (their keys loaded) before it inserts them. */
  private static final int REBUILD_CHUNK = 4096;

  private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(int[].class);
  private static final VarHandle TAG_WORD = MethodHandles.arrayElementVarHandle(long[].class);
  private static final int EMPTY = 0;
  private static final int TAG_TOMBSTONE = 15;
  private static final int TOMBSTONE = -1;
  static final int MIN_CAPACITY = 64;
  private static final int SEGMENT_SHIFT = 15;
  private static final int SEGMENT = 1 << SEGMENT_SHIFT;
  private static final int SEGMENT_MASK = SEGMENT - 1;
  private static final long PHI = 0x9E3779B97F4A7C15L;

  private final PackedBlocks blocks;
  private final int[][] slots;
  private final int capacity;
  private final long[] tags;
  private int live;
  private int used; // live + tombstones

  PackedTable(PackedBlocks blocks) {
    this(blocks, MIN_CAPACITY);
  }

  private PackedTable(PackedBlocks blocks, int capacity) {
    this.blocks = blocks;
    this.capacity = capacity;
    final int n = (capacity + SEGMENT_MASK) >>> SEGMENT_SHIFT;
    slots = new int[n][];
    for (int k = 0; k < n; k++) {
      slots[k] = new int[Math.min(SEGMENT, capacity - (k << SEGMENT_SHIFT))];
    }
    tags = new long[(capacity + 15) >>> 4];
  }

  private static int at(int[][] s, int i) {
    return s[i >>> SEGMENT_SHIFT][i & SEGMENT_MASK];
  }

  private static int acquireAt(int[][] s, int i) {
    return (int) SLOT.getAcquire(s[i >>> SEGMENT_SHIFT], i & SEGMENT_MASK);
  }

  private static void releaseAt(int[][] s, int i, int id) {
    SLOT.setRelease(s[i >>> SEGMENT_SHIFT], i & SEGMENT_MASK, id);
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

  private void setTag(int i, int tag) {
    final long[] g = tags;
    final int shift = (i & 15) << 2;
    final int w = i >>> 4;
    TAG_WORD.setRelease(g, w, (g[w] & ~(0xFL << shift)) | ((long) tag << shift));
  }

  private static int capacityFor(int n) {
    return Math.max(MIN_CAPACITY, 2 * n);
  }

  /** The id of the block with this key, or -1. Safe for lock-free readers. */
  int get(long seq, long local) {
    final int[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    final int tag = tag(seq);
    final PackedBlocks b = blocks;
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return -1;
      if (x == tag) {
        final int id = acquireAt(s, i);
        if (id >= 0 && b.hasKey(id, seq, local)) return id;
      }
    }
  }

  /**
   * The holders of the block with this key, or an empty array when there is none: get and the
   * block's holders in one record read. Safe for lock-free readers.
   */
  int[] holders(long seq, long local) {
    final int[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    final int tag = tag(seq);
    final PackedBlocks b = blocks;
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return SortedIds.NONE;
      if (x == tag) {
        final int id = acquireAt(s, i);
        if (id >= 0) {
          final int[] h = b.holdersIfKey(id, seq, local);
          if (h != null) return h;
        }
      }
    }
  }

  /**
   * The first block keyed {@code seq} (any local hash) that {@code names}'s worker names by that
   * key, or -1 (PackedWorker). Writer-only.
   */
  int ownNamed(long seq, PackedWorker names) {
    final int[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    final int tag = tag(seq);
    final PackedBlocks b = blocks;
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return -1;
      if (x == tag) {
        final int id = at(s, i);
        if (id >= 0 && b.seq(id) == seq && names.namesByKey(id)) return id;
      }
    }
  }

  /** Appends every block {@code names}'s worker names by its key to {@code out}. Writer-only. */
  void addOwnNamed(PackedWorker names, IntArrayList out) {
    final int[][] s = slots;
    final long[] g = tags;
    for (int w = 0; w < g.length; w++) {
      long word = g[w];
      while (word != 0) {
        final int shift = Long.numberOfTrailingZeros(word) & ~3;
        final int tag = (int) (word >>> shift) & 0xF;
        word &= ~(0xFL << shift);
        if (tag == TAG_TOMBSTONE) continue;
        final int id = at(s, (w << 4) + (shift >>> 2));
        if (names.namesByKey(id)) out.add(id);
      }
    }
  }

  /**
   * Adds block {@code id}, whose key is not in the table; returns this table or, when full, a
   * rebuilt copy that holds it. Writer-only.
   */
  PackedTable put(int id) {
    if ((used + 1) * 4L > capacity * 3L) {
      PackedTable rebuilt = rebuilt(capacityFor(live + 1));
      rebuilt.insert(blocks.seq(id), id);
      return rebuilt;
    }
    insert(blocks.seq(id), id);
    return this;
  }

  private PackedTable rebuilt(int newCapacity) {
    final PackedTable t = new PackedTable(blocks, newCapacity);
    // in chunks, first each chunk's ids and keys: independent loads the CPU overlaps (the records
    // are mostly not in cache); then its inserts, which touch no record. Chunks of REBUILD_CHUNK
    // keep the scratch small (no humongous array however large the table)
    final int[][] old = slots;
    final long[] g = tags;
    final int[] ids = new int[Math.max(1, Math.min(live, REBUILD_CHUNK))];
    final long[] keys = new long[ids.length];
    int n = 0;
    for (int w = 0; w < g.length; w++) {
      long word = g[w];
      while (word != 0) {
        final int shift = Long.numberOfTrailingZeros(word) & ~3;
        final int tag = (int) (word >>> shift) & 0xF;
        word &= ~(0xFL << shift);
        if (tag == TAG_TOMBSTONE) continue;
        final int id = at(old, (w << 4) + (shift >>> 2));
        ids[n] = id;
        keys[n++] = blocks.seq(id);
        if (n == ids.length) {
          for (int k = 0; k < n; k++) t.insert(keys[k], ids[k]);
          n = 0;
        }
      }
    }
    for (int k = 0; k < n; k++) t.insert(keys[k], ids[k]);
    return t;
  }

  private void insert(long seq, int id) {
    final int[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    int i = home(seq, cap);
    while (true) {
      final int x = tagAt(g, i);
      if (x == EMPTY) {
        used++;
        break;
      }
      if (x == TAG_TOMBSTONE) break;
      i = i + 1 < cap ? i + 1 : 0;
    }
    releaseAt(s, i, id);
    setTag(i, tag(seq));
    live++;
  }

  /** Removes block {@code id}; false when it is not in the table. Writer-only. */
  boolean remove(int id) {
    final int[][] s = slots;
    final long[] g = tags;
    final int cap = capacity;
    final long seq = blocks.seq(id);
    final int tag = tag(seq);
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return false;
      if (x == tag && at(s, i) == id) {
        releaseAt(s, i, TOMBSTONE);
        setTag(i, TAG_TOMBSTONE);
        live--;
        return true;
      }
    }
  }

  /** This table or, when under 1/8 full, a rebuilt smaller copy for the owner to publish. */
  PackedTable shrunk() {
    if (capacity <= MIN_CAPACITY || live * 8L >= capacity) return this;
    return rebuilt(capacityFor(live));
  }

  int size() {
    return live;
  }

  int capacity() {
    return capacity;
  }
}
