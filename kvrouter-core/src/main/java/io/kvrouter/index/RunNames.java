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
 * One long[] of slots, an ordered linear-probing table. A slot is 0 (empty), a tombstone
 * fp << 37 | 1 (node id 0), or fp << 37 | id << 11 | offset: a 27-bit fingerprint of the hash,
 * the block's node id (RunSeqs, 1 .. 2^26 - 1, so a live slot's id bits are never 0) and its
 * offset in the run (runs are at most CompressedTreeIndex.MAX_RUN = 2,048 blocks). The home slot
 * is a function of the fingerprint alone (fastrange of it over cap), so a rebuild re-homes every
 * slot without loading a node or computing a hash. 8 bytes a slot, between 5/8 and 7/8 of cap
 * used (grown by a quarter), so about 10 bytes a name.
 *
 * Ordered: probes never wrap. The array has cap slots for homes plus an overflow tail
 * (overflow(cap)), whose last slot stays empty, and the slots are in ascending order of
 * fingerprint (tombstones keep theirs), equal fingerprints in any order. Since homes ascend with
 * the fingerprint, a lookup can stop at the first slot whose fingerprint is above the query's:
 * no name with that fingerprint lies past it. So a miss (every new name, every block a Removed
 * lists that the worker does not hold) scans about as far as a hit (about 1/2 (1 + 1/(1 - a))
 * slots at load a, 4.5 at 7/8) instead of to the end of the cluster (1/2 (1 + 1/(1 - a)^2), 32.5
 * at 7/8). An insert goes where the order puts it: into an empty slot or a tombstone there, or it
 * moves the names from there up to the next empty slot or tombstone one slot up (in place: the
 * cluster's tail, a few slots). A rebuild reads the old table in order and puts each name at
 * max(its home, the slot after the previous one): no probe, no comparison.
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
 * Slots stay put except in a rebuild and in an insert (which moves the names above it by one
 * slot): a slot found by find is valid until the next put or rebuild. Batches: reserve(n) before
 * a run of n new names grows the table once, and keeps n slots free past both the homes and the
 * last filled slot (a put fills a home or the slot after a filled one), so putAt does not rebuild
 * in between;
 * removeAtKeepingCapacity never rebuilds or moves a slot, so slots found
 * before a batch of removals stay valid through it, and shrinkIfSparse applies the 3/8 rule once
 * at its end.
 *
 * A split or merge moves blocks to another node: the index calls repoint for every moved block of
 * every holder (in place: the fingerprint, so the order, does not change). Writer-only: readers
 * never touch it.
 * </pre>
 */
@NullUnmarked // nodeAt is null for an empty slot (as RunSeqs.node for a free id)
final class RunNames {
  private static final int MIN_CAPACITY = 16;
  private static final int OFF_BITS = 11;
  private static final long OFF_MASK = (1L << OFF_BITS) - 1;
  private static final int ID_BITS = 26;
  private static final long ID_MASK = (1L << ID_BITS) - 1;
  private static final long ID_BITS_MASK = ID_MASK << OFF_BITS;
  private static final int FP_SHIFT = OFF_BITS + ID_BITS; // 37: the fingerprint's 27 bits

  private final RunSeqs seqs;
  private int cap = MIN_CAPACITY; // homes are in [0, cap)
  private long[] slots = new long[MIN_CAPACITY + overflow(MIN_CAPACITY)];
  private int live;
  private int used; // live + tombstones
  private int end; // no slot at or past it is filled (an upper bound: removals leave it)
  private long touchSum; // touch's loads

  RunNames(RunSeqs seqs) {
    this.seqs = seqs;
  }

  /**
   * Slots past the homes of a table of {@code capacity} (class notes): the tail of the last
   * cluster, and the empty slot that ends every probe.
   */
  private static int overflow(int capacity) {
    // the last cluster's tail past the homes is short: at 7/8 full, 4 slots on average and 21 at
    // most in 40 random tables of 36,000 homes; a tail that outgrows it grows the table (place)
    return 8 + Math.min(capacity >>> 6, 56);
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

  private static boolean isLive(long m) {
    return (m & ID_BITS_MASK) != 0;
  }

  private static long tombstone(long m) {
    return (m >>> FP_SHIFT) << FP_SHIFT | 1;
  }

  /**
   * The slot naming {@code seq}, or {@code -1 - f} where {@code f} is the slot an insert would take
   * (in order: an empty slot, a tombstone, or a live slot whose names putAt moves up).
   */
  int find(long seq) {
    final long[] t = slots;
    final long fp = fp(seq);
    int free = -1; // a tombstone of the same fingerprint: an insert may take it
    for (int i = home(fp, cap); ; i++) {
      final long m = t[i];
      if (m == 0) return -1 - (free >= 0 ? free : i);
      final long f = m >>> FP_SHIFT;
      if (f > fp) return -1 - (free >= 0 ? free : i);
      if (f == fp) {
        if (isLive(m)) {
          final RunNode n = seqs.node((int) ((m >>> OFF_BITS) & ID_MASK));
          final int off = (int) (m & OFF_MASK);
          if (n != null && off < n.plain().length() && seqs.seqAt(n, off) == seq) return i;
        } else if (free < 0) {
          free = i;
        }
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
    final int c = cap;
    long sum = 0;
    for (int j = from; j < to; j++) sum += t[home(fp(seqs[j]), c)];
    touchSum += sum;
  }

  /** What touch loaded, summed (kept only so that its loads are not dropped). */
  long touchSum() {
    return touchSum;
  }

  RunNode nodeAt(int slot) {
    final long m = slots[slot];
    return isLive(m) ? seqs.node((int) ((m >>> OFF_BITS) & ID_MASK)) : null;
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
    if (found >= 0) throw new IllegalStateException("name taken");
    final long c = code(fp(seq), node, off);
    final long[] t = slots;
    final int p = -1 - found;
    final long m = t[p];
    if (m != 0 && !isLive(m)) {
      t[p] = c; // a tombstone, in order
      live++;
      return;
    }
    if ((used + 1) * 8L > cap * 7L || !placeAt(t, p, c)) {
      rebuild(grownCapacity());
      place(c);
    }
  }

  /**
   * Puts {@code c} at slot {@code p} of {@code t} (its place in the order), moving the names from
   * {@code p} up to the next empty slot or tombstone one slot up; false, with nothing changed, when
   * that would fill the array's last slot.
   */
  private boolean placeAt(long[] t, int p, long c) {
    int e = p;
    while (t[e] != 0 && isLive(t[e])) e++;
    if (t[e] == 0) {
      if (e >= t.length - 1) return false;
      used++;
      if (e >= end) end = e + 1;
    }
    if (e > p) System.arraycopy(t, p, t, p + 1, e - p);
    t[p] = c;
    live++;
    return true;
  }

  /** Puts {@code c} where the order puts it, growing the table until it fits (no tombstones). */
  private void place(long c) {
    while (true) {
      final long[] t = slots;
      final long f = c >>> FP_SHIFT;
      int i = home(f, cap);
      while (t[i] != 0 && t[i] >>> FP_SHIFT <= f) i++;
      if (placeAt(t, i, c)) return;
      rebuild(cap + (cap >>> 2));
    }
  }

  /** The capacity a full table is rebuilt to: a quarter more when live names fill 5/8 of it. */
  private int grownCapacity() {
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
    live--;
    if (g[i + 1] == 0) {
      // no probe passes this slot (it would have to pass the empty one after it): empty it, and
      // the tombstones just before it
      g[i] = 0;
      used--;
      for (int j = i - 1; j >= 0 && g[j] != 0 && !isLive(g[j]); j--) {
        g[j] = 0;
        used--;
      }
    } else {
      g[i] = tombstone(g[i]);
    }
  }

  /**
   * Rebuilds the table to 5/8 full when it is under 3/8 full (the policy of one removal at a time,
   * applied at once): one rebuild for a batch of removals. Between 3/8 and 7/8 nothing moves, so a
   * worker's table is rebuilt only after about a quarter of its capacity in puts or removals.
   */
  void shrinkIfSparse() {
    if (live * 8L >= cap * 3L || cap <= MIN_CAPACITY) return;
    rebuild(Math.max(MIN_CAPACITY, live * 8 / 5 + 1));
  }

  /**
   * Makes room for {@code n} more names at once (a run of new blocks), so that the puts that follow
   * do not rebuild: one rebuild to the size the puts would have grown the table to, instead of one
   * every time it passed 7/8 full.
   */
  void reserve(int n) {
    // a put fills a home slot or the slot after a filled one, so n puts fill nothing at or past
    // max(end, cap) + n: they fit when that is below the last slot
    final boolean room = (used + (long) n) * 8 <= cap * 7L;
    if (room && Math.max(end, cap) + (long) n < slots.length - 1) return;
    int c = cap; // room in the homes: only the tail is short (after a rebuild of no batch's)
    if (!room) {
      final long need = (live + (long) n) * 8 / 7 + 1;
      c = grownCapacity();
      while (c < need) c += Math.max(1, c >>> 2);
    }
    rebuild(c, n + 1);
  }

  /** Moves the name {@code seq} of block (from, fromOff), if it names it, to (to, toOff). */
  void repoint(long seq, RunNode from, int fromOff, RunNode to, int toOff) {
    final int i = find(seq);
    if (i >= 0 && nodeAt(i) == from && offAt(i) == fromOff) {
      slots[i] = code(slots[i] >>> FP_SHIFT, to, toOff);
    }
  }

  /**
   * Moves every live slot into a table of {@code capacity} homes (a larger one if its overflow tail
   * would not hold the last names): in the old order, each at max(its home, the slot after the one
   * before), which is where it goes in an ordered table (class notes).
   */
  private void rebuild(int capacity) {
    rebuild(capacity, 0);
  }

  /**
   * Like {@link #rebuild(int)}, with {@code extra} more slots past the overflow tail, which the
   * names leave empty: room for a batch of puts (reserve).
   */
  private void rebuild(int capacity, int extra) {
    final long[] old = slots;
    int c = capacity;
    while (true) {
      final long[] t = new long[c + overflow(c) + extra];
      final int last = c + overflow(c) - 1; // it and every slot past it stay empty
      int next = 0;
      int n = 0;
      boolean fits = true;
      for (final long m : old) {
        if (!isLive(m)) continue;
        final int p = Math.max(next, home(m >>> FP_SHIFT, c));
        if (p >= last) {
          fits = false;
          break;
        }
        t[p] = m;
        next = p + 1;
        n++;
      }
      if (fits) {
        slots = t;
        cap = c;
        live = n;
        used = n;
        end = next;
        return;
      }
      c += Math.max(1, c >>> 2);
    }
  }

  int size() {
    return live;
  }

  void clear() {
    cap = MIN_CAPACITY;
    slots = new long[MIN_CAPACITY + overflow(MIN_CAPACITY)];
    live = 0;
    used = 0;
    end = 0;
  }

  /** The fingerprint a name of {@code seq} carries (tests: names that share one, or homes). */
  static long fingerprint(long seq) {
    return fp(seq);
  }

  /**
   * The first broken invariant of the layout (class notes), or null (tests): the last slot empty,
   * every filled slot at or past its home with every slot from its home to it filled, the
   * fingerprints in ascending order, and the counts (live, used, end) right.
   */
  String invariantViolation() {
    final long[] t = slots;
    if (t[t.length - 1] != 0) return "the last slot is filled";
    int liveSeen = 0;
    int usedSeen = 0;
    long prevFp = -1;
    int lastFilled = -1;
    for (int i = 0; i < t.length; i++) {
      final long m = t[i];
      if (m == 0) continue;
      usedSeen++;
      if (isLive(m)) liveSeen++;
      final long f = m >>> FP_SHIFT;
      if (f < prevFp) return "slot " + i + " is out of fingerprint order";
      prevFp = f;
      final int h = home(f, cap);
      if (i < h) return "slot " + i + " is before its home " + h;
      for (int j = h; j < i; j++) {
        if (t[j] == 0) return "slot " + i + " is past an empty slot " + j + " from its home " + h;
      }
      lastFilled = i;
    }
    if (liveSeen != live) return liveSeen + " live slots, counted " + live;
    if (usedSeen != used) return usedSeen + " used slots, counted " + used;
    if (lastFilled >= end) return "slot " + lastFilled + " is filled, end " + end;
    return null;
  }

  /** The number of home slots (the fastrange's range; the array is longer by its tail). */
  int homes() {
    return cap;
  }

  /** No slot at or past it holds a name: the end of an iteration with nodeAt. */
  int scanEnd() {
    return end;
  }

  /** The number of slots, for iterating with nodeAt (null: no name there). */
  int capacity() {
    return slots.length;
  }
}
