package io.kvrouter.index;

import java.util.ArrayDeque;
import org.jspecify.annotations.NullUnmarked;

/**
 * The bound of a bounded compressed tree ({@code maxBlocks}): past that many (worker, block) pairs
 * its writer drops pairs, least recently used first, approximated by a CLOCK over runs.
 * Writer-only; {@link CompressedTreeIndex} tells it of every node made and every node that leaves
 * the tree, and calls {@link #evictToFit()} at the end of every event.
 *
 * <pre>
 * Implementation notes
 *
 *  - Order: a node enters the clock queue (writer-only ArrayDeque of RunNodes) when it is made:
 *    a new run of a store, or the tail a split moves out of a run (it takes the run's used bit,
 *    and goes to the queue's end: a deque cannot put it beside its head, so a split tail gets
 *    one round more than its head at most). A node merged into its parent, or pruned, is dead:
 *    its entry is stale, the hand drops it when it comes to it, and the merged run keeps the
 *    used bit of either part. When stale entries make the queue more than 1.25 times the linked
 *    nodes (+64), checked when a node is made and after each settle, the queue is compacted
 *    (ClockBound's policy: at most a quarter of the nodes kept alive by the queue after they
 *    left the tree, amortized O(1) per node made or dropped).
 *  - Use: readers set a node's used bit (RunNode.markUsed) on each worker's deepest matched node
 *    of a query: the node where workers drop out (or the one before, for a worker that holds
 *    none of the node's run) and the node where the walk ends. A store marks the runs it passes
 *    through or appends to that existed before the event, and the run its chain hangs from.
 *  - Hand: takes the queue's head; a dead node is dropped, a used one gets its bit cleared and
 *    goes to the end (a second chance); otherwise every holder of the node that may lose blocks
 *    there loses its tail blocks of the run, up to what must still go, and the node goes to the
 *    end if still in the tree. After visiting twice the queue without dropping a pair the hand
 *    ignores used bits (readers marking faster than it clears must not stall the writer). A run
 *    the event itself made (a store's new blocks) counts as used on this event's visits, so the
 *    store's own blocks go only when nothing else may (a chain longer than the bound): the
 *    block trees get the same by making room before a store adds a pair.
 *  - Rule: a worker may lose blocks of a run only at the tail of its cut there (its last
 *    blocks), and, when it holds the whole run connected, only if it holds no child of the run
 *    (the run's last block is then a leaf of its chain). So dropping is exactly a Removed of
 *    leaves, deepest first: it makes no hole, every other score stays exact, and the worker's
 *    score on a path through the run drops to the new cut, its exact score without those blocks.
 *    A detached entry (a hole above) scores nothing; its tail may go at any time.
 *  - How much one visit drops: for each eligible holder in turn, its whole cut in the run, or
 *    what is still over the bound if that is less (then from the tail). Why that approximates
 *    LRU: a query that matches any of a worker's blocks of a run it holds nothing below ends
 *    that worker's match in the run, so it marks the run; an unused run on the hand's visit
 *    therefore means none of those blocks was matched (or stored again) since the hand last
 *    passed, which is what a block-level CLOCK would find for each of them, and the tail goes
 *    first because a block is never used more recently than the blocks before it on its path
 *    (every use is of a prefix). A run is marked as a whole, so within the approximation the
 *    blocks of one run count as used together.
 *  - Cascade: when a worker lost all of its cut in a run, the hand goes on to its parent run
 *    next while more must go and that run is unused (and now a leaf run of the worker's): the
 *    rest of a cold chain goes before newer chains, as LRU would.
 *  - When: at the end of every event (after it settled), while pairs or linked nodes exceed
 *    maxBlocks or the runs' blocks (held or not) exceed twice maxBlocks. Unheld blocks are of two
 *    kinds: the tail of a childless run that no one holds any more, which settle trims once it is
 *    half the run (so without holes the runs' blocks are at most twice the pairs), and runs no
 *    one holds above detached pairs after holes, which dropping those pairs prunes. So after
 *    every event pairs and nodes are within maxBlocks and the runs' blocks within twice that;
 *    inside a store they may pass it by that store's new blocks. Each visit that dropped pairs
 *    is settled at once (the emptied nodes pruned, runs merged where no split is needed any
 *    more, unheld tails trimmed).
 *    A dropped block's names leave the worker's names, so a later Removed of it counts as
 *    missing and a later store under it as parent-missing (an under-count).
 *  - evictedBlocks counts dropped pairs.
 *
 * Tests may set an EvictionListener (ClockBound's), told of every name an eviction drops.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class RunBound {
  private final CompressedTreeIndex index;
  private final IndexCounters counters;

  /** The most (worker, block) pairs held. */
  final long maxBlocks;

  private ArrayDeque<RunNode> clock = new ArrayDeque<>(); // nodes in the order they were made
  long linkedNodes; // nodes in the tree (the root not counted)
  private RunWorker cascadeWorker; // a worker that just lost all its cut in a run ...
  private RunNode cascadeNode; // ... and that run's parent, to try next
  ClockBound.EvictionListener evictionListener; // tests only

  RunBound(CompressedTreeIndex index, IndexCounters counters, long maxBlocks) {
    this.index = index;
    this.counters = counters;
    this.maxBlocks = maxBlocks;
  }

  /** References in the clock queue; for tests (writer-side). */
  int clockSize() {
    return clock.size();
  }

  /** {@code node} was just made and linked. */
  void nodeCreated(RunNode node) {
    linkedNodes++;
    if (clockOverfull()) compactClock();
    clock.addLast(node);
  }

  /** A node left the tree (pruned or merged away). */
  void nodeDied() {
    linkedNodes--;
  }

  /** After a settle: nodes that left must not pile up in the queue. */
  void settled() {
    if (clockOverfull() || linkedNodes == 0 && !clock.isEmpty()) compactClock();
  }

  /** Whether pairs, linked nodes or the runs' blocks are over the bound. */
  boolean over() {
    return want() > 0;
  }

  /** How many pairs must go at least (1 while only nodes or the runs' blocks are over). */
  private long want() {
    final long indexed = counters.value(IndexCounters.BLOCKS_INDEXED);
    if (indexed > maxBlocks) return indexed - maxBlocks;
    return linkedNodes > maxBlocks || index.runBlocks > 2 * maxBlocks ? 1 : 0;
  }

  /** Drops pairs by the CLOCK rule (class notes) until pairs and linked nodes fit maxBlocks. */
  void evictToFit() {
    long visits = 0;
    long patience = 2L * clock.size() + 16;
    while (true) {
      final long want = want();
      if (want <= 0) return;
      final RunNode up = cascadeNode;
      if (up != null) {
        final RunWorker ws = cascadeWorker;
        cascadeNode = null;
        cascadeWorker = null;
        if (!up.dead && !ws.forgotten && !up.isUsed()) {
          final int dropped = index.dropTail(ws, up, want);
          if (dropped > 0) {
            noteCascade(ws, up);
            index.settleAfterEviction();
            continue;
          }
        }
      }
      if (visits > 2 * patience) return; // nothing left that may go
      final RunNode n = clock.pollFirst();
      if (n == null) return;
      if (n.dead) continue; // left the tree since it was queued
      if (++visits <= patience && (n.isUsed() || n.fresh)) {
        if (!n.fresh) n.clearUsed();
        clock.addLast(n); // a run this event made goes last, as it would after a used one
        continue;
      }
      if (dropAt(n, want) > 0) {
        visits = 0;
        patience = 2L * clock.size() + 16;
      }
      if (!n.dead) clock.addLast(n);
    }
  }

  /** Drops up to {@code want} pairs at {@code n} that the rule lets go; returns how many. */
  private long dropAt(RunNode n, long want) {
    final int[] ids = n.plain().ids; // never written in place: a change publishes new arrays
    long dropped = 0;
    for (int i = 0; i < ids.length && dropped < want; i++) {
      final RunWorker ws = index.workerById(ids[i]);
      final int d = index.dropTail(ws, n, want - dropped);
      if (d > 0) {
        dropped += d;
        noteCascade(ws, n);
      }
    }
    if (dropped > 0) index.settleAfterEviction();
    return dropped;
  }

  /**
   * After {@code ws} lost blocks of {@code n}: when it lost all of them, try its parent run next.
   */
  private void noteCascade(RunWorker ws, RunNode n) {
    if (index.lastDropEmptiedConnected && n.parent != index.root) {
      cascadeWorker = ws;
      cascadeNode = n.parent;
    }
  }

  private boolean clockOverfull() {
    return clock.size() > linkedNodes + (linkedNodes >> 2) + 64;
  }

  /** Rebuilds the clock queue without dead nodes, keeping the order. */
  private void compactClock() {
    ArrayDeque<RunNode> kept =
        new ArrayDeque<>((int) Math.min(Integer.MAX_VALUE - 8, linkedNodes + 16));
    for (RunNode n : clock) {
      if (!n.dead) kept.addLast(n);
    }
    clock = kept;
  }
}
