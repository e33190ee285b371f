package io.kvrouter.index;

import org.jspecify.annotations.NullUnmarked;

/**
 * The canonical names one worker gave its blocks in a {@link CompressedTreeIndex}: each sequence
 * hash that is the block's own (the hash it was first stored under, RunSeqs), mapped to the block
 * as (node id, offset in the run), with a fingerprint of the hash and no key stored.
 *
 * <pre>
 * Implementation notes
 *
 * One long[] of slots, open addressing with linear probing. A slot is 0 (empty), 1 (a tombstone)
 * or fp << 37 | id << 11 | offset: a 27-bit fingerprint of the hash, the block's node id (RunSeqs,
 * 1 .. 2^26 - 1, so a live slot is never 0 or 1) and its offset in the run (runs are at most
 * CompressedTreeIndex.MAX_RUN = 2,048 blocks). The home slot is a function of the fingerprint
 * alone (fastrange of it), so a rebuild re-homes every slot without loading a node or computing a
 * hash. 8 bytes a slot, between 5/8 and 7/8 full (grown by a quarter), so about 10 bytes a name.
 *
 * A fingerprint match proves nothing: the probe then takes the block's canonical hash
 * (RunSeqs.seqAt: its stored hash where it departs from §2, else §2 along the run) and compares
 * all 64 bits, so a name never resolves to the wrong block. Slots whose home is the query's share
 * the fingerprint's top bits, so among them a false match has a chance of about capacity / 2^27
 * each, and slots with another home never match: a lookup checks a wrong block about once in
 * 2^27 / capacity lookups.
 * A hash names at most one block, so no two slots have the same key.
 *
 * A removal leaves a tombstone only where a probe may pass: when the next slot is empty, no
 * probe crosses the freed slot, so it becomes empty, and so do the tombstones just before it.
 * A worker whose blocks churn (a trace's per-block Removed then Stored) so keeps fewer
 * tombstones, and misses and same-size rebuilds are rarer.
 *
 * Batches: reserve(n) before a run of n new names grows the table once (so putAt does not rebuild
 * in between); removeAtKeepingCapacity never rebuilds, so slots found before a batch of removals
 * stay valid through it, and shrinkIfSparse applies the 3/8 rule once at its end.
 *
 * A split or merge moves blocks to another node: the index calls repoint for every moved block of
 * every holder (in place: a slot never moves except in a rebuild). Writer-only: readers never
 * touch it.
 * </pre>
 */
@NullUnmarked // nodeAt is null for an empty slot (as RunSeqs.node for a free id)
final class RunNames {
  private static final int MIN_CAPACITY = 16;
  private static final long TOMBSTONE = 1;
  private static final int OFF_BITS = 11;
  private static final long OFF_MASK = (1L << OFF_BITS) - 1;
  private static final int ID_BITS = 26;
  private static final long ID_MASK = (1L << ID_BITS) - 1;
  private static final int FP_SHIFT = OFF_BITS + ID_BITS; // 37: the fingerprint's 27 bits

  private final RunSeqs seqs;
  private long[] slots = new long[MIN_CAPACITY];
  private int live;
  private int used; // live + tombstones
  private long touchSum; // touch's loads

  RunNames(RunSeqs seqs) {
    this.seqs = seqs;
  }

  /** 27 bits of a strong mix of the hash (any 64-bit name, not only a §2 one). */
  private static long fp(long seq) {
    long h = seq * 0x9E3779B97F4A7C15L;
    h ^= h >>> 32;
    h *= 0xD6E8FEB86659FD93L;
    h ^= h >>> 32;
    return h >>> FP_SHIFT;
  }

  private static int home(long fp, int capacity) {
    return (int) ((fp * capacity) >>> (64 - FP_SHIFT));
  }

  private static long code(long fp, RunNode node, int off) {
    return fp << FP_SHIFT | (long) node.id << OFF_BITS | off;
  }

