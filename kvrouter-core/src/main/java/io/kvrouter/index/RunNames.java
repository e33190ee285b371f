package io.kvrouter.index;

/**
 * The canonical names one worker gave its blocks in a {@link CompressedTreeIndex}: each sequence
 * hash that is the block's own (the hash it was first stored under, kept in its run's {@code
 * seqs}), mapped to the block as (node, offset in the run), with no key stored.
 *
 * <pre>
 * Implementation notes
 *
 * nodes[] and meta[] are parallel, open addressing with linear probing from the fastrange home of
 * a spread of the hash. meta is 0 for an empty slot, 1 for a tombstone, else tag << 11 | offset:
 * the offset of the block in its run (runs are at most CompressedTreeIndex.MAX_RUN = 2,048 blocks)
 * and a 4-bit tag (1..15) of the hash apart from its home slot. A slot's key is the hash at its
 * block, nodes[i].plain().seqs[offset], so a probe loads a node only on a matching tag and the
 * key costs nothing: 6 bytes a slot, mostly between 1/2 and 3/4 full (NameTable's policy).
 * A hash names at most one block, so no two slots have the same key.
 *
 * A removal leaves a tombstone only where a probe may pass: when the next slot is empty, no
 * probe crosses the freed slot, so it becomes empty, and so do the tombstones just before it
 * (no key is loaded). A worker whose blocks churn (a trace's per-block Removed then Stored) so
 * keeps fewer tombstones, and misses and same-size rebuilds are rarer. (Backward-shift deletion,
 * no tombstones at all, was tried: it loads the key of every entry it passes, a chain of cache
 * misses per removal, and made the trace's writer about 7 % slower.)
 *
 * Batches: reserve(n) before a run of n new names grows the table once (so putAt does not rebuild
 * in between); removeAtKeepingCapacity never rebuilds, so slots found before a batch of removals
 * stay valid through it, and shrinkIfSparse applies the 1/8 rule once at its end.
 *
 * A split or merge moves blocks to another node: the index calls repoint for every moved block of
 * every holder (in place: a slot never moves except in a rebuild). Writer-only: readers never
 * touch it.
 * </pre>
 */
final class RunNames {
  private static final int MIN_CAPACITY = 16;
  private static final long PHI = 0x9E3779B97F4A7C15L;
  private static final int TOMBSTONE = 1;
  private static final int OFF_MASK = 0x7FF;
  private static final int REBUILD_CHUNK = 256;

  private RunNode[] nodes = new RunNode[MIN_CAPACITY];
  private short[] meta = new short[MIN_CAPACITY];
  private int live;
  private int used; // live + tombstones

  private static int home(long seq, int capacity) {
    return (int) ((((seq * PHI) >>> 32) * capacity) >>> 32);
  }

  private static int tag(long seq) {
    return 1 + (int) (((seq * PHI) >>> 8) & 0xF) % 15;
  }

  private static short code(long seq, int off) {
    return (short) (tag(seq) << 11 | off);
  }

