package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.Long2ObjectMap;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The block-tree index: one node per block position, reached from the root by local hashes, each
 * node listing the workers that hold it; behind {@link KvIndexes#radixTree()} and {@link
 * KvIndexes#concurrentRadixTree()}.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: TreeNode objects (see there) under one root; per worker rank a WorkerState mapping its
 * sequence hashes to nodes. Workers are dense int ids (WorkerTable).
 *
 * Writers: every mutation runs under writeLock when the index is concurrent, and on the caller's
 * thread otherwise (radixTree(): one thread at a time, documented as single-threaded).
 * Readers: findMatches takes no lock; it walks nodes by local hash, reading each node's holders
 * with acquire loads, and intersects them depth by depth.
 *
 * Holes (DESIGN.md §4 rule 4): removing a block a worker still holds children of moves the
 * worker's held descendants, leaf first, from holders to detached; a later store that makes the
 * block held again moves them back, root first. So holders only ever names workers that hold
 * the whole path, scores stay exact, and readers never see a worker "jump" a hole.
 * </pre>
 */
final class TreeIndex implements KvIndex {
  private final TreeNode root = new TreeNode(0L, null);
  private final WorkerTable workers = new WorkerTable();
  private final ReentrantLock writeLock; // null: single-threaded
  private final boolean concurrent;

  /**
   * Odd while a writer changes several nodes that must look like one step to readers (making or
   * filling a hole, clearing a worker); readers retry a walk that overlapped such a change.
   */
  @SuppressWarnings("unused") // through VERSION
  private long version;

  private static final java.lang.invoke.VarHandle VERSION;

  static {
    try {
      VERSION =
          java.lang.invoke.MethodHandles.lookup()
              .findVarHandle(TreeIndex.class, "version", long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Optimistic walks before a reader falls back to the writers' lock (docs/concurrency.md). */
  private static final int OPTIMISTIC_ATTEMPTS = 64;

  // counters: written under the writer discipline, read racily by stats()
  private volatile long storedEvents;
  private volatile long removedEvents;
  private volatile long clearedEvents;
  private volatile long parentMissing;
  private volatile long blocksMissing;
  private volatile long blocksIndexed;

  /** 0 when recent-use frequencies are not tracked (the default). */
  private final long frequencyWindowNanos;

  private final java.util.function.LongSupplier nanoClock;

  TreeIndex(boolean concurrent) {
    this(concurrent, 0L, System::nanoTime);
  }

  /**
   * A single-threaded tree that also counts, for every block on a query's matched path, the queries
   * within the last {@code frequencyWindowNanos} whose match covered it.
   */
  TreeIndex(boolean concurrent, long frequencyWindowNanos, java.util.function.LongSupplier clock) {
    if (concurrent && frequencyWindowNanos > 0) {
      throw new IllegalArgumentException("recent-use frequencies need the single-threaded tree");
    }
    this.concurrent = concurrent;
    this.writeLock = concurrent ? new ReentrantLock() : null;
    this.frequencyWindowNanos = frequencyWindowNanos;
    this.nanoClock = clock;
  }

  boolean isConcurrent() {
    return concurrent;
  }

  // ------------------------------------------------------------------ reads

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    if (frequencyWindowNanos > 0) {
      Scores s = (Scores) walk(localHashes, earlyExit);
      return s.withFrequencies(touchPath(localHashes, s.maxScore()));
    }
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

  /**
   * Records a use of the first {@code depth} blocks of the query path and returns, per block, the
   * uses within the frequency window (this one included). Single-threaded kind only.
   */
  private int[] touchPath(long[] localHashes, int depth) {
    final long now = nanoClock.getAsLong();
    final long oldest = now - frequencyWindowNanos;
    final int[] out = new int[depth];
    TreeNode node = root;
    for (int i = 0; i < depth; i++) {
      node = node.child(localHashes[i]);
      if (node == null) return java.util.Arrays.copyOf(out, i);
      it.unimi.dsi.fastutil.longs.LongArrayFIFOQueue uses = node.recentUses;
      if (uses == null)
        uses = node.recentUses = new it.unimi.dsi.fastutil.longs.LongArrayFIFOQueue(4);
      while (!uses.isEmpty() && uses.firstLong() < oldest) uses.dequeueLong();
      uses.enqueue(now);
      out[i] = uses.size();
    }
    return out;
  }

  private void beginStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
  }

  private void endStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
  }

  private OverlapScores walk(long[] localHashes, boolean earlyExit) {
    final int len = localHashes.length;
    if (len == 0) return Scores.EMPTY;
    TreeNode node = root.child(localHashes[0]);
    if (node == null) return Scores.EMPTY;
    int[] prev = node.holders();
    final int m = prev.length;
    if (m == 0) return Scores.EMPTY;
    // alive ids in ids[0..alive), sorted; dropped ids after them with their final scores
    final int[] ids = prev.clone();
    final int[] scores = new int[m];
    int alive = m;
    int depth = 1;
    if (!(earlyExit && alive == 1)) {
      for (; depth < len; depth++) {
        node = node.child(localHashes[depth]);
        if (node == null) break;
        int[] h = node.holders();
        if (h != prev) {
          alive = retain(ids, scores, alive, h, depth);
          prev = h;
          if (alive == 0) break;
        }
        if (earlyExit && alive == 1) {
          depth++;
          break;
        }
      }
    }
    for (int i = 0; i < alive; i++) scores[i] = depth;
    final WorkerState[] states = workers.readerView();
    final io.kvrouter.event.Worker[] out = new io.kvrouter.event.Worker[m];
    final int[] counts = new int[m];
    int n = 0;
    for (int i = 0; i < m; i++) {
      if (scores[i] <= 0) continue;
      WorkerState ws = states[ids[i]];
      out[n] = ws.worker;
      scores[n] = scores[i];
      counts[n] = ws.heldBlocks;
      n++;
    }
    return new Scores(out, scores, counts, n);
  }

  /**
   * Keeps in {@code ids[0..alive)} the ids that are in {@code holders} (sorted); each other id is
   * swapped behind the alive range with {@code score} as its final score. Returns the new alive
   * count. Order inside the alive range does not matter.
   */
  private static int retain(int[] ids, int[] scores, int alive, int[] holders, int score) {
    int i = 0;
    while (i < alive) {
      int id = ids[i];
      if (java.util.Arrays.binarySearch(holders, id) >= 0) {
        i++;
      } else {
        alive--;
        ids[i] = ids[alive];
        ids[alive] = id;
        scores[alive] = score;
      }
    }
    return alive;
  }

  // ------------------------------------------------------------------ writes

  @Override
  public void apply(RouterEvent event) {
    if (writeLock != null) writeLock.lock();
    try {
      applyLocked(event);
    } finally {
      if (writeLock != null) writeLock.unlock();
    }
  }

  private void applyLocked(RouterEvent event) {
    CacheEvent data = event.data();
    if (data instanceof CacheEvent.Stored s) {
      store(workers.intern(event.worker()), s);
    } else if (data instanceof CacheEvent.Removed r) {
      WorkerState ws = workers.find(event.worker());
      remove(ws, r);
    } else {
      WorkerState ws = workers.intern(event.worker());
      clear(ws);
      clearedEvents++;
    }
  }

  private void store(WorkerState ws, CacheEvent.Stored s) {
    TreeNode parent;
    if (s.hasParent()) {
      parent = ws.blocks.get(s.parentHash());
      if (parent == null) {
        parentMissing++;
        return;
      }
    } else {
      parent = root;
    }
    final long[] seqs = s.blockHashes();
    final long[] locals = s.tokensHashes();
    final int id = ws.id;
    boolean connected = parent == root || parent.isHolder(id);
    List<TreeNode> pruneLater = null;
    for (int i = 0; i < seqs.length; i++) {
      TreeNode child = parent.child(locals[i]);
      if (child == null) child = parent.addChild(locals[i]);
      long seq = seqs[i];
      TreeNode previous = ws.blocks.get(seq);
      if (previous != child) {
        if (previous != null) {
          // the same sequence hash named another position: the newer store wins. Pruning waits
          // for the end of the store, so no node of this chain is unlinked under it.
          unname(ws, seq, previous);
          if (pruneLater == null) pruneLater = new ArrayList<>();
          pruneLater.add(previous);
        }
        name(ws, seq, child, connected);
      }
      parent = child;
    }
    storedEvents++;
    if (pruneLater != null) {
      for (TreeNode n : pruneLater) prune(n);
    }
  }

  /** Records that {@code ws} holds {@code node} under {@code seq}. */
  private void name(WorkerState ws, long seq, TreeNode node, boolean parentConnected) {
    ws.blocks.put(seq, node);
    final int id = ws.id;
    if (node.isHolder(id) || node.isDetached(id)) {
      if (ws.aliases == null) ws.aliases = new Object2IntOpenHashMap<>();
      ws.aliases.addTo(node, 1);
      return;
    }
    ws.heldBlocks++;
    blocksIndexed++;
    if (parentConnected) {
      if (ws.detachedCount > 0 && hasDetachedChild(node, id)) {
        beginStep();
        node.addHolder(id);
        reconnectBelow(ws, node);
        endStep();
      } else {
        node.addHolder(id);
      }
    } else {
      node.addDetached(id);
      ws.detachedCount++;
    }
  }

  /** Undoes {@link #name} for {@code seq}, which named {@code node}; does not prune. */
  private void unname(WorkerState ws, long seq, TreeNode node) {
    ws.blocks.remove(seq);
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
    if (node.isHolder(id)) {
      List<TreeNode> below = node.childCount > 0 ? heldBelow(node, id) : List.of();
      if (below.isEmpty()) {
        node.removeHolder(id);
      } else {
        beginStep();
        node.removeHolder(id);
        for (int i = below.size() - 1; i >= 0; i--) {
          TreeNode n = below.get(i);
          n.removeHolder(id);
          n.addDetached(id);
          ws.detachedCount++;
        }
        endStep();
      }
    } else {
      node.removeDetached(id);
      ws.detachedCount--;
    }
  }

  /** {@code id}'s connected descendants of {@code top}, parents before children. */
  private static List<TreeNode> heldBelow(TreeNode top, int id) {
    List<TreeNode> order = new ArrayList<>();
    ArrayDeque<TreeNode> stack = new ArrayDeque<>();
    stack.push(top);
    while (!stack.isEmpty()) {
      TreeNode n = stack.pop();
      n.forEachChild(
          c -> {
            if (c.isHolder(id)) {
              order.add(c);
              stack.push(c);
            }
          });
    }
    return order;
  }

  private static boolean hasDetachedChild(TreeNode node, int id) {
    boolean[] found = {false};
    node.forEachChild(c -> found[0] |= c.isDetached(id));
    return found[0];
  }

  /** Moves {@code ws}'s detached descendants of {@code top} back to holders, root first. */
  private void reconnectBelow(WorkerState ws, TreeNode top) {
    final int id = ws.id;
    ArrayDeque<TreeNode> stack = new ArrayDeque<>();
    stack.push(top);
    while (!stack.isEmpty() && ws.detachedCount > 0) {
      TreeNode n = stack.pop();
      n.forEachChild(
          c -> {
            if (c.isDetached(id)) {
              c.removeDetached(id);
              c.addHolder(id);
              ws.detachedCount--;
              stack.push(c);
            }
          });
    }
  }

  private void remove(WorkerState ws, CacheEvent.Removed r) {
    for (long seq : r.blockHashes()) {
      TreeNode node = ws == null ? null : ws.blocks.get(seq);
      if (node == null) {
        blocksMissing++;
        continue;
      }
      unname(ws, seq, node);
      prune(node);
    }
    removedEvents++;
  }

  /** Drops every block of {@code ws}, deepest first so readers never see a hole. */
  private void clear(WorkerState ws) {
    if (ws.blocks.isEmpty()) return;
    final int id = ws.id;
    List<TreeNode> nodes = new ArrayList<>(ws.blocks.values());
    nodes.sort(Comparator.comparingInt((TreeNode n) -> n.depth).reversed());
    beginStep();
    TreeNode last = null;
    for (TreeNode n : nodes) {
      if (n == last) continue; // aliases list a node twice
      last = n;
      if (n.isHolder(id)) n.removeHolder(id);
      else if (n.isDetached(id)) n.removeDetached(id);
    }
    endStep();
    blocksIndexed -= ws.heldBlocks;
    ws.blocks.clear();
    ws.aliases = null;
    ws.heldBlocks = 0;
    ws.detachedCount = 0;
    for (TreeNode n : nodes) prune(n);
  }

  /** Unlinks {@code node} and then its ancestors while they hold nothing and lead nowhere. */
  private void prune(TreeNode node) {
    while (node != root && node.isUnused()) {
      TreeNode p = node.parent;
      if (p.child(node.local) != node) return; // already unlinked
      p.removeChild(node);
      node = p;
    }
  }

  @Override
  public void clearWorker(long workerId) {
    if (writeLock != null) writeLock.lock();
    try {
      for (WorkerState ws : workers.ranksOf(workerId)) clear(ws);
    } finally {
      if (writeLock != null) writeLock.unlock();
    }
  }

  @Override
  public void removeWorker(long workerId) {
    if (writeLock != null) writeLock.lock();
    try {
      for (WorkerState ws : workers.ranksOf(workerId)) {
        clear(ws);
        workers.forget(ws);
      }
    } finally {
      if (writeLock != null) writeLock.unlock();
    }
  }

  // ------------------------------------------------------------------ dump, stats

  @Override
  public List<RouterEvent> dump() {
    if (writeLock != null) writeLock.lock();
    try {
      List<RouterEvent> out = new ArrayList<>();
      for (WorkerState ws : workers.live()) dumpWorker(ws, out);
      return out;
    } finally {
      if (writeLock != null) writeLock.unlock();
    }
  }

  /** One Stored event per connected block, parents before children (root first). */
  private void dumpWorker(WorkerState ws, List<RouterEvent> out) {
    final Worker worker = ws.worker;
    final int id = ws.id;
    Object2LongOpenHashMap<TreeNode> seqOf = new Object2LongOpenHashMap<>();
    for (Long2ObjectMap.Entry<TreeNode> e : ws.blocks.long2ObjectEntrySet()) {
      seqOf.put(e.getValue(), e.getLongKey());
    }
    ArrayDeque<TreeNode> stack = new ArrayDeque<>();
    root.forEachChild(
        c -> {
          if (c.isHolder(id)) stack.push(c);
        });
    long eventId = 0;
    while (!stack.isEmpty()) {
      TreeNode n = stack.pop();
      long seq = seqOf.getLong(n);
      CacheEvent ev =
          n.parent == root
              ? CacheEvent.storedAtRoot(new long[] {seq}, new long[] {n.local})
              : CacheEvent.stored(seqOf.getLong(n.parent), new long[] {seq}, new long[] {n.local});
      out.add(new RouterEvent(worker, eventId++, ev));
      n.forEachChild(
          c -> {
            if (c.isHolder(id)) stack.push(c);
          });
    }
    if (ws.blocks.isEmpty()) {
      out.add(new RouterEvent(worker, eventId, CacheEvent.cleared()));
    }
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
