package io.kvrouter.sim;

import io.kvrouter.admission.FairQueue;
import io.kvrouter.admission.HolderWait;
import io.kvrouter.admission.TokenBucket;
import io.kvrouter.admission.TokenCost;
import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.mockengine.EventLoop;
import io.kvrouter.route.Candidate;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.route.WorkerLoad;
import io.kvrouter.sim.trace.TraceRequest;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * One run of {@code simulate --admission}: a trace, its tenants and priorities, replayed in
 * simulated time through the gateway's admission in front of a fleet of {@link MockEngine}s routed
 * by the kv policy (docs/SIMULATION.md, "Admission and fair shares").
 *
 * <pre>
 * Implementation notes
 *
 * One EventLoop on the calling thread drives arrivals, the engines and the queue's expiry, as in
 * FleetSimulation (whose default run this class does not touch). The router is the kv policy's
 * KvRouter on the simulated clock, fed the engines' KV events at once, with busyRequests and
 * busyPrefillTokens set except in fifo mode: a rank is busy when it has busyRequests requests in
 * flight or more than busyPrefillTokens prefill tokens not yet through their prefill (the router's
 * own counts); route answers AllBusy when every rank is busy, the gateway's saturation rule.
 *
 * Modes. fifo: no limit, no queue: every request is routed and submitted at its arrival (today's
 * gateway). fair-cost and fair-tokens: a FairQueue (the gateway's class) of SimRequests, bands 0
 * (high) and 1 (normal), tenant t0 weight Settings.heavyWeight, every other tenant weight 1.
 * On arrival: when requests wait, the new one waits behind them (it does not pass them; priced by
 * router.overlaps); otherwise it routes and waits only on AllBusy (priced by the AllBusy
 * candidates' best overlap). fair-cost charges max(0, prompt - overlap tokens) + output tokens
 * and, once the engine admitted a request that waited, corrects the tenant by (prompt - cached
 * tokens) - charged uncached tokens (FairQueue.charge), as the gateway does from
 * usage.cached_tokens; fair-tokens charges prompt + output tokens, no correction. The output
 * length stands for max_tokens (expected decode).
 * A finished request, or a prefill that ends, may leave a rank with room: grant() then sends the
 * requests that wait for that rank (below), then the queue's next requests, while a rank has room;
 * each routes among the ranks with room. An offer beyond maxDepth is refused (429 queue_full); at
 * arrival + maxWait an expiry pass refuses what still waits (429 queue_timeout).
 *
 * Waiting for the prefix holder (Settings.holderWait; HolderWait, docs/routing.md "Admission"):
 * when the router routes a request (at arrival or granted) to a rank other than the one holding
 * its longest prefix, and that holder is busy, HolderWait prices both in prefill tokens; when
 * waiting is cheaper the route is freed and the request is parked for the holder: parked[k] is
 * rank k's FIFO of such requests, parkedTokens[k] their uncached prefill tokens, parkedOn[i] the
 * rank request i waits for (-1: none). A rank with room serves its parked requests before the
 * queue, unless a higher band waits in the queue. A parked request is refused (429 queue_timeout)
 * at arrival + maxWait like a queued one.
 *
 * Token-rate limits (Settings.rates; the gateway's, Proxy.limitRate): buckets[t] is tenant t's
 * TokenBucket (core's class) on the simulated clock, null when t is not limited. At arrival,
 * before anything else and in every mode, a limited tenant's request is charged its uncached
 * prefill as router.overlaps predicts it plus its output tokens (rateCharged[i]); a bucket that
 * cannot pay refuses it at once (outcome 4, 429 rate_limit_exceeded, rateRefused[tenant][band]).
 * A request the queue refuses gets its charge back; a finished one is settled on prompt - cached +
 * output tokens (the gateway's usage); one the engine rejects (outcome 3) keeps its charge, as an
 * answer without usage does at the gateway (docs/gateway.md, "Token-rate limits").
 *
 * Eviction of in-flight lower-band work (Settings.maxEvictions > 0, --evict-lower-bands;
 * docs/routing.md "Evicting lower-band work in flight"): prefilling holds, in the order they were
 * sent, the requests sent to an engine that have no first token yet (added in submit, removed at
 * the first token, an engine rejection or an eviction). When a request enters the queue
 * (wait), evictFor picks among them one of a lower band (the lowest band, then the one sent
 * last: sentNanos), evicted fewer than maxEvictions times (evictedTimes), that waited in the
 * gateway at most half its bound (sentNanos - arrival - engineNanos: the time it spent on
 * engines before earlier evictions does not count), whose leaving gives its rank room by the
 * busy rule (the
 * router's loads less its prompt - routed overlap). evict aborts it on its engine
 * (MockEngine.abort: slot, blocks it stored and the rest of its prefill freed at once;
 * wastedPrefillTokens adds what it had computed), frees its route, takes back the cached-tokens
 * correction its admission made (corrected[i]; the tenant was charged once, at its offer, and
 * is not charged again) and puts it in evictedWaiting[band]: it already won its place, so it waits
 * at the head of its band, before the queue's requests of that band and after those of higher
 * bands (grant, higherBandWaits); an event at arrival + engineNanos + maxWait refuses it (429
 * queue_timeout) if it still waits: its whole wait in the gateway is bounded by maxWait. Then grant() gives the freed room to the next request. A request's TTFT
 * still runs from its first arrival.
 *
 * Per request i (its index in the assignment): outcome[i] (0 pending, 1 answered, 2 refused,
 * 3 rejected by the engine: its prompt exceeds a rank's pool, 4 refused by its tenant's token
 * rate), ttft, charged uncached tokens.
 * Served cost per tenant: (prompt - cached) + output tokens of requests that finished within the
 * arrival span (while all tenants compete); per tenant also the prompt and cached tokens of its
 * answered requests (its hit rate). Everything is single-threaded.
 * </pre>
 */
public final class AdmissionSimulation {

  /** What stands in front of the fleet. */
  public enum Mode {
    /** No admission: every request goes to the engines at once (today's gateway). */
    FIFO("fifo"),
    /** FairQueue, cost = uncached prefill + expected decode tokens, corrected by cached tokens. */
    FAIR_COST("fair-cost"),
    /** FairQueue, cost = prompt + expected decode tokens (the peers' way). */
    FAIR_TOKENS("fair-tokens");

    public final String label;

    Mode(String label) {
      this.label = label;
    }

    /** The mode of a label; the message lists them. */
    public static Mode parse(String s) {
      String k = s.trim().toLowerCase(Locale.ROOT);
      for (Mode m : values()) if (m.label.equals(k)) return m;
      throw new IllegalArgumentException(
          "unknown admission mode '" + s + "': use fifo, fair-cost or fair-tokens");
    }
  }

  /**
   * The admission's limits.
   *
   * @param busyRequests a rank with this many requests in flight is busy (--busy-requests)
   * @param busyPrefillTokens a rank with more prefill tokens than this in flight is busy
   *     (--busy-prefill-tokens); -1: no limit
   * @param holderWait whether a request may wait for the busy rank that holds its prefix
   *     (HolderWait) rather than start cold on a rank with room
   * @param maxQueueTimeSec the longest a request waits, in simulated seconds (--max-queue-time)
   * @param maxQueueDepth requests that may wait at once (--max-queue-depth)
   * @param ttftSloMs a request is good when answered with TTFT at most this (--ttft-slo-ms)
   * @param shareSlack tenant shares span the bands with this slack, in cost units (FairQueue's
   *     shareSlack, --share-slack); -1: shares within each band, strict bands
   * @param heavyWeight tenant t0's weight in the queue, the others' being 1
   *     (--heavy-tenant-weight), > 0
   * @param rates per-tenant token-rate limits (--tenant-token-rate, --tenant-token-burst; the
   *     gateway's TokenRateConfig, its rates per simulated second; tenants t0, t1, ...)
   * @param maxEvictions eviction of in-flight lower-band work (--evict-lower-bands,
   *     --max-evictions): how many times one request may be evicted; 0: no eviction (the default)
   * @param excessFactor the excess rule (FairQueue's excessFactor, --tenant-excess-factor): a
   *     waiting tenant that sent more than this many times the mean of what the other waiting
   *     tenants sent (requests per unit of weight, decaying by e every maxQueueTimeSec) waits
   *     behind them in every band; 0: off, else >= 1 (shares within each band only)
   */
  public record Settings(
      int busyRequests,
      long busyPrefillTokens,
      boolean holderWait,
      double maxQueueTimeSec,
      int maxQueueDepth,
      double ttftSloMs,
      double shareSlack,
      double heavyWeight,
      TokenRateConfig rates,
      int maxEvictions,
      double excessFactor) {

    /** No eviction of in-flight work, no excess rule. */
    public Settings(
        int busyRequests,
        long busyPrefillTokens,
        boolean holderWait,
        double maxQueueTimeSec,
        int maxQueueDepth,
        double ttftSloMs,
        double shareSlack,
        double heavyWeight,
        TokenRateConfig rates) {
      this(
          busyRequests,
          busyPrefillTokens,
          holderWait,
          maxQueueTimeSec,
          maxQueueDepth,
          ttftSloMs,
          shareSlack,
          heavyWeight,
          rates,
          0,
          0);
    }

    /** No token-rate limits. */
    public Settings(
        int busyRequests,
        long busyPrefillTokens,
        boolean holderWait,
        double maxQueueTimeSec,
        int maxQueueDepth,
        double ttftSloMs,
        double shareSlack,
        double heavyWeight) {
      this(
          busyRequests,
          busyPrefillTokens,
          holderWait,
          maxQueueTimeSec,
          maxQueueDepth,
          ttftSloMs,
          shareSlack,
          heavyWeight,
          TokenRateConfig.OFF);
    }

    /** The same limits with token-rate limits {@code r}. */
    public Settings withRates(TokenRateConfig r) {
      return new Settings(
          busyRequests,
          busyPrefillTokens,
          holderWait,
          maxQueueTimeSec,
          maxQueueDepth,
          ttftSloMs,
          shareSlack,
          heavyWeight,
          r,
          maxEvictions,
          excessFactor);
    }

    /**
     * The same limits with eviction of in-flight lower-band work, each request evicted at most
     * {@code max} times (0: off).
     */
    public Settings withEvictions(int max) {
      return new Settings(
          busyRequests,
          busyPrefillTokens,
          holderWait,
          maxQueueTimeSec,
          maxQueueDepth,
          ttftSloMs,
          shareSlack,
          heavyWeight,
          rates,
          max,
          excessFactor);
    }

    /** The same limits with the excess rule at {@code factor} (0: off). */
    public Settings withExcessFactor(double factor) {
      return new Settings(
          busyRequests,
          busyPrefillTokens,
          holderWait,
          maxQueueTimeSec,
          maxQueueDepth,
          ttftSloMs,
          shareSlack,
          heavyWeight,
          rates,
          maxEvictions,
          factor);
    }

    /** Every tenant weight 1. */
    public Settings(
        int busyRequests,
        long busyPrefillTokens,
        boolean holderWait,
        double maxQueueTimeSec,
        int maxQueueDepth,
        double ttftSloMs,
        double shareSlack) {
      this(
          busyRequests,
          busyPrefillTokens,
          holderWait,
          maxQueueTimeSec,
          maxQueueDepth,
          ttftSloMs,
          shareSlack,
          1);
    }

    /** Shares within each band, strict bands (shareSlack -1). */
    public Settings(
        int busyRequests,
        long busyPrefillTokens,
        boolean holderWait,
        double maxQueueTimeSec,
        int maxQueueDepth,
        double ttftSloMs) {
      this(
          busyRequests,
          busyPrefillTokens,
          holderWait,
          maxQueueTimeSec,
          maxQueueDepth,
          ttftSloMs,
          -1);
    }

    /**
     * Busy by requests only (no prefill limit), no waiting for the prefix holder.
     *
     * @param busyRequests a rank with this many requests in flight is busy (--busy-requests)
     * @param maxQueueTimeSec the longest a request waits, in simulated seconds (--max-queue-time)
     * @param maxQueueDepth requests that may wait at once (--max-queue-depth)
     * @param ttftSloMs a request is good when answered with TTFT at most this (--ttft-slo-ms)
     */
    public Settings(int busyRequests, double maxQueueTimeSec, int maxQueueDepth, double ttftSloMs) {
      this(busyRequests, -1, false, maxQueueTimeSec, maxQueueDepth, ttftSloMs, -1);
    }

    public Settings {
      if (busyRequests < 1) {
        throw new IllegalArgumentException("--busy-requests must be >= 1, got " + busyRequests);
      }
      if (busyPrefillTokens < -1) {
        throw new IllegalArgumentException(
            "--busy-prefill-tokens must be >= 0 (or -1: no limit), got " + busyPrefillTokens);
      }
      if (!(maxQueueTimeSec > 0) || Double.isInfinite(maxQueueTimeSec)) {
        throw new IllegalArgumentException(
            "--max-queue-time must be > 0 s, got " + maxQueueTimeSec);
      }
      if (maxQueueDepth < 1) {
        throw new IllegalArgumentException("--max-queue-depth must be >= 1, got " + maxQueueDepth);
      }
      if (!(ttftSloMs > 0) || Double.isInfinite(ttftSloMs)) {
        throw new IllegalArgumentException("--ttft-slo-ms must be > 0, got " + ttftSloMs);
      }
      if (!(shareSlack >= 0 || shareSlack == -1) || Double.isInfinite(shareSlack)) {
        throw new IllegalArgumentException(
            "--share-slack must be >= 0 (or -1: shares within each band), got " + shareSlack);
      }
      if (!(heavyWeight > 0) || Double.isInfinite(heavyWeight)) {
        throw new IllegalArgumentException(
            "--heavy-tenant-weight must be finite and > 0, got " + heavyWeight);
      }
      Objects.requireNonNull(rates, "rates");
      if (maxEvictions < 0) {
        throw new IllegalArgumentException("--max-evictions must be >= 0, got " + maxEvictions);
      }
      if (!(excessFactor == 0 || excessFactor >= 1) || Double.isInfinite(excessFactor)) {
        throw new IllegalArgumentException(
            "--tenant-excess-factor must be 0 (off) or finite and >= 1, got " + excessFactor);
      }
      if (excessFactor > 0 && shareSlack >= 0) {
        throw new IllegalArgumentException(
            "--tenant-excess-factor orders tenants within each band; it cannot be combined with"
                + " --share-slack");
      }
    }
  }

  static final int ANSWERED = 1;
  static final int REFUSED = 2;
  static final int ENGINE_REJECTED = 3;
  static final int RATE_LIMITED = 4; // refused at arrival: 429 rate_limit_exceeded

  private final TenantRule.Assignment a;
  private final int tenants;
  private final SimConfig cfg;
  private final Settings s;
  private final Mode mode;
  private final String label;

  private final EventLoop loop = new EventLoop();
  private final KvIndex index;
  private final KvRouter router;
  private final MockEngine[] engines;
  private final FairQueue<SimRequest> queue;
  private final String[] tenantNames;
  private final SimRequest[] reqs;
  private final List<ArrayDeque<SimRequest>> parked = new ArrayList<>();
  private final long[] parkedTokens; // per rank: uncached prefill tokens of its parked requests
  private final int[] parkedOn; // per request: the rank it is parked for, -1 none
  private final long[] parkedUncached; // per request: its uncached tokens on that rank
  private int parkedNow;
  private int parkedEver;

  private final byte[] outcome;
  private final double[] ttftMs;
  private final long[] chargedUncached; // -1: did not wait
  private final double[] servedCost;
  final long[] waitNanos; // per request: its queue wait (granted), or 0
  private final double[] waitMs; // per tenant, total queue wait of the requests it got served
  private long lastArrival;
  private long lastFinish;
  private int refusedFull;
  private int refusedTimeout;
  private int waited;
  private long promptTokens;
  private long cachedTokens;
  private final long[] tenantPrompt; // per tenant: prompt tokens of its answered requests
  private final long[] tenantCached; // per tenant: their cached tokens
  private final TokenBucket[] buckets; // per tenant: its token-rate bucket, null: not limited
  private final long[] rateCharged; // per request: all its bucket was charged, 0: none
  private final int[][] rateRefused; // per tenant and band: 429 rate_limit_exceeded
  // eviction (Settings.maxEvictions > 0): requests sent to an engine that have no first token
  // yet, in the order they were sent; evictedTimes[i] how often request i was evicted;
  // sentNanos[i] when it was last sent; corrected[i] the cached-tokens correction its current
  // admission charged its tenant (taken back when it is evicted); evictedWaiting[b] the evicted
  // requests of band b waiting to be sent again, in eviction order
  private final LinkedHashSet<SimRequest> prefilling = new LinkedHashSet<>();
  private final int[] evictedTimes;
  private final boolean[] waitedOnce; // counted in waited
  private final long[] sentNanos;
  private final long[] engineNanos; // per request: time it spent on engines before evictions
  private final double[] corrected;
  private final List<ArrayDeque<SimRequest>> evictedWaiting =
      List.of(new ArrayDeque<>(), new ArrayDeque<>());
  private int evictedNow;
  private final int[][] evictions; // per tenant and band: evictions
  private long wastedPrefillTokens;

  /**
   * A run of {@code a} (its requests, tenants 0..tenants-1 and bands) on a fleet of {@code cfg}
   * (its speedup applied to the arrivals) under {@code mode}.
   */
  public AdmissionSimulation(
      TenantRule.Assignment a, int tenants, SimConfig cfg, Settings s, Mode mode, String label) {
    if (a.requests().isEmpty()) throw new IllegalArgumentException("no requests to simulate");
    this.a = a;
    this.tenants = tenants;
    this.cfg = cfg;
    this.s = s;
    this.mode = mode;
    this.label = label;
    int n = a.requests().size();
    outcome = new byte[n];
    ttftMs = new double[n];
    chargedUncached = new long[n];
    servedCost = new double[tenants];
    tenantPrompt = new long[tenants];
    tenantCached = new long[tenants];
    waitMs = new double[tenants];
    waitNanos = new long[n];
    reqs = new SimRequest[n];
    parkedOn = new int[n];
    Arrays.fill(parkedOn, -1);
    parkedUncached = new long[n];
    parkedTokens = new long[cfg.workers() * cfg.dpSize()];
    for (int k = 0; k < parkedTokens.length; k++) parked.add(new ArrayDeque<>());
    tenantNames = new String[tenants];
    for (int t = 0; t < tenants; t++) tenantNames[t] = "t" + t;
    buckets = new TokenBucket[tenants];
    for (int t = 0; t < tenants; t++) {
      double rate = s.rates().rate(tenantNames[t]);
      if (rate > 0) buckets[t] = new TokenBucket(rate, s.rates().burstTokens(rate), loop::now);
    }
    rateCharged = new long[n];
    rateRefused = new int[tenants][2];
    evictedTimes = new int[n];
    waitedOnce = new boolean[n];
    sentNanos = new long[n];
    engineNanos = new long[n];
    corrected = new double[n];
    evictions = new int[tenants][2];
    index = KvIndexes.concurrentCompressedTree();
    KvRouter.Builder b =
        KvRouter.builder(cfg.blockSize())
            .nanoClock(loop::now)
            .requestExpiry(Duration.ofDays(3650))
            .seed(cfg.seed())
            .index(index)
            .overlapWeight(cfg.overlapWeight())
            .pressureWeight(cfg.pressureWeight());
    if (mode != Mode.FIFO) {
      b.busyRequests(s.busyRequests());
      if (s.busyPrefillTokens() >= 0) b.busyPrefillTokens(s.busyPrefillTokens());
    }
    router = b.build();
    FairQueue.Config qc =
        new FairQueue.Config(2, s.maxQueueDepth(), Math.round(s.maxQueueTimeSec() * 1e9), 0);
    if (s.shareSlack() >= 0) qc = qc.withSharesSpanningBands(s.shareSlack());
    if (s.excessFactor() > 0) qc = qc.withExcessFactor(s.excessFactor());
    queue = mode == Mode.FIFO ? null : new FairQueue<>(qc);
    MockEngine.Listener listener =
        new MockEngine.Listener() {
          @Override
          public void firstToken(SimRequest r) {
            prefilling.remove(r);
            router.markPrefillCompleted(r.routerId);
            ttftMs[(int) r.id] = r.ttftNanos() / 1e6;
            grant(); // the rank's prefill tokens fell: it may have room again
          }

          @Override
          public void finished(SimRequest r) {
            router.free(r.routerId);
            int i = (int) r.id;
            outcome[i] = ANSWERED;
            promptTokens += r.trace.inputLength();
            cachedTokens += r.cachedTokens;
            tenantPrompt[a.tenant()[i]] += r.trace.inputLength();
            tenantCached[a.tenant()[i]] += r.cachedTokens;
            if (loop.now() <= lastArrival) {
              servedCost[a.tenant()[i]] +=
                  Math.max(0, r.trace.inputLength() - r.cachedTokens) + r.trace.outputLength();
            }
            lastFinish = Math.max(lastFinish, loop.now());
            settleRate(r);
            r.dropTokens();
            grant();
          }

          @Override
          public void admitting(SimRequest r, Worker rank) {}

          @Override
          public void rejected(SimRequest r) {
            prefilling.remove(r);
            router.free(r.routerId);
            outcome[(int) r.id] = ENGINE_REJECTED;
            r.dropTokens();
            grant();
          }
        };
    engines = new MockEngine[cfg.workers()];
    for (int w = 0; w < cfg.workers(); w++) {
      engines[w] =
          new MockEngine(
              w,
              cfg.dpSize(),
              cfg.blockSize(),
              cfg.gpuBlocks(),
              cfg.timing(),
              loop,
              cfg.removedEvents(),
              this::publish,
              listener);
      router.registerWorker(w, cfg.dpSize(), cfg.blockSize(), cfg.gpuBlocks());
    }
  }

  /** Requests that waited for their prefix holder (parked) at some point of the run. */
  int parkedForHolder() {
    return parkedEver;
  }

  /** Runs the whole trace. */
  public AdmissionResult run() {
    long wallStart = System.nanoTime();
    List<TraceRequest> trace = a.requests();
    double t0 = trace.get(0).timestampMs();
    for (int i = 0; i < trace.size(); i++) {
      TraceRequest t = trace.get(i);
      long at = Math.round((t.timestampMs() - t0) * 1e6 / cfg.speedup());
      SimRequest r = new SimRequest(i, t, at);
      reqs[i] = r;
      lastArrival = at;
      loop.at(at, () -> arrive(r));
    }
    loop.run();
    router.close();
    index.close();
    return result(System.nanoTime() - wallStart);
  }

  private void publish(RouterEvent e) {
    router.applyEvent(e);
  }

  private void arrive(SimRequest r) {
    if (!takeRate(r)) return;
    if (queue == null) {
      RouteDecision d = router.route(r.routerId, r.tokens());
      if (!(d instanceof RouteDecision.Routed routed)) {
        throw new IllegalStateException("the router did not route request " + r.id + ": " + d);
      }
      submit(r, routed);
      return;
    }
    if (queue.size() > 0 || evictedNow > 0) {
      // behind the requests that wait: a new request does not pass them
      wait(r, router.overlaps(r.tokens(), RouteOptions.defaults()).maxScore());
      return;
    }
    if (!dispatch(r)) wait(r, busyOverlap);
  }

  private int busyOverlap; // dispatch's AllBusy: the busy candidates' best overlap, in blocks

  /**
   * Routes {@code r} among the ranks with room and submits it, or parks it for its prefix holder
   * when HolderWait says waiting is cheaper; false (nothing done, busyOverlap set) when every rank
   * is busy.
   */
  private boolean dispatch(SimRequest r) {
    List<WorkerLoad> loads = s.holderWait() ? router.loads() : List.of();
    OverlapScores ov = s.holderWait() ? router.overlaps(r.tokens(), RouteOptions.defaults()) : null;
    RouteDecision d = router.route(r.routerId, r.tokens());
    if (d instanceof RouteDecision.AllBusy busy) {
      int overlap = 0;
      for (Candidate c : busy.candidates()) overlap = Math.max(overlap, c.overlapBlocks());
      busyOverlap = overlap;
      return false;
    }
    if (!(d instanceof RouteDecision.Routed routed)) {
      throw new IllegalStateException("the router did not route request " + r.id + ": " + d);
    }
    if (ov != null) {
      Worker holder = null;
      int best = 0;
      for (int i = 0; i < ov.size(); i++) {
        if (ov.scoreAt(i) > best) {
          best = ov.scoreAt(i);
          holder = ov.worker(i);
        }
      }
      if (holder != null && !holder.equals(routed.worker())) {
        WorkerLoad h = loads.get(rankIndex(holder));
        WorkerLoad here = loads.get(rankIndex(routed.worker()));
        long prompt = r.trace.inputLength();
        long holderTokens = (long) best * cfg.blockSize();
        int k = rankIndex(holder);
        if (busy(h)
            && HolderWait.waitForHolder(
                prompt,
                routed.overlapTokens(),
                here.activePrefillTokens(),
                holderTokens,
                h.activePrefillTokens(),
                parkedTokens[k],
                h.requests() >= s.busyRequests())) {
          router.free(r.routerId);
          park(r, k, Math.max(0, prompt - holderTokens));
          return true;
        }
      }
    }
    submit(r, routed);
    return true;
  }

  private int rankIndex(Worker w) {
    return (int) w.workerId() * cfg.dpSize() + w.dpRank();
  }

  /** The router's busy rule, on its own counts (KvRouter.isBusy with the limits set here). */
  private boolean busy(WorkerLoad l) {
    return l.requests() >= s.busyRequests()
        || (s.busyPrefillTokens() >= 0 && l.activePrefillTokens() > s.busyPrefillTokens());
  }

  private void park(SimRequest r, int rank, long uncached) {
    int i = (int) r.id;
    parked.get(rank).addLast(r);
    parkedTokens[rank] += uncached;
    parkedOn[i] = rank;
    parkedUncached[i] = uncached;
    parkedNow++;
    parkedEver++;
    countWaited(i); // parked at arrival: it waits too
    long deadline = r.arrival + Math.round(s.maxQueueTimeSec() * 1e9);
    loop.at(Math.max(loop.now(), deadline), () -> expireParked(r));
  }

  /** Counts request {@code i} among those that waited, once. */
  private void countWaited(int i) {
    if (waitedOnce[i]) return;
    waitedOnce[i] = true;
    waited++;
  }

  private void unpark(SimRequest r) {
    int i = (int) r.id;
    int k = parkedOn[i];
    parked.get(k).remove(r);
    parkedTokens[k] -= parkedUncached[i];
    parkedOn[i] = -1;
    parkedNow--;
  }

  private void expireParked(SimRequest r) {
    if (parkedOn[(int) r.id] < 0) return;
    unpark(r);
    refuse(r);
    refusedTimeout++;
  }

  private void submit(SimRequest r, RouteDecision.Routed routed) {
    int i = (int) r.id;
    long waitedNanos = loop.now() - r.arrival;
    if (waitedNanos > 0) {
      waitNanos[i] = waitedNanos;
      waitMs[a.tenant()[i]] += waitedNanos / 1e6;
    }
    r.routedOverlapTokens = routed.overlapTokens();
    r.routedTo = routed.worker();
    if (s.maxEvictions() > 0) {
      sentNanos[i] = loop.now();
      prefilling.add(r);
    }
    engines[(int) routed.worker().workerId()].submit(r, routed.worker().dpRank());
    correct(r);
  }

  private void wait(SimRequest r, int overlapBlocks) {
    int i = (int) r.id;
    long prompt = r.trace.inputLength();
    long uncached = TokenCost.uncached(prompt, overlapBlocks, cfg.blockSize());
    double cost =
        mode == Mode.FAIR_COST
            ? uncached + r.trace.outputLength()
            : prompt + r.trace.outputLength();
    double weight = a.tenant()[i] == 0 ? s.heavyWeight() : 1.0;
    FairQueue.Ticket<SimRequest> t =
        queue.offer(r, a.band()[i], tenantNames[a.tenant()[i]], weight, cost, loop.now());
    if (t == null) {
      refuse(r);
      refusedFull++;
      return;
    }
    countWaited(i);
    chargedUncached[i] = uncached + 1; // +1: 0 means "did not wait"
    loop.after(Math.round(s.maxQueueTimeSec() * 1e9), this::expire);
    if (s.maxEvictions() > 0) evictFor(a.band()[i]);
  }

  /**
   * Eviction (docs/routing.md, "Evicting lower-band work in flight"): a request of band {@code
   * band} waits because every rank is busy. Takes back the place of one request of a lower band
   * that an engine holds but that has produced no token yet: the lowest band below {@code band},
   * and in it the one sent last (the least work done), among those evicted fewer than maxEvictions
   * times, that waited in the gateway at most half its bound, and whose leaving gives its rank room
   * by the busy rule. Its engine aborts it (MockEngine.abort: the slot and the rest of its prefill
   * are freed at once, what it computed is wasted), the router frees it, and it waits again at the
   * head of its band, its wait bound still from its first arrival (time on the engine not counted);
   * then the next request is granted.
   */
  private void evictFor(int band) {
    long maxWait = Math.round(s.maxQueueTimeSec() * 1e9);
    List<WorkerLoad> loads = null;
    SimRequest victim = null;
    for (SimRequest x : prefilling) {
      int i = (int) x.id;
      int b = a.band()[i];
      if (b <= band || evictedTimes[i] >= s.maxEvictions()) continue;
      // its queue wait so far (time on engines excluded): past half its bound, it would likely
      // be refused before its turn came again
      if (sentNanos[i] - x.arrival - engineNanos[i] > maxWait / 2) continue;
      if (victim != null) {
        int vb = a.band()[(int) victim.id];
        if (b < vb || (b == vb && sentNanos[i] < sentNanos[(int) victim.id])) continue;
      }
      if (loads == null) loads = router.loads();
      WorkerLoad l = loads.get(rankIndex(x.routedTo));
      long prefill = Math.max(0, x.trace.inputLength() - x.routedOverlapTokens);
      boolean frees =
          l.requests() - 1 < s.busyRequests()
              && (s.busyPrefillTokens() < 0
                  || l.activePrefillTokens() - prefill <= s.busyPrefillTokens());
      if (frees) victim = x;
    }
    if (victim == null) return;
    evict(victim);
    grant();
  }

  private void evict(SimRequest r) {
    int i = (int) r.id;
    long wasted = engines[(int) r.routedTo.workerId()].abort(r, r.routedTo.dpRank());
    if (wasted < 0) {
      throw new IllegalStateException("request " + r.id + " was not on " + r.routedTo);
    }
    prefilling.remove(r);
    router.free(r.routerId);
    int t = a.tenant()[i];
    int b = a.band()[i];
    evictedTimes[i]++;
    evictions[t][b]++;
    engineNanos[i] += loop.now() - sentNanos[i];
    wastedPrefillTokens += wasted;
    if (corrected[i] != 0) queue.charge(b, tenantNames[t], -corrected[i]);
    corrected[i] = 0;
    countWaited(i);
    evictedWaiting.get(b).addLast(r);
    evictedNow++;
    // the wait bound counts time waiting in the gateway, not on an engine
    long deadline = r.arrival + engineNanos[i] + Math.round(s.maxQueueTimeSec() * 1e9);
    loop.at(Math.max(loop.now(), deadline), () -> expireEvicted(r));
  }

  /**
   * An evicted request still waiting at its wait bound (from its first arrival, its time on engines
   * not counted) is refused. Each eviction schedules this at its own bound; a later eviction moved
   * the bound on (more time on engines), so an earlier eviction's call that finds the request
   * waiting again before its current bound does nothing: the later call refuses it, if still
   * waiting.
   */
  private void expireEvicted(SimRequest r) {
    int i = (int) r.id;
    if (loop.now() < r.arrival + engineNanos[i] + Math.round(s.maxQueueTimeSec() * 1e9)) return;
    if (!evictedWaiting.get(a.band()[i]).remove(r)) return;
    evictedNow--;
    refuse(r);
    refusedTimeout++;
  }

  private void expire() {
    for (FairQueue.Ticket<SimRequest> t : queue.expire(loop.now())) {
      refuse(t.item());
      refusedTimeout++;
    }
  }

  private void refuse(SimRequest r) {
    outcome[(int) r.id] = REFUSED;
    refundRate(r); // the gateway refused it: no engine answered, nothing to charge
    r.dropTokens();
  }

  /**
   * The gateway's token-rate limit at arrival (Proxy.limitRate): charges the request's tenant its
   * uncached prefill as the router predicts it now plus its expected decode tokens (the trace's
   * output length stands for max_tokens); false, and the request refused at once (429
   * rate_limit_exceeded, counted per tenant and band), when the tenant's bucket cannot pay it.
   */
  private boolean takeRate(SimRequest r) {
    int i = (int) r.id;
    TokenBucket b = buckets[a.tenant()[i]];
    if (b == null) return true;
    int overlap = router.overlaps(r.tokens(), RouteOptions.defaults()).maxScore();
    long uncached = TokenCost.uncached(r.trace.inputLength(), overlap, cfg.blockSize());
    long cost = uncached + r.trace.outputLength();
    if (b.tryTake(cost) > 0) {
      outcome[i] = RATE_LIMITED;
      rateRefused[a.tenant()[i]][a.band()[i]]++;
      r.dropTokens();
      return false;
    }
    rateCharged[i] = cost;
    return true;
  }

  /** Gives a request's rate charge back (Proxy.refundRate), once. */
  private void refundRate(SimRequest r) {
    int i = (int) r.id;
    if (rateCharged[i] == 0) return;
    buckets[a.tenant()[i]].adjust(-rateCharged[i]);
    rateCharged[i] = 0;
  }

  /**
   * Settles a finished request's rate charge on what the engine reported (Proxy.settleRate):
   * uncached prompt tokens (prompt - cached) plus the output tokens, less what was charged.
   */
  private void settleRate(SimRequest r) {
    int i = (int) r.id;
    if (rateCharged[i] == 0) return;
    long decode = r.trace.outputLength(); // expected and actual: the trace's output length
    buckets[a.tenant()[i]].adjust(
        TokenCost.settlement(
            r.trace.inputLength(), r.cachedTokens, decode, rateCharged[i] - decode, decode));
    rateCharged[i] = 0;
  }

  /** Request {@code i} as the run saw it (its cached tokens, times); after {@link #run}. */
  SimRequest request(int i) {
    return reqs[i];
  }

  /** A request's outcome: 0 pending, 1 answered, 2 refused by the queue, 3 rejected, 4 rate. */
  int outcome(int i) {
    return outcome[i];
  }

  /**
   * A request finished or a prefill ended: while a rank has room, it serves the requests parked for
   * it (unless a higher band waits in the queue), then the queue's next request routes among the
   * ranks with room (or parks for its holder).
   */
  private void grant() {
    if (queue == null) return;
    while (queue.size() > 0 || parkedNow > 0 || evictedNow > 0) {
      List<WorkerLoad> loads = router.loads();
      boolean room = false;
      boolean sent = false;
      for (WorkerLoad l : loads) {
        if (busy(l)) continue;
        room = true;
        ArrayDeque<SimRequest> p = parked.get(rankIndex(l.worker()));
        if (p.isEmpty() || higherBandWaits(a.band()[(int) p.peekFirst().id])) continue;
        SimRequest r = p.peekFirst();
        unpark(r);
        RouteDecision d =
            router.route(
                r.routerId,
                r.tokens(),
                new RouteOptions(null, null, Set.of(l.worker().workerId())));
        if (!(d instanceof RouteDecision.Routed routed)) {
          throw new IllegalStateException(
              "rank " + l.worker() + " has room, yet request " + r.id + " was not routed: " + d);
        }
        submit(r, routed);
        sent = true;
        break; // the loads changed
      }
      if (sent) continue;
      if (!room || (queue.size() == 0 && evictedNow == 0)) return;
      SimRequest r = nextEvicted();
      if (r == null) r = queue.poll().item();
      if (!dispatch(r)) {
        throw new IllegalStateException(
            "a rank has room, yet every rank is busy for request " + r.id);
      }
    }
  }

  private boolean higherBandWaits(int band) {
    for (int b = 0; b < band; b++) {
      if (queue.size(b) > 0 || !evictedWaiting.get(b).isEmpty()) return true;
    }
    return false;
  }

  /**
   * The evicted request to send next, removed from its list: the head of the highest band that
   * holds one, unless the queue holds a request of a higher band; null: the queue's turn.
   */
  private @Nullable SimRequest nextEvicted() {
    if (evictedNow == 0) return null;
    for (int b = 0; b < evictedWaiting.size(); b++) {
      if (!evictedWaiting.get(b).isEmpty()) {
        if (higherBandWaits(b)) return null;
        evictedNow--;
        return evictedWaiting.get(b).pollFirst();
      }
    }
    return null;
  }

  /**
   * fair-cost: what the engine really recomputed less what the queue charged goes onto the tenant's
   * next request (the gateway does it from usage.cached_tokens). The mock engine sets cachedTokens
   * when it admits the request, which with busy-requests below the engine's batch is at once,
   * inside submit.
   */
  private void correct(SimRequest r) {
    int i = (int) r.id;
    if (mode != Mode.FAIR_COST || chargedUncached[i] == 0 || r.admitted < 0) return;
    long actual = Math.max(0, r.trace.inputLength() - r.cachedTokens);
    double delta = actual - (chargedUncached[i] - 1);
    queue.charge(a.band()[i], tenantNames[a.tenant()[i]], delta);
    corrected[i] = delta;
  }

  private int[][] rateRefusedCopy() {
    int[][] c = new int[tenants][];
    for (int t = 0; t < tenants; t++) c[t] = rateRefused[t].clone();
    return c;
  }

  private AdmissionResult.Evictions evictionsResult() {
    if (s.maxEvictions() == 0 || queue == null) return AdmissionResult.Evictions.NONE;
    int requests = 0;
    int answered = 0;
    int refused = 0;
    for (int i = 0; i < evictedTimes.length; i++) {
      if (evictedTimes[i] == 0) continue;
      requests++;
      if (outcome[i] == ANSWERED) answered++;
      else if (outcome[i] == REFUSED) refused++;
    }
    int[][] c = new int[tenants][];
    for (int t = 0; t < tenants; t++) c[t] = evictions[t].clone();
    return new AdmissionResult.Evictions(c, requests, answered, refused, wastedPrefillTokens);
  }

  /** How often request {@code i} was evicted. */
  int evictedTimes(int i) {
    return evictedTimes[i];
  }

  private AdmissionResult result(long wallNanos) {
    int n = reqs.length;
    int answered = 0;
    int engineRejected = 0;
    int lost = 0;
    int good = 0;
    for (int i = 0; i < n; i++) {
      if (outcome[i] == ANSWERED) {
        answered++;
        if (ttftMs[i] <= s.ttftSloMs()) good++;
      } else if (outcome[i] == ENGINE_REJECTED) {
        engineRejected++;
      } else if (outcome[i] != REFUSED && outcome[i] != RATE_LIMITED) {
        lost++;
      }
    }
    double[] highTtft =
        AdmissionResult.highBandTtftMs(a, ttftMs, i -> outcome[i] == ANSWERED, false);
    double[] otherHighTtft =
        AdmissionResult.highBandTtftMs(a, ttftMs, i -> outcome[i] == ANSWERED, true);
    int[] perTenant = new int[tenants];
    for (int i = 0; i < n; i++) if (outcome[i] == ANSWERED) perTenant[a.tenant()[i]]++;
    double[][] tenantTtft = new double[tenants][];
    for (int t = 0; t < tenants; t++) tenantTtft[t] = new double[perTenant[t]];
    int[] fill = new int[tenants];
    for (int i = 0; i < n; i++) {
      if (outcome[i] != ANSWERED) continue;
      int t = a.tenant()[i];
      tenantTtft[t][fill[t]++] = ttftMs[i];
    }
    int[] sent = new int[tenants];
    for (int i = 0; i < n; i++) sent[a.tenant()[i]]++;
    double[] tenantHit = new double[tenants];
    for (int t = 0; t < tenants; t++) {
      tenantHit[t] = tenantPrompt[t] == 0 ? 0 : tenantCached[t] / (double) tenantPrompt[t];
    }
    return new AdmissionResult(
        label,
        mode,
        n,
        answered,
        refusedFull,
        refusedTimeout,
        engineRejected,
        lost + (queue == null ? 0 : queue.size()) + parkedNow + evictedNow + router.inFlight(),
        waited,
        sent,
        highTtft,
        tenantTtft,
        servedCost,
        waitMs,
        good,
        lastArrival / 1e9,
        lastFinish / 1e9,
        promptTokens == 0 ? 0 : cachedTokens / (double) promptTokens,
        tenantHit,
        cfg.speedup(),
        rateRefusedCopy(),
        wallNanos,
        evictionsResult(),
        otherHighTtft);
  }
}
