package io.kvrouter.route;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

/**
 * Approximate mode's cache model: the blocks the router predicts each worker holds because it sent
 * them a prompt, each until a TTL runs out, mirrored into a {@link KvIndex} as Stored and Removed
 * events so that routing reads predictions exactly as it reads real events.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: one Entry per predicted (worker rank, sequence hash), found through a per-worker
 * Long2ObjectOpenHashMap and threaded on one global intrusive doubly linked list in deadline
 * order (head expires first). The TTL is one fixed duration and the clock monotonic, so a new or
 * refreshed prediction (deadline now + TTL) always belongs at the tail: record() and refresh are
 * O(1) per block, with no heap and no stale queue entries; the list holds exactly size entries.
 *
 * Re-prediction: a block predicted again is unlinked and re-appended with the new deadline, so
 * the older deadline never removes it (the index keeps it; it is not re-stored).
 *
 * Chains: record() walks a chain leaf first, so within one chain the deepest block sits nearest
 * the head. Expiry and pruning pop from the head, so a chain loses its leaves before its root
 * and predictions stay closed under prefixes (no holes in the index). A block's ancestors are
 * refreshed whenever it is, so their deadlines are never earlier than its own.
 *
 * Index: the router's own index (it accepts no outside events in this mode). A record that adds
 * any new block applies one Stored of the whole chain at the root (the index treats held blocks
 * idempotently); a record that only refreshes applies nothing. Expiry and pruning apply one
 * Removed per run of consecutive entries of the same worker.
 *
 * Bound: more than maxEntries entries after a record starts a pruning phase that removes the
 * oldest-expiring entries until 80% of maxEntries remain. The work is spread over the records
 * that follow: each removes at most max(MIN_PRUNE_STEP, 2 × the entries it added), so no single
 * routing decision pays for ~maxEntries/5 index removals at once (about 210k at the default
 * bound). A record in the phase removes at least twice what it adds (or down to 80%), so after
 * every record the size is at most maxEntries, and 80% is reached after about
 * maxEntries/(5 × new blocks per record) records. Expiry is not spread: every overdue entry is removed before matching, so
 * an expired prediction is never matched.
 *
 * Threading: not thread-safe; KvRouter calls it under its lock. Lock order: the router's lock,
 * then the index's writer lock (inside apply).
 * </pre>
 */
final class PredictedBlocks {
  /** The default time a predicted block is believed to stay cached. */
  static final Duration DEFAULT_TTL = Duration.ofSeconds(120);

  /** The default bound on (worker, block) predictions: 2^20. */
  static final int DEFAULT_MAX_ENTRIES = 1 << 20;

  /** The least a record removes while a pruning phase is in progress. */
  static final int MIN_PRUNE_STEP = 64;

  private static final class Entry {
    final Worker worker;
    final long seqHash;
    long deadline;
    Entry prev;
    Entry next;

    Entry(Worker worker, long seqHash) {
      this.worker = worker;
      this.seqHash = seqHash;
    }
  }

  private final KvIndex index;
  private final long ttlNanos;
  private final int maxEntries;
  private final int pruneTarget;
  private final HashMap<Worker, Long2ObjectOpenHashMap<Entry>> byWorker = new HashMap<>();
  private final LongArrayList removals = new LongArrayList();
  private Entry head;
  private Entry tail;
  private int size;
  private boolean pruning; // a pruning phase is in progress: size > pruneTarget
  private long eventId;

  PredictedBlocks(KvIndex index, Duration ttl, int maxEntries) {
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
  }

