package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import org.jspecify.annotations.NullUnmarked;

/**
 * The bound of a bounded index ({@code maxBlocks}): past that many (worker, block) pairs its writer
 * drops pairs, least recently used first, approximated by CLOCK. Writer-only; {@link BlockIndex}
 * calls it where blocks are made, stored and pruned. {@link PackedClockBound} is the same rule on
 * the block ids of the packed positional index (the positional kinds').
 *
 * <pre>
 * Implementation notes
 *
 *  - Order: every node enters the clock queue (writer-only, a ChunkedQueue: no humongous
 *    array) when it is made, so the queue is in store order. A node leaves it when the hand finds it unlinked; when stale
 *    entries make the queue more than 1.25 times the linked nodes (+64), checked when a node is
 *    made and after every prune, it is compacted, so the queue stays within 1.25 * nodes + 64
 *    references and keeps at most a quarter of the nodes alive after they were unlinked
 *    (amortized O(1) per node made or unlinked: a compaction drops at least a fifth of the
 *    queue). With 2 * nodes the stale nodes, kept alive with their holders, more than doubled a
 *    bounded tree's bytes per pair under eviction (IndexFootprint, config B, a quarter bound).
 *  - Use: readers set a node's used bit (IndexNode.markUsed: an opaque store, only when it was
 *    clear; the positional index keeps the bit in its table, BlockIndex.markUsed) on each
 *    worker's deepest matched node of a query: the tree walk marks the node where workers drop
 *    out and the node where it ends, the positional walk the entries it probes
 *    (each worker's deepest matched entry is one). That is the node the hand could take from
 *    that worker on this path (the rule below); nodes every matched worker holds below are not
 *    leaves of theirs, and marking all of them cost the tree walk 11-16 % (BENCHMARKS.md).
 *    A store marks the blocks it touches that already existed (re-stores, a second worker's copy,
 *    the parent); blocks it makes are at the queue's end already (isNew).
 *  - Hand: takes the queue's head; an unlinked node is dropped, a used one gets its bit cleared
 *    and goes to the end (a second chance); otherwise every pair at the node that may go is
 *    dropped and the node goes to the end if still linked. After visiting twice the queue
 *    without finding a pair to drop the hand ignores used bits (readers marking faster than it
 *    clears must not stall a writer).
 *  - Rule: a worker's connected pair may go only when the worker holds no child of the block (a
 *    leaf of its chain), so dropping it is exactly a Removed of a leaf: it makes no hole, every
 *    other score stays exact, and the worker's score on a path through the block drops to the
 *    block's depth minus one, which is its exact score without that block (never an over-count).
 *    A detached pair scores nothing and may go at any time. After dropping a leaf the hand goes
 *    on to the worker's parent block while more must go and that block is unused and now a leaf
 *    (the rest of a cold chain goes before newer chains, as LRU would).
 *  - When: before a store adds a pair while blocksIndexed is maxBlocks (makeRoom), never at the
 *    block the chain being stored hangs from; when only the chain itself could go, the rest of
 *    that store skips the search (so blocksIndexed passes maxBlocks only inside a store of a
 *    chain longer than what else can go). Then after each Stored event while pairs or linked
 *    nodes exceed maxBlocks (evictToFit: nodes no one holds can stay linked above detached pairs
 *    after holes; dropping those pairs prunes them). So after every event both are within
 *    maxBlocks. A dropped block's names leave the worker's NameTable, so a later Removed of it
 *    counts as missing and a later store under it as parent-missing (an under-count).
 *  - evictedBlocks counts dropped pairs.
 *
 * Tests may set an EvictionListener, told of every (worker, sequence hash) name an eviction drops.
 * An eviction inside a store comes before that store's block storeStep is stored (its earlier
 * blocks are stored; a later block it drops detached can be stored again by the same store), so
 * a listener's model reads storeStep to apply the store up to there first; -1 outside makeRoom
 * (evictToFit runs after the whole event).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class ClockBound<N extends IndexNode<N>> {
  /** Told of every name an eviction drops (tests: the reference model applies them). */
  interface EvictionListener {
    /** {@code worker} no longer names the block at {@code path} (local hashes) {@code seqHash}. */
    void evicted(Worker worker, long seqHash, long[] path);
  }

  private final BlockIndex<N> index;
  private final IndexCounters counters;

  /** The most (worker, block) pairs held. */
  final long maxBlocks;

  private ChunkedQueue<N> clock = new ChunkedQueue<>(); // nodes in store order
  long linkedNodes; // linked nodes of the index, kept by nodeCreated and nodeUnlinked
  private N lastCreated; // the node made last
  private WorkerBlocks<N> cascadeWorker; // a worker whose leaf the hand just dropped ...
  private N cascadeNode; // ... and that leaf's parent, to try next
  EvictionListener evictionListener; // tests only
  int storeStep = -1; // tests only: the store's block makeRoom runs for, or -1 (class notes)

  ClockBound(BlockIndex<N> index, IndexCounters counters, long maxBlocks) {
    this.index = index;
    this.counters = counters;
    this.maxBlocks = maxBlocks;
  }

  /** References in the clock queue; for tests (writer-side). */
  int clockSize() {
    return clock.size();
  }

  // ------------------------------------------------------------------ told by the index

  /** {@code node} was just made and linked. */
  void nodeCreated(N node) {
    lastCreated = node;
    linkedNodes++;
    if (clockOverfull()) compactClock();
    clock.addLast(node);
  }

  /** A node was unlinked. */
  void nodeUnlinked() {
    linkedNodes--;
  }

  /** After a prune: removals alone must not leave the queue holding unlinked nodes. */
  void pruned() {
    if (clockOverfull() || linkedNodes == 0 && !clock.isEmpty()) compactClock();
  }

  /** A store begins: no block of it was made yet. */
  void storeBegins() {
    lastCreated = null;
  }

  /** Whether {@code node} is the block the store made last (already at the queue's end). */
  boolean isNew(N node) {
    return node == lastCreated;
  }

  /** Whether pairs are at the bound: a store adding one must make room first. */
  boolean full() {
    return counters.value(IndexCounters.BLOCKS_INDEXED) >= maxBlocks;
  }

  /** Whether pairs or linked nodes are over the bound. */
  boolean over() {
    return linkedNodes > maxBlocks || counters.value(IndexCounters.BLOCKS_INDEXED) > maxBlocks;
  }

  // ------------------------------------------------------------------ eviction

  /**
   * Before the store of {@code ws} puts the block {@code local} under {@code parent} while the
   * index is full: when that adds a pair (the worker does not hold the block yet), drops one pair
   * first, never at {@code parent} (the chain being stored hangs from it). Returns false when
   * nothing could go: then only this chain's blocks are left to drop, and the rest of the store
   * skips the search (a chain longer than the bound would otherwise scan the queue once per block);
   * the end of the event drops what is over. {@code step} is the block's position in the store
   * (storeStep, for tests).
   */
  boolean makeRoom(WorkerBlocks<N> ws, N parent, long local, int step) {
    final N existing = index.findChild(parent, local);
    if (existing != null && (existing.isHolder(ws.id) || BlockIndex.isDetached(existing, ws)))
      return true;
    if (parent != index.root) index.markUsed(parent);
    storeStep = step;
    final long left = evict(counters.value(IndexCounters.BLOCKS_INDEXED) - maxBlocks + 1, parent);
    storeStep = -1;
    return left <= 0;
  }

  /** {@link #evict(long, IndexNode)} until pairs and linked nodes are both within maxBlocks. */
  void evictToFit() {
    evict(-1, null);
  }

  /**
   * Drops {@code need} pairs by the CLOCK rule (class notes), none at {@code keep}; with {@code
   * need < 0}, drops pairs until pairs and linked nodes are both within maxBlocks. Gives up when
   * only pairs at {@code keep} could go. Returns how many of {@code need} are left (0: all went).
   */
  private long evict(long need, N keep) {
    final boolean toFit = need < 0;
    long visits = 0;
    long patience = 2L * clock.size() + 16;
    while (true) {
      final long indexed = counters.value(IndexCounters.BLOCKS_INDEXED);
      final long want =
          !toFit
              ? need
              : indexed > maxBlocks ? indexed - maxBlocks : linkedNodes > maxBlocks ? 1 : 0;
      if (want <= 0) return 0;
      final N up = cascadeNode;
      if (up != null) {
        final WorkerBlocks<N> ws = cascadeWorker;
        cascadeNode = null;
        cascadeWorker = null;
        if (up != keep
            && index.isLinked(up)
            && !ws.forgotten
            && up.isHolder(ws.id)
            && !index.isUsed(up)
            && !index.holdsChildOf(ws.id, up)) {
          dropPair(ws, up);
          noteCascade(ws, up);
          index.prune(up);
          if (!toFit) need--;
          continue;
        }
      }
      if (visits > 2 * patience) return want; // only pairs at keep are left to drop
      final N n = clock.pollFirst();
      if (n == null) return want; // nothing left to drop
      if (!index.isLinked(n)) continue; // pruned since it was queued
      if (++visits <= patience && index.isUsed(n)) {
        index.clearUsed(n);
        clock.addLast(n);
        continue;
      }
      final long dropped = n == keep ? 0 : dropAt(n, want);
      if (!toFit) need -= dropped;
      if (dropped > 0) {
        visits = 0;
        patience = 2L * clock.size() + 16;
      }
      if (index.isLinked(n)) clock.addLast(n);
    }
  }

  private void noteCascade(WorkerBlocks<N> ws, N dropped) {
    final N p = dropped.parent;
    if (p != index.root && p != null) {
      cascadeWorker = ws;
      cascadeNode = p;
    }
  }

  /** Drops up to {@code want} pairs at {@code n} that the rule lets go; returns how many. */
  private long dropAt(N n, long want) {
    final int[] h = n.holders(); // copy-on-write: this array does not change under the loop
    long dropped = 0;
    for (int i = 0; i < h.length && dropped < want; i++) {
      final int x = h[i];
      if (x < 0) {
        dropPair(index.workers.byId(~x), n); // detached: scores nothing
        dropped++;
      } else if (!index.holdsChildOf(x, n)) {
        final WorkerBlocks<N> ws = index.workers.byId(x);
        dropPair(ws, n);
        noteCascade(ws, n);
        dropped++;
      }
    }
    if (dropped > 0) index.prune(n);
    return dropped;
  }

  /**
   * Drops every name {@code ws} has for {@code n} and so the pair, which is detached or a connected
   * leaf: one holders change, as a Removed of a leaf; no pruning.
   */
  private void dropPair(WorkerBlocks<N> ws, N n) {
    final EvictionListener listener = evictionListener;
    final long[] path = listener == null ? null : pathOf(n);
    if (ws.blocks.get(n.seq) == n) {
      ws.blocks.remove(n.seq);
      if (listener != null) listener.evicted(ws.worker, n.seq, path);
    }
    LongArrayList others = ws.blocks.removeOtherNamesOf(n);
    if (others != null && listener != null) {
      for (int i = 0; i < others.size(); i++) listener.evicted(ws.worker, others.getLong(i), path);
    }
    if (ws.aliases != null) ws.aliases.removeInt(n);
    ws.blocks.released(n);
    ws.heldBlocks--;
    counters.add(IndexCounters.BLOCKS_INDEXED, -1);
    if (n.isHolder(ws.id)) {
      n.removeHolder(ws.id);
    } else {
      n.removeDetached(ws.id);
      ws.detachedCount--;
    }
    index.holdersChanged();
    counters.inc(IndexCounters.EVICTED_BLOCKS);
  }

  /** The local hashes from the top down to {@code n} (for the tests' eviction listener). */
  private long[] pathOf(N n) {
    LongArrayList up = new LongArrayList();
    for (N a = n; a != index.root && a != null; a = a.parent) up.add(a.local);
    long[] out = new long[up.size()];
    for (int i = 0; i < out.length; i++) out[i] = up.getLong(out.length - 1 - i);
    return out;
  }

  /**
   * Whether unlinked nodes are more than a fifth of the clock queue (+64): they are garbage but for
   * the queue, with their holders and child tables, so they must not pile up.
   */
  private boolean clockOverfull() {
    return clock.size() > linkedNodes + (linkedNodes >> 2) + 64;
  }

  /** Rebuilds the clock queue without unlinked nodes, keeping the order. */
  private void compactClock() {
    ChunkedQueue<N> kept = new ChunkedQueue<>();
    for (N n : clock) {
      if (index.isLinked(n)) kept.addLast(n);
    }
    clock = kept;
  }
}
