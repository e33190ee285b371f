package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import it.unimi.dsi.fastutil.longs.Long2ObjectMap;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The positional index: one hash table of every cached block keyed by (position, local hash) and
 * the §2 sequence hash of its path, searched by jumping {@code jumpSize} positions ahead and
 * bisecting back only where workers drop out; behind {@link KvIndexes#positional(int)}.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: a PositionalTable (see there) of PositionalEntry slots, one per distinct block path,
 * keyed by the router's own §2 sequence hash of the path together with position and local hash;
 * per worker rank a PositionalWorker mapping its engine's sequence hashes to entries. Workers are
 * dense int ids (PositionalWorkers). On the writer side the entries also form a block tree
 * (parent and child links), used only to detach and reconnect below a hole and to prune.
 *
 * Sequence hashes (DESIGN.md §4 rule 8): a Stored block's entry is found by the router's hash
 * next(parent entry's hash, local), never by the engine's hash, which only names the block for
 * Removed and for later parents. For an engine that follows §2 the two are equal; for one that
 * does not, the block still lands on the entry of its true path, so the index scores it exactly
 * like the block tree (better than rule 8's floor of "position 0 only", and never more). A query
 * computes its own §2 hashes as it goes and looks up only (hash, position, local) triples: a
 * probe that lands on a matching slot has therefore matched the whole path up to it, so no skipped
 * block can differ.
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
 * Writers: every mutation (apply, clearWorker, removeWorker, dump) runs under one
 * ReentrantLock, so writers of any workers may call concurrently and take turns.
 * Readers: findMatches takes no lock; it loads the table with acquire, each slot with acquire,
 * and each entry's holders with acquire.
 *
 * Holes (DESIGN.md §4 rules 1 and 4), as in TreeIndex: removing a block a worker still holds
 * descendants of moves the worker's held descendants, leaf first, from holders to detached; a
 * later store that makes the block held again moves them back, root first; clearing drops a
 * worker's entries deepest first. So holders only ever names workers that hold the whole path,
 * and each write moves a worker's score on any query path by at most one block. A reader that
 * saw a worker in holders at position p (score >= p+1 at that instant) and out of holders at
 * p+1 (score <= p+1 at that instant) therefore reports a score the worker had at some instant of
 * the call, even when the two reads straddle writes: no over-count, no torn state.
 *
 * Tests may pass a Runnable that runs after every single holders change (writer's thread, under
 * the lock), to read each intermediate state a lock-free reader could see.
 *
 * Pruning: an entry that nobody holds and that has no children is unlinked from the table and
 * its parent, then its parent is tried. A Stored event defers pruning to its end, so an entry on
 * the chain being stored is never unlinked under it. An unlinked entry is never written again; a
 * reader that still holds it sees its last holders, which are empty.
 * </pre>
 */
final class PositionalIndex implements KvIndex {
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
  private final Runnable afterHolderChange; // tests only; null otherwise
  private final PositionalWorkers workers = new PositionalWorkers();
  private final ReentrantLock writeLock = new ReentrantLock();

  /**
   * Odd while a writer changes several entries that must look like one step to readers (making or
   * filling a hole, clearing a worker); readers retry a walk that overlapped such a step.
   */
  @SuppressWarnings("unused") // through VERSION
  private long version;

  private static final VarHandle VERSION;

  static {
    try {
      VERSION = MethodHandles.lookup().findVarHandle(PositionalIndex.class, "version", long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Optimistic walks before a reader falls back to the writers' lock (docs/concurrency.md). */
  private static final int OPTIMISTIC_ATTEMPTS = 64;

  private void beginStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
  }

  private void endStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
  }

  @SuppressWarnings("unused") // through TABLE
  private PositionalTable table = new PositionalTable();

  // counters: written under writeLock, read racily by stats()
  private volatile long storedEvents;
  private volatile long removedEvents;
  private volatile long clearedEvents;
  private volatile long parentMissing;
  private volatile long blocksMissing;
  private volatile long blocksIndexed;

  PositionalIndex(int jumpSize) {
    this(jumpSize, null);
  }

  /**
   * For tests: {@code afterHolderChange} runs on the writer's thread, under the lock, after every
   * single change of an entry's holders, so a test can read each intermediate state a lock-free
   * reader could see.
   */
  PositionalIndex(int jumpSize, Runnable afterHolderChange) {
    if (jumpSize < 1) {
      throw new IllegalArgumentException("jumpSize must be >= 1, got " + jumpSize);
    }
    this.jumpSize = jumpSize;
    this.afterHolderChange = afterHolderChange;
  }

  private void holdersChanged() {
    if (afterHolderChange != null) afterHolderChange.run();
  }

  int jumpSize() {
    return jumpSize;
  }

  // ------------------------------------------------------------------ reads

  private PositionalEntry lookup(long seq, int position, long local) {
    return ((PositionalTable) TABLE.getAcquire(this)).get(seq, position, local);
  }

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    for (int attempt = 0; attempt < OPTIMISTIC_ATTEMPTS; attempt++) {
      long before = (long) VERSION.getAcquire(this);
      if ((before & 1L) == 0) {
        OverlapScores s = walk(localHashes, earlyExit);
        // every table and holders load in walk() is an acquire load: this one stays below them
        if ((long) VERSION.getAcquire(this) == before) return s;
      }
      Thread.onSpinWait();
    }
    writeLock.lock();
    try {
      return walk(localHashes, earlyExit);
    } finally {
      writeLock.unlock();
    }
  }

  private OverlapScores walk(long[] localHashes, boolean earlyExit) {
    final int len = localHashes.length;
    if (len == 0) return Scores.EMPTY;
    final long first = localHashes[0];
    final PositionalEntry e0 = lookup(first, 0, first);
    if (e0 == null) return Scores.EMPTY;
    final int[] holders0 = e0.holders();
    final int m = holders0.length;
    if (m == 0) return Scores.EMPTY;
    // alive ids in ids[0..alive), sorted (partition keeps the kept ones in order); dropped ids
    // after them with their final scores
    final int[] ids = holders0.clone();
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
        final PositionalEntry e = lookup(seq, probe, localHashes[probe]);
        final int[] h = e == null ? SortedIds.NONE : e.holders();
        // no one dropped out: the usual case, one vectorised compare instead of a search per id
        final int kept =
            h.length == alive && Arrays.equals(ids, 0, alive, h, 0, alive)
                ? alive
                : partition(ids, 0, alive, h);
        if (kept < alive) resolve(localHashes, ids, scores, kept, alive, cur, curSeq, probe);
        alive = kept;
        cur = probe;
        curSeq = seq;
        if (alive == 0 || (earlyExit && alive == 1)) break;
      }
    }
    for (int i = 0; i < alive; i++) scores[i] = cur + 1;
    final PositionalWorker[] states = workers.readerView();
    final Worker[] out = new Worker[m];
    final int[] counts = new int[m];
    int n = 0;
    for (int i = 0; i < m; i++) {
      if (scores[i] <= 0) continue;
      final PositionalWorker ws = states[ids[i]];
      out[n] = ws.worker;
      scores[n] = scores[i];
      counts[n] = ws.heldBlocks;
      n++;
    }
    return new Scores(out, scores, counts, n);
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
    final PositionalEntry e = lookup(seq, mid, localHashes[mid]);
    final int[] h = e == null ? SortedIds.NONE : e.holders();
    final int k = partition(ids, from, to, h);
    if (k < to) resolve(localHashes, ids, scores, k, to, lo, loSeq, mid);
    if (k > from) resolve(localHashes, ids, scores, from, k, mid, seq, hi);
  }

  // ------------------------------------------------------------------ writes

  @Override
  public void apply(RouterEvent event) {
    writeLock.lock();
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
      writeLock.unlock();
    }
  }

  private PositionalTable table() {
    return (PositionalTable) TABLE.get(this);
  }

  private void store(PositionalWorker ws, CacheEvent.Stored s) {
    PositionalEntry parent = null; // null: the root
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
    List<PositionalEntry> pruneLater = null;
    for (int i = 0; i < seqs.length; i++) {
      final long local = locals[i];
      final long key = parent == null ? local : SequenceHasher.next(parent.seq, local);
      final int position = parent == null ? 0 : parent.position + 1;
      PositionalEntry child = table().get(key, position, local);
      final long seq = seqs[i];
      final PositionalEntry previous = ws.blocks.get(seq);
      if (previous == null || previous != child) {
        if (previous != null) {
          // the same engine hash named another block: the newer store wins
          unname(ws, seq, previous, false);
          if (pruneLater == null) pruneLater = new ArrayList<>();
          pruneLater.add(previous);
        }
        if (child == null) child = link(key, position, local, parent);
        // after unname: the parent may just have lost its last name
        name(ws, seq, child, parent == null || parent.isHolder(id));
      }
      parent = child;
    }
    storedEvents++;
    if (pruneLater != null) {
      for (PositionalEntry e : pruneLater) prune(e);
    }
  }

  /** A new, empty entry under {@code parent}, in the table. */
  private PositionalEntry link(long key, int position, long local, PositionalEntry parent) {
    PositionalEntry e = new PositionalEntry(key, position, local, parent);
    if (parent != null) parent.linkChild(e);
    e.linked = true;
    PositionalTable t = table();
    PositionalTable grown = t.put(e);
    if (grown != t) TABLE.setRelease(this, grown);
    return e;
  }

  /** Records that {@code ws} holds {@code e} under {@code seq}. */
  private void name(PositionalWorker ws, long seq, PositionalEntry e, boolean parentConnected) {
    ws.blocks.put(seq, e);
    final int id = ws.id;
    if (e.isHolder(id) || e.isDetached(id)) {
      if (ws.aliases == null) ws.aliases = new Object2IntOpenHashMap<>();
      ws.aliases.addTo(e, 1);
      return;
    }
    ws.heldBlocks++;
    blocksIndexed++;
    if (parentConnected) {
      if (ws.detachedCount > 0) {
        beginStep();
        e.addHolder(id);
        holdersChanged();
        reconnectBelow(ws, e);
        endStep();
      } else {
        e.addHolder(id);
        holdersChanged();
      }
    } else {
      e.addDetached(id);
      ws.detachedCount++;
    }
  }

  /** Undoes {@link #name} for {@code seq}, which named {@code e}. */
  private void unname(PositionalWorker ws, long seq, PositionalEntry e, boolean prune) {
    ws.blocks.remove(seq);
    final int id = ws.id;
    if (ws.aliases != null) {
      int extra = ws.aliases.getInt(e);
      if (extra > 0) {
        if (extra == 1) ws.aliases.removeInt(e);
        else ws.aliases.put(e, extra - 1);
        return;
      }
    }
    ws.heldBlocks--;
    blocksIndexed--;
    if (e.isHolder(id)) {
      if (e.childCount > 0) {
        beginStep();
        detachBelow(ws, e);
        e.removeHolder(id);
        holdersChanged();
        endStep();
      } else {
        e.removeHolder(id);
        holdersChanged();
      }
    } else {
      e.removeDetached(id);
      ws.detachedCount--;
    }
    if (prune) prune(e);
  }

  /** Moves {@code ws}'s held descendants of {@code top} from holders to detached, leaf first. */
  private void detachBelow(PositionalWorker ws, PositionalEntry top) {
    final int id = ws.id;
    List<PositionalEntry> order = new ArrayList<>();
    ArrayDeque<PositionalEntry> stack = new ArrayDeque<>();
    stack.push(top);
    while (!stack.isEmpty()) {
      PositionalEntry n = stack.pop();
      for (PositionalEntry c = n.firstChild; c != null; c = c.nextSibling) {
        if (c.isHolder(id)) {
          order.add(c);
          stack.push(c);
        }
      }
    }
    // reverse pre-order: every entry after all of its descendants
    for (int i = order.size() - 1; i >= 0; i--) {
      PositionalEntry n = order.get(i);
      n.removeHolder(id);
      n.addDetached(id);
      ws.detachedCount++;
      holdersChanged();
    }
  }

  /** Moves {@code ws}'s detached descendants of {@code top} back to holders, root first. */
  private void reconnectBelow(PositionalWorker ws, PositionalEntry top) {
    final int id = ws.id;
    ArrayDeque<PositionalEntry> stack = new ArrayDeque<>();
    stack.push(top);
    while (!stack.isEmpty() && ws.detachedCount > 0) {
      PositionalEntry n = stack.pop();
      for (PositionalEntry c = n.firstChild; c != null; c = c.nextSibling) {
        if (c.isDetached(id)) {
          c.removeDetached(id);
          c.addHolder(id);
          ws.detachedCount--;
          holdersChanged();
          stack.push(c);
        }
      }
    }
  }

  private void remove(PositionalWorker ws, CacheEvent.Removed r) {
    for (long seq : r.blockHashes()) {
      PositionalEntry e = ws == null ? null : ws.blocks.get(seq);
      if (e == null) {
        blocksMissing++;
        continue;
      }
      unname(ws, seq, e, true);
    }
    removedEvents++;
  }

  /** Drops every block of {@code ws}, deepest first so readers never see a hole. */
  private void clear(PositionalWorker ws) {
    if (ws.blocks.isEmpty()) return;
    final int id = ws.id;
    List<PositionalEntry> entries = new ArrayList<>(ws.blocks.values());
    entries.sort(Comparator.comparingInt((PositionalEntry e) -> e.position).reversed());
    beginStep();
    for (PositionalEntry e : entries) {
      // an aliased entry is listed twice: the second visit finds nothing to do
      if (e.isHolder(id)) {
        e.removeHolder(id);
        holdersChanged();
      } else if (e.isDetached(id)) {
        e.removeDetached(id);
      }
    }
    endStep();
    blocksIndexed -= ws.heldBlocks;
    ws.blocks.clear();
    ws.aliases = null;
    ws.heldBlocks = 0;
    ws.detachedCount = 0;
    for (PositionalEntry e : entries) prune(e);
  }

  /**
   * Unlinks {@code e} and then its ancestors while they are linked, held by nobody and childless.
   */
  private void prune(PositionalEntry e) {
    while (e != null && e.linked && e.isUnused()) {
      if (!table().remove(e)) throw new IllegalStateException("linked entry not in the table");
      if (e.parent != null) e.parent.unlinkChild(e);
      e.linked = false;
      e = e.parent;
    }
  }

  @Override
  public void clearWorker(long workerId) {
    writeLock.lock();
    try {
      for (PositionalWorker ws : workers.ranksOf(workerId)) clear(ws);
    } finally {
      writeLock.unlock();
    }
  }

  @Override
  public void removeWorker(long workerId) {
    writeLock.lock();
    try {
      for (PositionalWorker ws : workers.ranksOf(workerId)) {
        clear(ws);
        workers.forget(ws);
      }
    } finally {
      writeLock.unlock();
    }
  }

  // ------------------------------------------------------------------ dump, stats

  @Override
  public List<RouterEvent> dump() {
    writeLock.lock();
    try {
      List<RouterEvent> out = new ArrayList<>();
      for (PositionalWorker ws : workers.live()) dumpWorker(ws, out);
      return out;
    } finally {
      writeLock.unlock();
    }
  }

  /**
   * One Stored event per connected block, shallowest first (so each parent comes before its
   * children), under the engine's own hashes; a lone Cleared event when none is connected, so the
   * worker stays known. Detached blocks are left out: they score nothing.
   */
  private static void dumpWorker(PositionalWorker ws, List<RouterEvent> out) {
    final Worker worker = ws.worker;
    final int id = ws.id;
    Object2LongOpenHashMap<PositionalEntry> seqOf = new Object2LongOpenHashMap<>();
    for (Long2ObjectMap.Entry<PositionalEntry> e : ws.blocks.long2ObjectEntrySet()) {
      seqOf.put(e.getValue(), e.getLongKey());
    }
    List<PositionalEntry> connected = new ArrayList<>();
    for (PositionalEntry e : seqOf.keySet()) {
      if (e.isHolder(id)) connected.add(e);
    }
    connected.sort(Comparator.comparingInt((PositionalEntry e) -> e.position));
    long eventId = 0;
    for (PositionalEntry e : connected) {
      long[] seq = {seqOf.getLong(e)};
      long[] local = {e.local};
      CacheEvent ev =
          e.parent == null
              ? CacheEvent.storedAtRoot(seq, local)
              : CacheEvent.stored(seqOf.getLong(e.parent), seq, local);
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

  /** Entries in the table now; for tests. Writer-side (takes the lock). */
  int entryCount() {
    writeLock.lock();
    try {
      return table().size();
    } finally {
      writeLock.unlock();
    }
  }

  @Override
  public void close() {}

  @Override
  public String toString() {
    return "PositionalIndex(jumpSize=" + jumpSize + ")";
  }
}