  /**
   * Predicts that {@code worker} now caches the chain with these sequence and local hashes, until
   * {@code nowNanos + ttl}. The arrays are handed to the index: the caller must not change them.
   */
  void record(Worker worker, long[] seqHashes, long[] localHashes, long nowNanos) {
    final int n = seqHashes.length;
    if (n == 0) return;
    Long2ObjectOpenHashMap<Entry> mine = byWorker.get(worker);
    if (mine == null) {
      mine = new Long2ObjectOpenHashMap<>();
      byWorker.put(worker, mine);
    }
    final long deadline = nowNanos + ttlNanos;
    int added = 0;
    for (int i = n - 1; i >= 0; i--) { // leaf first: see the class comment
      long seq = seqHashes[i];
      Entry e = mine.get(seq);
      if (e == null) {
        e = new Entry(worker, seq);
        mine.put(seq, e);
        size++;
        added++;
      } else {
        unlink(e);
      }
      e.deadline = deadline;
      append(e);
    }
    if (added > 0) {
      index.apply(
          new RouterEvent(worker, eventId++, CacheEvent.storedAtRoot(seqHashes, localHashes)));
    }
    if (size > maxEntries) pruning = true;
    if (pruning) {
      int step = Math.max(MIN_PRUNE_STEP, 2 * added);
      removeHead(Math.max(pruneTarget, size - step), Long.MIN_VALUE, false);
      if (size <= pruneTarget) pruning = false;
    }
  }

  /** Removes every prediction whose deadline has passed at {@code nowNanos}; returns how many. */
  int expire(long nowNanos) {
    if (head == null || nowNanos - head.deadline < 0) return 0;
    return removeHead(-1, nowNanos, true);
  }

  /**
   * Pops entries from the head while either {@code size > downTo} (pruning) or, when {@code
   * byDeadline}, the head's deadline has passed at {@code nowNanos}; mirrors them into the index.
   */
  private int removeHead(int downTo, long nowNanos, boolean byDeadline) {
    int n = 0;
    final LongArrayList batch = removals;
    batch.clear();
    Worker batchWorker = null;
    Entry e;
    while ((e = head) != null && (byDeadline ? nowNanos - e.deadline >= 0 : size > downTo)) {
      unlink(e);
      Long2ObjectOpenHashMap<Entry> mine = byWorker.get(e.worker);
      mine.remove(e.seqHash);
      if (mine.isEmpty()) byWorker.remove(e.worker);
      size--;
      n++;
      if (batchWorker != null && !batchWorker.equals(e.worker)) {
        flushRemovals(batchWorker, batch);
      }
      batchWorker = e.worker;
      batch.add(e.seqHash);
    }
    if (batchWorker != null) flushRemovals(batchWorker, batch);
    return n;
  }

  private void flushRemovals(Worker worker, LongArrayList batch) {
    index.apply(new RouterEvent(worker, eventId++, CacheEvent.removed(batch.toLongArray())));
    batch.clear();
  }

  /** Forgets every prediction for every rank of {@code workerId} (the caller clears the index). */
  void removeWorker(long workerId) {
    Iterator<Map.Entry<Worker, Long2ObjectOpenHashMap<Entry>>> it = byWorker.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry<Worker, Long2ObjectOpenHashMap<Entry>> me = it.next();
      if (me.getKey().workerId() != workerId) continue;
      for (Entry e : me.getValue().values()) {
        unlink(e);
        size--;
      }
      it.remove();
    }
  }

  /** Forgets every prediction for one rank (the caller clears the index). */
  void removeRank(Worker rank) {
    Long2ObjectOpenHashMap<Entry> entries = byWorker.remove(rank);
    if (entries == null) return;
    for (Entry e : entries.values()) {
      unlink(e);
      size--;
    }
  }

  private void append(Entry e) {
    e.prev = tail;
    e.next = null;
    if (tail == null) head = e;
    else tail.next = e;
    tail = e;
  }

  private void unlink(Entry e) {
    Entry p = e.prev;
    Entry x = e.next;
    if (p == null) head = x;
    else p.next = x;
    if (x == null) tail = p;
    else x.prev = p;
    e.prev = null;
    e.next = null;
  }

  /** Predicted (worker rank, block) pairs held now. */
  int size() {
    return size;
  }
}
