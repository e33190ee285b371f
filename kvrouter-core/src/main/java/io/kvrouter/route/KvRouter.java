package io.kvrouter.route;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SaltedHashers;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.HybridIndex;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.kvrouter.index.TieredScores;
import io.kvrouter.route.SlotTable.Slot;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * A KV-cache-aware router: given a prompt's tokens, picks the worker rank where cached prefix and
 * load make it cheapest (DESIGN.md §6), and tracks the request until it is freed. The façade a
 * gateway embeds; safe to call from many threads at once.
 *
 * <pre>{@code
 * KvRouter router = KvRouter.builder(16).build();
 * router.registerWorker(1, 1, 16);                 // worker id, dp ranks, block size
 * router.registerWorker(2, 1, 16);
 * eventSource.subscribe(router::applyEvent);       // engines' KV events feed the index
 * if (router.route("req-1", tokens) instanceof RouteDecision.Routed r) {
 *   send(r.worker(), request);                     // r.overlapTokens() are cached there
 *   router.markPrefillCompleted("req-1");          // first token came back
 *   router.free("req-1");                          // response finished
 * }
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * Data: table (SlotTable) holds the registered worker ranks in ascending Worker order, each with
 * its ActiveSequences and KV capacity, the requests in flight and the directory of their root
 * blocks; see its notes. Each slot is of one KV source (Slot.predicted, fixed at registration).
 * For the predicted ones, predictions (PredictedBlocks) models what each caches (an LRU of the
 * slot's kvBlocks, corrected by observeCachedTokens) and writes it into the same index the
 * other ranks' events go to, as that rank's Stored and Removed events (an index scores each rank
 * on its own, so the two kinds never mix); its predicted evictions feed the eviction-pressure
 * counts as Removed events do. In approximate mode (the builder's approximate()) every rank is
 * predicted and the index is the router's own. predictedRanks counts the predicted slots under
 * lock; predicting (volatile) mirrors predictedRanks > 0 for route()'s lock-free read. salted
 * (SaltedHashers) builds the
 * hasher of a salted request, caching at most 64 hashers of short salts: salts are the client's
 * strings, so nothing keyed by them may grow with their number or length.
 *
 * route(): hashing (local, then §2 sequence hashes) runs on the caller's thread with no lock.
 * Without predicted ranks findMatches also runs without a lock (the index's readers never block).
 * Then one ReentrantLock, lock, is held for the bookkeeping: expire overdue requests (and with
 * predicted ranks overdue predictions, then findMatches, so that an expired prediction is never
 * matched; also when predicting changed between the read and the lock), build the Candidates from the loads, ask the selector, record the request,
 * record the prediction. The candidate loop fills one primitive column per load term (arrays as
 * long as the rank count) and builds no object per rank: the Candidates and the decision's
 * candidate list (PricedCandidates) are views over those columns and the costs. A predicted
 * slot's cached-blocks figure (the cost's tie-break) is its predicted size whether it matched or
 * not, so that a cold prompt's tie goes to the emptier cache. Every read and write of the table,
 * the predictions and the selector happens under lock, so two concurrent routes see each other's load and a request id is
 * admitted once.
 *
 * Lock order: lock, then the index's writer lock (predictions and unregisterWorker write the
 * index under lock). applyEvent never takes lock. Nothing is called back under lock except
 * the selector and the ActiveSequences listener (which only edits the table's maps); with sequence
 * sync, the SequenceSync outbox lock is taken under lock (a leaf).
 *
 * Eviction pressure (EvictionPressure): applyEvent adds a Removed event's block count to its
 * rank's decaying count (a per-rank monitor, a leaf apart from the pressure's own monitor taken
 * inside it once per 50 windows); each slot holds its rank's meter (set at registration), and
 * route reads every allowed rank's count under lock, with one exp per decision and no monitor,
 * and hands the selector, in the Candidates, each candidate's count over max(mean,
 * PRESSURE_FLOOR_BLOCKS). Code that applies events to the index itself (a
 * NATS replica) goes through eventFeed(), so the counts see its events too. applyEvent reads
 * nanoClock on the caller's thread.
 *
 * Sequence sync (SequenceSync, off until sequenceSync() is called): sync is written once under
 * lock; route, markPrefillCompleted and free tell it of every change they make, under lock, and
 * the table tells it of requests that expire or leave with their rank (SlotTable.Departures).
 * Peers' requests live in the same table under keys starting with U+0001, which route refuses
 * and free / markPrefillCompleted do not find for a local caller. For predicted ranks, decide and
 * observeCachedTokens also hand it each prediction and report (under lock), and peers' are
 * applied to predictions under lock by SequenceSync.
 *
 * Scores are matched to slots by the Worker of each index answer (an index may know workers
 * that are not registered: they are ignored).
 *
 * Tiers (docs/routing.md, "Blocks beyond the GPU"): when the index is a TieredIndex that has seen
 * an event of a non-device tier, route() asks it for findTiered (no lock, like findMatches) and
 * prices each slot's prefill from its weighted blocks (the table's tier column, written by prepareTiers under
 * lock); otherwise nothing changes. applyEvent(Tier, event) goes to the TieredIndex without lock.
 *
 * Hybrid models (docs/routing.md, "Hybrid models"): hybrid holds the secondary KV cache groups,
 * declared by the builder (kvCacheGroups) or by the first group event that names a group's kind
 * (applyGroupEvent, no lock). Once a group is declared, route() and overlaps() cut the main
 * index's scores to the engine's hit (HybridIndex.rescore, no lock, before the table is
 * prepared), capped below the prompt's last token as the engine is; until then (every model
 * without groups) the only cost is one volatile read. A device Cleared also empties the rank's
 * groups; unregistering a rank or worker drops them too.
 * </pre>
 */
public final class KvRouter implements AutoCloseable {

  private final int blockSize;
  private final BlockHasher hasher;
  private final SaltedHashers salted;
  private final KvIndex index;
  private final boolean ownsIndex;
  private final WorkerSelector selector;
  private final double busyBlockFraction;
  private final boolean busyByBlocks; // busyBlockFraction is finite: a rank may be busy by blocks
  private final long busyPrefillTokens;
  private final int busyRequests; // Integer.MAX_VALUE: never
  private final LongSupplier nanoClock;
  private final boolean approximate; // every rank predicted; the index takes no outside events
  private final PredictedBlocks predictions; // the predicted ranks' cache model (empty without)
  private final EvictionPressure pressure; // fed by applyEvent, or the predicted evictions
  private final @Nullable TieredIndex tiered; // index as a TieredIndex, or null: no tiers
  private final TierWeights tierWeights;
  private final HybridIndex hybrid; // the secondary KV cache groups; inactive until one is declared

  private final ReentrantLock lock = new ReentrantLock();

  @GuardedBy("lock")
  private final SlotTable table; // under lock

  // the table's count of blocks held by requests in flight: written under lock, read without it
  private final AtomicLong heldBlocks;

  @GuardedBy("lock")
  private int[] rankScratch = new int[0]; // under lock: decide()'s table positions by column index

  // decide()'s requests column when no term reads it after the decision
  @GuardedBy("lock")
  private int[] requestScratch = new int[0];

  // decide()'s overlap and cached columns, and the triples of the matched, when the decision keeps
  // the triples alone (few ranks matched)
  @GuardedBy("lock")
  private int[] overlapScratch = new int[0];

  @GuardedBy("lock")
  private int[] cachedScratch = new int[0];

  @GuardedBy("lock")
  private int[] tripleScratch = new int[0];

  // decide()'s costs when the decision prices them again on demand (PricedCandidates)
  @GuardedBy("lock")
  private double[] costScratch = new double[0];

  // decide()'s relative pressures while no rank ever evicted: zeros, never written, shared by
  // the decisions that keep them (replaced by a longer one when ranks are added)
  @GuardedBy("lock")
  private double[] zeroPressure = new double[0];

