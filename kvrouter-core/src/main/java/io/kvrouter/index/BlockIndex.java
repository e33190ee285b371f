package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.NullUnmarked;
import org.jspecify.annotations.Nullable;

/**
 * What both index kinds share: which worker holds which block, kept prefix-closed through holes,
 * with the writer's side of every event and the reader's retry around a walk; {@link TreeIndex} and
 * {@link PositionalIndex} add how blocks are found and how a query walks them.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: blocks are nodes of type N (IndexNode) under a root (a node of the tree, or null for the
 * positional index, whose first blocks have no parent); per worker rank a WorkerBlocks maps its
 * sequence hashes to nodes (NameTable). Workers are dense int ids (WorkerTable). The subclass says
 * how a block is found under its parent (childFor), how its children are listed and how a node
 * leaves the structure (unlink); this class does the rest of every write. The bound (maxBlocks)
 * is ClockBound's, the dump BlockDump's; the counters are IndexCounters.
 *
 * Writers: every mutation (apply, clearWorker, removeWorker, dump) runs under writeLock when there
 * is one, and on the caller's thread otherwise (radixTree(): one thread at a time, documented as
 * single-threaded). The writer owns WorkerTable, every WorkerBlocks and the counters.
 * Readers: findMatches takes no lock; the subclass's walk reads each node's holders with acquire
 * loads.
 *
 * Holes (DESIGN.md §4 rules 1 and 4): removing a block a worker still holds descendants of turns
 * the worker's held descendants, leaf first, from connected to detached, and then takes the block
 * itself out of holders; a later store that makes the block held again moves them back, root first;
 * clearing drops a worker's blocks deepest first. So holders only ever names workers that hold
 * the whole path, scores stay exact, and each single holders change moves a worker's score on any
 * query path by at most one block; after every single change the worker holds a prefix-closed set
 * of blocks, as a partial eviction would leave it.
 *
 * Steps: a change of several nodes (making or filling a hole, clearing a worker) runs in steps of
 * at most STEP_CHANGES holders changes, each bracketed by version (odd while it runs); a reader
 * retries a walk that overlapped a step, so it sees the state before or after each step, never
 * inside one. An operation of up to STEP_CHANGES changes is one step: atomic for readers (what
 * Lincheck checks); a longer one is a sequence of steps, each leaving a valid state (above). The
 * version, the readers' retry and the writer's pause for readers that keep losing are
 * SteppedIndex's; readers take no lock (docs/concurrency.md).
 *
 * Stores: a block is found under its parent (the worker's hash names it, but does not find it).
 * Each name costs one NameTable put, which also returns the block the hash named before. When
 * that was another block, the newer store wins: the old block is released at once, but pruned
 * only at the end of the store, so no node of the chain being stored is unlinked under it.
 *
 * Detached workers are kept in the node's holders array as ~id (IndexNode), where readers skip
 * them; a worker with no detached block (WorkerBlocks.detachedCount == 0) never looks for one.
 *
 * Pruning: a node nobody holds (connected or detached) and that has no children is unlinked, then
 * its parent is tried. An unlinked node is never written again; a reader that still holds it sees
 * its last holders, which are empty.
 *
 * Tests may pass a Runnable that runs after every single holders change (writer's thread, under
 * the lock), to read each intermediate state a lock-free reader could see: a findMatches on the
 * writer's own thread walks at once, without waiting for the step it is inside of to end.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
abstract class BlockIndex<N extends IndexNode<N>> extends SteppedIndex {
  /** The most holders changes in one step of a multi-node change (SteppedIndex). */
  static final int STEP_CHANGES = SteppedIndex.STEP_CHANGES;

  /** The parent of a chain stored at the root: a node, or null when first blocks have none. */
  final N root;

  final IndexCounters counters = new IndexCounters();
  final WorkerTable<N> workers;
  private final @Nullable Runnable afterHolderChange; // tests only; null otherwise

  /** Whether readers mark used bits: the index is bounded. */
  final boolean bounded;

  /** The CLOCK bound; null when unbounded. */
  final ClockBound<N> bound;

  private IndexNode<?>[] removalScratch = new IndexNode<?>[16];
  private final ArrayList<N> childScratch = new ArrayList<>();

  BlockIndex(N root, ReentrantLock writeLock, Runnable afterHolderChange, long maxBlocks) {
    super(writeLock);
    if (maxBlocks < 1)
      throw new IllegalArgumentException("maxBlocks must be >= 1, got " + maxBlocks);
    this.root = root;
    this.afterHolderChange = afterHolderChange;
    this.bounded = maxBlocks != Long.MAX_VALUE;
    this.bound = bounded ? new ClockBound<>(this, counters, maxBlocks) : null;
    // eviction must find the names a worker gave a block without scanning its table
    this.workers = new WorkerTable<>(bounded, counters, this::newNames);
  }

  // ------------------------------------------------------------------ the node structure

  /**
   * The child of {@code parent} (the root when {@code root}) with this local hash, made if new; a
   * new tree node is keyed by {@code seq}, a new positional entry by the router's own hash.
   */
  abstract N childFor(N parent, long local, long seq);

  abstract boolean hasChildren(N node);

  /** Appends every child of {@code node} to {@code out}. Writer-side. */
  abstract void addChildren(N node, List<N> out);

  /** Whether {@code node} is still in the structure (not pruned). */
  abstract boolean isLinked(N node);

  /** Takes the unused, childless {@code node} out of the structure for good. */
  abstract void unlink(N node);

  /** The child of {@code parent} (the root when {@code root}) with this local hash, or null. */
  abstract N findChild(N parent, long local);

  /** Blocks in the structure now, counted from scratch. Writer-side. */
  abstract int countNodes();

  /**
   * A new worker's name table (WorkerBlocks): a NameTable; the positional index's keeps no name
   * that is the block's own key. Called when a worker is first seen, after construction.
   */
  NameTable<N> newNames(WorkerBlocks<N> ws, boolean findsOtherNames) {
    return new NameTable<>(findsOtherNames);
  }

  /** Sets {@code node}'s used bit (a bounded index's eviction order: IndexNode.markUsed). */
  void markUsed(N node) {
    node.markUsed();
  }

  /** {@code node}'s used bit. Writer-side. */
  boolean isUsed(N node) {
    return node.isUsed();
  }

  /** Clears {@code node}'s used bit. Writer-side. */
  void clearUsed(N node) {
    node.clearUsed();
  }

  /** Subclasses call this from childFor for each node they make. */
  final void nodeCreated(N node) {
    if (bound != null) bound.nodeCreated(node);
  }

  // ------------------------------------------------------------------ reads

  /**
   * The result of a walk that started with the {@code m} workers {@code ids[0..m)} (the holders of
   * the query's first block), each with its score (at least 1) in {@code scores}; both arrays
   * become the result's.
   */
  final OverlapScores result(int[] ids, int[] scores, int m) {
    final WorkerBlocks<N>[] states = workers.readerView();
    final int[] counts = new int[m];
    for (int i = 0; i < m; i++) counts[i] = states[ids[i]].heldBlocks;
    return new Scores(states, ids, scores, counts, m);
  }

  // ------------------------------------------------------------------ writes

  /**
   * After a holders change inside a step: once the step holds STEP_CHANGES changes, ends it and
   * begins the next. Call only where the state is valid (class notes).
   */
  private void changedInStep() {
    holdersChanged();
    countStepChange();
  }

  final void holdersChanged() {
    if (afterHolderChange != null) afterHolderChange.run();
  }

  @Override
  void applyLocked(RouterEvent event) {
    CacheEvent data = event.data();
    if (data instanceof CacheEvent.Stored s) {
      store(workers.intern(event.worker()), s);
      if (bound != null && bound.over()) bound.evictToFit();
    } else if (data instanceof CacheEvent.Removed r) {
      remove(workers.find(event.worker()), r);
    } else {
      clear(workers.intern(event.worker()));
      counters.inc(IndexCounters.CLEARED_EVENTS);
    }
  }

  private void store(WorkerBlocks<N> ws, CacheEvent.Stored s) {
    N parent = root;
    if (s.hasParent()) {
      parent = ws.blocks.get(s.parentHash());
      if (parent == null) {
        counters.inc(IndexCounters.PARENT_MISSING);
        return;
      }
      if (bounded) markUsed(parent);
    }
    final long[] seqs = s.blockHashes();
    final long[] locals = s.tokensHashes();
    final int id = ws.id;
    final ClockBound<N> bound = this.bound;
    List<N> pruneLater = null;
    if (bound != null) bound.storeBegins();
    boolean roomLeft = bound != null; // false once the hand found only this chain's to drop
    for (int i = 0; i < seqs.length; i++) {
      final long seq = seqs[i];
      if (roomLeft && bound.full()) roomLeft = bound.makeRoom(ws, parent, locals[i], i);
      final N child = childFor(parent, locals[i], seq);
      final N previous = ws.blocks.put(seq, child);
      if (previous != child) {
        if (previous != null) {
          // the same hash named another block: the newer store wins
          release(ws, previous);
          if (pruneLater == null) pruneLater = new ArrayList<>();
          pruneLater.add(previous);
        }
        if (bound != null && !bound.isNew(child)) markUsed(child); // a block that existed: used
        // asked after release: the parent may just have lost its last name
        hold(ws, child, parent == root || parent.isHolder(id));
      } else if (bound != null) {
        markUsed(child); // stored again: used
      }
      parent = child;
    }
    counters.inc(IndexCounters.STORED_EVENTS);
    if (pruneLater != null) {
      for (N n : pruneLater) prune(n);
    }
  }

  /** Whether worker {@code id} holds a child of {@code n} connected. Writer-side. */
  final boolean holdsChildOf(int id, N n) {
    if (!hasChildren(n)) return false;
    final ArrayList<N> children = childScratch;
    children.clear();
    addChildren(n, children);
    boolean found = false;
    for (int i = 0; i < children.size() && !found; i++) found = children.get(i).isHolder(id);
    children.clear();
    return found;
  }

  /** Records that {@code ws} holds {@code node} under one more name (already in its blocks). */
  private void hold(WorkerBlocks<N> ws, N node, boolean parentConnected) {
    final int id = ws.id;
    if (node.isHolder(id) || isDetached(node, ws)) {
      if (ws.aliases == null) ws.aliases = new Object2IntOpenHashMap<>();
      ws.aliases.addTo(node, 1);
      return;
    }
    ws.heldBlocks++;
    counters.inc(IndexCounters.BLOCKS_INDEXED);
    if (!parentConnected) {
      node.addDetached(id);
      ws.detachedCount++;
      holdersChanged();
      return;
    }
    List<N> reconnect = ws.detachedCount > 0 ? detachedChildren(node, ws) : List.of();
    if (reconnect.isEmpty()) {
      node.addHolder(id);
      holdersChanged();
    } else {
      beginStep();
      try {
        node.addHolder(id);
        changedInStep();
        reconnectBelow(ws, reconnect);
      } finally {
        endStep();
      }
    }
  }

  /** Undoes {@link #hold} for a name of {@code node} just dropped from its blocks; no pruning. */
  private void release(WorkerBlocks<N> ws, N node) {
    final int id = ws.id;
    if (ws.aliases != null) {
      int extra = ws.aliases.getInt(node);
      if (extra > 0) {
        if (extra == 1) ws.aliases.removeInt(node);
        else ws.aliases.put(node, extra - 1);
        return;
      }
    }
    ws.heldBlocks--;
    counters.add(IndexCounters.BLOCKS_INDEXED, -1);
    ws.blocks.released(node);
    if (!node.isHolder(id)) {
      node.removeDetached(id);
      ws.detachedCount--;
      holdersChanged();
      return;
    }
    // most blocks with children have only other workers' blocks below: ask without allocating
    List<N> below = holdsChildOf(id, node) ? heldBelow(node, id) : List.of();
    if (below.isEmpty()) {
      node.removeHolder(id);
      holdersChanged();
    } else {
      beginStep();
      try {
        // reverse pre-order: every node after all of its descendants, the block itself last;
        // between steps the worker has lost a set of descendants closed downwards, as a partial
        // eviction would leave it
        for (int i = below.size() - 1; i >= 0; i--) {
          below.get(i).detach(id);
          ws.detachedCount++;
          changedInStep();
        }
        node.removeHolder(id);
        holdersChanged();
      } finally {
        endStep();
      }
    }
  }

  static boolean isDetached(IndexNode<?> node, WorkerBlocks<?> ws) {
    return ws.detachedCount > 0 && node.isDetached(ws.id);
  }

  /** {@code id}'s connected descendants of {@code top}, parents before children. */
  private List<N> heldBelow(N top, int id) {
    List<N> order = new ArrayList<>();
    List<N> children = new ArrayList<>();
    ArrayDeque<N> stack = new ArrayDeque<>();
    stack.push(top);
    while (!stack.isEmpty()) {
      children.clear();
      addChildren(stack.pop(), children);
      for (int i = 0; i < children.size(); i++) {
        N c = children.get(i);
        if (c.isHolder(id)) {
          order.add(c);
          stack.push(c);
        }
      }
    }
    return order;
  }

  /** The children of {@code node} that {@code ws} holds detached. */
  private List<N> detachedChildren(N node, WorkerBlocks<N> ws) {
    if (!hasChildren(node)) return List.of();
    List<N> children = new ArrayList<>();
    addChildren(node, children);
    int kept = 0;
    for (int i = 0; i < children.size(); i++) {
      N c = children.get(i);
      if (isDetached(c, ws)) children.set(kept++, c);
    }
    return children.subList(0, kept);
  }

  /**
   * Moves {@code ws}'s detached nodes {@code top} (children of a node just connected) and their
   * detached descendants back to holders, root first.
   */
  private void reconnectBelow(WorkerBlocks<N> ws, List<N> top) {
    final int id = ws.id;
    ArrayDeque<N> stack = new ArrayDeque<>(top.size());
    for (int i = top.size() - 1; i >= 0; i--) stack.push(top.get(i));
    List<N> children = new ArrayList<>();
    while (!stack.isEmpty()) {
      N n = stack.pop();
      n.reconnect(id);
      ws.detachedCount--;
      changedInStep(); // root first: between steps every connected block's parent is connected
      if (ws.detachedCount == 0) return;
      children.clear();
      addChildren(n, children);
      for (int i = 0; i < children.size(); i++) {
        N c = children.get(i);
        if (isDetached(c, ws)) stack.push(c);
      }
    }
  }

  private void remove(WorkerBlocks<N> ws, CacheEvent.Removed r) {
    final long[] seqs = r.blockHashes();
    final int n = seqs.length;
    counters.inc(IndexCounters.REMOVED_EVENTS);
    if (ws == null) {
      counters.add(IndexCounters.BLOCKS_MISSING, n);
      return;
    }
    if (n == 1) {
      removeNamed(ws, ws.blocks.remove(seqs[0]));
      return;
    }
    // The end state does not depend on the order of an event's blocks, but the cost does: a chain
    // listed from the top (kvrouter's PrefixCache lists each evicted leaf so) would make a hole at
    // its first block, walking and detaching the rest of the chain, and then drop the detached
    // blocks one by one. So the names go first (releasing never reads them), and then each run of
    // blocks that are parent and child in the order listed is released from its end. (Engines
    // that send one block per event, top first, as SGLang does per radix node, still make that
    // hole once per node: each of their events is a real step.)
    final IndexNode<?>[] nodes = removalScratch(n);
    for (int k = 0; k < n; k++) nodes[k] = ws.blocks.remove(seqs[k]);
    int from = 0;
    while (from < n) {
      int to = from + 1;
      while (to < n
          && nodes[to] != null
          && nodes[to - 1] != null
          && nodes[to].parent == nodes[to - 1]) to++;
      for (int k = to - 1; k >= from; k--) removeNamed(ws, node(nodes, k));
      from = to;
    }
    Arrays.fill(nodes, 0, n, null);
  }

  @SuppressWarnings("unchecked")
  private N node(IndexNode<?>[] nodes, int k) {
    return (N) nodes[k];
  }

  /** Releases {@code node}, whose name {@code ws} just dropped (null: no such name), and prunes. */
  private void removeNamed(WorkerBlocks<N> ws, N node) {
    if (node == null) {
      counters.inc(IndexCounters.BLOCKS_MISSING);
      return;
    }
    release(ws, node);
    prune(node);
  }

  /** The writer's scratch array for the blocks of one Removed event: at least n slots, all null. */
  private IndexNode<?>[] removalScratch(int n) {
    if (removalScratch.length < n)
      removalScratch = new IndexNode<?>[Math.max(n, 2 * removalScratch.length)];
    return removalScratch;
  }

  /**
   * Drops every block of {@code ws}, deepest first, in steps of at most STEP_CHANGES holders
   * changes: between steps the worker holds a prefix-closed set of blocks (every block it still
   * holds is no deeper than any it lost), which is what a partial eviction would leave.
   */
  private void clear(WorkerBlocks<N> ws) {
    if (ws.blocks.isEmpty()) return;
    final int id = ws.id;
    List<N> named = new ArrayList<>(ws.blocks.size());
    ws.blocks.addBlocksTo(named);
    List<N> nodes = BlockDump.byDepth(root, named, true);
    beginStep();
    try {
      for (N n : nodes) {
        // an aliased node is listed twice: the second visit finds nothing to do
        if (n.isHolder(id)) {
          n.removeHolder(id);
        } else if (isDetached(n, ws)) {
          n.removeDetached(id);
          ws.detachedCount--;
        } else {
          continue;
        }
        ws.heldBlocks--;
        counters.add(IndexCounters.BLOCKS_INDEXED, -1);
        changedInStep();
      }
    } finally {
      endStep();
    }
    ws.blocks.clear();
    ws.aliases = null;
    ws.heldBlocks = 0;
    ws.detachedCount = 0;
    for (N n : nodes) prune(n);
  }

  /** Unlinks {@code node} and then its ancestors while they are unused and lead nowhere. */
  final void prune(N node) {
    while (node != root
        && node != null
        && node.isUnheld()
        && !hasChildren(node)
        && isLinked(node)) {
      unlink(node);
      if (bound != null) bound.nodeUnlinked();
      node = node.parent;
    }
    if (bound != null) bound.pruned();
  }

  @Override
  public void clearWorker(long workerId) {
    lock();
    try {
      for (WorkerBlocks<N> ws : workers.ranksOf(workerId)) clear(ws);
    } finally {
      unlock();
    }
  }

  @Override
  public void removeWorker(long workerId) {
    lock();
    try {
      for (WorkerBlocks<N> ws : workers.ranksOf(workerId)) {
        clear(ws);
        workers.forget(ws);
      }
    } finally {
      unlock();
    }
  }

  // ------------------------------------------------------------------ dump, stats

  @Override
  public List<RouterEvent> dump() {
    lock();
    try {
      return BlockDump.of(this);
    } finally {
      unlock();
    }
  }

  @Override
  public int blockCount(Worker worker) {
    lock();
    try {
      WorkerBlocks<N> ws = workers.find(worker);
      return ws == null ? 0 : ws.heldBlocks - ws.detachedCount;
    } finally {
      unlock();
    }
  }

  @Override
  public long[] workerIds() {
    lock();
    try {
      return workers.live().stream()
          .mapToLong(ws -> ws.worker.workerId())
          .distinct()
          .sorted()
          .toArray();
    } finally {
      unlock();
    }
  }

  @Override
  public void flush() {
    // synchronous: every apply is visible when it returns
  }

  @Override
  public IndexStats stats() {
    return counters.stats();
  }

  @Override
  public void close() {}
}
