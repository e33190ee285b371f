package io.kvrouter.server;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.kvrouter.index.TieredScores;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.KvSource;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.kvevents.GroupEvent;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import io.kvrouter.transport.nats.NatsSequenceSync;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * The state of one {@code (model_name, routing_group)}: its router (which owns the concurrent
 * index), the block size its first registration fixed, and its registered worker ranks.
 *
 * <pre>
 * Implementation notes
 *
 * Shared by every request thread. router and its index are thread-safe on their own (see
 * docs/concurrency.md). registrations is a concurrent sorted map: /workers and /dump iterate it
 * without a lock, /events looks workers up in it. Nothing here grows with what clients send:
 * the salted hashers of /query are made per request (localHashes).
 *
 * lock orders event application against membership changes: /events holds the read lock while
 * it checks that every event's worker is registered and applies the batch, so an unregister
 * (which takes the write lock, under Registry's membership lock) cannot slip between the check
 * and the apply and leave a forgotten worker's blocks behind in the index. Many /events batches
 * hold the read lock at once; the index's own writer lock serialises their writes. Queries and
 * routing take neither: the index's readers never block.
 *
 * closed is set under the write lock when the last rank unregisters and the Registry drops this
 * index; an /events batch that got the object before that sees closed under the read lock and
 * answers 404, like a request that arrives after.
 *
 * With NATS, the index has one more writer, the replica's thread (NatsEvents), which applies
 * the subject's events without this lock: in that mode /events publishes rather than applies
 * and no ZMQ listener exists, so nothing else checks registrations against its events.
 * </pre>
 */
final class ModelIndex implements RouterModel {
  final ModelKey key;
  final int blockSize;
  final KvRouter router;
  private final BlockHasher hasher;
  final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  final ConcurrentSkipListMap<Worker, Registration> registrations = new ConcurrentSkipListMap<>();
  private final DistributionDataPoint findMatchesSeconds;
  volatile boolean closed;

  /** A few routed prompts, for GET /dashboard's hot prefixes (DashboardSampler drains it). */
  final PromptSample prompts = new PromptSample();

  /**
   * The gateway's prediction counters per registered rank (made on first use; see
   * PredictionAccuracy), dropped when the rank is unregistered.
   */
  private final ConcurrentHashMap<Worker, PredictionAccuracy> accuracy = new ConcurrentHashMap<>();

  /**
   * Registered ranks per base URL, kept by {@link #registered} and {@link #unregistered} (Registry,
   * under its locks): a URL with several ranks is a data-parallel engine that serves them all
   * behind one HTTP server, and the gateway names the chosen rank in each request.
   */
  private final ConcurrentHashMap<String, Integer> ranksByUrl = new ConcurrentHashMap<>();

  /**
   * With {@code serve --events nats://...}: the NATS replica writing this index and the publisher
   * of {@code /events}; set once before the index is visible to other threads, null otherwise.
   */
  NatsEvents.Feed nats;

  /**
   * With sequence sync (docs/service.md, "Several replicas share their in-flight load"): this
   * index's sync with the other replicas; set once before the index is visible, null otherwise.
   */
  NatsSequenceSync sync;

  ModelIndex(ModelKey key, int blockSize, KvRouter router, DistributionDataPoint findMatches) {
    this.key = key;
    this.blockSize = blockSize;
    this.router = router;
    this.hasher = BlockHasher.of(blockSize);
    this.findMatchesSeconds = findMatches;
  }

  // ------------------------------------------------------------------ RouterModel (the gateway)

  @Override
  public String modelName() {
    return key.modelName();
  }

  @Override
  public String routingGroup() {
    return key.routingGroup();
  }

  @Override
  public int blockSize() {
    return blockSize;
  }

  @Override
  public KvRouter router() {
    return router;
  }

  @Override
  public String baseUrl(Worker worker) {
    Registration r = registrations.get(worker);
    return r == null ? null : r.baseUrl();
  }

  @Override
  public boolean sharesBaseUrl(Worker worker) {
    Registration r = registrations.get(worker);
    if (r == null || r.baseUrl() == null) return false;
    Integer n = ranksByUrl.get(r.baseUrl());
    return n != null && n > 1;
  }

  /** Puts {@code r} in the registrations (replacing any of its worker) and counts its URL. */
  void registered(Registration r) {
    Registration old = registrations.put(r.worker(), r);
    if (old != null) uncount(old);
    if (r.baseUrl() != null) ranksByUrl.merge(r.baseUrl(), 1, Integer::sum);
  }

  /** Removes {@code worker}'s registration and its URL count; returns it, or null. */
  Registration unregistered(Worker worker) {
    Registration gone = registrations.remove(worker);
    if (gone != null) uncount(gone);
    return gone;
  }

  private void uncount(Registration r) {
    if (r.baseUrl() != null) {
      ranksByUrl.computeIfPresent(r.baseUrl(), (u, n) -> n <= 1 ? null : n - 1);
    }
  }

  @Override
  public List<Rank> ranks() {
    List<Rank> out = new ArrayList<>(registrations.size());
    for (Registration r : registrations.values()) {
      out.add(new Rank(r.worker(), r.baseUrl(), r.engineBlockSize(), r.role(), r.kvSource()));
    }
    return out;
  }

  @Override
  public String listenerState(Worker worker) {
    Registration r = registrations.get(worker);
    ZmqListener l = r == null ? null : r.listener();
    return l == null ? null : l.state();
  }

  @Override
  public PredictionAccuracy accuracy(Worker worker) {
    PredictionAccuracy a = accuracy.get(worker);
    if (a != null) return a;
    if (!registrations.containsKey(worker)) return new PredictionAccuracy(); // not kept
    PredictionAccuracy made = accuracy.computeIfAbsent(worker, w -> new PredictionAccuracy());
    // an unregister removes the registration, then this entry (forgetAccuracy): whichever order
    // it interleaves with the lines above, a rank that is gone keeps no entry
    if (!registrations.containsKey(worker)) accuracy.remove(worker, made);
    return made;
  }

  /**
   * Drops the prediction counters of a rank that was unregistered (Registry, after removing it).
   */
  void forgetAccuracy(Worker worker) {
    accuracy.remove(worker);
  }

  /** How many ranks have prediction counters (tests: bounded by the registered ranks). */
  int accuracyCount() {
    return accuracy.size();
  }

  /** The prediction counters of {@code worker}, or null when the gateway made none. */
  PredictionAccuracy accuracyOrNull(Worker worker) {
    return accuracy.get(worker);
  }

  @Override
  public void samplePrompt(int[] tokens, String loraName, String cacheSalt) {
    // a salted prompt's blocks hash otherwise: its prefixes are not the index's unsalted ones
    if (loraName == null && cacheSalt == null) prompts.offer(tokens);
  }

  @Override
  public boolean closed() {
    return closed;
  }

  /**
   * The local block hashes of {@code tokens} (full blocks only), salted by the LoRA name and the
   * cache salt (which salts the seed like a namespace, DESIGN.md §2). A salted hasher is made for
   * the call and dropped after it: making one hashes the salt strings once, which costs less than
   * hashing the prompt, and keeping them would let clients grow memory with distinct salts.
   */
  long[] localHashes(int[] tokens, String loraName, String cacheSalt) {
    BlockHasher h =
        loraName == null && cacheSalt == null
            ? hasher
            : hasher.withLora(loraName).withNamespace(cacheSalt);
    return h.localHashes(tokens);
  }

  /**
   * The index's tiers when an engine published copies beyond the device (docs/routing.md, "Blocks
   * beyond the GPU"), else null.
   */
  TieredIndex tiers() {
    return router.index() instanceof TieredIndex t && t.hasTiers() ? t : null;
  }

  /**
   * Makes the index's tiers up to {@code slowest} now (a warm start from a dump with tiers, so that
   * the index has them even with no block left off the device); a no-op without a tiered index.
   */
  void addTiers(Tier slowest) {
    if (router.index() instanceof TieredIndex t) t.addTiers(slowest);
  }

  /**
   * Blocks dropped from each tier past the bound (indexed by tier; {@code --max-tier-blocks}), or
   * null when the index is not tiered, or has neither a bound nor tiers (no series then).
   */
  long[] tierEvictions() {
    if (!(router.index() instanceof TieredIndex t)) return null;
    if (t.maxTierBlocks() == 0 && !t.hasTiers()) return null;
    long[] v = new long[Tier.values().length];
    for (Tier tier : Tier.values()) {
      v[tier.ordinal()] = t.evictedBlocks(tier);
    }
    return v;
  }

  /** Every worker's scores on every tier (see {@link #tiers()}), or null without tiers. */
  TieredScores findTiered(long[] localHashes) {
    TieredIndex t = tiers();
    return t == null ? null : t.findTiered(localHashes);
  }

  /** Exact scores of every worker the index knows, timed into the findMatches histogram. */
  OverlapScores findMatches(long[] localHashes) {
    long t0 = System.nanoTime();
    OverlapScores s = router.index().findMatches(localHashes, false);
    findMatchesSeconds.observe((System.nanoTime() - t0) / 1e9);
    return s;
  }

  /**
   * Applies one event of a ZMQ listener about the copies on {@code tier}, under the read lock, only
   * while {@code r} is still the registration of its rank.
   *
   * @return false (nothing applied) when the rank was unregistered or the index dropped meanwhile
   */
  boolean applyFrom(Registration r, Tier tier, RouterEvent e) {
    lock.readLock().lock();
    try {
      if (closed || registrations.get(r.worker()) != r) return false;
      router.applyEvent(tier, e);
      return true;
    } finally {
      lock.readLock().unlock();
    }
  }

  /**
   * Applies one event of a hybrid model's secondary KV cache group from a ZMQ listener
   * (docs/routing.md, "Hybrid models"), under the read lock, only while {@code r} is still the
   * registration of its rank.
   */
  boolean applyGroupFrom(Registration r, GroupEvent g) {
    lock.readLock().lock();
    try {
      if (closed || registrations.get(r.worker()) != r) return false;
      return router.applyGroupEvent(g.groupIdx(), g.group(), g.event());
    } finally {
      lock.readLock().unlock();
    }
  }

  /**
   * Checks that every event's worker is registered (unless {@code acceptUnregistered}), as {@link
   * #applyEvents} does, without applying anything.
   */
  void checkWorkers(List<RouterEvent> events, boolean acceptUnregistered) {
    lock.readLock().lock();
    try {
      check(events, acceptUnregistered);
    } finally {
      lock.readLock().unlock();
    }
  }

  /**
   * Applies a decoded batch whole: first every event's worker is checked (unless {@code
   * acceptUnregistered}), then every event is applied in order. Nothing is applied when a check
   * fails.
   *
   * @throws ApiException 404 naming the first unregistered worker, or the model when it was dropped
   *     meanwhile
   */
  void applyEvents(List<RouterEvent> events, boolean acceptUnregistered) {
    lock.readLock().lock();
    try {
      check(events, acceptUnregistered);
      for (RouterEvent e : events) router.applyEvent(e);
    } finally {
      lock.readLock().unlock();
    }
  }

  /**
   * {@link #applyEvents} for events with Dynamo's {@code storage_tier}: a device event, and a
   * {@code Cleared} of any tier (Dynamo's indexer clears the rank on every tier whatever the
   * event's tier says), is applied as {@link #applyEvents} applies it; a Stored or Removed of
   * another tier goes to that tier of the index (dropped by an index without tiers, as over ZMQ).
   */
  void applyTieredEvents(
      List<TieredEvent> tiered, List<RouterEvent> events, boolean acceptUnregistered) {
    lock.readLock().lock();
    try {
      check(events, acceptUnregistered);
      for (TieredEvent te : tiered) {
        RouterEvent e = te.event();
        if (te.tier() == StorageTier.DEVICE || e.data() instanceof CacheEvent.Cleared) {
          router.applyEvent(e);
        } else {
          router.applyEvent(Tier.valueOf(te.tier().name()), e);
        }
      }
    } finally {
      lock.readLock().unlock();
    }
  }

  /** The checks of applyEvents; under the read lock. */
  private void check(List<RouterEvent> events, boolean acceptUnregistered) {
    if (closed) {
      throw ApiException.notFound(
          "unknown " + key.describe() + ": its last worker was unregistered");
    }
    for (int i = 0, n = events.size(); i < n; i++) {
      Worker w = events.get(i).worker();
      Registration r = registrations.get(w);
      if (r == null && !acceptUnregistered) {
        throw ApiException.notFound(
            "event ["
                + i
                + "]: instance "
                + Long.toUnsignedString(w.workerId())
                + " dp_rank "
                + w.dpRank()
                + " is not registered for "
                + key.describe()
                + "; register it first (or start the server with --accept-unregistered);"
                + " nothing was applied");
      }
      if (r != null && r.kvSource() == KvSource.PREDICTED) {
        throw ApiException.conflict(
            "event ["
                + i
                + "]: instance "
                + Long.toUnsignedString(w.workerId())
                + " dp_rank "
                + w.dpRank()
                + " of "
                + key.describe()
                + " is tracked by predictions (kv_source predicted: registered with a base_url"
                + " and no endpoint, or --approximate), not by events; register it with"
                + " \"kv_source\": \"events\" to post its events; nothing was applied");
      }
    }
  }
}