  @GuardedBy("lock")
  private @Nullable SequenceSync sync; // under lock; null: no sequence sync

  @GuardedBy("lock")
  private int predictedRanks; // under lock: registered ranks of KvSource.PREDICTED

  // predictedRanks > 0, written under lock: route() matches without the lock only when false
  private volatile boolean predicting;

  private KvRouter(Builder b) {
    this.blockSize = b.blockSize;
    this.salted = new SaltedHashers(b.blockSize);
    this.hasher = salted.base();
    this.selector =
        b.selector != null
            ? b.selector
            : WorkerSelector.costBased(b.overlapWeight, b.pressureWeight, b.temperature, b.seed);
    this.pressure = new EvictionPressure(b.pressureWindow.toNanos(), b.nanoClock.getAsLong());
    this.busyBlockFraction = b.busyBlockFraction;
    this.busyByBlocks = b.busyBlockFraction != Double.POSITIVE_INFINITY;
    this.busyPrefillTokens = b.busyPrefillTokens;
    this.busyRequests = b.busyRequests;
    this.nanoClock = b.nanoClock;
    this.table = new SlotTable(b.requestExpiry);
    this.heldBlocks = table.heldBlocks;
    this.approximate = b.approximate;
    if (b.approximate) {
      this.index = KvIndexes.concurrentRadixTree();
      this.ownsIndex = true;
    } else {
      this.ownsIndex = b.index == null;
      this.index = b.index != null ? b.index : KvIndexes.concurrentCompressedTree();
    }
    // the predicted ranks' model writes into the same index as the events of the others; its
    // evictions feed the pressure term, as Removed events do for ranks with events
    this.predictions =
        new PredictedBlocks(index, b.predictionTtl, b.maxPredictions, pressure::evicted);
    this.tiered = index instanceof TieredIndex t ? t : null;
    this.tierWeights = b.tierWeights;
    this.hybrid = new HybridIndex(b.blockSize);
    if (b.kvCacheGroups != null) hybrid.declare(b.kvCacheGroups);
  }

  /**
   * The one check of a cost weight or the temperature: finite and at least 0; returns {@code
   * value}. The builder uses it, and so do configurations that validate before they build a router.
   *
   * @throws IllegalArgumentException {@code "<name> must be finite and >= 0, got <value>"}
   */
  public static double requireWeight(String name, double value) {
    return CostBasedSelector.requireWeight(name, value);
  }

  /** A builder for a router whose workers use blocks of {@code blockSize} tokens. */
  public static Builder builder(int blockSize) {
    return new Builder(blockSize);
  }

  // ------------------------------------------------------------------ configuration, workers

  /** Tokens per KV block; every registered worker uses this size. */
  public int blockSize() {
    return blockSize;
  }

  /**
   * Whether the router predicts the cache contents of every rank from its own decisions instead of
   * events (built with {@link Builder#approximate()}). A router that is not may still hold ranks
   * registered as {@link KvSource#PREDICTED}; see {@link #kvSource}.
   */
  public boolean isApproximate() {
    return approximate;
  }

  /** The KV source ranks get when registration names none: predicted in approximate mode. */
  public KvSource defaultKvSource() {
    return approximate ? KvSource.PREDICTED : KvSource.EVENTS;
  }

