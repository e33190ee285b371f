package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

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
 * Tests may pass a Runnable that runs after every single holders change (writer's thread, under
 * the lock), to read each intermediate state a lock-free reader could see.
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

  /** Optimistic walks before a reader falls back to the writers' lock (docs/concurrency.md). */
  private static final int OPTIMISTIC_ATTEMPTS = 64;

  /** The parent of a chain stored at the root: a node, or null when first blocks have none. */
  final N root;

  final WorkerTable<N> workers = new WorkerTable<>();
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

  BlockIndex(N root, ReentrantLock writeLock, Runnable afterHolderChange) {
    this.root = root;
    this.writeLock = writeLock;
    this.afterHolderChange = afterHolderChange;
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
      CacheEvent data = event.data();
      if (data instanceof CacheEvent.Stored s) {
        store(workers.intern(event.worker()), s);
      } else if (data instanceof CacheEvent.Removed r) {
        remove(workers.find(event.worker()), r);
      } else {
        clear(workers.intern(event.worker()));
        clearedEvents++;
      }
    } finally {
      unlock();
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
    }
    final long[] seqs = s.blockHashes();
    final long[] locals = s.tokensHashes();
    final int id = ws.id;
    List<N> pruneLater = null;
    for (int i = 0; i < seqs.length; i++) {
      final long seq = seqs[i];
      final N child = childFor(parent, locals[i], seq);
      final N previous = ws.blocks.put(seq, child);
      if (previous != child) {
        if (previous != null) {
          // the same hash named another block: the newer store wins
          release(ws, previous);
          if (pruneLater == null) pruneLater = new ArrayList<>();
          pruneLater.add(previous);
        }
        // asked after release: the parent may just have lost its last name
        hold(ws, child, parent == root || parent.isHolder(id));
      }
      parent = child;
    }
    storedEvents++;
    if (pruneLater != null) {
      for (N n : pruneLater) prune(n);
    }
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
      node.addHolder(id);
      holdersChanged();
      reconnectBelow(ws, reconnect);
      endStep();
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
    List<N> below = hasChildren(node) ? heldBelow(node, id) : List.of();
    if (below.isEmpty()) {
      node.removeHolder(id);
      holdersChanged();
    } else {
      beginStep();
      // reverse pre-order: every node after all of its descendants, the block itself last
      for (int i = below.size() - 1; i >= 0; i--) {
        below.get(i).detach(id);
        ws.detachedCount++;
        holdersChanged();
      }
      node.removeHolder(id);
      holdersChanged();
      endStep();
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
    for (long seq : r.blockHashes()) {
      N node = ws == null ? null : ws.blocks.remove(seq);
      if (node == null) {
        blocksMissing++;
        continue;
      }
      release(ws, node);
      prune(node);
    }
    removedEvents++;
  }

  /** Drops every block of {@code ws}, deepest first so readers never see a hole. */
  private void clear(WorkerBlocks<N> ws) {
    if (ws.blocks.isEmpty()) return;
    final int id = ws.id;
    List<N> named = new ArrayList<>(ws.blocks.size());
    ws.blocks.addBlocksTo(named);
    List<N> nodes = byDepth(named, true);
    beginStep();
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
    endStep();
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
      node = node.parent;
    }
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
        workers.size());
  }

  @Override
  public void close() {}
}
