package io.kvrouter.index;

import io.kvrouter.hash.SequenceHasher;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.NullUnmarked;

/**
 * The positional index: one hash table of every cached block keyed by the §2 sequence hash of its
 * path and its local hash, searched by jumping {@code jumpSize} positions ahead and bisecting back
 * only where workers drop out. No factory makes it any more: {@link KvIndexes#positional(int)} and
 * {@link KvIndexes#positional(int, long)} are {@link PackedPositionalIndex}, the same search,
 * writer and CLOCK bound on block records with int ids instead of an entry object per block. It
 * stays as the reference the packed index is tested against (PackedClockBoundModelTest compares
 * their evictions; PositionalReadCpu their readers) and for tests of BlockIndex's writer.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: a PositionalTable (see there) of PositionalEntry slots, one per distinct block path,
 * keyed by the router's own §2 sequence hash of the path together with the local hash (the
 * position is not stored: the path's hash implies it, PositionalEntry); per worker rank a
 * WorkerBlocks whose name table is a PositionalNames: a name that is the entry's own key (every
 * name an engine that follows §2 gives) is not stored but found in the table and the entry's
 * holders; only other names are kept. Workers are dense int ids (WorkerTable). On the writer side
 * the entries also form a block tree (parent link, and a children field: one child inline, a
 * PositionalChildren set for more), used only to detach and reconnect below a hole, to prune and
 * to dump.
 *
 * Memory (config B of IndexWorkload, 508,160 (worker, block) pairs on 500,480 entries; see
 * docs/BENCHMARKS.md, "Issue 37: positional memory, session 16"): a 40-byte entry per distinct
 * block (39.4 bytes per pair) and the table's 4.5-byte slots (reference and tag) at 1/2 to 3/4
 * full (6.8), 46.3 to 47.0 in all; no per-pair name (it was 7.5 in NameTables); holder arrays
 * are shared along chains and cost almost nothing. A bounded index's entries are 40 bytes too
 * (the used bit is in the table). The object per block (its 12-byte header, the parent and children
 * references) is what keeps it above 40 bytes per pair; that section says what a layout of int
 * ids in primitive arrays would need.
 *
 * Sequence hashes (DESIGN.md §4 rule 8): a Stored block's entry is found by the router's hash
 * next(parent entry's hash, local), never by the engine's hash, which only names the block for
 * Removed and for later parents. For an engine that follows §2 the two are equal; for one that
 * does not, the block still lands on the entry of its true path, so the index scores it exactly
 * like the block tree (better than rule 8's floor of "position 0 only", and never more). A query
 * computes its own §2 hashes as it goes and looks up only (hash, local) pairs: a probe that lands
 * on a matching slot has therefore matched the whole path up to it, so no skipped block can
 * differ (short of a 64-bit collision of the §2 hash that also ends in the same local hash).
 *
 * Search: the workers holding position 0 are alive. From a position cur that every alive worker
 * holds, probe the next position of the form k*jumpSize - 1 (capped at the query's end), hashing
 * forward from cur's hash. Alive workers in the probe's holders hold everything up to it (holders
 * are prefix-closed, below); the others dropped out in (cur, probe] and are placed by bisection:
 * probe the middle, split the group by membership, recurse into each half on the call stack. Each
 * bisection step hashes forward from its left end, so a window costs O(jumpSize) hashes and
 * O(log jumpSize) lookups per distinct drop position. earlyExit stops once one worker is alive.
 * The alive ids stay sorted, so a probe where nobody dropped out costs one array compare.
 * The path allocates only the result arrays: no boxing, iterators or capturing lambdas.
 *
 * Bound: a bounded index keeps each entry's used bit in the table, one bit per slot
 * (PositionalTable), not in the entry, so its entries are 40 bytes too.
 *
 * Writers: every mutation (apply, clearWorker, removeWorker, dump) runs under one
 * ReentrantLock, so writers of any workers may call concurrently and take turns.
 * Readers: findMatches takes no lock; it loads the table with acquire, each slot with acquire,
 * and each entry's holders with acquire.
 *
 * Holes (DESIGN.md §4 rules 1 and 4) and pruning are BlockIndex's, the reader's retry
 * SteppedIndex's: the ids >= 0
 * in holders are exactly the workers that hold the whole path, and each single holders change moves
 * a worker's score on any query path by at most one block. A reader that saw a worker in holders at
 * position p (score >= p+1 at that instant) and out of holders at p+1 (score <= p+1 at that
 * instant) therefore reports a score the worker had at some instant of the call, even when the two
 * reads straddle writes: no over-count, no torn state. Pruning an entry also takes it out of the
 * table.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PositionalIndex extends BlockIndex<PositionalEntry> {
  private static final VarHandle TABLE;

  static {
    try {
      TABLE =
          MethodHandles.lookup()
              .findVarHandle(PositionalIndex.class, "table", PositionalTable.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final int jumpSize;

  @SuppressWarnings("unused") // through TABLE
  private PositionalTable table;

  PositionalIndex(int jumpSize) {
    this(jumpSize, null);
  }

  /**
   * For tests: {@code afterHolderChange} runs on the writer's thread, under the lock, after every
   * single change of an entry's holders, so a test can read each intermediate state a lock-free
   * reader could see.
   */
  PositionalIndex(int jumpSize, Runnable afterHolderChange) {
    this(jumpSize, afterHolderChange, Long.MAX_VALUE);
  }

  /** An index that holds at most {@code maxBlocks} (worker, block) pairs (BlockIndex notes). */
  PositionalIndex(int jumpSize, Runnable afterHolderChange, long maxBlocks) {
    super(null, new ReentrantLock(), afterHolderChange, maxBlocks);
    if (jumpSize < 1) {
      throw new IllegalArgumentException("jumpSize must be >= 1, got " + jumpSize);
    }
    this.jumpSize = jumpSize;
    // a bounded index keeps its entries' used bits in the table (PositionalTable)
    TABLE.setRelease(this, new PositionalTable(bounded));
  }

  int jumpSize() {
    return jumpSize;
  }

  // ------------------------------------------------------------------ reads

  private PositionalEntry lookup(long seq, long local) {
    return ((PositionalTable) TABLE.getAcquire(this)).get(seq, local);
  }

  @Override
  OverlapScores walk(long[] localHashes, boolean earlyExit) {
    final int len = localHashes.length;
    if (len == 0) return Scores.EMPTY;
    final long first = localHashes[0];
    final PositionalEntry e0 = lookup(first, first);
    if (e0 == null) return Scores.EMPTY;
    final int[] holders0 = e0.holders();
    // a first block has no ancestor to miss, so no detached (negative) ids: from is 0
    final int from = IndexNode.connectedFrom(holders0);
    final int m = holders0.length - from;
    if (m == 0) return Scores.EMPTY;
    final boolean mark = bounded;
    if (mark) markUsedByReader(e0);
    // alive ids in ids[0..alive), sorted (partition keeps the kept ones in order); dropped ids
    // after them with their final scores. Later holders may hold detached ids (negative): no
    // alive id ever matches one.
    final int[] ids = Arrays.copyOfRange(holders0, from, holders0.length);
    final int[] scores = new int[m];
    final int jump = jumpSize;
    final int last = len - 1;
    int alive = m;
    int cur = 0; // every alive worker was seen holding 0..cur
    long curSeq = first;
    if (!(earlyExit && alive == 1)) {
      while (cur < last) {
        final int step = jump - (cur + 1) % jump;
        final int probe = step > last - cur ? last : cur + step;
        long seq = curSeq;
        for (int p = cur + 1; p <= probe; p++) seq = SequenceHasher.next(seq, localHashes[p]);
        final PositionalEntry e = lookup(seq, localHashes[probe]);
        final int[] h = e == null ? SortedIds.NONE : e.holders();
        // no one dropped out: the usual case, one vectorised compare instead of a search per id
        final int kept =
            h.length == alive && Arrays.equals(ids, 0, alive, h, 0, alive)
                ? alive
                : partition(ids, 0, alive, h);
        if (mark && kept > 0) markUsedByReader(e);
        if (kept < alive) resolve(localHashes, ids, scores, kept, alive, cur, curSeq, probe);
        alive = kept;
        cur = probe;
        curSeq = seq;
        if (alive == 0 || (earlyExit && alive == 1)) break;
      }
    }
    for (int i = 0; i < alive; i++) scores[i] = cur + 1;
    return result(ids, scores, m);
  }

  /**
   * Moves the ids of {@code ids[from..to)} that are in {@code holders} (sorted) to the front of
   * that range; returns the end of that front part.
   */
  private static int partition(int[] ids, int from, int to, int[] holders) {
    int k = from;
    if (holders.length == 0) return k;
    for (int i = from; i < to; i++) {
      final int id = ids[i];
      if (Arrays.binarySearch(holders, id) >= 0) {
        ids[i] = ids[k];
        ids[k] = id;
        k++;
      }
    }
    return k;
  }

  /**
   * Scores the workers {@code ids[from..to)}, each seen holding position {@code lo} (whose sequence
   * hash is {@code loSeq}) and seen not holding position {@code hi}: bisects {@code (lo, hi]} until
   * each one's last held position is found.
   */
  private void resolve(
      long[] localHashes, int[] ids, int[] scores, int from, int to, int lo, long loSeq, int hi) {
    if (hi - lo == 1) {
      for (int i = from; i < to; i++) scores[i] = hi;
      return;
    }
    final int mid = (lo + hi) >>> 1;
    long seq = loSeq;
    for (int p = lo + 1; p <= mid; p++) seq = SequenceHasher.next(seq, localHashes[p]);
    final PositionalEntry e = lookup(seq, localHashes[mid]);
    final int[] h = e == null ? SortedIds.NONE : e.holders();
    final int k = partition(ids, from, to, h);
    if (bounded && k > from) markUsedByReader(e);
    if (k < to) resolve(localHashes, ids, scores, k, to, lo, loSeq, mid);
    if (k > from) resolve(localHashes, ids, scores, from, k, mid, seq, hi);
  }

  /** Sets a matched entry's used bit, which the table keeps (bounded only). */
  private void markUsedByReader(PositionalEntry e) {
    ((PositionalTable) TABLE.getAcquire(this)).markUsed(e);
  }

  // ------------------------------------------------------------------ the node structure

  @Override
  void markUsed(PositionalEntry e) {
    table().markUsed(e);
  }

  @Override
  boolean isUsed(PositionalEntry e) {
    return table().isUsed(e);
  }

  @Override
  void clearUsed(PositionalEntry e) {
    table().clearUsed(e);
  }

  /** The table as the writer sees it (plain load). Writer-side. */
  PositionalTable table() {
    return (PositionalTable) TABLE.get(this);
  }

  /**
   * The entry of {@code local} under {@code parent}, found by the router's own §2 hash of the path
   * (never by the engine's {@code seq}, which only names the block); linked if new.
   */
  @Override
  PositionalEntry childFor(PositionalEntry parent, long local, long seq) {
    final long key = parent == null ? local : SequenceHasher.next(parent.seq, local);
    PositionalEntry e = table().get(key, local);
    if (e != null) return e;
    e = new PositionalEntry(key, local, parent);
    if (parent != null) parent.linkChild(e);
    PositionalTable t = table();
    PositionalTable grown = t.put(e);
    if (grown != t) TABLE.setRelease(this, grown);
    nodeCreated(e);
    return e;
  }

  @Override
  PositionalEntry findChild(PositionalEntry parent, long local) {
    final long key = parent == null ? local : SequenceHasher.next(parent.seq, local);
    return table().get(key, local);
  }

  /** Names that are a block's own key are found in the table, not kept per worker. */
  @Override
  NameTable<PositionalEntry> newNames(WorkerBlocks<PositionalEntry> ws, boolean findsOtherNames) {
    return new PositionalNames(this, ws, findsOtherNames);
  }

  @Override
  int countNodes() {
    return table().size();
  }

  @Override
  boolean hasChildren(PositionalEntry e) {
    return e.hasChildren();
  }

  @Override
  void addChildren(PositionalEntry e, List<PositionalEntry> out) {
    e.addChildrenTo(out);
  }

  @Override
  boolean isLinked(PositionalEntry e) {
    return e.isLinked();
  }

  @Override
  void unlink(PositionalEntry e) {
    PositionalTable t = table();
    if (!t.remove(e)) throw new IllegalStateException("linked entry not in the table");
    PositionalTable small = t.shrunk();
    if (small != t) TABLE.setRelease(this, small);
    if (e.parent != null) e.parent.unlinkChild(e);
    e.markUnlinked();
  }

  @Override
  public String toString() {
    return "PositionalIndex(jumpSize=" + jumpSize + ")";
  }
}
