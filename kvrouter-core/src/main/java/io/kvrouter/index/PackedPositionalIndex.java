package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import it.unimi.dsi.fastutil.ints.Int2IntOpenHashMap;
import it.unimi.dsi.fastutil.ints.Int2LongOpenHashMap;
import it.unimi.dsi.fastutil.ints.IntArrayList;
import it.unimi.dsi.fastutil.ints.IntIterator;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.NullUnmarked;

/**
 * The positional index ({@link KvIndexes#positional(int)}, and bounded {@link
 * KvIndexes#positional(int, long)}) on block records with int ids ({@link PackedBlocks}) instead of
 * an object per block: {@link PositionalIndex}'s search and {@link BlockIndex}'s writer, on ids;
 * the bound is {@link PackedClockBound}, ClockBound's CLOCK on ids.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: a PackedTable of block ids keyed by (the router's §2 hash of the block's path, its local
 * hash); the blocks' records in PackedBlocks (key, holders' set id and parent in three longs, the
 * children in an int: 28 bytes a block, no header), the distinct holder arrays in HolderSets; per
 * worker rank a PackedWorker (its names other than the blocks' own keys, as PositionalNames).
 * Memory on config B of IndexWorkload: 28 bytes a block and the table's 4.5-byte slots at 1/2 to
 * 3/4 full, 35.2 to 35.7 bytes per (worker, block) pair against 46.3 to 47.0 for the object layout
 * (docs/BENCHMARKS.md, "Issue 37: the positional index on int ids").
 *
 * Search: PositionalIndex's (see there): probe every jumpSize-th position, bisect back where
 * workers drop out. A probe is a table lookup (tag, slot id) and one record read: the key and
 * the holders' set id share a cache line, and the set is one of a few arrays that stay in cache.
 *
 * Writes: BlockIndex's rules (holes, steps, pruning, the newer store winning a hash, aliases),
 * on ids; see there. Every mutation (apply, clearWorker, removeWorker, dump) runs under one
 * ReentrantLock. Readers take no lock: findMatches walks between two acquire loads of the version
 * (SteppedIndex), and every load of a slot, a record word or a set in the walk is an acquire load.
 *
 * Id reuse: the id of a pruned block, and of a holder set no block uses any more, is not handed
 * out again at once: it waits until reuseBatch ids wait; then, before the next operation and
 * outside any step, the writer bumps the version (SteppedIndex.bumpVersion) and only then lets
 * them back into use (a reused id's record is written with release stores after the bump). A
 * walk that read an id's old meaning and might read its new one therefore overlaps the bump and
 * retries; a walk that keeps its answer saw every id it reached mean one thing throughout.
 * Without the bump a reader could match an old key and then read the holders of the block that
 * took its id (PackedIdReuseLincheckTest finds that interleaving when the bump is left out). The
 * same bump precedes dropping every page when the last block goes. Freed ids keep their key and
 * their empty holders meanwhile, as an unlinked PositionalEntry does. A bump costs the walks
 * under way one retry: with the default batch (REUSE_BATCH), one per 1,024 freed block ids or
 * 1,024 freed holder sets, whichever fills first.
 *
 * Bound (maxBlocks, PackedClockBound): readers set the used bit (PackedBlocks, an atomic OR, no
 * lock) of each block PositionalIndex's walk marks: the first block when someone holds it, each
 * probe where an alive worker stays, each bisection probe some worker holds. A bounded walk looks
 * the id up (PackedTable.get) and then reads its holders, so a probe reads the record twice; the
 * version check covers an id reused in between as it covers any other. The writer calls the bound
 * where BlockIndex does (makeRoom before each block of a store while full, evictToFit after a
 * Stored event, nodeCreated, pruned) and before ids go back into use (beforeReuse) or every page
 * is dropped (allFreed): the clock queue never names a reused id (PackedClockBound's notes).
 * Memory on config B: 39.4 bytes per pair with a bound never reached, against 50.8 for the
 * object layout (docs/BENCHMARKS.md, "Issue 37: the bounded positional kinds on int ids").
 *
 * Tests may pass a Runnable that runs after every single holders change (BlockIndex).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PackedPositionalIndex extends SteppedIndex {
  /** Freed ids that wait before they go back into use, one version bump for them all. */
  static final int REUSE_BATCH = 1024;

  private static final int NONE = PackedBlocks.NONE;
  private static final VarHandle TABLE;

  static {
    try {
      TABLE =
          MethodHandles.lookup()
              .findVarHandle(PackedPositionalIndex.class, "table", PackedTable.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final int jumpSize;
  final PackedBlocks blocks;
  final IndexCounters counters = new IndexCounters();
  final PackedWorkers workers;
  private final Runnable afterHolderChange; // tests only; null otherwise

  /** The CLOCK bound; null when unbounded. */
  final PackedClockBound bound;

  @SuppressWarnings("unused") // through TABLE
  private PackedTable table;

  private int[] removalScratch = new int[16];
  private final IntArrayList childScratch = new IntArrayList();

  PackedPositionalIndex(int jumpSize) {
    this(jumpSize, null, REUSE_BATCH);
  }

  /**
   * For tests: {@code afterHolderChange} runs on the writer's thread after every single change of a
   * block's holders; freed ids go back into use {@code reuseBatch} at a time.
   */
  PackedPositionalIndex(int jumpSize, Runnable afterHolderChange, int reuseBatch) {
    this(jumpSize, afterHolderChange, reuseBatch, Long.MAX_VALUE);
  }

  /**
   * An index that holds at most {@code maxBlocks} (worker, block) pairs (PackedClockBound);
   * Long.MAX_VALUE: unbounded. For tests as the constructor above.
   */
  PackedPositionalIndex(int jumpSize, Runnable afterHolderChange, int reuseBatch, long maxBlocks) {
    super(new ReentrantLock());
    if (jumpSize < 1) {
      throw new IllegalArgumentException("jumpSize must be >= 1, got " + jumpSize);
    }
    if (maxBlocks < 1)
      throw new IllegalArgumentException("maxBlocks must be >= 1, got " + maxBlocks);
    this.jumpSize = jumpSize;
    this.afterHolderChange = afterHolderChange;
    final boolean bounded = maxBlocks != Long.MAX_VALUE;
    this.blocks = new PackedBlocks(reuseBatch, bounded);
    this.workers = new PackedWorkers(this, counters);
    this.bound = bounded ? new PackedClockBound(this, counters, maxBlocks) : null;
    TABLE.setRelease(this, new PackedTable(blocks));
  }

  int jumpSize() {
    return jumpSize;
  }

  /** The table as the writer sees it (plain load). Writer-side. */
  PackedTable table() {
    return (PackedTable) TABLE.get(this);
  }

  // ------------------------------------------------------------------ reads

  /** The holders of the block keyed (seq, local); empty when there is none. */
  private int[] lookup(long seq, long local) {
    return ((PackedTable) TABLE.getAcquire(this)).holders(seq, local);
  }

  /** The id of the block keyed (seq, local), or NONE (bounded walks: they mark it used). */
  private int probe(long seq, long local) {
    return ((PackedTable) TABLE.getAcquire(this)).get(seq, local);
  }

  private int[] holdersOf(int b) {
    return b < 0 ? SortedIds.NONE : blocks.holders(b);
  }

  @Override
  OverlapScores walk(long[] localHashes, boolean earlyExit) {
    final int len = localHashes.length;
    if (len == 0) return Scores.EMPTY;
    final long first = localHashes[0];
    final boolean mark = bound != null;
    // bounded: the id too, to set its used bit (PositionalIndex marks the same blocks)
    final int id0 = mark ? probe(first, first) : NONE;
    final int[] holders0 = mark ? holdersOf(id0) : lookup(first, first);
    // a first block has no ancestor to miss, so no detached (negative) ids: from is 0
    final int from = IndexNode.connectedFrom(holders0);
    final int m = holders0.length - from;
    if (m == 0) return Scores.EMPTY;
    if (mark) blocks.markUsed(id0);
    // alive ids in ids[0..alive), sorted; dropped ids after them with their final scores
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
        final int b = mark ? probe(seq, localHashes[probe]) : NONE;
        final int[] h = mark ? holdersOf(b) : lookup(seq, localHashes[probe]);
        final int kept =
            h.length == alive && Arrays.equals(ids, 0, alive, h, 0, alive)
                ? alive
                : partition(ids, 0, alive, h);
        if (mark && kept > 0) blocks.markUsed(b);
        if (kept < alive) resolve(localHashes, ids, scores, kept, alive, cur, curSeq, probe);
        alive = kept;
        cur = probe;
        curSeq = seq;
        if (alive == 0 || (earlyExit && alive == 1)) break;
      }
    }
    for (int i = 0; i < alive; i++) scores[i] = cur + 1;
    final PackedWorker[] states = workers.readerView();
    final int[] counts = new int[m];
    for (int i = 0; i < m; i++) counts[i] = states[ids[i]].heldBlocks;
    return new Scores(states, ids, scores, counts, m);
  }

  /** PositionalIndex.partition. */
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

  /** PositionalIndex.resolve: bisects (lo, hi] for the workers ids[from..to). */
  private void resolve(
      long[] localHashes, int[] ids, int[] scores, int from, int to, int lo, long loSeq, int hi) {
    if (hi - lo == 1) {
      for (int i = from; i < to; i++) scores[i] = hi;
      return;
    }
    final int mid = (lo + hi) >>> 1;
    long seq = loSeq;
    for (int p = lo + 1; p <= mid; p++) seq = SequenceHasher.next(seq, localHashes[p]);
    final boolean mark = bound != null;
    final int b = mark ? probe(seq, localHashes[mid]) : NONE;
    final int[] h = mark ? holdersOf(b) : lookup(seq, localHashes[mid]);
    final int k = partition(ids, from, to, h);
    if (mark && k > from) blocks.markUsed(b);
    if (k < to) resolve(localHashes, ids, scores, k, to, lo, loSeq, mid);
    if (k > from) resolve(localHashes, ids, scores, from, k, mid, seq, hi);
  }

  // ------------------------------------------------------------------ blocks (writer side)

  boolean isHolder(int b, int id) {
    return SortedIds.contains(blocks.holders(b), id);
  }

  private boolean isDetached(int b, int id) {
    return SortedIds.contains(blocks.holders(b), ~id);
  }

  private static boolean isDetached(PackedPositionalIndex x, int b, PackedWorker ws) {
    return ws.detachedCount > 0 && x.isDetached(b, ws.id);
  }

  /** Whether {@code ws} holds {@code b} detached. */
  boolean isDetachedBy(int b, PackedWorker ws) {
    return isDetached(this, b, ws);
  }

  /** The block of {@code local} under {@code parent} (NONE at the top), or NONE. */
  int findChild(int parent, long local) {
    final long key = parent < 0 ? local : SequenceHasher.next(blocks.seq(parent), local);
    return table().get(key, local);
  }

  private void setHolders(int b, int[] a) {
    blocks.publishHolders(b, a);
  }

  /**
   * The block of {@code local} under {@code parent} (NONE at the top), found by the router's own §2
   * hash of the path; made and published if new.
   */
  private int childFor(int parent, long local) {
    final long key = parent < 0 ? local : SequenceHasher.next(blocks.seq(parent), local);
    final PackedTable t = table();
    int b = t.get(key, local);
    if (b >= 0) return b;
    b = blocks.allocate(key, local, parent);
    final PackedTable grown = t.put(b);
    if (grown != t) TABLE.setRelease(this, grown);
    if (bound != null) bound.nodeCreated(b);
    return b;
  }

  /** Takes the unheld, childless block {@code b} out of the table and frees its id. */
  private void unlink(int b) {
    final PackedTable t = table();
    if (!t.remove(b)) throw new IllegalStateException("linked block not in the table");
    final PackedTable small = t.shrunk();
    if (small != t) TABLE.setRelease(this, small);
    if (blocks.free(b) && blocks.pages() > 1) {
      bumpVersion(); // as for a reuse: no walk under way keeps an answer read from a dropped page
      if (bound != null) bound.allFreed();
      blocks.reset();
    }
  }

  // ------------------------------------------------------------------ writes

  private void changedInStep() {
    holdersChanged();
    countStepChange();
  }

  private void holdersChanged() {
    if (afterHolderChange != null) afterHolderChange.run();
  }

  /**
   * Lets the ids of blocks and holder sets freed by earlier operations go back into use, once
   * enough wait: after a version bump, so walks under way retry before any freed id names something
   * else (class notes). Called before each operation, outside any step.
   */
  private void reuseFreedIds() {
    if (blocks.reusable()) {
      bumpVersion();
      if (bound != null) bound.beforeReuse();
      blocks.startReuse();
    }
  }

  @Override
  void applyLocked(RouterEvent event) {
    reuseFreedIds();
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

  private void store(PackedWorker ws, CacheEvent.Stored s) {
    int parent = NONE;
    if (s.hasParent()) {
      parent = ws.get(s.parentHash());
      if (parent < 0) {
        counters.inc(IndexCounters.PARENT_MISSING);
        return;
      }
      if (bound != null) blocks.markUsed(parent);
    }
    final long[] seqs = s.blockHashes();
    final long[] locals = s.tokensHashes();
    final int id = ws.id;
    final PackedClockBound bound = this.bound;
    IntArrayList pruneLater = null;
    if (bound != null) bound.storeBegins();
    boolean roomLeft = bound != null; // false once the hand found only this chain's to drop
    for (int i = 0; i < seqs.length; i++) {
      if (roomLeft && bound.full()) roomLeft = bound.makeRoom(ws, parent, locals[i], i);
      final int child = childFor(parent, locals[i]);
      final int previous = ws.put(seqs[i], child);
      if (previous != child) {
        if (previous >= 0) {
          // the same hash named another block: the newer store wins
          release(ws, previous);
          if (pruneLater == null) pruneLater = new IntArrayList();
          pruneLater.add(previous);
        }
        if (bound != null && !bound.isNew(child)) blocks.markUsed(child); // existed: used
        // asked after release: the parent may just have lost its last name
        hold(ws, child, parent < 0 || isHolder(parent, id));
      } else if (bound != null) {
        blocks.markUsed(child); // stored again: used
      }
      parent = child;
    }
    counters.inc(IndexCounters.STORED_EVENTS);
    if (pruneLater != null) {
      for (int i = 0; i < pruneLater.size(); i++) prune(pruneLater.getInt(i));
    }
  }

  /** Whether worker {@code id} holds a child of {@code b} connected. */
  boolean holdsChildOf(int id, int b) {
    if (!blocks.hasChildren(b)) return false;
    final IntArrayList children = childScratch;
    children.clear();
    blocks.addChildren(b, children);
    boolean found = false;
    for (int i = 0; i < children.size() && !found; i++) found = isHolder(children.getInt(i), id);
    children.clear();
    return found;
  }

  /** Records that {@code ws} holds {@code b} under one more name (already among its names). */
  private void hold(PackedWorker ws, int b, boolean parentConnected) {
    final int id = ws.id;
    if (isHolder(b, id) || isDetached(this, b, ws)) {
      if (ws.aliases == null) ws.aliases = new Int2IntOpenHashMap();
      ws.aliases.addTo(b, 1);
      return;
    }
    ws.heldBlocks++;
    counters.inc(IndexCounters.BLOCKS_INDEXED);
    if (!parentConnected) {
      setHolders(b, SortedIds.with(blocks.holders(b), ~id));
      ws.detachedCount++;
      holdersChanged();
      return;
    }
    final IntArrayList reconnect = ws.detachedCount > 0 ? detachedChildren(b, ws) : null;
    if (reconnect == null || reconnect.isEmpty()) {
      setHolders(b, SortedIds.with(blocks.holders(b), id));
      holdersChanged();
    } else {
      beginStep();
      try {
        setHolders(b, SortedIds.with(blocks.holders(b), id));
        changedInStep();
        reconnectBelow(ws, reconnect);
      } finally {
        endStep();
      }
    }
  }

  /** Undoes {@link #hold} for a name of {@code b} just dropped; no pruning. */
  private void release(PackedWorker ws, int b) {
    final int id = ws.id;
    if (ws.aliases != null) {
      final int extra = ws.aliases.get(b);
      if (extra > 0) {
        if (extra == 1) ws.aliases.remove(b);
        else ws.aliases.put(b, extra - 1);
        return;
      }
    }
    ws.heldBlocks--;
    counters.add(IndexCounters.BLOCKS_INDEXED, -1);
    ws.released(b);
    if (!isHolder(b, id)) {
      setHolders(b, SortedIds.without(blocks.holders(b), ~id));
      ws.detachedCount--;
      holdersChanged();
      return;
    }
    final IntArrayList below = holdsChildOf(id, b) ? heldBelow(b, id) : null;
    if (below == null || below.isEmpty()) {
      setHolders(b, SortedIds.without(blocks.holders(b), id));
      holdersChanged();
    } else {
      beginStep();
      try {
        // reverse pre-order: every block after all of its descendants, the block itself last
        for (int i = below.size() - 1; i >= 0; i--) {
          final int c = below.getInt(i);
          setHolders(c, SortedIds.replaced(blocks.holders(c), id, ~id));
          ws.detachedCount++;
          changedInStep();
        }
        setHolders(b, SortedIds.without(blocks.holders(b), id));
        holdersChanged();
      } finally {
        endStep();
      }
    }
  }

  /** {@code id}'s connected descendants of {@code top}, parents before children. */
  private IntArrayList heldBelow(int top, int id) {
    final IntArrayList order = new IntArrayList();
    final IntArrayList children = new IntArrayList();
    final IntArrayList stack = new IntArrayList();
    stack.add(top);
    while (!stack.isEmpty()) {
      children.clear();
      blocks.addChildren(stack.popInt(), children);
      for (int i = 0; i < children.size(); i++) {
        final int c = children.getInt(i);
        if (isHolder(c, id)) {
          order.add(c);
          stack.add(c);
        }
      }
    }
    return order;
  }

  /** The children of {@code b} that {@code ws} holds detached. */
  private IntArrayList detachedChildren(int b, PackedWorker ws) {
    final IntArrayList out = new IntArrayList();
    if (!blocks.hasChildren(b)) return out;
    final IntArrayList children = new IntArrayList();
    blocks.addChildren(b, children);
    for (int i = 0; i < children.size(); i++) {
      final int c = children.getInt(i);
      if (isDetached(this, c, ws)) out.add(c);
    }
    return out;
  }

  /**
   * Moves {@code ws}'s detached blocks {@code top} and their detached descendants back, root first.
   */
  private void reconnectBelow(PackedWorker ws, IntArrayList top) {
    final int id = ws.id;
    final IntArrayList stack = new IntArrayList(top.size());
    for (int i = top.size() - 1; i >= 0; i--) stack.add(top.getInt(i));
    final IntArrayList children = new IntArrayList();
    while (!stack.isEmpty()) {
      final int n = stack.popInt();
      setHolders(n, SortedIds.replaced(blocks.holders(n), ~id, id));
      ws.detachedCount--;
      changedInStep(); // root first: between steps every connected block's parent is connected
      if (ws.detachedCount == 0) return;
      children.clear();
      blocks.addChildren(n, children);
      for (int i = 0; i < children.size(); i++) {
        final int c = children.getInt(i);
        if (isDetached(this, c, ws)) stack.add(c);
      }
    }
  }

  private void remove(PackedWorker ws, CacheEvent.Removed r) {
    final long[] seqs = r.blockHashes();
    final int n = seqs.length;
    counters.inc(IndexCounters.REMOVED_EVENTS);
    if (ws == null) {
      counters.add(IndexCounters.BLOCKS_MISSING, n);
      return;
    }
    if (n == 1) {
      removeNamed(ws, ws.remove(seqs[0]));
      return;
    }
    // BlockIndex.remove: the names first, then each run of parent-and-child blocks from its end
    if (removalScratch.length < n) removalScratch = new int[Math.max(n, 2 * removalScratch.length)];
    final int[] nodes = removalScratch;
    for (int k = 0; k < n; k++) nodes[k] = ws.remove(seqs[k]);
    int from = 0;
    while (from < n) {
      int to = from + 1;
      while (to < n
          && nodes[to] >= 0
          && nodes[to - 1] >= 0
          && blocks.parent(nodes[to]) == nodes[to - 1]) to++;
      for (int k = to - 1; k >= from; k--) removeNamed(ws, nodes[k]);
      from = to;
    }
  }

  /** Releases {@code b}, whose name {@code ws} just dropped (-1: no such name), and prunes. */
  private void removeNamed(PackedWorker ws, int b) {
    if (b < 0) {
      counters.inc(IndexCounters.BLOCKS_MISSING);
      return;
    }
    release(ws, b);
    prune(b);
  }

  /** Drops every block of {@code ws}, deepest first, in steps (BlockIndex.clear). */
  private void clear(PackedWorker ws) {
    if (!ws.hasNames()) return;
    final int id = ws.id;
    final IntArrayList named = new IntArrayList();
    ws.addBlocksTo(named);
    final IntArrayList nodes = byDepth(named, true);
    beginStep();
    try {
      for (int i = 0; i < nodes.size(); i++) {
        final int b = nodes.getInt(i);
        // an aliased block is listed twice: the second visit finds nothing to do
        if (isHolder(b, id)) {
          setHolders(b, SortedIds.without(blocks.holders(b), id));
        } else if (isDetached(this, b, ws)) {
          setHolders(b, SortedIds.without(blocks.holders(b), ~id));
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
    ws.clearNames();
    ws.aliases = null;
    ws.heldBlocks = 0;
    ws.detachedCount = 0;
    for (int i = 0; i < nodes.size(); i++) prune(nodes.getInt(i));
  }

  /** Frees {@code b} and then its ancestors while they are unheld and lead nowhere. */
  void prune(int b) {
    while (b >= 0
        && blocks.isLinked(b)
        && blocks.holders(b).length == 0
        && !blocks.hasChildren(b)) {
      final int parent = blocks.parent(b);
      unlink(b);
      b = parent;
    }
    if (bound != null) bound.pruned();
  }

  /**
   * The bound dropped {@code ws}'s pair at {@code b} (a connected leaf of its, or detached), whose
   * names it already removed: ClockBound.dropPair's bookkeeping, one holders change; no pruning.
   */
  void evicted(PackedWorker ws, int b) {
    if (ws.aliases != null) ws.aliases.remove(b);
    ws.released(b);
    ws.heldBlocks--;
    counters.add(IndexCounters.BLOCKS_INDEXED, -1);
    if (isHolder(b, ws.id)) {
      setHolders(b, SortedIds.without(blocks.holders(b), ws.id));
    } else {
      setHolders(b, SortedIds.without(blocks.holders(b), ~ws.id));
      ws.detachedCount--;
    }
    holdersChanged();
    counters.inc(IndexCounters.EVICTED_BLOCKS);
  }

  /** {@code list} sorted by depth: deepest first, or shallowest first (BlockDump.byDepth). */
  private IntArrayList byDepth(IntArrayList list, boolean deepestFirst) {
    final int n = list.size();
    final long[] keys = new long[n];
    final Int2IntOpenHashMap depthOf = new Int2IntOpenHashMap();
    depthOf.defaultReturnValue(-1);
    final IntArrayList path = new IntArrayList();
    for (int i = 0; i < n; i++) {
      path.clear();
      int a = list.getInt(i);
      int d = 0;
      while (a >= 0) {
        final int known = depthOf.get(a);
        if (known >= 0) {
          d = known;
          break;
        }
        path.add(a);
        a = blocks.parent(a);
      }
      for (int k = path.size() - 1; k >= 0; k--) depthOf.put(path.getInt(k), ++d);
      keys[i] = (long) (deepestFirst ? -d : d) << 32 | i;
    }
    Arrays.sort(keys);
    final IntArrayList out = new IntArrayList(n);
    for (long k : keys) out.add(list.getInt((int) k));
    return out;
  }

  @Override
  public void clearWorker(long workerId) {
    lock();
    try {
      reuseFreedIds();
      for (PackedWorker ws : workers.ranksOf(workerId)) clear(ws);
    } finally {
      unlock();
    }
  }

  @Override
  public void removeWorker(long workerId) {
    lock();
    try {
      reuseFreedIds();
      for (PackedWorker ws : workers.ranksOf(workerId)) {
        clear(ws);
        workers.forget(ws);
      }
    } finally {
      unlock();
    }
  }

  // ------------------------------------------------------------------ dump, stats

  /** BlockDump's events: per worker one Stored per connected block, shallowest first. */
  @Override
  public List<RouterEvent> dump() {
    lock();
    try {
      final List<RouterEvent> out = new ArrayList<>();
      for (PackedWorker ws : workers.live()) dumpWorker(ws, out);
      return out;
    } finally {
      unlock();
    }
  }

  private void dumpWorker(PackedWorker ws, List<RouterEvent> out) {
    final Worker worker = ws.worker;
    final int id = ws.id;
    final Int2LongOpenHashMap seqOf = new Int2LongOpenHashMap();
    ws.addNamesTo(seqOf);
    final IntArrayList connected = new IntArrayList();
    for (IntIterator it = seqOf.keySet().iterator(); it.hasNext(); ) {
      final int b = it.nextInt();
      if (isHolder(b, id)) connected.add(b);
    }
    long eventId = 0;
    final IntArrayList ordered = byDepth(connected, false);
    for (int i = 0; i < ordered.size(); i++) {
      final int b = ordered.getInt(i);
      final long[] seq = {seqOf.get(b)};
      final long[] local = {blocks.local(b)};
      final int parent = blocks.parent(b);
      final CacheEvent ev =
          parent < 0
              ? CacheEvent.storedAtRoot(seq, local)
              : CacheEvent.stored(seqOf.get(parent), seq, local);
      out.add(new RouterEvent(worker, eventId++, ev));
    }
    if (connected.isEmpty()) out.add(new RouterEvent(worker, eventId, CacheEvent.cleared()));
  }

  @Override
  public int blockCount(Worker worker) {
    lock();
    try {
      PackedWorker ws = workers.find(worker);
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

  @Override
  public String toString() {
    return "PackedPositionalIndex(jumpSize=" + jumpSize + ")";
  }
}
