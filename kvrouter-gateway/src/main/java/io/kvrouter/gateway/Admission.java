package io.kvrouter.gateway;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import io.kvrouter.admission.FairQueue;
import io.kvrouter.admission.HolderWait;
import io.kvrouter.event.Worker;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.WorkerLoad;
import io.kvrouter.server.RouterModel;
import java.util.ArrayDeque;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiPredicate;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The queue in front of a saturated model (docs/gateway.md, "Admission"): a request whose every
 * engine is busy (the router answered {@code AllBusy}) waits here, in a {@link FairQueue} per
 * model, until an engine of that model has room again (a request ends, or an engine's prefill ends:
 * its first token of an answer); what cannot wait is refused with 429. A request the router sent to
 * another rank than the busy one holding its prefix may instead wait for that holder when that
 * costs fewer prefill tokens ({@link HolderWait}, docs/routing.md "Waiting for the prefix holder"):
 * it is parked for the holder, outside the fair queue.
 *
 * <pre>
 * Implementation notes
 *
 * Data: one ModelQueue per RouterModel (a ConcurrentHashMap, made on a model's first request,
 * dropped by retain() once the model is gone and its queue empty),
 * each with its FairQueue of Waiters, parked (rank -> FIFO of the Waiters parked for that prefix
 * holder, with their uncached prefill tokens summed), frees (an AtomicLong counting the model's
 * freed routes and ended prefills), waiting (an AtomicInteger: requests queued, parked, about to
 * queue, or granted and not yet routed) and granting (1 while a granted waiter has not routed yet,
 * else 0). One ReentrantLock, lock, guards every FairQueue, every parked FIFO, every Waiter's state,
 * granting and the queue metrics; each Waiter has its own Condition of lock. Lock order: lock, then
 * the router's lock (grant reads the router's loads under lock); the router never calls back.
 *
 * Who writes: the request's own thread offers (await) or parks (waitForHolder) and, when it times
 * out, cancels; freed() and prefillEnded() (the thread that freed a route, or relayed an answer's
 * first token) grant the next waiter when a rank has room by the router's busy rule; the client
 * watch's thread cancels a waiter whose client left; the health round (retain, recheck) grants room
 * that appeared without a freed route (an expired request, a new rank) and sends requests parked for
 * a holder gone or at its request limit back to route (releaseUnwaitable, also run by every grant
 * while requests are parked). A granted waiter routes again outside the
 * lock; until it has, waiting still counts it, so that a new request does not take the place it
 * was granted.
 *
 * Grants (grant): one at a time per model. While a granted waiter has not routed, room that
 * appears is not granted again (its route would find the same room taken and queue anew, losing
 * its place); once it has (routed()), the room left is checked again and the next waiter granted,
 * so one freed prefill may admit several small requests, one after another, as the simulator's
 * loop does. A rank with room first serves the requests parked for it, unless a higher band waits
 * in the fair queue; then the fair queue's next request is granted (it routes among the ranks with
 * room).
 *
 * The hot path (a model that is not saturated): one map lookup per request, and per freed route
 * or ended prefill an increment of frees and a read of waiting; the lock is taken only while
 * something waits.
 *
 * Eviction (AdmissionConfig.maxEvictions > 0; docs/gateway.md "Evicting lower-band work in
 * flight"): a request of a band below high sent to an engine registers an InFlight in inFlight (a
 * concurrent set, no lock) until its first bytes (Proxy: the answer's first read, a stream's
 * first event), when its own thread moves its phase SENT -> STARTED and leaves the set. A request
 * that enters the fair queue (await, under the lock) picks among the SENT ones of a lower band
 * (evictFor: lowest band, sent last, evicted fewer than maxEvictions times, waited at most half
 * its bound, its rank free by the router's busy rule once it leaves) and moves it SENT ->
 * EVICTING, interrupts its thread (a virtual thread blocked on its upstream socket: the socket
 * is closed, the engine aborts), then sets EVICTED. The phase's compare-and-set decides which
 * comes first, the first bytes or the eviction: never both. The evicted request's thread frees
 * its route as any failed attempt does, waits for EVICTED, clears its interrupt, and waits again
 * (resume) in evicted[band], which grant serves before the fair queue's requests of that band and
 * after those of higher bands; its wait bound runs from its arrival plus its time on engines.
 *
 * No lost wake-up: a request that found every engine busy read frees before it routed; under the
 * lock it increments waiting, then re-reads frees: if a route was freed since, it routes again
 * instead of queuing. freed() increments frees, then reads waiting. Both are sequentially
 * consistent (atomics), so either the request sees the new count or freed() sees the waiter and
 * takes the lock (which the request holds until it is queued).
 * </pre>
 */
final class Admission {
  /** The priority bands: high (priority below 0), normal (0 or none), low (above 0). */
  static final int BANDS = 3;

  static final String[] BAND_NAMES = {"high", "normal", "low"};

  /** What {@link ModelQueue#await} ended with. */
  enum Outcome {
    /** Route again now: a route of the model was freed since the request's route. */
    RETRY,
    /** The request was granted a place: route it (then call {@link ModelQueue#routed}). */
    GRANTED,
    /** The client left while queued: answer nothing. */
    GONE
  }

  /** What made room for a grant (the label of kvrouter_gateway_queue_grants_total). */
  static final String PREFILL_END = "prefill_end";

  static final String REQUEST_END = "request_end";
  static final String AFTER_GRANT = "after_grant";
  static final String RECHECK = "recheck";
  static final String ENGINE_QUEUE = "engine_queue";

  /** Why parked requests were sent back to route (kvrouter_gateway_holder_releases_total). */
  static final String HOLDER_GONE = "holder_gone";

  static final String HOLDER_FULL = "holder_at_request_limit";

  private final AdmissionConfig config;
  private final RoutingSettings busyLimits;
  private final boolean holderWait;
  private final GatewayMetrics.AdmissionMetrics metrics;
  private final BiPredicate<RouterModel, Worker> engineQueueFull;
  private final ReentrantLock lock = new ReentrantLock();
  private final Map<RouterModel, ModelQueue> queues = new ConcurrentHashMap<>();

  /** Without the router's busy limits (every rank has room) and without waiting for holders. */
  Admission(AdmissionConfig config, GatewayMetrics.AdmissionMetrics metrics) {
    this(config, RoutingSettings.DEFAULTS, false, metrics, (m, w) -> false);
  }

  /**
   * @param busyLimits the router's busy limits (busyRequests, busyPrefillTokens,
   *     busyBlockFraction), for whether a rank has room
   * @param holderWait whether a request may wait for the busy rank holding its prefix
   * @param engineQueueFull whether a rank's engine says its own queue is at the busy limit
   *     (Gateway.engineQueueFull): such a rank has no room either
   */
  Admission(
      AdmissionConfig config,
      RoutingSettings busyLimits,
      boolean holderWait,
      GatewayMetrics.AdmissionMetrics metrics,
      BiPredicate<RouterModel, Worker> engineQueueFull) {
    this.config = config;
    this.busyLimits = busyLimits;
    this.holderWait = holderWait;
    this.metrics = metrics;
    this.engineQueueFull = engineQueueFull;
  }

  /** Whether a request may wait for the busy rank that holds its prefix (HolderWait). */
  boolean holderWait() {
    return holderWait;
  }

  /** The router's busy rule on one rank: KvRouter's own, so a grant and a route agree. */
  boolean rankBusy(KvRouter router, WorkerLoad l) {
    return router.isBusy(l);
  }

  /** Whether a rank with {@code l}'s load is at its request limit (busyRequests). */
  boolean atRequestLimit(WorkerLoad l) {
    return busyLimits.busyRequests() > 0 && l.requests() >= busyLimits.busyRequests();
  }

  AdmissionConfig config() {
    return config;
  }

  /** The queue of {@code m}, made on first use; null when admission is off. */
  @Nullable ModelQueue queue(RouterModel m) {
    if (!config.queues()) return null;
    ModelQueue q = queues.get(m);
    return q != null
        ? q
        : queues.computeIfAbsent(m, k -> new ModelQueue(k.modelName(), k.router(), k));
  }

  /**
   * Requests waiting for {@code m} now (GET /dashboard), or -1 when admission is off; takes the
   * lock briefly.
   */
  int depth(RouterModel m) {
    if (!config.queues()) return -1;
    ModelQueue q = queues.get(m);
    return q == null ? 0 : q.size();
  }

  /**
   * Drops the queues of models no longer served that have nothing waiting (the health round calls
   * it, Gateway.prune), so that models that come and go leave nothing behind, and checks the others
   * again ({@link ModelQueue#recheck}).
   */
  void retain(Collection<RouterModel> live) {
    Set<RouterModel> keep = Collections.newSetFromMap(new IdentityHashMap<>());
    keep.addAll(live);
    queues.entrySet().removeIf(e -> !keep.contains(e.getKey()) && !e.getValue().busy());
    recheckAll(RECHECK);
  }

  /**
   * Checks every model's queue again ({@link ModelQueue#recheck}), counting grants as {@code
   * trigger}.
   */
  void recheckAll(String trigger) {
    for (ModelQueue q : queues.values()) q.recheck(trigger);
  }

  /**
   * A request of {@code tenant} was refused by its token-rate limit (TenantRates): counted under
   * the tenant's capped label. Takes the lock briefly (the label set is guarded by it).
   */
  void rateLimited(String tenant) {
    lock.lock();
    try {
      metrics.rateLimited.labelValues(metrics.tenantLabel(tenant)).inc();
    } finally {
      lock.unlock();
    }
  }

  /** The band of a priority: below 0 high, 0 normal, above 0 low (vLLM: lower is earlier). */
  static int band(long priority) {
    return priority < 0 ? 0 : priority == 0 ? 1 : 2;
  }

  /**
   * A request an engine holds that has sent its client nothing yet (eviction on): its thread moves
   * it SENT -> STARTED at its first bytes, an eviction SENT -> EVICTING -> EVICTED (class notes).
   */
  static final class InFlight {
    static final int SENT = 0;
    static final int STARTED = 1;
    static final int EVICTING = 2;
    static final int EVICTED = 3;

    final int band;
    final String tenant;
    final Worker rank;
    final long prefillTokens; // what the router counts for it on its rank
    final long sentNanos;
    final long queueWaitNanos; // how long it waited in the gateway before it was sent
    final Thread thread;
    final AtomicInteger phase = new AtomicInteger(SENT);

    InFlight(
        int band,
        String tenant,
        Worker rank,
        long prefillTokens,
        long sentNanos,
        long queueWaitNanos,
        Thread thread) {
      this.band = band;
      this.tenant = tenant;
      this.rank = rank;
      this.prefillTokens = prefillTokens;
      this.sentNanos = sentNanos;
      this.queueWaitNanos = queueWaitNanos;
      this.thread = thread;
    }

    /**
     * Its own thread, at its first bytes or its attempt's end: true when it started (it is no
     * longer evictable), false when it was evicted (then its interrupt is cleared, once the
     * evicting thread has delivered it).
     */
    boolean start() {
      if (phase.compareAndSet(SENT, STARTED) || phase.get() == STARTED) return true;
      while (phase.get() != EVICTED) Thread.onSpinWait();
      Thread.interrupted();
      return false;
    }
  }

  /** One waiting request; its state is guarded by the lock. */
  static final class Waiter {
    final int band;
    final String tenant;
    final String tenantLabel;
    final double cost;
    final long arrivalNanos;
    final Condition wake;
    FairQueue.@Nullable Ticket<Waiter> ticket; // null: the queue was full, or parked
    @Nullable Worker holder; // the rank it is parked for; null: in the fair queue
    long uncached; // parked: its uncached prefill tokens on the holder
    @Nullable Outcome state; // null while queued or parked
    boolean resumed; // evicted: waits in ModelQueue.evicted[band], not in the fair queue

    private Waiter(
        int band, String tenant, String label, double cost, long arrival, Condition wake) {
      this.band = band;
      this.tenant = tenant;
      this.tenantLabel = label;
      this.cost = cost;
      this.arrivalNanos = arrival;
      this.wake = wake;
    }
  }

  /** The admission state of one model (its queue, its counts). */
  final class ModelQueue {
    final String model;

    @GuardedBy("Admission.this.lock")
    private final FairQueue<Waiter> queue;

    private final AtomicLong frees = new AtomicLong();
    private final AtomicInteger waiting = new AtomicInteger();
    private final @Nullable KvRouter router; // null: every rank has room (tests)
    private final @Nullable RouterModel routerModel; // for engineQueueFull; null in tests

    @GuardedBy("Admission.this.lock")
    private final Map<Worker, Parked> parked = new HashMap<>();

    @GuardedBy("Admission.this.lock")
    private int parkedNow;

    @GuardedBy("Admission.this.lock")
    private int granting;

    @GuardedBy("Admission.this.lock")
    private long passes; // releaseUnwaitable's pass counter (Parked.pass)

    // eviction: the requests that may be evicted, and the evicted ones waiting, per band
    private final Set<InFlight> inFlight = ConcurrentHashMap.newKeySet();

    @GuardedBy("Admission.this.lock")
    private final List<ArrayDeque<Waiter>> evicted =
        List.of(new ArrayDeque<>(), new ArrayDeque<>(), new ArrayDeque<>());

    @GuardedBy("Admission.this.lock")
    private int evictedNow;

    /** A queue whose model has room whenever asked (no router): for tests of the protocol. */
    ModelQueue(String model) {
      this(model, null, null);
    }

    ModelQueue(String model, @Nullable KvRouter router, @Nullable RouterModel routerModel) {
      this.model = model;
      this.router = router;
      this.routerModel = routerModel;
      this.queue =
          new FairQueue<>(
              new FairQueue.Config(
                      BANDS,
                      config.maxQueueDepth(),
                      config.maxQueueTime().toNanos(),
                      config.starvationLimit())
                  .withExcessFactor(config.excessFactor()));
    }

    /** The count of freed routes: read it before routing, pass it to {@link #await}. */
    long generation() {
      return frees.get();
    }

    /** Whether requests wait (or hold a place not yet routed): a new one queues behind them. */
    boolean busy() {
      return waiting.get() > 0;
    }

    /** A route of this model was freed: the next waiter, if any, is granted its place. */
    void freed() {
      frees.incrementAndGet();
      if (waiting.get() > 0) grantNext(REQUEST_END);
    }

    /**
     * An engine of this model ended a prefill (the first token of an answer arrived; the router's
     * prefill tokens in flight dropped): the next waiter is granted when a rank has room now.
     */
    void prefillEnded() {
      frees.incrementAndGet();
      if (waiting.get() > 0) grantNext(PREFILL_END);
    }

    /** A granted request has routed and was placed on an engine ({@link #routed(boolean)}). */
    void routed() {
      routed(true);
    }

    /**
     * A granted request has routed (or left without routing: then also call {@link #freed}).
     *
     * @param placed whether its route placed it on an engine: then the room left, if any, goes to
     *     the next waiter at once; not when every engine it may use was busy (the room the grant
     *     saw is one it cannot use, a session's engine being busy, say: granting on would only pass
     *     the turn round among such waiters until a route is freed)
     */
    void routed(boolean placed) {
      lock.lock();
      try {
        waiting.decrementAndGet();
        if (granting > 0) granting--;
        if (placed && waiting.get() > 0) grant(AFTER_GRANT);
      } finally {
        lock.unlock();
      }
    }

    /** Requests parked for their prefix holder now. */
    int parked() {
      lock.lock();
      try {
        return parkedNow;
      } finally {
        lock.unlock();
      }
    }

    /** Requests waiting now (in the fair queue, or evicted and waiting again). */
    int size() {
      lock.lock();
      try {
        return queue.size() + evictedNow;
      } finally {
        lock.unlock();
      }
    }

    private void grantNext(String trigger) {
      lock.lock();
      try {
        grant(trigger);
      } finally {
        lock.unlock();
      }
    }

    /**
     * Under the lock: grants the next waiter when a rank has room and no grant is in flight (the
     * class notes): a rank with room serves its parked requests first (unless a higher band waits
     * in the fair queue), then the fair queue's next one.
     */
    @GuardedBy("Admission.this.lock")
    private void grant(String trigger) {
      if (granting > 0 || (queue.size() == 0 && parkedNow == 0 && evictedNow == 0)) return;
      Waiter w = null;
      if (router != null) {
        boolean room = false;
        List<WorkerLoad> loads = router.loads();
        if (parkedNow > 0) releaseUnwaitable(loads);
        for (int i = 0, n = loads.size(); i < n && w == null; i++) {
          WorkerLoad l = loads.get(i);
          if (rankBusy(router, l)
              || (routerModel != null && engineQueueFull.test(routerModel, l.worker()))) {
            continue;
          }
          room = true;
          if (parkedNow == 0) break;
          Parked p = parked.get(l.worker());
          if (p != null && !p.waiters.isEmpty() && !higherBandWaits(p.waiters.peekFirst().band)) {
            w = p.waiters.peekFirst();
            unpark(w);
          }
        }
        if (!room) return;
      }
      if (w == null) w = nextEvicted();
      if (w == null) {
        FairQueue.Ticket<Waiter> t = queue.poll();
        if (t == null) return;
        w = t.item();
        metrics.left(model, w.band, w.tenantLabel, System.nanoTime() - w.arrivalNanos);
      }
      w.state = Outcome.GRANTED;
      granting++;
      metrics.grants.labelValues(model, trigger).inc();
      w.wake.signal();
    }

    /**
     * Under the lock: sends the requests parked for a holder that can no longer be waited for back
     * to route again (RETRY): a holder that left the router (unregistered), or one now at its
     * request limit, which frees a place only when a decode ends (HolderWait never waits for such a
     * holder; this keeps a request parked before the holder reached it from waiting on it until its
     * queue-time bound). Each pass stamps the holders it finds among {@code loads}; the parked
     * FIFOs left unstamped belong to ranks gone.
     */
    @GuardedBy("Admission.this.lock")
    private void releaseUnwaitable(List<WorkerLoad> loads) {
      long pass = ++passes;
      for (int i = 0, n = loads.size(); i < n; i++) {
        WorkerLoad l = loads.get(i);
        Parked p = parked.get(l.worker());
        if (p == null) continue;
        p.pass = pass;
        if (atRequestLimit(l)) release(p, HOLDER_FULL);
      }
      for (Parked p : parked.values()) if (p.pass != pass) release(p, HOLDER_GONE);
      parked.values().removeIf(p -> p.waiters.isEmpty());
    }

    /** Under the lock: every request parked in {@code p} routes again (its FIFO is emptied). */
    @GuardedBy("Admission.this.lock")
    private void release(Parked p, String reason) {
      for (Waiter w; (w = p.waiters.pollFirst()) != null; ) {
        parkedNow--;
        waiting.decrementAndGet();
        metrics.holderWaiting.labelValues(model).dec();
        metrics.holderReleases.labelValues(model, reason).inc();
        w.state = Outcome.RETRY;
        w.wake.signal();
      }
      p.tokens = 0;
    }

    /**
     * Checks the model's queue again without a freed route (the health round: Admission.retain; an
     * engine's own queue that dropped below the limit: EngineQueueWatch): room that appeared
     * otherwise (a request expired, a rank registered, an engine's queue drained) is granted, and
     * requests parked for a holder that can no longer be waited for route again.
     */
    void recheck(String trigger) {
      // like a freed route: a request about to queue routes again instead (no lost wake-up)
      frees.incrementAndGet();
      if (waiting.get() == 0) return;
      lock.lock();
      try {
        if (router != null && parkedNow > 0) releaseUnwaitable(router.loads());
        grant(trigger);
      } finally {
        lock.unlock();
      }
    }

    @GuardedBy("Admission.this.lock")
    private boolean higherBandWaits(int band) {
      for (int b = 0; b < band; b++) {
        if (queue.size(b) > 0 || !evicted.get(b).isEmpty()) return true;
      }
      return false;
    }

    /**
     * Under the lock: the evicted waiter to grant next, taken off its list: the head of the highest
     * band holding one, unless the fair queue holds a request of a higher band; null: the fair
     * queue's turn.
     */
    @GuardedBy("Admission.this.lock")
    private @Nullable Waiter nextEvicted() {
      if (evictedNow == 0) return null;
      for (int b = 0; b < BANDS; b++) {
        ArrayDeque<Waiter> d = evicted.get(b);
        if (d.isEmpty()) continue;
        if (higherBandWaits(b)) return null;
        Waiter w = d.pollFirst();
        evictedNow--;
        metrics.left(model, w.band, w.tenantLabel, System.nanoTime() - w.arrivalNanos);
        return w;
      }
      return null;
    }

    /**
     * A request is sent to an engine with nothing sent to its client yet: it may be evicted until
     * {@link InFlight#start()}; null when eviction is off, for the high band (nothing is above it),
     * or once it was evicted maxEvictions times.
     */
    @Nullable InFlight sent(
        int band,
        String tenant,
        Worker rank,
        long prefillTokens,
        long queueWaitNanos,
        int evictions) {
      if (config.maxEvictions() == 0 || band == 0 || evictions >= config.maxEvictions()) {
        return null;
      }
      InFlight f =
          new InFlight(
              band,
              tenant,
              rank,
              prefillTokens,
              System.nanoTime(),
              queueWaitNanos,
              Thread.currentThread());
      inFlight.add(f);
      return f;
    }

    /** {@code f} started or ended: no longer evictable (its thread calls it once). */
    void unsent(InFlight f) {
      inFlight.remove(f);
    }

    /**
     * Under the lock, when a request of band {@code band} entered the queue: takes back the place
     * of one request of a lower band that an engine holds with nothing sent to its client yet
     * (class notes, docs/gateway.md "Evicting lower-band work in flight").
     */
    @GuardedBy("Admission.this.lock")
    private void evictFor(int band) {
      if (config.maxEvictions() == 0 || router == null || inFlight.isEmpty()) return;
      long halfBound = config.maxQueueTime().toNanos() / 2;
      List<WorkerLoad> loads = null;
      InFlight victim = null;
      for (InFlight f : inFlight) {
        if (f.band <= band || f.phase.get() != InFlight.SENT || f.queueWaitNanos > halfBound) {
          continue;
        }
        if (victim != null
            && (f.band < victim.band
                || (f.band == victim.band && f.sentNanos <= victim.sentNanos))) {
          continue;
        }
        if (loads == null) loads = router.loads();
        if (freesItsRank(loads, f)) victim = f;
      }
      if (victim == null || !victim.phase.compareAndSet(InFlight.SENT, InFlight.EVICTING)) return;
      inFlight.remove(victim);
      victim.thread.interrupt(); // its upstream socket closes: the engine aborts the request
      victim.phase.set(InFlight.EVICTED);
      String label = metrics.tenantLabel(victim.tenant);
      metrics.evicted.labelValues(model, BAND_NAMES[victim.band], label).inc();
    }

    /** Whether the rank of {@code f} has room by the router's busy rule once {@code f} leaves. */
    private boolean freesItsRank(List<WorkerLoad> loads, InFlight f) {
      for (int i = 0, n = loads.size(); i < n; i++) {
        WorkerLoad l = loads.get(i);
        if (!l.worker().equals(f.rank)) continue;
        WorkerLoad without =
            new WorkerLoad(
                l.worker(),
                l.activeBlocks(),
                Math.max(0, l.activePrefillTokens() - f.prefillTokens),
                Math.max(0, l.requests() - 1));
        return !rankBusy(router, without);
      }
      return false;
    }

    /**
     * An evicted request waits again, at the head of its band (it won its place once): returns
     * GRANTED (route now, then {@link #routed}) or GONE (the client left).
     *
     * @param boundFrom its wait bound runs from here: its arrival plus its time on engines
     * @throws OpenAiError 429 when the wait reached its bound
     */
    Outcome resume(int band, String tenant, long boundFrom, Consumer<Waiter> watch) {
      String label;
      Waiter w;
      lock.lock();
      try {
        waiting.incrementAndGet();
        label = metrics.tenantLabel(tenant);
        w = new Waiter(band, tenant, label, 0, boundFrom, lock.newCondition());
        w.resumed = true;
        evicted.get(band).addLast(w);
        evictedNow++;
        metrics.depth.labelValues(model, BAND_NAMES[band], label).inc();
        grant(REQUEST_END); // the route it freed may have room for it already
      } finally {
        lock.unlock();
      }
      watch.accept(w);
      return waitGranted(w, label);
    }

    /** Under the lock: takes a parked waiter off its holder's FIFO. */
    @GuardedBy("Admission.this.lock")
    private void unpark(Waiter w) {
      Worker h = w.holder;
      if (h == null) return;
      Parked p = parked.get(h);
      if (p != null && p.waiters.remove(w)) {
        p.tokens -= w.uncached;
        parkedNow--;
        metrics.holderWaiting.labelValues(model).dec();
        if (p.waiters.isEmpty()) parked.remove(h);
      }
    }

    /**
     * Waits for the busy rank {@code holder} that holds the longest prefix of the request's prompt,
     * when {@link HolderWait} says that costs fewer prefill tokens than starting now on the rank
     * the router chose (whose route {@code unroute} then frees, under the lock); returns null when
     * starting now is cheaper (nothing done), else GRANTED (route to the holder now, then {@link
     * #routed}), RETRY (a route was freed or a prefill ended since {@code generation}: route again)
     * or GONE (the client left).
     *
     * @param promptTokens the prompt's length
     * @param hereOverlap prompt tokens the chosen rank holds
     * @param hereBacklog prefill tokens in flight on the chosen rank, without this request's
     * @param holderOverlap prompt tokens the holder holds
     * @param holderLoad the holder's load
     * @throws OpenAiError 429 when the wait reached the queue-time bound
     */
    @Nullable Outcome waitForHolder(
        long generation,
        Worker holder,
        long promptTokens,
        long hereOverlap,
        long hereBacklog,
        long holderOverlap,
        WorkerLoad holderLoad,
        int band,
        String tenant,
        long arrivalNanos,
        Runnable unroute,
        Consumer<Waiter> watch) {
      String label;
      Waiter w;
      lock.lock();
      try {
        Parked p = parked.get(holder);
        if (queue.size() + parkedNow >= config.maxQueueDepth()
            || !HolderWait.waitForHolder(
                promptTokens,
                hereOverlap,
                hereBacklog,
                holderOverlap,
                holderLoad.activePrefillTokens(),
                p == null ? 0 : p.tokens,
                atRequestLimit(holderLoad))) {
          return null;
        }
        unroute.run();
        waiting.incrementAndGet();
        if (frees.get() != generation) {
          waiting.decrementAndGet();
          return Outcome.RETRY;
        }
        label = metrics.tenantLabel(tenant);
        w = new Waiter(band, tenant, label, 0, arrivalNanos, lock.newCondition());
        w.holder = holder;
        w.uncached = Math.max(0, promptTokens - holderOverlap);
        if (p == null) parked.put(holder, p = new Parked());
        p.waiters.addLast(w);
        p.tokens += w.uncached;
        parkedNow++;
        metrics.holderWaiting.labelValues(model).inc();
        metrics.holderWaits.labelValues(model).inc();
        grant(REQUEST_END); // the route it freed may leave room for another
      } finally {
        lock.unlock();
      }
      watch.accept(w);
      return waitGranted(w, label);
    }

    /**
     * Waits for a place: returns GRANTED (route now, then {@link #routed}), RETRY (a route was
     * freed since {@code generation} was read: route again now) or GONE (the client left).
     *
     * @param generation what {@link #generation()} said before the route that found every engine
     *     busy; -1 for a request that queues behind others without having routed
     * @param watch called once the request is queued, to watch its client (returns whether it can);
     *     its callback is {@link #gone}
     * @throws OpenAiError 429 when the queue is full or the wait reached its bound
     */
    Outcome await(
        long generation,
        int band,
        String tenant,
        double cost,
        long arrivalNanos,
        Consumer<Waiter> watch) {
      String label;
      Waiter w;
      lock.lock();
      try {
        waiting.incrementAndGet();
        if (generation >= 0 && frees.get() != generation) {
          waiting.decrementAndGet();
          return Outcome.RETRY;
        }
        label = metrics.tenantLabel(tenant);
        w = new Waiter(band, tenant, label, cost, arrivalNanos, lock.newCondition());
        w.ticket = queue.offer(w, band, tenant, config.weight(tenant), cost, arrivalNanos);
        if (w.ticket == null) {
          waiting.decrementAndGet();
          metrics.rejected(model, band, label, "queue_full");
          throw refusal(
              "queue_full",
              "model '"
                  + model
                  + "' is saturated and "
                  + config.maxQueueDepth()
                  + " requests wait for it already (--max-queue-depth); retry later");
        }
        metrics.entered(model, band, label);
        evictFor(band);
      } finally {
        lock.unlock();
      }
      watch.accept(w);
      return waitGranted(w, label);
    }

    /** Waits until {@code w} is granted or gone (then its outcome), or refuses it at its bound. */
    private Outcome waitGranted(Waiter w, String label) {
      long deadline = w.arrivalNanos + config.maxQueueTime().toNanos();
      lock.lock();
      try {
        while (w.state == null) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            dequeue(w);
            // refused: its client's connection closing after the 429 (the watch calls gone) must
            // not take it off the queue a second time (its depth, the waiting count)
            w.state = Outcome.GONE;
            metrics.rejected(model, w.band, label, "queue_timeout");
            throw refusal(
                "queue_timeout",
                "model '"
                    + model
                    + "' stayed saturated for "
                    + config.maxQueueTime().toMillis()
                    + " ms while the request waited (--max-queue-time); retry later");
          }
          try {
            w.wake.awaitNanos(left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            if (w.state == null) leave(w);
            return w.state; // GRANTED when the grant came first: the caller passes it on
          }
        }
        return w.state;
      } finally {
        lock.unlock();
      }
    }

    /** The client of {@code w} left: it leaves the queue at once (nothing when granted already). */
    void gone(Waiter w) {
      lock.lock();
      try {
        if (w.state == null) {
          leave(w);
          w.wake.signal();
        }
      } finally {
        lock.unlock();
      }
    }

    /** Under the lock: a queued waiter leaves without a place (once: a refused one has left). */
    @GuardedBy("Admission.this.lock")
    private void leave(Waiter w) {
      if (w.state != null) return;
      w.state = Outcome.GONE;
      dequeue(w);
      metrics.cancelled(model, w.band, w.tenantLabel);
    }

    /** Under the lock: takes a waiter that was not granted off its holder's FIFO or the queue. */
    @GuardedBy("Admission.this.lock")
    private void dequeue(Waiter w) {
      if (w.holder != null) {
        unpark(w);
      } else if (w.resumed) {
        if (evicted.get(w.band).remove(w)) evictedNow--;
        metrics.left(model, w.band, w.tenantLabel, System.nanoTime() - w.arrivalNanos);
      } else {
        queue.cancel(w.ticket);
        metrics.left(model, w.band, w.tenantLabel, System.nanoTime() - w.arrivalNanos);
      }
      waiting.decrementAndGet();
    }

    /**
     * The engine reported what a queued request really cost: {@code delta} cost units (actual
     * uncached prefill tokens less the predicted) go onto its tenant's next request.
     */
    void charge(Waiter w, double delta) {
      if (w.ticket == null) return; // parked for its holder at once: never charged
      lock.lock();
      try {
        queue.charge(w.band, w.tenant, delta);
      } finally {
        lock.unlock();
      }
    }
  }

  /** The requests parked for one prefix holder, in arrival order, and their uncached tokens. */
  private static final class Parked {
    final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
    long tokens;
    long pass; // the last releaseUnwaitable pass that found its holder registered
  }

  /** The 429 of a request the queue cannot hold, with the queue's bound as its Retry-After. */
  OpenAiError refusal(String code, String message) {
    return new OpenAiError(429, "requests", code, null, message);
  }

  /** Retry-After, in whole seconds: the queue's wait bound, at least 1. */
  long retryAfterSeconds() {
    long ns = config.maxQueueTime().toNanos();
    return Math.max(1, TimeUnit.NANOSECONDS.toSeconds(ns + TimeUnit.SECONDS.toNanos(1) - 1));
  }
}