  /**
   * The slot naming {@code seq}, or {@code -1 - f} where {@code f} is the slot an insert would
   * take.
   */
  int find(long seq) {
    final long[] t = slots;
    final int cap = t.length;
    final long fp = fp(seq);
    int free = -1;
    for (int i = home(fp, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final long m = t[i];
      if (m == 0) return -1 - (free >= 0 ? free : i);
      if (m == TOMBSTONE) {
        if (free < 0) free = i;
      } else if (m >>> FP_SHIFT == fp) {
        final RunNode n = seqs.node((int) ((m >>> OFF_BITS) & ID_MASK));
        final int off = (int) (m & OFF_MASK);
        if (n != null && off < n.plain().length() && seqs.seqAt(n, off) == seq) return i;
      }
    }
  }

  /**
   * Loads the home slot of each of {@code seqs[from..to)}: independent loads the CPU overlaps,
   * where the finds that follow would wait for each miss in turn (each find's verification loads a
   * node before the next find starts). A batch of names (a store's run, a Removed event) so pays
   * about one cache miss for the batch instead of one per name. The loaded words' sum goes to a
   * field (touchSum) so that the loads are not dropped.
   */
  void touch(long[] seqs, int from, int to) {
    final long[] t = slots;
    final int cap = t.length;
    long sum = 0;
    for (int j = from; j < to; j++) sum += t[home(fp(seqs[j]), cap)];
    touchSum += sum;
  }

  /** What touch loaded, summed (kept only so that its loads are not dropped). */
  long touchSum() {
    return touchSum;
  }

  RunNode nodeAt(int slot) {
    final long m = slots[slot];
    return m == 0 || m == TOMBSTONE ? null : seqs.node((int) ((m >>> OFF_BITS) & ID_MASK));
  }

  int offAt(int slot) {
    return (int) (slots[slot] & OFF_MASK);
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
    if (slots[f] == TOMBSTONE) {
      slots[f] = code(fp(seq), node, off);
      live++;
    } else if ((used + 1) * 8L <= slots.length * 7L) {
      slots[f] = code(fp(seq), node, off);
      live++;
      used++;
    } else {
      rebuild(grownCapacity());
      insert(code(fp(seq), node, off));
    }
  }

  /** The capacity a full table is rebuilt to: a quarter more when live names fill 5/8 of it. */
  private int grownCapacity() {
    final int cap = slots.length;
    return live * 8L > cap * 5L ? cap + (cap >>> 2) : cap;
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
    final long[] g = slots;
    final int cap = g.length;
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
   * Rebuilds the table to 5/8 full when it is under 3/8 full (the policy of one removal at a time,
   * applied at once): one rebuild for a batch of removals. Between 3/8 and 7/8 nothing moves, so a
   * worker's table is rebuilt only after about a quarter of its capacity in puts or removals.
   */
  void shrinkIfSparse() {
    final int cap = slots.length;
    if (live * 8L >= cap * 3L || cap <= MIN_CAPACITY) return;
    rebuild(Math.max(MIN_CAPACITY, live * 8 / 5 + 1));
  }

  /**
   * Makes room for {@code n} more names at once (a run of new blocks), so that the puts that follow
   * never rebuild: one rebuild to the size the puts would have grown the table to, instead of one
   * every time it passed 7/8 full.
   */
  void reserve(int n) {
    if ((used + (long) n) * 8 <= slots.length * 7L) return;
    final long need = (live + (long) n) * 8 / 7 + 1;
    int cap = grownCapacity();
    while (cap < need) cap += Math.max(1, cap >>> 2);
    rebuild(cap);
  }

  /** Moves the name {@code seq} of block (from, fromOff), if it names it, to (to, toOff). */
  void repoint(long seq, RunNode from, int fromOff, RunNode to, int toOff) {
    final int i = find(seq);
    if (i >= 0 && nodeAt(i) == from && offAt(i) == fromOff) {
      slots[i] = code(slots[i] >>> FP_SHIFT, to, toOff);
    }
  }

  private void insert(long code) {
    final long[] t = slots;
    final int cap = t.length;
    int i = home(code >>> FP_SHIFT, cap);
    while (t[i] != 0) i = i + 1 < cap ? i + 1 : 0;
    t[i] = code;
    live++;
    used++;
  }

  private void rebuild(int capacity) {
    final long[] old = slots;
    slots = new long[capacity];
    live = 0;
    used = 0;
    // the home is the fingerprint's: no node is loaded, no hash computed
    for (final long m : old) {
      if (m != 0 && m != TOMBSTONE) insert(m);
    }
  }

  int size() {
    return live;
  }

  void clear() {
    slots = new long[MIN_CAPACITY];
    live = 0;
    used = 0;
  }

  /** The number of slots, for iterating with nodeAt (null: no name there). */
  int capacity() {
    return slots.length;
  }
}
