package io.kvrouter.route;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.route.SequenceChange.Predicted;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.NullUnmarked;

/**
 * Approximate mode's cache model: the blocks the router predicts each worker rank holds because it
 * sent them a prompt, kept per rank as an LRU of the rank's capacity in blocks (the engine's own KV
 * block count, or learned from the engines' cached-token reports), with a TTL as an upper bound;
 * mirrored into a {@link KvIndex} as Stored and Removed events so that routing reads predictions
 * exactly as it reads real events.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: one Rank per rank that was ever predicted, with a Long2ObjectOpenHashMap from sequence
 * hash to Entry (which keeps the block's local hash too, for snapshots) and its own intrusive
 * doubly linked LRU list (head = least recently touched). Each
 * Entry is also threaded on one global list in touch order (head = touched longest ago). The clock
 * is monotonic and a touch always moves an entry to the tail of both lists, so both lists are
 * sorted by touch time: the global head is the first to outlive the TTL (one fixed duration), and a
 * rank's head is what its LRU evicts. Touching, inserting and evicting are O(1) per block; no
 * heap, no stale entries; each list holds exactly its entries.
 *
 * Chains: record() walks a chain leaf first, appending each block, so within one chain the deepest
 * block sits nearest the heads and a block's ancestors are touched whenever it is. Every removal
 * (LRU eviction, TTL expiry, the global bound, a correction) pops from a head, so a chain loses its
 * leaves before its root and predictions stay closed under prefixes (no holes in the index). This
 * is the order an engine's prefix cache evicts in (vLLM, SGLang: LRU, leaves first).
 *
 * Capacity: Rank.capacity starts as the registered KV blocks of the rank (Slot.kvBlocks, passed on
 * every record), or unbounded when that is 0 (unknown), and is then learned from corrections
 * (below), never above the registered count. A record that takes a rank past its capacity (or
 * its share of the bound, below) evicts the rank's LRU blocks down to it at once and reports the
 * count to the Evictions listener: KvRouter feeds it to the eviction-pressure term, as it feeds
 * Removed events in event mode. TTL expiry and the global pruning are not evictions an engine
 * would make and are not reported.
 *
 * Correction (observe): an engine reports k cached blocks of a prompt at its admission, where
 * the decision predicted p. The engine stored the whole prompt at admission, so the report says
 * nothing about that prompt's blocks now; it says how far the model is off. k < p: the model
 * holds more than the engine, so the rank's capacity shrinks by p - k (an unbounded one starts
 * from the rank's predicted size), and the LRU drops its oldest predictions down to it: under
 * LRU those are the blocks the engine evicted first. k > p: the engine kept blocks the model had
 * dropped, so the capacity grows by k - p (up to the registered count). Either way the blocks
 * 0..k-1 are predicted again if the model lacks any (the whole chain is touched, leaf first, to
 * keep prefixes closed). The capacity is an integrator of the reported error, in blocks, with
 * gain 1: no tuned constant. Evictions made by a correction are not reported to Evictions.
 *
 * Speed: record() is told the index's overlap for the rank; blocks from there on are new
 * (prefixes are closed), so they are put without a lookup first; the blocks before are reached
 * from the deepest held one by Entry.parent (a block's parent is removed only after it, since
 * every removal pops leaves first), checked against the chain's hash, so one hash lookup touches
 * the whole held prefix. Removed entries are kept in a
 * pool of at most POOL_MAX for reuse, so a rank at capacity (as many evictions as new blocks)
 * allocates no Entry.
 *
 * Index: the router's own index (it accepts no outside events in this mode). A record that adds
 * any new block applies one Stored of the whole chain at the root (the index treats held blocks
 * idempotently); a record that only refreshes applies nothing. Removals apply one Removed per run
 * of consecutive entries of the same rank.
 *
 * Bound: each rank keeps at most maxEntries / (ranks with predictions) blocks (the share), by the
 * same LRU as its capacity and reported the same way, so that a fleet whose capacities add up to
 * more than the bound is trimmed rank by rank, one Removed per record. The share shrinks when a
 * rank appears, and the other ranks are trimmed only at their next record, so the total could pass
 * the bound; for that, more than maxEntries entries in all after a record starts a pruning phase
 * that removes
 * the entries touched longest ago until 80% of maxEntries remain, spread over the records that
 * follow: each removes at most max(MIN_PRUNE_STEP, 2 × the entries it added), so after every record
 * the size is at most maxEntries. Expiry is not spread: every overdue entry is removed before
 * matching, so an expired prediction is never matched.
 *
 * Peers (sequence sync, SequenceSync): a peer replica's prediction is applied by record() as if
 * made here, with every block looked up (the overlap here may differ from the peer's), its
 * evictions reported like local ones (they are the engine's); a peer's correction by observe()
 * with the peer's counts (p is not bounded by the k hashes sent). Applied in the order they
 * happened, the same decisions and reports give every replica the same model.
 *
 * Snapshot (chains / load / capacities / loadCapacity): the model goes to a joining peer as
 * chains, root first. A rank's LRU list is made of runs, each the deepest block of one touch and
 * the ancestors touched with it (each entry's predecessor is its child); a run starts at a chain
 * end, an entry whose predecessor is not its child. chains() emits, walking the global list from
 * its head, one chain per chain end (the end and all its ancestors) with the end's age. load()
 * records them in that order, each as touched age ago: every entry lands where the newest chain
 * containing it puts it, which is where its own run is, so the loader's lists have the same order
 * as the peer's (PredictionSyncTest checks a joiner stays equal under more traffic) and, on an
 * empty model, the same touch times to the millisecond. A shared prefix is repeated in each chain
 * through it. A loaded touch is never before the newest one held (the lists stay sorted by time),
 * so on a model that is not empty a loaded chain may outlive its peer's by up to the TTL.
 *
 * Threading: not thread-safe; KvRouter calls it under its lock. Lock order: the router's lock,
 * then the index's writer lock (inside apply); the Evictions listener takes only a leaf monitor.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PredictedBlocks {
  /** The default upper bound on how long a predicted block is believed to stay cached untouched. */
  static final Duration DEFAULT_TTL = Duration.ofHours(1);

  /** The default bound on (worker, block) predictions: 2^20. */
  static final int DEFAULT_MAX_ENTRIES = 1 << 20;

  /** The most removed entries kept for reuse. */
  static final int POOL_MAX = 4096;

  /** The least a record removes while a pruning phase is in progress. */
  static final int MIN_PRUNE_STEP = 64;

  /** Told of every block the capacity model evicts. */
  interface Evictions {
    void evicted(Worker rank, int blocks, long nowNanos);
  }

  private static final class Entry {
    Rank rank; // rank, seqHash and localHash change only when a pooled entry is reused
    long seqHash;
    long localHash;
    long touched;
    Entry parent; // the entry of the block before, same rank: it outlives this one (leaves first)
    Entry prev; // rank LRU
    Entry next;
    Entry gPrev; // global, by touch time
    Entry gNext;

    Entry(Rank rank, long seqHash, long localHash) {
      this.rank = rank;
      this.seqHash = seqHash;
      this.localHash = localHash;
    }
  }

  private static final class Rank {
    final Worker worker;
    final Long2ObjectOpenHashMap<Entry> map = new Long2ObjectOpenHashMap<>();
    long registered; // registered KV blocks; 0 = unknown
    long capacity; // effective: registered, or learned (Long.MAX_VALUE until learned)
    Entry head;
    Entry tail;

    Rank(Worker worker, long registered) {
      this.worker = worker;
      setRegistered(registered);
    }

    void setRegistered(long kvBlocks) {
      this.registered = kvBlocks;
      this.capacity = kvBlocks > 0 ? kvBlocks : Long.MAX_VALUE;
    }
  }

  private final KvIndex index;
  private final long ttlNanos;
  private final int maxEntries;
  private final int pruneTarget;
  private final Evictions evictions;
  private final HashMap<Worker, Rank> ranks = new HashMap<>();
  private final LongArrayList removals = new LongArrayList();
  private Entry pool; // removed entries kept for reuse, linked through next
  private int pooled;
  private Entry gHead;
  private Entry gTail;
  private int size;
  private boolean pruning; // a pruning phase is in progress: size > pruneTarget
  private long eventId;

  PredictedBlocks(KvIndex index, Duration ttl, int maxEntries, Evictions evictions) {
    if (index == null) throw new IllegalArgumentException("index must not be null");
    if (ttl == null || ttl.isNegative() || ttl.isZero()) {
      throw new IllegalArgumentException("ttl must be positive, got " + ttl);
    }
    if (maxEntries < 1) {
      throw new IllegalArgumentException("maxEntries must be >= 1, got " + maxEntries);
    }
    this.index = index;
    this.ttlNanos = ttl.toNanos();
    this.maxEntries = maxEntries;
    this.pruneTarget = (int) (maxEntries * 0.8);
    this.evictions = evictions == null ? (w, b, t) -> {} : evictions;
  }

  private Rank rank(Worker worker, long kvBlocks) {
    Rank r = ranks.get(worker);
    if (r == null) {
      r = new Rank(worker, kvBlocks);
      ranks.put(worker, r);
    } else if (r.registered != kvBlocks) {
      r.setRegistered(kvBlocks);
    }
    return r;
  }

  /**
   * Predicts that {@code worker}, a rank of {@code kvBlocks} KV blocks (0: unknown), now caches the
   * chain with these sequence and local hashes. The arrays are handed to the index: the caller must
   * not change them.
   */
  void record(
      Worker worker,
      long kvBlocks,
      long[] seqHashes,
      long[] localHashes,
      int predictedBlocks,
      long nowNanos) {
    put(worker, kvBlocks, seqHashes, localHashes, predictedBlocks, nowNanos, true);
  }

  /**
   * {@link #record}, with the evictions it makes reported ({@code report}) or not (a snapshot being
   * loaded). {@code nowNanos} must not be before the newest touch held.
   */
  private void put(
      Worker worker,
      long kvBlocks,
      long[] seqHashes,
      long[] localHashes,
      int predictedBlocks,
      long nowNanos,
      boolean report) {
    final int n = seqHashes.length;
    if (n == 0) return;
    final Rank r = rank(worker, kvBlocks);
    final int added =
        touchChain(r, seqHashes, localHashes, n, Math.min(predictedBlocks, n), nowNanos);
    if (added > 0) {
      index.apply(
          new RouterEvent(worker, eventId++, CacheEvent.storedAtRoot(seqHashes, localHashes)));
    }
    fitCapacity(r, nowNanos, report);
    if (size > maxEntries) pruning = true;
    if (pruning) {
      int step = Math.max(MIN_PRUNE_STEP, 2 * added);
      pruneGlobal(Math.max(pruneTarget, size - step));
      if (size <= pruneTarget) pruning = false;
    }
  }

  /**
   * Touches blocks {@code 0..n-1} of the chain on {@code r}, leaf first; returns how many new.
   * Blocks from {@code held} on are expected to be new (the index's overlap for {@code r}: the
   * predictions are closed under prefixes), so they are put without a lookup first; one found there
   * anyway is kept.
   */
  private int touchChain(Rank r, long[] seqHashes, long[] localHashes, int n, int held, long now) {
    final Long2ObjectOpenHashMap<Entry> map = r.map;
    int added = 0;
    Entry child = null; // the entry of block i + 1, touched just before
    for (int i = n - 1; i >= 0; i--) { // leaf first: see the class comment
      final long seq = seqHashes[i];
      Entry e;
      if (i >= held) {
        e = newEntry(r, seq, localHashes[i]);
        Entry old = map.put(seq, e);
        if (old == null) {
          size++;
          added++;
        } else { // not new after all: keep the old entry
          map.put(seq, old);
          recycle(e);
          e = old;
          unlink(e);
        }
      } else {
        Entry p = child == null ? null : child.parent;
        if (p != null && p.rank == r && p.seqHash == seq) {
          e = p; // the parent link: no hash lookup
          unlink(e);
        } else {
          e = map.get(seq);
          if (e == null) {
            e = newEntry(r, seq, localHashes[i]);
            map.put(seq, e);
            size++;
            added++;
          } else {
            unlink(e);
          }
        }
      }
      e.touched = now;
      append(e);
      if (child != null) child.parent = e;
      child = e;
    }
    return added;
  }

  private Entry newEntry(Rank r, long seq, long localHash) {
    Entry e = pool;
    if (e == null) return new Entry(r, seq, localHash);
    pool = e.next;
    e.next = null;
    e.parent = null;
    pooled--;
    e.rank = r;
    e.seqHash = seq;
    e.localHash = localHash;
    return e;
  }

  /** Keeps a removed entry for reuse (at most POOL_MAX), so steady churn allocates nothing. */
  private void recycle(Entry e) {
    if (pooled >= POOL_MAX) return;
    e.rank = null;
    e.parent = null;
    e.next = pool;
    pool = e;
    pooled++;
  }

  /**
   * Evicts {@code r}'s least recently touched blocks down to its capacity; reports them when {@code
   * report} (engine-like evictions, not corrections of the model).
   */
  private void fitCapacity(Rank r, long now, boolean report) {
    // the bound in all is shared evenly, so that a large fleet trims each rank by its own LRU
    // (one Removed per record) rather than through the global pruning below
    final long limit = Math.min(r.capacity, Math.max(1, maxEntries / ranks.size()));
    final long over = r.map.size() - limit;
    if (over <= 0) return;
    final LongArrayList batch = removals;
    batch.clear();
    for (long i = 0; i < over; i++) {
      Entry e = r.head;
      batch.add(e.seqHash);
      removeEntry(e);
    }
    flushRemovals(r.worker, batch);
    if (report) evictions.evicted(r.worker, (int) over, now);
  }

  /**
   * Corrects the model with an engine's report: {@code worker} found {@code cachedBlocks} leading
   * blocks of the chain cached at admission, where the router had predicted {@code
   * predictedBlocks}. See the class comment.
   *
   * @return the blocks added as predictions (unpredicted hits)
   */
  int observe(
      Worker worker,
      long kvBlocks,
      long[] seqHashes,
      long[] localHashes,
      int predictedBlocks,
      int cachedBlocks,
      long nowNanos) {
    final int n = seqHashes.length;
    final int k = Math.max(0, Math.min(cachedBlocks, n));
    final int p = Math.max(0, predictedBlocks); // the caller bounds it (a peer sends k blocks only)
    final Rank r = rank(worker, kvBlocks);
    if (k < p) { // the engine denied p - k predicted blocks: the model holds too much
      long from = r.capacity == Long.MAX_VALUE ? r.map.size() : r.capacity;
      r.capacity = Math.max(1, from - (p - k));
    } else if (k > p && r.capacity != Long.MAX_VALUE) { // it had more: the model evicts too soon
      long ceiling = r.registered > 0 ? r.registered : Long.MAX_VALUE;
      r.capacity = Math.min(ceiling, r.capacity + (k - p));
    }
    int missing = 0;
    for (int i = 0; i < k; i++) {
      if (!r.map.containsKey(seqHashes[i])) missing++;
    }
    if (missing > 0) {
      touchChain(r, seqHashes, localHashes, k, 0, nowNanos);
      index.apply(
          new RouterEvent(
              worker,
              eventId++,
              CacheEvent.storedAtRoot(Arrays.copyOf(seqHashes, k), Arrays.copyOf(localHashes, k))));
    }
    fitCapacity(r, nowNanos, false);
    return missing;
  }

  /** Removes every prediction whose TTL has passed at {@code nowNanos}; returns how many. */
  int expire(long nowNanos) {
    final long cutoff = nowNanos - ttlNanos; // entries touched at or before it are overdue
    if (gHead == null || gHead.touched - cutoff > 0) return 0;
    int n = 0;
    final LongArrayList batch = removals;
    batch.clear();
    Rank batchRank = null;
    Entry e;
    while ((e = gHead) != null && e.touched - cutoff <= 0) {
      if (batchRank != null && batchRank != e.rank) flushRemovals(batchRank.worker, batch);
      batchRank = e.rank;
      batch.add(e.seqHash);
      removeEntry(e);
      n++;
    }
    if (batchRank != null) flushRemovals(batchRank.worker, batch);
    return n;
  }

  /** Pops entries from the global head while {@code size > downTo}; mirrors them. */
  private void pruneGlobal(int downTo) {
    final LongArrayList batch = removals;
    batch.clear();
    Rank batchRank = null;
    Entry e;
    while ((e = gHead) != null && size > downTo) {
      if (batchRank != null && batchRank != e.rank) flushRemovals(batchRank.worker, batch);
      batchRank = e.rank;
      batch.add(e.seqHash);
      removeEntry(e);
    }
    if (batchRank != null) flushRemovals(batchRank.worker, batch);
  }

  private void removeEntry(Entry e) {
    unlink(e);
    e.rank.map.remove(e.seqHash);
    size--;
    recycle(e);
  }

  private void flushRemovals(Worker worker, LongArrayList batch) {
    if (batch.isEmpty()) return;
    index.apply(new RouterEvent(worker, eventId++, CacheEvent.removed(batch.toLongArray())));
    batch.clear();
  }

  /** Forgets every prediction for every rank of {@code workerId} (the caller clears the index). */
  void removeWorker(long workerId) {
    Iterator<Map.Entry<Worker, Rank>> it = ranks.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry<Worker, Rank> me = it.next();
      if (me.getKey().workerId() != workerId) continue;
      forget(me.getValue());
      it.remove();
    }
  }

  /** Forgets every prediction for one rank (the caller clears the index). */
  void removeRank(Worker rank) {
    Rank r = ranks.remove(rank);
    if (r != null) forget(r);
  }

  private void forget(Rank r) {
    for (Entry e = r.head; e != null; e = e.next) {
      gUnlink(e);
      size--;
    }
    r.map.clear();
    r.head = r.tail = null;
  }

  private void append(Entry e) {
    final Rank r = e.rank;
    e.prev = r.tail;
    e.next = null;
    if (r.tail == null) r.head = e;
    else r.tail.next = e;
    r.tail = e;
    e.gPrev = gTail;
    e.gNext = null;
    if (gTail == null) gHead = e;
    else gTail.gNext = e;
    gTail = e;
  }

  private void unlink(Entry e) {
    final Rank r = e.rank;
    Entry p = e.prev;
    Entry x = e.next;
    if (p == null) r.head = x;
    else p.next = x;
    if (x == null) r.tail = p;
    else x.prev = p;
    e.prev = null;
    e.next = null;
    gUnlink(e);
  }

  private void gUnlink(Entry e) {
    Entry p = e.gPrev;
    Entry x = e.gNext;
    if (p == null) gHead = x;
    else p.gNext = x;
    if (x == null) gTail = p;
    else x.gPrev = p;
    e.gPrev = null;
    e.gNext = null;
  }

  /**
   * The model as chains, for a peer's snapshot (the class comment, "Snapshot"): one per chain end,
   * an entry whose predecessor in its rank's LRU list is not its child, with its local hashes from
   * the root and its age; in touch order, oldest first, the order {@link #load} takes them in.
   *
   * <p>A shared prefix is repeated in each chain through it, so the chains may hold far more hashes
   * than the model has entries. They are taken newest first and stop at {@code 4 × maxEntries}
   * hashes in all: past that the oldest chains are left out of the snapshot (the joiner misses what
   * they predicted), so a snapshot never costs more than that much memory or lock time.
   */
  List<Predicted> chains(long nowNanos) {
    List<Predicted> out = new ArrayList<>();
    long budget = 4L * maxEntries;
    for (Entry e = gTail; e != null; e = e.gPrev) {
      if (e.prev != null && e.prev.parent == e) continue; // touched with its child: not an end
      int depth = 0;
      for (Entry x = e; x != null; x = x.parent) depth++;
      budget -= depth;
      if (budget < 0) break;
      long[] local = new long[depth];
      int i = depth;
      for (Entry x = e; x != null; x = x.parent) local[--i] = x.localHash;
      // parents outlive their children, so the links are the chain; checked all the same
      if (SequenceHasher.sequenceHashes(local)[depth - 1] != e.seqHash) continue;
      out.add(
          new Predicted(0, e.rank.worker, local, Math.max(0, nowNanos - e.touched) / 1_000_000));
    }
    Collections.reverse(out); // oldest first
    return out;
  }

  /** Each predicted rank's effective capacity; {@code Long.MAX_VALUE} when unknown. */
  Map<Worker, Long> capacities() {
    Map<Worker, Long> out = new HashMap<>();
    for (Rank r : ranks.values()) out.put(r.worker, r.capacity);
    return out;
  }

  /**
   * The engine's own word on {@code worker}'s capacity: {@code kvBlocks} registered blocks (0:
   * unknown) from now on, and a learnt capacity starts again from it. Trims the rank to it; not
   * reported as evictions (the engine made them, if any).
   */
  void capacity(Worker worker, long kvBlocks, long nowNanos) {
    final Rank r = ranks.get(worker);
    if (r == null) return; // nothing predicted yet: the next record takes kvBlocks
    r.setRegistered(kvBlocks);
    fitCapacity(r, nowNanos, false);
  }

  /**
   * Takes a peer's capacity for {@code worker} (a rank of {@code kvBlocks} here): never above the
   * registered count; an unknown one ({@code Long.MAX_VALUE}) changes nothing. Trims the rank to
   * it; not reported as evictions.
   */
  void loadCapacity(Worker worker, long kvBlocks, long capacity, long nowNanos) {
    if (capacity == Long.MAX_VALUE || capacity < 1) return;
    final Rank r = rank(worker, kvBlocks);
    r.capacity = r.registered > 0 ? Math.min(r.registered, capacity) : capacity;
    fitCapacity(r, nowNanos, false);
  }

  /**
   * Loads one chain of a peer's snapshot ({@link #chains}) for {@code worker}, a rank of {@code
   * kvBlocks} blocks: recorded as touched {@code chain.ageMillis()} ago, but never before the
   * newest touch held (the lists stay sorted by touch time, so a chain may live longer than it
   * would have on the peer, never shorter) nor after {@code nowNanos}. A chain past the TTL is
   * skipped. Evictions it makes are not reported. Returns whether it was loaded.
   */
  boolean load(Worker worker, long kvBlocks, Predicted chain, long nowNanos) {
    final long[] local = chain.localHashes();
    if (local.length == 0) return false;
    final long age =
        chain.ageMillis() >= ttlNanos / 1_000_000 ? ttlNanos : chain.ageMillis() * 1_000_000;
    if (age >= ttlNanos) return false;
    long t = nowNanos - age;
    if (gTail != null && t - gTail.touched < 0) t = gTail.touched;
    if (t - nowNanos > 0) t = nowNanos;
    put(worker, kvBlocks, SequenceHasher.sequenceHashes(local), local, local.length, t, false);
    return true;
  }

  /** Predicted (worker rank, block) pairs held now. */
  int size() {
    return size;
  }

  /** Predicted blocks of one rank (for tests). */
  int size(Worker worker) {
    Rank r = ranks.get(worker);
    return r == null ? 0 : r.map.size();
  }

  /**
   * The rank's effective capacity in blocks, for a rank registered with {@code kvBlocks}; {@code
   * Long.MAX_VALUE} when unknown (for tests).
   */
  long capacity(Worker worker, long kvBlocks) {
    Rank r = ranks.get(worker);
    if (r != null) return r.capacity;
    return kvBlocks > 0 ? kvBlocks : Long.MAX_VALUE;
  }
}