  /** How the router knows what {@code rank} caches, or null when it is not registered. */
  public @Nullable KvSource kvSource(Worker rank) {
    lock.lock();
    try {
      Slot s = table.get(rank);
      return s == null ? null : s.predicted ? KvSource.PREDICTED : KvSource.EVENTS;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The KV capacity {@code rank} is registered with, in blocks (0: unknown); -1: not registered.
   */
  public long kvBlocks(Worker rank) {
    lock.lock();
    try {
      Slot s = table.get(rank);
      return s == null ? -1 : s.kvBlocks;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Sets the KV capacity of a registered rank, in blocks (0: unknown), as its engine reports it
   * (vLLM's {@code num_gpu_blocks}, llama.cpp's context size): what the busy fraction compares
   * with, and for a predicted rank the size of the LRU that models its cache (a capacity learnt
   * from its reports starts again from this one). Returns false when the rank is not registered.
   *
   * @throws IllegalArgumentException when {@code kvBlocks < 0}
   */
  public boolean setKvBlocks(Worker rank, long kvBlocks) {
    Objects.requireNonNull(rank, "rank");
    if (kvBlocks < 0) {
      throw new IllegalArgumentException("kvBlocks must be >= 0, got " + kvBlocks);
    }
    lock.lock();
    try {
      Slot s = table.get(rank);
      if (s == null) return false;
      if (s.kvBlocks != kvBlocks) {
        table.setCapacity(s, kvBlocks);
        if (s.predicted) predictions.capacity(rank, kvBlocks, nanoClock.getAsLong());
      }
      return true;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The index routing reads. In event mode, feed it (or call {@link #applyEvent}); in approximate
   * mode it is the router's own and must not be written from outside.
   */
  public KvIndex index() {
    return index;
  }

  /**
   * The index for code that applies events itself, such as a NATS replica or a dump being replayed:
   * its {@code apply} is {@link #applyEvent} (so the eviction-pressure counts see the events), and
   * everything else is the index's. Closing it does nothing; the router owns the index. Over a
   * {@link TieredIndex} it is a {@link io.kvrouter.index.TieredKvIndex}, whose tier events are
   * {@link #applyEvent(Tier, RouterEvent)} (so a replica or a replay carries every tier).
   *
   * @throws IllegalStateException in approximate mode, where the router writes the index itself
   */
  public KvIndex eventFeed() {
    if (approximate) {
      throw new IllegalStateException(
          "approximate mode: the router predicts cache contents itself and accepts no events");
    }
    return EventFeed.of(this, index);
  }

  /**
   * Applies a worker's KV cache event to the index. Does not take the router's lock.
   *
   * @throws IllegalStateException in approximate mode, where the router writes the index itself
   */
  public void applyEvent(RouterEvent event) {
    if (approximate) {
      throw new IllegalStateException(
          "approximate mode: the router predicts cache contents itself and accepts no events");
    }
    index.apply(event);
    CacheEvent data = event.data();
    if (data instanceof CacheEvent.Removed r) {
      pressure.evicted(event.worker(), r.blockHashes().length, nanoClock.getAsLong());
    } else if (data instanceof CacheEvent.Cleared) {
      pressure.reset(event.worker()); // an emptied cache evicts nothing for a while
      hybrid.clearRank(event.worker()); // and its KV cache groups went with it
    }
  }

  /**
   * Applies an event of a secondary KV cache group of a hybrid model (docs/routing.md, "Hybrid
   * models"; the main group's events are {@link #applyEvent}): its block hashes are the §2 sequence
   * hashes (DESIGN.md §2) of the positions the group now holds ({@code Stored}) or no longer holds
   * ({@code Removed}); a {@code Cleared} empties the group for the rank. The first event that names
   * a group's kind declares the group, and from then on routing cuts each rank's score to the
   * longest prefix every group can serve. Does not take the router's lock.
   *
   * @param kind the group's kind as the engine names it (on stores), or null
   * @return false when the event was refused: about the main group, or naming another kind than the
   *     group was declared with
   * @throws IllegalStateException in approximate mode, where the router writes the index itself
   */
  public boolean applyGroupEvent(int groupIdx, KvCacheGroup kind, RouterEvent event) {
    if (approximate) {
      throw new IllegalStateException(
          "approximate mode: the router predicts cache contents itself and accepts no events");
    }
    return hybrid.apply(groupIdx, kind, event);
  }

  /** The secondary KV cache groups of a hybrid model and what each rank holds in them. */
  public HybridIndex kvCacheGroups() {
    return hybrid;
  }

  /**
   * Applies a worker's KV cache event about the copies on {@code tier}. With a {@link TieredIndex}
   * (docs/routing.md, "Blocks beyond the GPU"), the event goes to that tier, and a {@code Cleared}
   * clears that tier alone (vLLM's {@code AllBlocksCleared} keeps the offloaded copies); without
   * one, device events are {@link #applyEvent(RouterEvent)} and the others are dropped. Only device
   * removals count as evictions for the pressure term. Does not take the router's lock.
   *
   * @throws IllegalStateException in approximate mode, where the router writes the index itself
   */
  public void applyEvent(Tier tier, RouterEvent event) {
    Objects.requireNonNull(tier, "tier");
    if (tier == Tier.DEVICE && (tiered == null || !(event.data() instanceof CacheEvent.Cleared))) {
      applyEvent(event);
      return;
    }
    if (approximate) {
      throw new IllegalStateException(
          "approximate mode: the router predicts cache contents itself and accepts no events");
    }
    if (tiered == null) return; // an index without tiers: offloaded copies are not scored
    // a device Cleared: forget the rank's evictions first, so that a route that sees the cleared
    // index sees the count gone too (the monitor's release comes before the index's writes)
    if (tier == Tier.DEVICE) {
      pressure.forget(event.worker());
      hybrid.clearRank(event.worker());
    }
    tiered.apply(tier, event);
  }

  /** {@link #registerWorker(long, int, int, long)} with the KV capacity unknown. */
  public void registerWorker(long workerId, int dpSize, int blockSize) {
    registerWorker(workerId, dpSize, blockSize, 0);
  }

  /**
   * Makes ranks {@code 0..dpSize-1} of {@code workerId} eligible. Registering the same worker again
   * with the same parameters does nothing.
   *
   * @param blockSize the engine's KV block size; must equal the router's, since blocks of another
   *     size never match
   * @param kvBlocksPerRank KV blocks each rank can hold, for the busy fraction; 0 when unknown (the
   *     fraction then never makes it busy)
   * @throws IllegalArgumentException on a block size other than the router's, or bad values
   * @throws IllegalStateException when the worker is registered with other parameters
   */
  public void registerWorker(long workerId, int dpSize, int blockSize, long kvBlocksPerRank) {
    if (blockSize != this.blockSize) {
      throw new IllegalArgumentException(
          "worker "
              + Long.toUnsignedString(workerId)
              + " uses KV blocks of "
              + blockSize
              + " tokens but this router hashes blocks of "
              + this.blockSize
              + ": no block would ever match; configure both with the same block size");
    }
    if (dpSize < 1) {
      throw new IllegalArgumentException("dpSize must be >= 1, got " + dpSize);
    }
    if (kvBlocksPerRank < 0) {
      throw new IllegalArgumentException("kvBlocksPerRank must be >= 0, got " + kvBlocksPerRank);
    }
    lock.lock();
    try {
      Slot existing = table.anyRankOf(workerId);
      if (existing != null && existing.dpSize == 0) {
        throw new IllegalStateException(
            "worker "
                + Long.toUnsignedString(workerId)
                + " has ranks registered one by one (registerRank); unregister them before"
                + " registering it with dpSize "
                + dpSize);
      }
      if (existing != null) {
        if (existing.dpSize == dpSize && existing.kvBlocks == kvBlocksPerRank) return;
        throw new IllegalStateException(
            "worker "
                + Long.toUnsignedString(workerId)
                + " is registered with dpSize "
                + existing.dpSize
                + " and "
                + existing.kvBlocks
                + " KV blocks per rank; unregister it before registering it with dpSize "
                + dpSize
                + " and "
                + kvBlocksPerRank);
      }
      List<Worker> ranks = new ArrayList<>(dpSize);
      for (int rank = 0; rank < dpSize; rank++) ranks.add(new Worker(workerId, rank));
      table.add(ranks, dpSize, kvBlocksPerRank, approximate, pressure::meter);
      if (approximate) countPredicted(dpSize);
    } finally {
      lock.unlock();
    }
  }

  /**
   * Makes one rank of a worker eligible on its own, for data-parallel engines whose ranks come and
   * go one by one (a registry such as the HTTP service's). Ranks registered this way are
   * independent of each other and need not be contiguous; mixing them with {@link
   * #registerWorker(long, int, int, long)} for the same worker id is refused.
   *
   * @param blockSize the engine's KV block size; must equal the router's
   * @param kvBlocks KV blocks this rank can hold, for the busy fraction; 0 when unknown
   * @return false when that rank is already registered (nothing changes)
   * @throws IllegalArgumentException on a block size other than the router's, or bad values
   * @throws IllegalStateException when the worker id is registered with {@code registerWorker}
   */
  public boolean registerRank(Worker rank, int blockSize, long kvBlocks) {
    return registerRank(rank, blockSize, kvBlocks, defaultKvSource());
  }

  /**
   * {@link #registerRank(Worker, int, long)} for a rank whose cache the router learns from {@code
   * source}: {@link KvSource#EVENTS} (its engine's events are applied to the index) or {@link
   * KvSource#PREDICTED} (the router predicts it from its own decisions, corrected by {@link
   * #observeCachedTokens}). A router may hold ranks of both kinds (docs/routing.md, "Mixed
   * fleets"); an approximate one only predicted ranks.
   *
   * @throws IllegalArgumentException also for an {@code EVENTS} rank in approximate mode
   */
  public boolean registerRank(Worker rank, int blockSize, long kvBlocks, KvSource source) {
    Objects.requireNonNull(rank, "rank");
    Objects.requireNonNull(source, "source");
    if (approximate && source == KvSource.EVENTS) {
      throw new IllegalArgumentException(
          "worker "
              + rank
              + ": this router predicts every rank's cache (approximate mode) and takes no KV"
              + " events; register it as predicted");
    }
    if (blockSize != this.blockSize) {
      throw new IllegalArgumentException(
          "worker "
              + rank
              + " uses KV blocks of "
              + blockSize
              + " tokens but this router hashes blocks of "
              + this.blockSize
              + ": no block would ever match; configure both with the same block size");
    }
    if (kvBlocks < 0) {
      throw new IllegalArgumentException("kvBlocks must be >= 0, got " + kvBlocks);
    }
    lock.lock();
    try {
      if (table.get(rank) != null) return false;
      Slot other = table.anyRankOf(rank.workerId());
      if (other != null && other.dpSize != 0) {
        throw new IllegalStateException(
            "worker "
                + Long.toUnsignedString(rank.workerId())
                + " is registered with dpSize "
                + other.dpSize
                + " (registerWorker); unregister it before registering ranks one by one");
      }
      boolean predicted = source == KvSource.PREDICTED;
      table.add(List.of(rank), 0, kvBlocks, predicted, pressure::meter);
      if (predicted) countPredicted(1);
      return true;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Forgets one rank: its requests in flight (their later {@link #free} returns false), its load,
   * and its blocks in the index (the index clears that rank, and forgets the worker id once no rank
   * of it is registered any more). Returns false when the rank was not registered.
   */
  public boolean unregisterRank(Worker rank) {
    Objects.requireNonNull(rank, "rank");
    lock.lock();
    try {
      Slot gone = table.get(rank);
      if (gone == null || !table.remove(rank)) return false;
      if (gone.predicted) countPredicted(-1);
      pressure.forget(rank);
      boolean otherRanks = table.anyRankOf(rank.workerId()) != null;
      if (otherRanks) {
        predictions.removeRank(rank);
        index.apply(new RouterEvent(rank, 0, CacheEvent.cleared()));
        hybrid.clearRank(rank);
      } else {
        predictions.removeWorker(rank.workerId());
        index.removeWorker(rank.workerId());
        hybrid.removeWorker(rank.workerId());
      }
      return true;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Forgets every rank of {@code workerId}: its requests in flight (their later {@link #free}
   * returns false), its load, and its blocks in the index. Returns false when it was not
   * registered. In event mode, an event for the worker applied afterwards puts it back into the
   * index, but it is not routed to until registered again.
   */
  public boolean unregisterWorker(long workerId) {
    lock.lock();
    try {
      int predictedGone = 0;
      for (Slot s : table.slots()) {
        if (s.worker.workerId() == workerId && s.predicted) predictedGone++;
      }
      List<Worker> gone = table.removeWorker(workerId);
      if (gone.isEmpty()) return false;
      countPredicted(-predictedGone);
      for (Worker w : gone) pressure.forget(w);
      predictions.removeWorker(workerId);
      index.removeWorker(workerId);
      hybrid.removeWorker(workerId);
      return true;
    } finally {
      lock.unlock();
    }
  }

  /** Adds {@code delta} to the predicted ranks registered (under lock). */
  @GuardedBy("lock")
  private void countPredicted(int delta) {
    predictedRanks += delta;
    predicting = predictedRanks > 0;
  }

  /** The registered worker ranks, ascending. */
  public List<Worker> workers() {
    lock.lock();
    try {
      Slot[] all = table.slots();
      List<Worker> out = new ArrayList<>(all.length);
      for (Slot s : all) out.add(s.worker);
      return out;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Turns on sharing of this router's in-flight bookkeeping with other replicas and returns its
   * handle (the same one on later calls with the same id): from now on every request routed,
   * prefill-completed, freed or expired here is numbered in its outbox, and peers' changes given to
   * it count as load here. A transport (kvrouter-transport's {@code NatsSequenceSync}) moves the
   * changes between replicas. {@link #loads()}, {@link #load} and {@link #inFlight()} then count
   * the peers' requests too.
   *
   * @param replicaId this replica's name among its peers (non-empty)
   * @throws IllegalStateException when already on with another id
   */
  public SequenceSync sequenceSync(String replicaId) {
    lock.lock();
    try {
      if (sync != null) {
        if (sync.replicaId().equals(replicaId)) return sync;
        throw new IllegalStateException(
            "sequence sync is already on as replica " + sync.replicaId() + ", not " + replicaId);
      }
      SequenceSync s = new SequenceSync(replicaId, lock, table, predictions, nanoClock);
      table.departures(s::departed);
      sync = s;
      return s;
    } finally {
      lock.unlock();
    }
  }

  private static boolean peerKey(String requestId) {
    return requestId != null && !requestId.isEmpty() && requestId.charAt(0) == SequenceSync.MARK;
  }

  // ------------------------------------------------------------------ routing

  /** {@link #route(String, int[], RouteOptions)} with default options. */
  public RouteDecision route(String requestId, int[] tokens) {
    return route(requestId, tokens, RouteOptions.defaults());
  }

  /**
   * Picks a worker rank for the prompt {@code tokens} and, when one is chosen, tracks the request
   * (its blocks and prefill tokens count as that worker's load) until {@link #free}.
   *
   * @param requestId unique among requests in flight
   * @throws IllegalArgumentException when {@code requestId} is already in flight
   */
  public RouteDecision route(String requestId, int[] tokens, RouteOptions options) {
    Objects.requireNonNull(requestId, "requestId");
    Objects.requireNonNull(tokens, "tokens");
    Objects.requireNonNull(options, "options");
    if (peerKey(requestId)) {
      throw new IllegalArgumentException("a request id must not start with U+0001");
    }
    final BlockHasher blockHasher = hasherFor(options);
    final long[] local = new long[tokens.length / blockHasher.blockSize()];
    final long[] seq = new long[local.length];
    blockHasher.hashes(tokens, local, seq); // local and §2 sequence hashes, in one pass
    // with predicted ranks the index is matched under the lock, after expiring predictions (so an
    // expired prediction is never matched); with events only, here, without it
    final boolean unlocked = !predicting;
    // tiers (docs/routing.md, "Blocks beyond the GPU"): the device answer plus the cumulative ones
    TieredScores tiers =
        unlocked && tiered != null && tiered.hasTiers() ? tiered.findTiered(local) : null;
    OverlapScores scores =
        !unlocked ? null : tiers != null ? tiers.device() : index.findMatches(local, false);
    if (scores != null && hybrid.active()) {
      scores = hybrid.rescore(scores, seq, engineCap(tokens.length));
    }
    lock.lock();
    try {
      final long now = nanoClock.getAsLong();
      if (predictedRanks > 0 || scores == null) { // (a predicted rank may have come or gone since)
        predictions.expire(now);
        tiers = tiered != null && tiered.hasTiers() ? tiered.findTiered(local) : null;
        scores = tiers != null ? tiers.device() : index.findMatches(local, false);
        if (hybrid.active()) scores = rescoreMixed(scores, seq, tokens.length);
      }
      table.prepare(now, scores, seq);
      if (tiers != null) table.prepareTiers(tiers, tierWeights);
      Slot holder = table.holding(requestId);
      if (holder != null) {
        throw new IllegalArgumentException(
            "request id '"
                + requestId
                + "' is already in flight on worker "
                + holder.worker
                + "; free it before reusing the id");
      }
      return decide(requestId, seq, local, tokens.length, options, now);
    } finally {
      lock.unlock();
    }
  }

  /**
   * Routes a prompt the table is prepared for (under lock): one candidate per allowed rank, the
   * busy ones set aside, the selector's choice, recorded.
   */
  @GuardedBy("lock")
  private RouteDecision decide(
      String requestId, long[] seq, long[] local, int isl, RouteOptions options, long now) {
    final Slot[] all = table.slots();
    final int n = all.length;
    // the table's columns, indexed by rank (SlotTable: contiguous arrays, no object per rank)
    final Worker[] workerCol = table.workerColumn();
    final long[] capacityCol = table.capacityColumn();
    final EvictionPressure.Meter[] meterCol = table.meterColumn();
    final int[] blocksCol = table.activeBlocksColumn();
    final long[] prefillCol = table.activePrefillColumn();
    final int[] requestsCol = table.requestsColumn();
    final boolean[] predictedCol = table.predictedColumn();
    final boolean anyPredicted = predictedRanks > 0;
    final int[] overlapCol = table.overlapColumn();
    final int[] cachedCol = table.cachedColumn();
    final boolean[] rootCol = table.rootColumn();
    final TierOverlap[] tiersCol = table.tierColumn();
    // one column per load term; eligible ranks fill [0, m) in ascending order, busy ones fill
    // (n - busy, n) from the end (so in descending order there): no object per rank
    int[] ranks = rankScratch; // positions in the table; not kept past this call: reused
    if (ranks.length < n) rankScratch = ranks = new int[n];
    // overlap and cached blocks: when few ranks matched and none is predicted (whose cached blocks
    // are its predictions' count, matched or not), the decision keeps only the candidates where
    // either is not 0, as (index, overlap, cached) triples (Candidates' notes), and the columns
    // here are the router's scratch, read only before this call returns
    final int matched = table.matchedRanks();
    final int @Nullable [] triples;
    final int[] overlap;
    final int[] cached;
    if (!anyPredicted && matched <= n / SPARSE_RANKS_PER_MATCH) {
      if (overlapScratch.length < n) {
        overlapScratch = new int[n];
        cachedScratch = new int[n];
      }
      if (tripleScratch.length < 3 * matched) tripleScratch = new int[3 * matched];
      overlap = overlapScratch;
      cached = cachedScratch;
      triples = tripleScratch;
    } else {
      overlap = new int[n];
      cached = new int[n];
      triples = null;
    }
    int found = 0; // triples written
    final double[] prefillBlocks = new double[n];
    final int[] decode = new int[n];
    // in flight before this one: the queue scorer's figure; the reused scratch unless a term may
    // read it after this decision (Candidates' notes)
    final CostBasedSelector scored = selector instanceof CostBasedSelector c ? c : null;
    int[] requests = requestScratch;
    if (scored == null || scored.scorers().readsRequests()) {
      requests = new int[n];
    } else if (requests.length < n) {
      requestScratch = requests = new int[n];
    }
    // each eligible rank's eviction count, divided below by the mean count of the allowed ranks
    // (busy ones included; docs/routing.md); until some rank evicts, every count is 0 and the
    // decision shares the router's array of zeros (never written) instead of reading every meter
    final boolean evictions = pressure.anyEvicted();
    final double[] relativePressure;
    if (evictions) {
      relativePressure = new double[n];
    } else {
      if (zeroPressure.length < n) zeroPressure = new double[n];
      relativePressure = zeroPressure;
    }
    final TierOverlap @Nullable [] tierColumn = tiersCol != null ? new TierOverlap[n] : null;
    final Set<Long> allowedIds = options.allowedWorkerIds();
    final int bs = blockSize;
    // x / bs as x × (1 / bs) when bs is a power of two: the same double, since both are exact
    // scalings by a power of two of the same value, without a division per rank
    final boolean pow2 = Integer.bitCount(bs) == 1;
    final double perBlock = 1.0 / bs;
    final int blocks = seq.length;
    // the eviction counts' common decay, once per decision (EvictionPressure: scaled counts)
    final EvictionPressure.@Nullable Epoch epoch = evictions ? pressure.epoch(now) : null;
    final double decay = epoch != null ? pressure.decay(epoch, now) : 0;
    double evictedSum = 0;
    int allowed = 0;
    int m = 0;
    int busy = 0;
    // on the ranks that hold the prompt's root block, its active prefix there (SlotTable.prepare)
    final int[] activeCol = table.activePrefixColumn();
    // every rank a candidate in its place (none filtered out, none busy) and nothing per rank but
    // the columns (no prediction, tier or eviction count to read): the same figures, column by
    // column, in plain passes without a branch per rank (ranks[] is then the identity, unwritten).
    // The busy test is folded into the same passes; a busy rank sends the decision to the loop
    // below, which writes every figure again
    boolean plain = allowedIds == null && !anyPredicted && tiersCol == null && epoch == null;
    if (plain) {
      boolean anyBusy =
          plainPrefill(prefillCol, overlapCol, requestsCol, prefillBlocks, n, isl, pow2);
      if (busyByBlocks) anyBusy |= anyBusyByBlocks(capacityCol, blocksCol, n);
      plain = !anyBusy;
    }
    if (plain) {
      allowed = n;
      m = n;
      // activeCol is 0 wherever rootCol is false (SlotTable.prepare): no branch
      for (int i = 0; i < n; i++) decode[i] = blocksCol[i] + (blocks - activeCol[i]);
      // the requests column as it is when no term reads it after the choice (the scratch's case):
      // nothing changes it before the selector returns, and afterwards no one asks (Candidates)
      if (requests == requestScratch) {
        requests = requestsCol;
      } else {
        System.arraycopy(requestsCol, 0, requests, 0, n);
      }
      // with triples the decision reads no overlap or cached column (the chosen rank's overlap is
      // read from the table's below): no copies; the triples from the few matched ranks' positions
      // when prepare noted them, else from a scan of every rank
      if (triples == null) {
        System.arraycopy(overlapCol, 0, overlap, 0, n);
        System.arraycopy(cachedCol, 0, cached, 0, n);
      } else {
        found = matched <= SORTED_TRIPLES_MAX ? table.matchedTriples(triples) : -1;
        if (found < 0) {
          found = 0;
          for (int i = 0; i < n; i++) {
            final int ov = overlapCol[i];
            final int cb = cachedCol[i];
            if ((ov | cb) != 0) {
              triples[found] = i;
              triples[found + 1] = ov;
              triples[found + 2] = cb;
              found += 3;
            }
          }
        }
      }
    } else {
      for (int i = 0; i < n; i++) {
        if (allowedIds != null && !allowedIds.contains(all[i].boxedWorkerId)) continue;
        allowed++;
        final long prefill = prefillCol[i];
        final int active = blocksCol[i];
        final int inFlight = requestsCol[i];
        final boolean isBusy = isBusy(capacityCol[i], active, prefill, inFlight);
        final int k = isBusy ? n - 1 - busy++ : m++;
        ranks[k] = i;
        requests[k] = inFlight;
        final int ov = overlapCol[i];
        overlap[k] = ov;
        // a predicted rank's held blocks are known whether or not it matched: a cold prompt's tie
        // goes to the emptier cache, so new conversations spread over a cold fleet
        final int cb =
            anyPredicted && predictedCol[i] ? predictions.size(workerCol[i]) : cachedCol[i];
        cached[k] = cb;
        if (triples != null && !isBusy && (ov | cb) != 0) {
          triples[found] = k;
          triples[found + 1] = ov;
          triples[found + 2] = cb;
          found += 3;
        }
        final TierOverlap t = tiersCol == null ? null : tiersCol[i];
        final long charged = prefill + chargedTokens(isl, ov, t, bs);
        prefillBlocks[k] = pow2 ? charged * perBlock : charged / (double) bs;
        if (tierColumn != null) tierColumn[k] = t;
        // only a rank holding a request with the prompt's root block can hold any of its blocks
        final int fresh = rootCol[i] ? blocks - activeCol[i] : blocks;
        decode[k] = active + fresh;
        if (epoch != null) {
          final double evicted = pressure.read(meterCol[i], epoch, decay, now);
          evictedSum += evicted;
          relativePressure[k] = evicted;
        }
      }
    }
    // the workers by column index: the table's own column (never written in place) when every rank
    // is a candidate in its place, else a copy in candidate order
    final Worker[] workers;
    if (m == n) {
      workers = workerCol;
    } else {
      workers = new Worker[n];
      for (int k = 0; k < m; k++) workers[k] = workerCol[ranks[k]];
      for (int k = n - busy; k < n; k++) workers[k] = workerCol[ranks[k]];
    }
    if (m == 0) {
      if (busy == 0) return new RouteDecision.NoWorkers();
      return new RouteDecision.AllBusy(
          busyCandidates(workers, overlap, cached, prefillBlocks, decode, n, busy));
    }
    // a floor, so that the remains of evictions long ago are not a multiple of a mean near 0
    final double mean = Math.max(evictedSum / allowed, PRESSURE_FLOOR_BLOCKS);
    if (evictions) {
      for (int k = 0; k < m; k++) relativePressure[k] /= mean;
    }
    // a cost of built-in terms only is priced again from the candidates when the decision is asked
    // for it (PricedCandidates): the selector writes it to the router's scratch; else it is kept
    final @Nullable Scorers repriced =
        scored != null && scored.scorers().builtInOnly() ? scored.scorers() : null;
    double[] costs = costScratch;
    if (repriced == null) {
      costs = new double[m];
    } else if (costs.length < m) {
      costScratch = costs = new double[n];
    }
    final Candidates cands =
        new Candidates(
            workers,
            triples == null ? overlap : null,
            triples == null ? cached : null,
            triples == null || found == 0 ? NO_TRIPLES : Arrays.copyOf(triples, found),
            prefillBlocks,
            decode,
            m,
            seq.length,
            relativePressure,
            tierColumn,
            requests,
            options,
            !evictions);
    // a cost of named terms reports each term's contribution, computed when asked for
    final int chosen = selector.select(cands, costs);
    if (chosen < 0 || chosen >= m) {
      throw new IllegalStateException(
          "selector " + selector + " returned " + chosen + " for " + m + " candidates");
    }
    final Slot target = all[plain ? chosen : ranks[chosen]];
    // (the plain passes with triples leave the overlap scratch unwritten: the table's column)
    final int targetOverlap = plain ? overlapCol[chosen] : overlap[chosen];
    final TierOverlap targetTiers = tiersCol == null ? null : tiersCol[target.index];
    final long charge = chargedTokens(isl, targetOverlap, targetTiers, blockSize);
    table.record(requestId, target, seq, charge, now);
    if (sync != null) sync.localRouted(requestId, target.worker, seq, charge);
    if (target.predicted) {
      predictions.record(target.worker, target.kvBlocks, seq, local, targetOverlap, now);
      if (sync != null) sync.localPredicted(target.worker, local);
    }
    final List<Worker> busyWorkers;
    if (busy == 0) {
      busyWorkers = List.of();
    } else {
      Worker[] bw = new Worker[busy];
      for (int j = 0; j < busy; j++) bw[j] = workers[n - 1 - j];
      busyWorkers = Arrays.asList(bw);
    }
    return new RouteDecision.Routed(
        target.worker,
        targetOverlap,
        targetOverlap * blockSize,
        repriced != null
            ? new PricedCandidates(cands, repriced)
            : new PricedCandidates(cands, costs, scored == null ? null : scored.scorers()),
        busyWorkers,
        targetTiers);
  }

  /**
   * The prefill tokens a request of {@code isl} tokens costs on {@code s}: the tokens past its
   * device overlap, less the weighted credit of the blocks its slower tiers add (a block loaded
   * from the host costs {@code 1 − w_host} of a recompute); never negative.
   */
  private static long chargedTokens(int isl, int overlap, @Nullable TierOverlap tiers, int bs) {
    if (tiers == null) return ActiveSequences.prefillTokens(isl, overlap, bs);
    return Math.max(0L, Math.round(isl - tiers.weightedBlocks() * bs));
  }

  /** The busy ranks' candidates, ascending (they sit at the end of the columns, descending). */
  private static List<Candidate> busyCandidates(
      Worker[] workers,
      int[] overlap,
      int[] cached,
      double[] prefill,
      int[] decode,
      int n,
      int busy) {
    List<Candidate> out = new ArrayList<>(busy);
    for (int j = 0; j < busy; j++) {
      int k = n - 1 - j;
      out.add(new Candidate(workers[k], overlap[k], cached[k], prefill[k], decode[k]));
    }
    return out;
  }

  /**
   * Approximate mode's correction from what an engine reports: {@code worker} answered the prompt
   * {@code tokens} (hashed with {@code options}' salt) with {@code cachedTokens} of it served from
   * its prefix cache ({@code usage.prompt_tokens_details.cached_tokens}), where the router's
   * decision had predicted {@code predictedTokens} ({@link RouteDecision.Routed#overlapTokens()}).
   * The difference corrects the rank's modelled capacity: fewer cached than predicted shrinks it by
   * the difference, and the LRU drops the oldest predictions down to it; more grows it (never past
   * the registered {@code kvBlocks}); a rank registered without a capacity learns one. The blocks
   * the engine had are predicted again if the model had dropped them. docs/routing.md, "Approximate
   * mode". Both counts are compared in whole blocks, capped below the prompt's last token, which an
   * engine never reports as cached. Call it for a request routed to {@code worker}, once the engine
   * reported (freed or not). Does nothing for an unregistered rank.
   *
   * @throws IllegalStateException for a rank of {@link KvSource#EVENTS}, whose engine's events keep
   *     the index exact
   */
  public void observeCachedTokens(
      Worker worker, int[] tokens, RouteOptions options, int predictedTokens, long cachedTokens) {
    Objects.requireNonNull(worker, "worker");
    Objects.requireNonNull(tokens, "tokens");
    Objects.requireNonNull(options, "options");
    final long[] local = hasherFor(options).localHashes(tokens);
    final long[] seq = SequenceHasher.sequenceHashes(local);
    // an engine never reports a prompt's last token as cached (vLLM recomputes it for the logits):
    // both sides are compared in whole blocks below that
    final int cap = Math.max(0, tokens.length - 1) / blockSize;
    final int predictedBlocks = Math.min(cap, Math.max(0, predictedTokens) / blockSize);
    final int cachedBlocks = (int) Math.min(cap, Math.max(0, cachedTokens) / blockSize);
    lock.lock();
    try {
      Slot s = table.get(worker);
      if (s == null) return;
      if (!s.predicted) {
        throw new IllegalStateException(
            "worker "
                + worker
                + " is fed by KV events: observeCachedTokens is for ranks tracked by predictions"
                + " (approximate mode)");
      }
      final long now = nanoClock.getAsLong();
      predictions.expire(now); // as before a route, and as a peer does before applying it
      predictions.observe(worker, s.kvBlocks, seq, local, predictedBlocks, cachedBlocks, now);
      if (sync != null) {
        sync.localCorrected(worker, Arrays.copyOf(local, cachedBlocks), predictedBlocks);
      }
    } finally {
      lock.unlock();
    }
  }

  /** Predicted blocks held for one rank in approximate mode (for tests). */
  int predictedEntries(Worker worker) {
    lock.lock();
    try {
      return predictions.size(worker);
    } finally {
      lock.unlock();
    }
  }

  /** The capacity approximate mode models for one rank; {@code Long.MAX_VALUE} unknown (tests). */
  long predictedCapacity(Worker worker) {
    lock.lock();
    try {
      Slot s = table.get(worker);
      if (s == null || !s.predicted) return Long.MAX_VALUE;
      return predictions.capacity(worker, s.kvBlocks);
    } finally {
      lock.unlock();
    }
  }

  /** Distinct root blocks of requests in flight (for tests of the bookkeeping). */
  int rootBlocksInFlight() {
    lock.lock();
    try {
      return table.rootBlocksInFlight();
    } finally {
      lock.unlock();
    }
  }

  /** Salted hashers cached now (for tests: bounded whatever salts requests carry). */
  int cachedSaltedHashers() {
    return salted.size();
  }

  /**
   * The most blocks of a prompt of {@code tokens} tokens an engine reuses: it always computes the
   * last token (vLLM asks its prefix cache for at most {@code tokens - 1} of them).
   */
  private int engineCap(int tokens) {
    return Math.max(0, tokens - 1) / blockSize;
  }

  /**
   * Whether a rank with load {@code l} is busy by the rule {@link #route} applies (the
   * busyRequests, busyPrefillTokens and busyBlockFraction this router was built with, against the
   * KV capacity the rank registered), so a caller that waits for room uses the same rule.
   */
  public boolean isBusy(WorkerLoad l) {
    long kv = busyBlockFraction == Double.POSITIVE_INFINITY ? 0 : Math.max(0, kvBlocks(l.worker()));
    return isBusy(kv, l.activeBlocks(), l.activePrefillTokens(), l.requests());
  }

  /**
   * Writes the first {@code n} ranks' prefill blocks, {@code (prefill + prefillTokens(isl,
   * overlap)) / blockSize} (as a product by the exact reciprocal when {@code pow2}: the same
   * double), and returns whether any of them is busy by its prefill tokens or requests (isBusy's
   * first two tests): one straight pass, the tests without a branch.
   */
  @SuppressWarnings("ShortCircuitBoolean") // both sides are plain reads: no branch per rank
  private boolean plainPrefill(
      long[] prefillCol,
      int[] overlapCol,
      int[] requestsCol,
      double[] prefillBlocks,
      int n,
      int isl,
      boolean pow2) {
    final int bs = blockSize;
    final double perBlock = 1.0 / bs;
    final long prefillLimit = busyPrefillTokens;
    final int requestLimit = busyRequests;
    boolean anyBusy = false;
    if (pow2) {
      for (int i = 0; i < n; i++) {
        final long prefill = prefillCol[i];
        prefillBlocks[i] =
            (prefill + ActiveSequences.prefillTokens(isl, overlapCol[i], bs)) * perBlock;
        anyBusy |= prefill > prefillLimit | requestsCol[i] >= requestLimit;
      }
    } else {
      for (int i = 0; i < n; i++) {
        final long prefill = prefillCol[i];
        prefillBlocks[i] =
            (prefill + ActiveSequences.prefillTokens(isl, overlapCol[i], bs)) / (double) bs;
        anyBusy |= prefill > prefillLimit | requestsCol[i] >= requestLimit;
      }
    }
    return anyBusy;
  }

  /**
   * Whether any of the first {@code n} ranks is busy by the block fraction (isBusy's last test).
   */
  private boolean anyBusyByBlocks(long[] capacity, int[] blocks, int n) {
    for (int i = 0; i < n; i++) {
      if (capacity[i] > 0 && blocks[i] > busyBlockFraction * capacity[i]) return true;
    }
    return false;
  }

  private boolean isBusy(long kvBlocks, int activeBlocks, long activePrefill, int requests) {
    if (activePrefill > busyPrefillTokens || requests >= busyRequests) return true;
    // at the default fraction, infinite, no count exceeds it: no multiplication per rank
    return busyByBlocks && kvBlocks > 0 && activeBlocks > busyBlockFraction * kvBlocks;
  }

  /**
   * How many leading blocks of {@code tokens} each worker caches, as routing would see it now;
   * changes nothing (in approximate mode it does expire overdue predictions first).
   */
  public OverlapScores overlaps(int[] tokens, RouteOptions options) {
    Objects.requireNonNull(tokens, "tokens");
    Objects.requireNonNull(options, "options");
    long[] local = hasherFor(options).localHashes(tokens);
    if (!predicting) {
      OverlapScores scores = index.findMatches(local, false);
      return hybrid.active()
          ? hybrid.rescore(scores, SequenceHasher.sequenceHashes(local), engineCap(tokens.length))
          : scores;
    }
    lock.lock();
    try {
      predictions.expire(nanoClock.getAsLong());
      OverlapScores scores = index.findMatches(local, false);
      return hybrid.active()
          ? rescoreMixed(scores, SequenceHasher.sequenceHashes(local), tokens.length)
          : scores;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Under the lock, with predicted ranks registered: the groups cut the event ranks' scores; a
   * predicted rank's score is its prediction of the main group (no engine tells the router what its
   * other groups hold), capped as the engine caps a hit.
   */
  @GuardedBy("lock")
  private OverlapScores rescoreMixed(OverlapScores scores, long[] seq, int tokens) {
    final SlotTable slots = table; // the predicate runs inside rescore, under the lock still
    return hybrid.rescore(
        scores,
        seq,
        engineCap(tokens),
        w -> {
          Slot s = slots.get(w);
          return s != null && s.predicted;
        });
  }

  /**
   * Stops charging the request's prefill tokens to its worker (call when its first token is out).
   * Returns false when the request is not in flight (unknown, freed, or expired).
   */
  public boolean markPrefillCompleted(String requestId) {
    lock.lock();
    try {
      if (peerKey(requestId)) return false;
      boolean done = table.markPrefillCompleted(requestId, nanoClock.getAsLong());
      if (done && sync != null) sync.localPrefillCompleted(requestId);
      return done;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Releases the request's blocks and prefill tokens (call when its response is finished or
   * cancelled). Returns false when the request is not in flight (unknown, freed, or expired).
   */
  public boolean free(String requestId) {
    lock.lock();
    try {
      if (peerKey(requestId)) return false;
      boolean freed = table.free(requestId, nanoClock.getAsLong());
      if (freed && sync != null) sync.localReleased(requestId, false);
      return freed;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Runs the lazy expiry now: drops requests in flight longer than the request expiry and, in
   * approximate mode, predictions older than their TTL. Routing does this on every call; a gateway
   * with long idle periods may call it from a timer.
   */
  public void expire() {
    lock.lock();
    try {
      long now = nanoClock.getAsLong();
      predictions.expire(now);
      table.expire(now);
    } finally {
      lock.unlock();
    }
  }

  // ------------------------------------------------------------------ observability

  /** The load of every registered worker rank, ascending, after expiring overdue requests. */
  public List<WorkerLoad> loads() {
    lock.lock();
    try {
      long now = nanoClock.getAsLong();
      Slot[] all = table.slots();
      List<WorkerLoad> out = new ArrayList<>(all.length);
      for (Slot s : all) {
        s.seqs.expire(now);
        out.add(load(s));
      }
      return out;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The load of one registered worker rank, after expiring its overdue requests.
   *
   * @throws IllegalArgumentException when the rank is not registered
   */
  public WorkerLoad load(Worker worker) {
    lock.lock();
    try {
      Slot s = table.get(worker);
      if (s == null) {
        throw new IllegalArgumentException("worker " + worker + " is not registered");
      }
      s.seqs.expire(nanoClock.getAsLong());
      return load(s);
    } finally {
      lock.unlock();
    }
  }

  private static WorkerLoad load(Slot s) {
    ActiveSequences a = s.seqs;
    return new WorkerLoad(s.worker, a.activeBlocks(), a.activePrefillTokens(), a.requestCount());
  }

  /** Requests in flight across all workers, after expiring overdue ones. */
  public int inFlight() {
    lock.lock();
    try {
      long now = nanoClock.getAsLong();
      table.expire(now);
      return table.inFlight();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Blocks held by the requests in flight across all workers: the sum of their lengths in blocks, a
   * block that several requests share counted for each (what their state takes in memory, unlike
   * {@link WorkerLoad#activeBlocks()}). Read without the router's lock; overdue requests count
   * until the router next expires them (every route does).
   */
  public long heldBlocks() {
    return heldBlocks.getAcquire();
  }

  /** Predicted (worker rank, block) entries held in approximate mode; 0 in event mode. */
  int predictedEntries() {
    lock.lock();
    try {
      return predictions.size();
    } finally {
      lock.unlock();
    }
  }

  /** Closes the index when the router created it. */
  @Override
  public void close() {
    if (ownsIndex) index.close();
  }

  private BlockHasher hasherFor(RouteOptions options) {
    if (!options.hasSalt()) return hasher;
    return salted.get(options.loraName(), options.namespace());
  }

  @Override
  public String toString() {
    return "KvRouter[blockSize="
        + blockSize
        + (approximate ? ", approximate" : "")
        + ", selector="
        + selector
        + "]";
  }

  // ------------------------------------------------------------------ builder

  /** The default weight of the eviction-pressure term (docs/routing.md, Builder.pressureWeight). */
  public static final double DEFAULT_PRESSURE_WEIGHT = 20.0;

  /** The default time constant of the eviction rates the pressure term compares. */
  public static final Duration DEFAULT_PRESSURE_WINDOW = Duration.ofSeconds(30);

  /**
   * The least mean eviction count the pressure term divides by, in blocks: when no rank evicted
   * lately, the decayed remains of old evictions are priced as the fractions of a block they are,
   * not as a multiple of a mean that is nearly 0. (A floor of 64 blocks, tried too, changed the
   * simulated results only by noise: load imbalance 1.08 became 1.35 at weight 20 and 1.21 at 30.)
   */
  static final double PRESSURE_FLOOR_BLOCKS = 1;

  /**
   * A decision keeps its candidates' overlaps as triples (Candidates' notes) when at most one rank
   * in this many matched the prompt: 12 bytes a matched rank instead of 8 a rank.
   */
  static final int SPARSE_RANKS_PER_MATCH = 4;

  // up to this many matched ranks, the plain passes take the triples from the matched ranks'
  // positions (SlotTable.matchedTriples, an insertion sort) rather than a scan of every rank
  static final int SORTED_TRIPLES_MAX = 32;

  private static final int[] NO_TRIPLES = new int[0];

  /** Configures a {@link KvRouter}; every setting has a default. Not thread-safe. */
  public static final class Builder {
    private final int blockSize;
    private double overlapWeight = 1.0;
    private double pressureWeight = DEFAULT_PRESSURE_WEIGHT;
    private Duration pressureWindow = DEFAULT_PRESSURE_WINDOW;
    private double temperature = 0.0;
    private long seed = 0L;
    private @Nullable WorkerSelector selector;
    private double busyBlockFraction = Double.POSITIVE_INFINITY;
    private long busyPrefillTokens = Long.MAX_VALUE;
    private int busyRequests = Integer.MAX_VALUE;
    private Duration requestExpiry = ActiveSequences.DEFAULT_EXPIRY;
    private boolean approximate;
    private Duration predictionTtl = PredictedBlocks.DEFAULT_TTL;
    private int maxPredictions = PredictedBlocks.DEFAULT_MAX_ENTRIES;
    private @Nullable KvIndex index;
    private LongSupplier nanoClock = System::nanoTime;
    private TierWeights tierWeights = TierWeights.DEFAULTS;
    private @Nullable KvCacheGroups kvCacheGroups;

    private Builder(int blockSize) {
      if (blockSize < 1) {
        throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
      }
      this.blockSize = blockSize;
    }

    /**
     * Every setting of {@code s} that the builder has: the cost's weights, temperature, seed,
     * request expiry, the busy limits (unless never), approximate mode (when on) and the tier
     * weights. The index bounds ({@link RoutingSettings#maxBlocks()}) are the index's: {@link
     * RoutingSettings#newRouter} builds the index too.
     */
    public Builder settings(RoutingSettings s) {
      overlapWeight(s.overlapWeight());
      pressureWeight(s.pressureWeight());
      temperature(s.temperature());
      seed(s.seed());
      requestExpiry(s.requestExpiry());
      if (s.busyPrefillTokens() >= 0) busyPrefillTokens(s.busyPrefillTokens());
      if (s.busyBlockFraction() > 0) busyBlockFraction(s.busyBlockFraction());
      if (s.busyRequests() > 0) busyRequests(s.busyRequests());
      if (s.approximate()) approximate();
      return tierWeights(s.tierWeights());
    }

    /** Weight of prefill work in the default cost; default 1.0, 0 ignores cached prefixes. */
    public Builder overlapWeight(double overlapWeight) {
      this.overlapWeight = CostBasedSelector.requireWeight("overlapWeight", overlapWeight);
      return this;
    }

    /**
     * Weight of the eviction-pressure term of the default cost, {@code pressureWeight × newBlocks ×
     * relativePressure} (docs/routing.md); default {@value #DEFAULT_PRESSURE_WEIGHT}, 0 gives
     * DESIGN.md §6's cost exactly. The term is 0 until workers evict (and in approximate mode).
     */
    public Builder pressureWeight(double pressureWeight) {
      this.pressureWeight = CostBasedSelector.requireWeight("pressureWeight", pressureWeight);
      return this;
    }

    /**
     * Time constant of the eviction rates the pressure term compares (an exponentially decaying
     * count of the blocks each rank's Removed events named); default 30 s.
     */
    public Builder pressureWindow(Duration window) {
      if (window == null || window.isNegative() || window.isZero()) {
        throw new IllegalArgumentException("pressureWindow must be positive, got " + window);
      }
      if (window.compareTo(Duration.ofDays(365)) > 0) {
        throw new IllegalArgumentException(
            "pressureWindow must be at most 365 days, got " + window);
      }
      this.pressureWindow = window;
      return this;
    }

    /** Softmax temperature of the default selector; default 0 (take the cheapest). */
    public Builder temperature(double temperature) {
      this.temperature = CostBasedSelector.requireWeight("temperature", temperature);
      return this;
    }

    /** Seed of the default selector's tie-breaks and sampling; default 0. */
    public Builder seed(long seed) {
      this.seed = seed;
      return this;
    }

    /** A selector of your own; replaces overlapWeight, pressureWeight, temperature and seed. */
    public Builder selector(WorkerSelector selector) {
      this.selector = Objects.requireNonNull(selector, "selector");
      return this;
    }

    /**
     * A worker rank whose active blocks exceed this fraction of its KV capacity (given at
     * registration) is busy and not routed to; default: never busy by blocks.
     */
    public Builder busyBlockFraction(double fraction) {
      if (!(fraction > 0)) {
        throw new IllegalArgumentException("busyBlockFraction must be > 0, got " + fraction);
      }
      this.busyBlockFraction = fraction;
      return this;
    }

    /**
     * A worker rank whose prefill tokens in flight exceed this limit is busy and not routed to;
     * default: never busy by tokens.
     */
    public Builder busyPrefillTokens(long limit) {
      if (limit < 0) {
        throw new IllegalArgumentException("busyPrefillTokens must be >= 0, got " + limit);
      }
      this.busyPrefillTokens = limit;
      return this;
    }

    /**
     * A worker rank with {@code limit} requests in flight is busy and not routed to (a route that
     * finds every allowed rank busy answers {@link RouteDecision.AllBusy}); default: never busy by
     * requests.
     */
    public Builder busyRequests(int limit) {
      if (limit < 1) {
        throw new IllegalArgumentException("busyRequests must be >= 1, got " + limit);
      }
      this.busyRequests = limit;
      return this;
    }

    /** How long a request may stay in flight without {@link #free}; default 300 s. */
    public Builder requestExpiry(Duration expiry) {
      if (expiry == null || expiry.isNegative() || expiry.isZero()) {
        throw new IllegalArgumentException("requestExpiry must be positive, got " + expiry);
      }
      this.requestExpiry = expiry;
      return this;
    }

    /** Approximate mode with the default TTL bound (1 h) and entry bound (2^20). */
    public Builder approximate() {
      return approximate(PredictedBlocks.DEFAULT_TTL, PredictedBlocks.DEFAULT_MAX_ENTRIES);
    }

    /**
     * Approximate mode, for engines that publish no KV events: each decision is taken as the chosen
     * rank caching the prompt's blocks. Each rank's predictions are an LRU of the rank's KV
     * capacity (the {@code kvBlocks} it was registered with; learned from {@link
     * KvRouter#observeCachedTokens} when 0); a block untouched for {@code ttl} is dropped whatever
     * the capacity; past {@code maxEntries} (rank, block) predictions in all, the least recently
     * touched are pruned down to 80%.
     */
    public Builder approximate(Duration ttl, int maxEntries) {
      if (ttl == null || ttl.isNegative() || ttl.isZero()) {
        throw new IllegalArgumentException("ttl must be positive, got " + ttl);
      }
      if (maxEntries < 1) {
        throw new IllegalArgumentException("maxEntries must be >= 1, got " + maxEntries);
      }
      this.approximate = true;
      this.predictionTtl = ttl;
      this.maxPredictions = maxEntries;
      return this;
    }

    /**
     * The index to route from in event mode (the caller feeds it and closes it); default: a new
     * {@link KvIndexes#concurrentCompressedTree()} that the router closes.
     */
    public Builder index(KvIndex index) {
      this.index = Objects.requireNonNull(index, "index");
      return this;
    }

    /**
     * What a block on each slower tier saves of a recompute, when the index is a {@link
     * TieredIndex} (docs/routing.md, "Blocks beyond the GPU"); default {@link
     * TierWeights#DEFAULTS}.
     */
    public Builder tierWeights(TierWeights weights) {
      this.tierWeights = Objects.requireNonNull(weights, "weights");
      return this;
    }

    /**
     * The KV cache groups of a hybrid model (docs/routing.md, "Hybrid models"), declared up front;
     * without it, the first group event that names a group declares it ({@link #applyGroupEvent}).
     * A model of one group is not hybrid and routes as without this.
     */
    public Builder kvCacheGroups(KvCacheGroups groups) {
      this.kvCacheGroups = Objects.requireNonNull(groups, "groups");
      return this;
    }

    /** A monotonic clock in nanoseconds for expiry and TTLs; default {@code System::nanoTime}. */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /**
     * The router.
     *
     * @throws IllegalStateException when both approximate mode and an index are set, or approximate
     *     mode and the KV cache groups of a hybrid model
     */
    public KvRouter build() {
      if (approximate && index != null) {
        throw new IllegalStateException(
            "approximate mode uses the router's own index; do not set index(...) as well");
      }
      if (approximate && kvCacheGroups != null && kvCacheGroups.isHybrid()) {
        throw new IllegalStateException(
            "approximate mode predicts one cache per rank; it cannot model the KV cache groups "
                + kvCacheGroups
                + " of a hybrid model (route it with events)");
      }
      return new KvRouter(this);
    }
  }
}
