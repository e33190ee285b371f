package io.kvrouter.index;

import it.unimi.dsi.fastutil.longs.LongArrayList;
import org.jspecify.annotations.NullUnmarked;

/**
 * The bound of a bounded {@link PackedPositionalIndex} ({@code maxBlocks}): {@link ClockBound}'s
 * CLOCK on block ids. Writer-only; the index calls it where blocks are made, stored and pruned.
 *
 * <pre>
 * Implementation notes
 *
 * The rules are ClockBound's, unchanged (see there): which pair may go (a worker's leaf, or a
 * detached pair), the order (the clock queue in store order, a used block's second chance, the
 * cascade to the parent of a dropped leaf, the hand ignoring used bits after twice round the
 * queue without a drop), when (makeRoom before a store adds a pair while full, never at the
 * block the chain hangs from; evictToFit after each Stored event), what a drop does (a Removed of
 * that leaf: every name of the pair goes, one holders change) and the test hooks
 * (EvictionListener, storeStep). One difference: the queue is compacted when its entries for
 * freed ids pass a sixteenth of the linked blocks (+64), not a quarter (below), so it can be
 * shorter than ClockBound's, and the hand's patience (twice the queue's length) with it. Skipping a
 * freed id's entry costs no visit, so (no reader marking meanwhile) the two differ only where the hand gives up (it found nothing
 * to drop within twice its patience) while the queue holds between a sixteenth and a quarter of
 * the linked blocks + 64 in freed ids: then it stops at another place in the queue. Otherwise the
 * packed bounded index evicts the pairs the object-based PositionalIndex evicts, event for event
 * (PackedClockBoundModelTest compares the two on seeded events, bounds up to 60 pairs).
 *
 * Layout: the queue is an IntChunkedQueue of block ids (4 bytes an entry); the used bits and the
 * queued bits are PackedBlocks' (one bit each per id). Readers set used bits; all else here is
 * the writer's.
 *
 * Ids, not objects: the queue must never name an id that went back into use, or the hand would
 * take a block for one stored long before. Invariant: an id is in the queue at most once
 * (PackedBlocks' queued bit), and an id the queue names is never in PackedBlocks' free or pending
 * lists: a block pruned while queued is parked and becomes reusable only when its entry leaves
 * the queue (the hand polls it, or a compaction drops it), and then only after the version bump
 * that precedes every reuse. So every id the queue holds names either a linked block (the one it
 * named when queued: a linked id is never freed and reused without leaving the queue first) or a
 * freed id that is not reused yet, which the hand drops as ClockBound drops an unlinked node.
 * Parked ids cost their records until then (the pages keep their high-water mark), as
 * ClockBound's stale entries keep their nodes alive; the compaction bounds them at a sixteenth of
 * the linked blocks + 64 (a quarter left config B at a quarter bound 50.1 bytes per pair, a
 * sixteenth 43.5; a compaction is O(queue) and drops at least 1/17 of it, so O(17) per unlink
 * amortized). The cascade's block
 * id, kept from one eviction to the next, is forgotten when it is not linked before ids go back
 * into use (beforeReuse), and everything is forgotten when the last block goes and the pages are
 * dropped (allFreed).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PackedClockBound {
  private static final int NONE = PackedBlocks.NONE;

  /** Parked ids may be up to 1/2^STALE_SHIFT of the linked blocks (+64) before a compaction. */
  private static final int STALE_SHIFT = 4;

  private final PackedPositionalIndex index;
  private final PackedBlocks blocks;
  private final IndexCounters counters;

  /** The most (worker, block) pairs held. */
  final long maxBlocks;

  private final IntChunkedQueue clock = new IntChunkedQueue(); // block ids in store order
  private int lastCreated = NONE; // the block made last in this store
  private PackedWorker cascadeWorker; // a worker whose leaf the hand just dropped ...
  private int cascadeNode = NONE; // ... and that leaf's parent, to try next
  ClockBound.EvictionListener evictionListener; // tests only
  int storeStep = -1; // tests only: the store's block makeRoom runs for, or -1 (ClockBound)

  PackedClockBound(PackedPositionalIndex index, IndexCounters counters, long maxBlocks) {
    this.index = index;
    this.blocks = index.blocks;
    this.counters = counters;
    this.maxBlocks = maxBlocks;
  }

  /** Entries in the clock queue; for tests (writer-side). */
  int clockSize() {
    return clock.size();
  }

  /** Linked blocks of the index. */
  long linkedNodes() {
    return blocks.size();
  }

  private void enqueue(int id) {
    blocks.queued(id);
    clock.addLast(id);
  }

  private int dequeue() {
    final int id = clock.pollFirst();
    blocks.unqueued(id);
    return id;
  }

  // ------------------------------------------------------------------ told by the index

  /** Block {@code id} was just made and linked. */
  void nodeCreated(int id) {
    lastCreated = id;
    if (clockOverfull()) compactClock();
    enqueue(id);
  }

  /** After a prune: removals alone must not leave the queue naming freed ids. */
  void pruned() {
    if (clockOverfull() || blocks.size() == 0 && !clock.isEmpty()) compactClock();
  }

  /** Freed ids are about to go back into use: a cascade naming one of them is forgotten. */
  void beforeReuse() {
    if (cascadeNode >= 0 && !blocks.isLinked(cascadeNode)) {
      cascadeNode = NONE;
      cascadeWorker = null;
    }
  }

  /** The last block went and the pages are about to be dropped: ids start again from 0. */
  void allFreed() {
    clock.clear();
    lastCreated = NONE;
    cascadeNode = NONE;
    cascadeWorker = null;
  }

  /** A store begins: no block of it was made yet. */
  void storeBegins() {
    lastCreated = NONE;
  }

  /** Whether {@code id} is the block the store made last (already at the queue's end). */
  boolean isNew(int id) {
    return id == lastCreated;
  }

  /** Whether pairs are at the bound: a store adding one must make room first. */
  boolean full() {
    return counters.value(IndexCounters.BLOCKS_INDEXED) >= maxBlocks;
  }

  /** Whether pairs or linked blocks are over the bound. */
  boolean over() {
    return blocks.size() > maxBlocks || counters.value(IndexCounters.BLOCKS_INDEXED) > maxBlocks;
  }

  // ------------------------------------------------------------------ eviction

  /** ClockBound.makeRoom on ids ({@code parent} NONE at the top). */
  boolean makeRoom(PackedWorker ws, int parent, long local, int step) {
    final int existing = index.findChild(parent, local);
    if (existing >= 0 && (index.isHolder(existing, ws.id) || index.isDetachedBy(existing, ws)))
      return true;
    if (parent >= 0) blocks.markUsed(parent);
    storeStep = step;
    final long left = evict(counters.value(IndexCounters.BLOCKS_INDEXED) - maxBlocks + 1, parent);
    storeStep = -1;
    return left <= 0;
  }

  /** {@link #evict} until pairs and linked blocks are both within maxBlocks. */
  void evictToFit() {
    evict(-1, NONE - 1);
  }

  /** ClockBound.evict on ids; {@code keep} is a block id or a value no block has. */
  private long evict(long need, int keep) {
    final boolean toFit = need < 0;
    long visits = 0;
    long patience = 2L * clock.size() + 16;
    while (true) {
      final long indexed = counters.value(IndexCounters.BLOCKS_INDEXED);
      final long linked = blocks.size();
      final long want =
          !toFit ? need : indexed > maxBlocks ? indexed - maxBlocks : linked > maxBlocks ? 1 : 0;
      if (want <= 0) return 0;
      final int up = cascadeNode;
      if (up >= 0) {
        final PackedWorker ws = cascadeWorker;
        cascadeNode = NONE;
        cascadeWorker = null;
        if (up != keep
            && blocks.isLinked(up)
            && !ws.forgotten
            && index.isHolder(up, ws.id)
            && !blocks.isUsed(up)
            && !index.holdsChildOf(ws.id, up)) {
          dropPair(ws, up);
          noteCascade(ws, up);
          index.prune(up);
          if (!toFit) need--;
          continue;
        }
      }
      if (visits > 2 * patience) return want; // only pairs at keep are left to drop
      if (clock.isEmpty()) return want; // nothing left to drop
      final int n = dequeue();
      if (!blocks.isLinked(n)) continue; // pruned since it was queued; now reusable
      if (++visits <= patience && blocks.isUsed(n)) {
        blocks.clearUsed(n);
        enqueue(n);
        continue;
      }
      final long dropped = n == keep ? 0 : dropAt(n, want);
      if (!toFit) need -= dropped;
      if (dropped > 0) {
        visits = 0;
        patience = 2L * clock.size() + 16;
      }
      if (blocks.isLinked(n)) enqueue(n);
    }
  }

  private void noteCascade(PackedWorker ws, int dropped) {
    final int p = blocks.parent(dropped);
    if (p >= 0) {
      cascadeWorker = ws;
      cascadeNode = p;
    }
  }

  /** Drops up to {@code want} pairs at {@code n} that the rule lets go; returns how many. */
  private long dropAt(int n, long want) {
    final int[] h = blocks.holders(n); // copy-on-write: this array does not change under the loop
    final PackedWorker[] byId = index.workers.readerView();
    long dropped = 0;
    for (int i = 0; i < h.length && dropped < want; i++) {
      final int x = h[i];
      if (x < 0) {
        dropPair(byId[~x], n); // detached: scores nothing
        dropped++;
      } else if (!index.holdsChildOf(x, n)) {
        final PackedWorker ws = byId[x];
        dropPair(ws, n);
        noteCascade(ws, n);
        dropped++;
      }
    }
    if (dropped > 0) index.prune(n);
    return dropped;
  }

  /** ClockBound.dropPair: every name {@code ws} has for {@code n} goes; no pruning. */
  private void dropPair(PackedWorker ws, int n) {
    final ClockBound.EvictionListener listener = evictionListener;
    final long[] path = listener == null ? null : pathOf(n);
    final long seq = blocks.seq(n);
    if (ws.get(seq) == n) {
      ws.remove(seq);
      if (listener != null) listener.evicted(ws.worker, seq, path);
    }
    final LongArrayList others = ws.removeOtherNamesOf(n);
    if (others != null && listener != null) {
      for (int i = 0; i < others.size(); i++) listener.evicted(ws.worker, others.getLong(i), path);
    }
    index.evicted(ws, n);
  }

  /** The local hashes from the top down to {@code n} (for the tests' eviction listener). */
  private long[] pathOf(int n) {
    final LongArrayList up = new LongArrayList();
    for (int a = n; a >= 0; a = blocks.parent(a)) up.add(blocks.local(a));
    final long[] out = new long[up.size()];
    for (int i = 0; i < out.length; i++) out[i] = up.getLong(out.length - 1 - i);
    return out;
  }

  /**
   * Whether entries naming freed (parked) ids are more than 1/2^STALE_SHIFT of the linked blocks
   * (+64). ClockBound allows a quarter; here a parked id keeps its 28-byte record's place (the
   * pages keep their high-water mark), so a sixteenth (class notes).
   */
  private boolean clockOverfull() {
    final long linked = blocks.size();
    return clock.size() > linked + (linked >> STALE_SHIFT) + 64;
  }

  /** Drops the entries naming freed ids (now reusable), keeping the order of the others. */
  private void compactClock() {
    final int n = clock.size();
    for (int i = 0; i < n; i++) {
      final int id = dequeue();
      if (blocks.isLinked(id)) enqueue(id);
    }
  }
}
