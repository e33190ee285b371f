package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiConsumer;

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
 * leaves the structure (unlink); this class does the rest of every write.
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
 * query path by at most one block. A change of several nodes (making or filling a hole, clearing
 * a worker) is one step for readers: version is odd while it runs, and a reader retries a walk
 * that overlapped one (docs/concurrency.md); after OPTIMISTIC_ATTEMPTS tries it takes writeLock.
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
 * Bound (maxBlocks, optional): past maxBlocks (worker, block) pairs the writer drops pairs, least
 * recently used first, approximated by CLOCK:
 *  - Order: every node enters the clock queue (writer-only ArrayDeque) when it is made, so the
 *    queue is in store order. A node leaves it when the hand finds it unlinked; when stale
 *    entries make the queue more than 1.25 times the linked nodes (+64), checked when a node is
 *    made and after every prune, it is compacted, so the queue stays within 1.25 * nodes + 64
 *    references and keeps at most a quarter of the nodes alive after they were unlinked
 *    (amortized O(1) per node made or unlinked: a compaction drops at least a fifth of the
 *    queue). With 2 * nodes the stale nodes, kept alive with their holders, more than doubled a
 *    bounded tree's bytes per pair under eviction (IndexFootprint, config B, a quarter bound).
 *  - Use: readers set a node's used bit (IndexNode.markUsed: an opaque store, only when it was
 *    clear) on each worker's deepest matched node of a query: the tree walk marks the node where
 *    workers drop out and the node where it ends, the positional walk the entries it probes
 *    (each worker's deepest matched entry is one). That is the node the hand could take from
 *    that worker on this path (the rule below); nodes every matched worker holds below are not
 *    leaves of theirs, and marking all of them cost the tree walk 11-16 % (BENCHMARKS.md).
 *    A store marks the blocks it touches that already existed (re-stores, a second worker's copy,
 *    the parent); blocks it makes are at the queue's end already.
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
 *  - When: before a store adds a pair while blocksIndexed is maxBlocks, never at the block the
 *    chain being stored hangs from; when only the chain itself could go, the rest of that store
 *    skips the search (so blocksIndexed passes maxBlocks only inside a store of a chain longer
 *    than what else can go). Then after each Stored event while pairs or linked nodes exceed
 *    maxBlocks (nodes no one holds can stay linked above detached pairs after holes; dropping
 *    those pairs prunes them). So after every event both are within maxBlocks.
 *    A dropped block's names leave the worker's NameTable, so a later Removed of it counts as
 *    missing and a later store under it as parent-missing (an under-count).
 *  - evictedBlocks counts dropped pairs.
 *
 * Tests may pass a Runnable that runs after every single holders change (writer's thread, under
 * the lock), to read each intermediate state a lock-free reader could see, and an
 * EvictionListener told of every (worker, sequence hash) name an eviction drops.
 * </pre>
 */
abstract class BlockIndex<N extends IndexNode<N>> implements KvIndex {
  private static final VarHandle VERSION;

  static {
    try {
      VERSION = MethodHandles.lookup().findVarHandle(BlockIndex.class, "version", long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Told of every name an eviction drops (tests: the reference model applies them). */
  interface EvictionListener {
    /** {@code worker} no longer names the block at {@code path} (local hashes) {@code seqHash}. */
    void evicted(Worker worker, long seqHash, long[] path);
  }

  /** Optimistic walks before a reader falls back to the writers' lock (docs/concurrency.md). */
  private static final int OPTIMISTIC_ATTEMPTS = 64;

  /** The parent of a chain stored at the root: a node, or null when first blocks have none. */
  final N root;

  final WorkerTable<N> workers;
  final ReentrantLock writeLock; // null: single-threaded
  private final Runnable afterHolderChange; // tests only; null otherwise

  /**
   * Odd while a writer changes several nodes that must look like one step to readers (making or
   * filling a hole, clearing a worker); readers retry a walk that overlapped such a step.
   */
  @SuppressWarnings("unused") // through VERSION
  private long version;

  // counters: written under the writer discipline, read racily by stats()
  private volatile long storedEvents;
  private volatile long removedEvents;
  private volatile long clearedEvents;
  private volatile long parentMissing;
  private volatile long blocksMissing;
  private volatile long blocksIndexed;
  private volatile long evictedBlocks;

  // ---- the bound; writer-only except maxBlocks and bounded (final)

  /** The most (worker, block) pairs held; Long.MAX_VALUE when unbounded. */
  final long maxBlocks;

  /** Whether readers mark used bits: the index is bounded. */
  final boolean bounded;

  /** CLOCK queue of nodes in store order; null when unbounded. */
  private ArrayDeque<N> clock;

  private long linkedNodes; // counted only when bounded
  private N lastCreated; // the node childFor made last (bounded only)
  private WorkerBlocks<N> cascadeWorker; // a worker whose leaf the hand just dropped ...
  private N cascadeNode; // ... and that leaf's parent, to try next
  private final ArrayList<N> scratch = new ArrayList<>();
  private IndexNode<?>[] removalScratch = new IndexNode<?>[16];
  EvictionListener evictionListener; // tests only

  BlockIndex(N root, ReentrantLock writeLock, Runnable afterHolderChange) {
    this(root, writeLock, afterHolderChange, Long.MAX_VALUE);
  }

  BlockIndex(N root, ReentrantLock writeLock, Runnable afterHolderChange, long maxBlocks) {
    if (maxBlocks < 1)
      throw new IllegalArgumentException("maxBlocks must be >= 1, got " + maxBlocks);
    this.root = root;
    this.writeLock = writeLock;
    this.afterHolderChange = afterHolderChange;
    this.maxBlocks = maxBlocks;
    this.bounded = maxBlocks != Long.MAX_VALUE;
    this.clock = bounded ? new ArrayDeque<>() : null;
    // eviction must find the names a worker gave a block without scanning its table
    this.workers = new WorkerTable<>(bounded);
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

  /** Blocks in the structure now, counted from scratch; for tests. Writer-side. */
  abstract int countNodes();

  /** {@link #countNodes()} under the writers' discipline; for tests and the soak. */
  final int nodeCount() {
    lock();
    try {
      return countNodes();
    } finally {
      unlock();
    }
  }

  /** The bounded index's running count of linked nodes (0 when unbounded); for tests. */
  final long linkedNodes() {
    lock();
    try {
      return linkedNodes;
    } finally {
      unlock();
    }
  }

  /** References in the bounded index's clock queue (0 when unbounded); for tests. */
  final int clockSize() {
    lock();
    try {
      return clock == null ? 0 : clock.size();
    } finally {
      unlock();
    }
  }

  /** Subclasses call this from childFor for each node they make. */
  final void nodeCreated(N node) {
    if (!bounded) return;
    lastCreated = node;
    linkedNodes++;
    if (clockOverfull()) compactClock();
    clock.addLast(node);
  }

  // ------------------------------------------------------------------ reads

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    for (int attempt = 0; attempt < OPTIMISTIC_ATTEMPTS; attempt++) {
      long before = (long) VERSION.getAcquire(this);
      if ((before & 1L) == 0) {
        OverlapScores s = walk(localHashes, earlyExit);
        // every node load in walk() is an acquire load, so this load cannot move above them
        if ((long) VERSION.getAcquire(this) == before) return s;
      }
      Thread.onSpinWait();
    }
    if (writeLock == null) return walk(localHashes, earlyExit);
    writeLock.lock();
    try {
      return walk(localHashes, earlyExit);
    } finally {
      writeLock.unlock();
    }
  }

  /** The scores of one lock-free walk of the query path. */
  abstract OverlapScores walk(long[] localHashes, boolean earlyExit);

  /**
   * The result of a walk that started with the {@code m} workers {@code ids[0..m)}, each with its
   * score in {@code scores} (0: none); reuses {@code scores}.
   */
  final OverlapScores result(int[] ids, int[] scores, int m) {
    final WorkerBlocks<N>[] states = workers.readerView();
    final Worker[] out = new Worker[m];
    final int[] counts = new int[m];
    int n = 0;
    for (int i = 0; i < m; i++) {
      if (scores[i] <= 0) continue;
      final WorkerBlocks<N> ws = states[ids[i]];
      out[n] = ws.worker;
      scores[n] = scores[i];
      counts[n] = ws.heldBlocks;
      n++;
    }
    return new Scores(out, scores, counts, n);
  }

  // ------------------------------------------------------------------ writes

  private void lock() {
    if (writeLock != null) writeLock.lock();
  }

  private void unlock() {
    if (writeLock != null) writeLock.unlock();
  }

  /** Starts a step of several changes (version odd); always paired with endStep in a finally. */
  private void beginStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
  }

  private void endStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
  }

  private void holdersChanged() {
    if (afterHolderChange != null) afterHolderChange.run();
  }

  @Override
  public void apply(RouterEvent event) {
    lock();
    try {
      applyLocked(event);
    } finally {
      unlock();
    }
  }

  /**
   * Applies {@code events[from, to)} in order under one hold of the writers' lock (thread-pool
   * lanes: one lock hand-over per batch instead of per event). An event that throws goes to {@code
   * onFailure} and the rest are still applied.
   */
  final void applyAll(
      RouterEvent[] events, int from, int to, BiConsumer<RouterEvent, RuntimeException> onFailure) {
    lock();
    try {
      for (int i = from; i < to; i++) {
        try {
          applyLocked(events[i]);
        } catch (RuntimeException e) {
          onFailure.accept(events[i], e);
        }
      }
    } finally {
      unlock();
    }
  }

  private void applyLocked(RouterEvent event) {
    CacheEvent data = event.data();
    if (data instanceof CacheEvent.Stored s) {
      store(workers.intern(event.worker()), s);
      if (bounded && (linkedNodes > maxBlocks || blocksIndexed > maxBlocks)) evictToFit();
    } else if (data instanceof CacheEvent.Removed r) {
      remove(workers.find(event.worker()), r);
    } else {
      clear(workers.intern(event.worker()));
      clearedEvents++;
    }
  }

  private void store(WorkerBlocks<N> ws, CacheEvent.Stored s) {
    N parent = root;
    if (s.hasParent()) {
      parent = ws.blocks.get(s.parentHash());
      if (parent == null) {
        parentMissing++;
        return;
      }
      if (bounded) parent.markUsed();
    }
    final long[] seqs = s.blockHashes();
    final long[] locals = s.tokensHashes();
    final int id = ws.id;
    List<N> pruneLater = null;
    if (bounded) lastCreated = null;
    boolean roomLeft = bounded; // false once the hand found only this chain's blocks to drop
    for (int i = 0; i < seqs.length; i++) {
      final long seq = seqs[i];
      if (roomLeft && blocksIndexed >= maxBlocks) roomLeft = makeRoom(ws, parent, locals[i]);
      final N child = childFor(parent, locals[i], seq);
      final N previous = ws.blocks.put(seq, child);
      if (previous != child) {
        if (previous != null) {
          // the same hash named another block: the newer store wins
          release(ws, previous);
          if (pruneLater == null) pruneLater = new ArrayList<>();
          pruneLater.add(previous);
        }
        if (bounded && child != lastCreated) child.markUsed(); // a block that existed: used
        // asked after release: the parent may just have lost its last name
        hold(ws, child, parent == root || parent.isHolder(id));
      } else if (bounded) {
        child.markUsed(); // stored again: used
      }
      parent = child;
    }
    storedEvents++;
    if (pruneLater != null) {
      for (N n : pruneLater) prune(n);
    }
  }

  // ------------------------------------------------------------------ the bound

  /**
   * Before the store of {@code ws} puts the block {@code local} under {@code parent} while the
   * index is full: when that adds a pair (the worker does not hold the block yet), drops one pair
   * first, never at {@code parent} (the chain being stored hangs from it). Returns false when
   * nothing could go: then only this chain's blocks are left to drop, and the rest of the store
   * skips the search (a chain longer than the bound would otherwise scan the queue once per block);
   * the end of the event drops what is over.
   */
  private boolean makeRoom(WorkerBlocks<N> ws, N parent, long local) {
    final N existing = findChild(parent, local);
    if (existing != null && (existing.isHolder(ws.id) || isDetached(existing, ws))) return true;
    if (parent != root) parent.markUsed();
    return evict(blocksIndexed - maxBlocks + 1, parent) <= 0;
  }

  /** {@link #evict(long, IndexNode)} until pairs and linked nodes are both within maxBlocks. */
  private void evictToFit() {
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
      final long want =
          !toFit
              ? need
              : blocksIndexed > maxBlocks
                  ? blocksIndexed - maxBlocks
                  : linkedNodes > maxBlocks ? 1 : 0;
      if (want <= 0) return 0;
      final N up = cascadeNode;
      if (up != null) {
        final WorkerBlocks<N> ws = cascadeWorker;
        cascadeNode = null;
        cascadeWorker = null;
        if (up != keep
            && isLinked(up)
            && !ws.forgotten
            && up.isHolder(ws.id)
            && !up.isUsed()
            && !holdsChildOf(ws.id, up)) {
          dropPair(ws, up);
          noteCascade(ws, up);
          prune(up);
          if (!toFit) need--;
          continue;
        }
      }
      if (visits > 2 * patience) return want; // only pairs at keep are left to drop
      final N n = clock.pollFirst();
      if (n == null) return want; // nothing left to drop
      if (!isLinked(n)) continue; // pruned since it was queued
      if (++visits <= patience && n.isUsed()) {
        n.clearUsed();
        clock.addLast(n);
        continue;
      }
      final long dropped = n == keep ? 0 : dropAt(n, want);
      if (!toFit) need -= dropped;
      if (dropped > 0) {
        visits = 0;
        patience = 2L * clock.size() + 16;
      }
      if (isLinked(n)) clock.addLast(n);
    }
  }

  private void noteCascade(WorkerBlocks<N> ws, N dropped) {
    final N p = dropped.parent;
    if (p != root && p != null) {
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
        dropPair(workers.byId(~x), n); // detached: scores nothing
        dropped++;
      } else if (!holdsChildOf(x, n)) {
        final WorkerBlocks<N> ws = workers.byId(x);
        dropPair(ws, n);
        noteCascade(ws, n);
        dropped++;
      }
    }
    if (dropped > 0) prune(n);
    return dropped;
  }

  /** Whether worker {@code id} holds a child of {@code n} connected. */
  private boolean holdsChildOf(int id, N n) {
    if (!hasChildren(n)) return false;
    final ArrayList<N> children = scratch;
    children.clear();
    addChildren(n, children);
    boolean found = false;
    for (int i = 0; i < children.size() && !found; i++) found = children.get(i).isHolder(id);
    children.clear();
    return found;
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
    ws.heldBlocks--;
    blocksIndexed--;
    if (n.isHolder(ws.id)) {
      n.removeHolder(ws.id);
    } else {
      n.removeDetached(ws.id);
      ws.detachedCount--;
    }
    holdersChanged();
    evictedBlocks++;
  }

  /** The local hashes from the top down to {@code n} (for the tests' eviction listener). */
  private long[] pathOf(N n) {
    LongArrayList up = new LongArrayList();
    for (N a = n; a != root && a != null; a = a.parent) up.add(a.local);
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
    ArrayDeque<N> kept = new ArrayDeque<>((int) Math.min(Integer.MAX_VALUE - 8, linkedNodes + 16));
    for (N n : clock) {
      if (isLinked(n)) kept.addLast(n);
    }
    clock = kept;
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
    blocksIndexed++;
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
        holdersChanged();
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
    blocksIndexed--;
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
        // reverse pre-order: every node after all of its descendants, the block itself last
        for (int i = below.size() - 1; i >= 0; i--) {
          below.get(i).detach(id);
          ws.detachedCount++;
          holdersChanged();
        }
        node.removeHolder(id);
        holdersChanged();
      } finally {
        endStep();
      }
    }
  }

  private static boolean isDetached(IndexNode<?> node, WorkerBlocks<?> ws) {
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
      holdersChanged();
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
    removedEvents++;
    if (ws == null) {
      blocksMissing += n;
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
      blocksMissing++;
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

  /** Drops every block of {@code ws}, deepest first so readers never see a hole. */
  private void clear(WorkerBlocks<N> ws) {
    if (ws.blocks.isEmpty()) return;
    final int id = ws.id;
    List<N> named = new ArrayList<>(ws.blocks.size());
    ws.blocks.addBlocksTo(named);
    List<N> nodes = byDepth(named, true);
    beginStep();
    try {
      for (N n : nodes) {
        // an aliased node is listed twice: the second visit finds nothing to do
        if (n.isHolder(id)) {
          n.removeHolder(id);
          holdersChanged();
        } else if (isDetached(n, ws)) {
          n.removeDetached(id);
          ws.detachedCount--;
          holdersChanged();
        }
      }
    } finally {
      endStep();
    }
    blocksIndexed -= ws.heldBlocks;
    ws.blocks.clear();
    ws.aliases = null;
    ws.heldBlocks = 0;
    ws.detachedCount = 0;
    for (N n : nodes) prune(n);
  }

  /** {@code list} sorted by depth: deepest first, or shallowest first. */
  private List<N> byDepth(List<N> list, boolean deepestFirst) {
    final int n = list.size();
    final long[] keys = new long[n];
    // nodes keep no depth: measure along parent links, each walk stopping at a measured node
    final Object2IntOpenHashMap<N> depthOf = new Object2IntOpenHashMap<>();
    depthOf.defaultReturnValue(-1);
    final List<N> path = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      path.clear();
      N a = list.get(i);
      int d = 0;
      while (a != root && a != null) {
        int known = depthOf.getInt(a);
        if (known >= 0) {
          d = known;
          break;
        }
        path.add(a);
        a = a.parent;
      }
      for (int k = path.size() - 1; k >= 0; k--) depthOf.put(path.get(k), ++d);
      keys[i] = (long) (deepestFirst ? -d : d) << 32 | i;
    }
    Arrays.sort(keys);
    List<N> out = new ArrayList<>(n);
    for (long k : keys) out.add(list.get((int) k));
    return out;
  }

  /** Unlinks {@code node} and then its ancestors while they are unused and lead nowhere. */
  private void prune(N node) {
    while (node != root
        && node != null
        && node.isUnheld()
        && !hasChildren(node)
        && isLinked(node)) {
      unlink(node);
      if (bounded) linkedNodes--;
      node = node.parent;
    }
    // removals alone must not leave the queue holding unlinked nodes: compact here too, and
    // drop the last stale references when the index is empty
    if (bounded && (clockOverfull() || linkedNodes == 0 && !clock.isEmpty())) compactClock();
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
      List<RouterEvent> out = new ArrayList<>();
      for (WorkerBlocks<N> ws : workers.live()) dumpWorker(ws, out);
      return out;
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

  /**
   * One Stored event per connected block, shallowest first (so each parent comes before its
   * children), under the worker's own hashes; a lone Cleared event when none is connected, so the
   * worker stays known. Detached blocks are left out: they score nothing.
   */
  private void dumpWorker(WorkerBlocks<N> ws, List<RouterEvent> out) {
    final Worker worker = ws.worker;
    final int id = ws.id;
    Object2LongOpenHashMap<N> seqOf = new Object2LongOpenHashMap<>();
    ws.blocks.addNamesTo(seqOf);
    List<N> connected = new ArrayList<>();
    for (N n : seqOf.keySet()) {
      if (n.isHolder(id)) connected.add(n);
    }
    long eventId = 0;
    for (N n : byDepth(connected, false)) {
      long[] seq = {seqOf.getLong(n)};
      long[] local = {n.local};
      CacheEvent ev =
          n.parent == root
              ? CacheEvent.storedAtRoot(seq, local)
              : CacheEvent.stored(seqOf.getLong(n.parent), seq, local);
      out.add(new RouterEvent(worker, eventId++, ev));
    }
    if (connected.isEmpty()) out.add(new RouterEvent(worker, eventId, CacheEvent.cleared()));
  }

  @Override
  public void flush() {
    // synchronous: every apply is visible when it returns
  }

  @Override
  public IndexStats stats() {
    return new IndexStats(
        storedEvents,
        removedEvents,
        clearedEvents,
        parentMissing,
        blocksMissing,
        blocksIndexed,
        workers.size(),
        evictedBlocks);
  }

  @Override
  public void close() {}
}