  /**
   * The slot naming {@code seq}, or {@code -1 - f} where {@code f} is the slot an insert would
   * take.
   */
  int find(long seq) {
    final short[] g = meta;
    final RunNode[] t = nodes;
    final int cap = t.length;
    final int tag = tag(seq);
    int free = -1;
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int m = g[i];
      if (m == 0) return -1 - (free >= 0 ? free : i);
      if (m == TOMBSTONE) {
        if (free < 0) free = i;
      } else if ((m >>> 11) == tag) {
        final long[] s = t[i].plain().seqs;
        final int off = m & OFF_MASK;
        if (off < s.length && s[off] == seq) return i;
      }
    }
  }

  RunNode nodeAt(int slot) {
    return nodes[slot];
  }

  int offAt(int slot) {
    return meta[slot] & OFF_MASK;
  }

  /** Names block ({@code node}, {@code off}), whose own hash is {@code seq}, by it; a new name. */
  void put(long seq, RunNode node, int off) {
    putAt(find(seq), seq, node, off);
  }

  /**
   * Like {@link #put}, given what {@link #find}{@code (seq)} returned, with no change to the table
   * since.
   */
  void putAt(int found, long seq, RunNode node, int off) {
    final int i = found;
    if (i >= 0) throw new IllegalStateException("name taken");
    final int f = -1 - i;
    if (meta[f] == TOMBSTONE) {
      nodes[f] = node;
      meta[f] = code(seq, off);
      live++;
    } else if ((used + 1) * 4 <= nodes.length * 3) {
      nodes[f] = node;
      meta[f] = code(seq, off);
      live++;
      used++;
    } else {
      rebuild(live * 2 > nodes.length ? nodes.length + (nodes.length >>> 1) : nodes.length);
      insert(seq, node, off);
    }
  }

  void removeAt(int i) {
    removeAtKeepingCapacity(i);
    shrinkIfSparse();
  }

  /**
   * Like {@link #removeAt} but never rebuilds, so every other slot stays where it is: a removal of
   * many names (one Removed event) takes them out by the slots it found and then calls {@link
   * #shrinkIfSparse} once.
   */
  void removeAtKeepingCapacity(int i) {
    final short[] g = meta;
    final int cap = g.length;
    nodes[i] = null;
    live--;
    if (g[i + 1 < cap ? i + 1 : 0] == 0) {
      // no probe passes this slot (it would have to pass the empty one after it): empty it, and
      // the tombstones just before it
      g[i] = 0;
      used--;
      for (int j = i > 0 ? i - 1 : cap - 1; g[j] == TOMBSTONE; j = j > 0 ? j - 1 : cap - 1) {
        g[j] = 0;
        used--;
      }
    } else {
      g[i] = TOMBSTONE;
    }
  }

  /**
   * Halves the table while it is under 1/8 full (the policy of one removal at a time, applied at
   * once): one rebuild for a batch of removals.
   */
  void shrinkIfSparse() {
    int cap = nodes.length;
    while (live * 8 < cap && cap > MIN_CAPACITY) cap = Math.max(MIN_CAPACITY, cap >>> 1);
    if (cap != nodes.length) rebuild(cap);
  }

  /**
   * Makes room for {@code n} more names at once (a run of new blocks), so that the puts that follow
   * never rebuild: one rebuild to the size the puts would have grown the table to, instead of one
   * every time it passed 3/4 full.
   */
  void reserve(int n) {
    if ((used + (long) n) * 4 <= nodes.length * 3L) return;
    final long need = (live + (long) n) * 4 / 3 + 1;
    int cap = live * 2 > nodes.length ? nodes.length + (nodes.length >>> 1) : nodes.length;
    while (cap < need) cap += cap >>> 1;
    rebuild(cap);
  }

  /** Moves the name {@code seq} of block (from, fromOff), if it names it, to (to, toOff). */
  void repoint(long seq, RunNode from, int fromOff, RunNode to, int toOff) {
    final int i = find(seq);
    if (i >= 0 && nodes[i] == from && offAt(i) == fromOff) {
      nodes[i] = to;
      meta[i] = code(seq, toOff);
    }
  }

  private void insert(long seq, RunNode node, int off) {
    final int cap = nodes.length;
    int i = home(seq, cap);
    while (meta[i] != 0) i = i + 1 < cap ? i + 1 : 0;
    nodes[i] = node;
    meta[i] = code(seq, off);
    live++;
    used++;
  }

  private void rebuild(int capacity) {
    final RunNode[] oldNodes = nodes;
    final short[] oldMeta = meta;
    nodes = new RunNode[capacity];
    meta = new short[capacity];
    live = 0;
    used = 0;
    // in chunks: first load a chunk's keys (independent loads the CPU overlaps; the nodes are
    // mostly not in cache), then insert them without touching the nodes again. A fixed chunk
    // rather than one array of every key, so a rebuild allocates only the new table.
    final int chunk = Math.max(1, Math.min(REBUILD_CHUNK, live));
    final long[] keys = new long[chunk];
    final int[] from = new int[chunk];
    int i = 0;
    while (i < oldNodes.length) {
      int k = 0;
      for (; i < oldNodes.length && k < chunk; i++) {
        final RunNode n = oldNodes[i];
        if (n != null) {
          from[k] = i;
          keys[k++] = n.plain().seqs[oldMeta[i] & OFF_MASK];
        }
      }
      for (int j = 0; j < k; j++) {
        final int o = from[j];
        insert(keys[j], oldNodes[o], oldMeta[o] & OFF_MASK);
      }
    }
  }

  int size() {
    return live;
  }

  void clear() {
    nodes = new RunNode[MIN_CAPACITY];
    meta = new short[MIN_CAPACITY];
    live = 0;
    used = 0;
  }

  /** The number of slots, for iterating with nodeAt (null: no name there). */
  int capacity() {
    return nodes.length;
  }
}
