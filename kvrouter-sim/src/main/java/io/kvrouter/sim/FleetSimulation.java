package io.kvrouter.sim;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.kvrouter.mockengine.EventLoop;
import io.kvrouter.mockengine.HybridKvCache;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.StorageTier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * Replays a trace against a fresh fleet of {@link MockEngine}s under one routing policy, in
 * simulated time, and measures hit rate, TTFT and load; at the end checks that the index fed by the
 * engines' events equals their caches.
 *
 * <pre>
 * Implementation notes
 *
 * One EventLoop drives everything on the calling thread. Every request's arrival is scheduled at
 * (timestamp - first timestamp) / speedup. On arrival the request is hashed and routed by a
 * KvRouter whose clock is the simulated clock (so its expiry and approximate-mode TTLs run in
 * simulated time; request expiry is set to ten years, since a simulated overload may keep a
 * request queued for longer than the default 300 s and it must still be freed, not expired),
 * then handed to the chosen engine rank. The engine calls back at first token
 * (markPrefillCompleted) and at the end (free).
 *
 * Every policy is a KvRouter: kv is the default cost; least-loaded is the cost with overlap
 * weight 0; round-robin and random are WorkerSelectors. All of them see the candidates in
 * ascending Worker order, which is the engines' rank order (no busy thresholds are set, so every
 * registered rank is a candidate). approx is KvRouter.approximate(), which takes no events; its
 * engines' events go to a separate shadow index, only to verify that they were right. Its router
 * models each rank's cache as an LRU of --gpu-blocks (the capacity it is registered with) and,
 * unless cfg.approxCorrection() is off, is told each request's cached tokens when it finishes
 * (observeCachedTokens), as the gateway tells it from usage.
 *
 * KV events: each engine's PrefixCache publishes into publish(), at the simulated time of the
 * store or eviction. With no delay the event is applied at once, inside the engine's call, as
 * an in-process subscriber of a real engine would; with a delay it is applied that much later
 * in simulated time (per-rank order is kept: equal delays, FIFO ties). With jsonEvents every
 * event is encoded to Dynamo's JSON wire form and decoded again before it is applied. The
 * eventFilter exists for tests that drop an event on purpose. With SimNats (simulate --events
 * nats://...) the sink publishes to NATS and waits until the index, a replica of the run's
 * subject, applied the event (SimNats); the results equal an in-process run's.
 *
 * Loads are sampled on a fixed simulated period that divides the arrival span into loadSamples
 * steps, for as long as requests are in flight. The hit rate over time (HitSeries) counts each
 * completed request in one of loadSamples slices of the arrival span, by its arrival.
 * </pre>
 */
public final class FleetSimulation {
  private final List<TraceRequest> trace;
  private final SimConfig cfg;
  private final Policy policy;
  private final Runnable progress;
  private final Predicate<RouterEvent> eventFilter;

  private final EventLoop loop = new EventLoop();
  private final KvIndex index;
  private final KvRouter router;
  private final Consumer<RouterEvent> sink;
  private final SimNats.Feed feed;
  private final MockEngine[] engines;
  private final MockEngine.Rank[] ranks;

  private long eventsPublished;
  private long eventsApplied;
  private int done;
  private long lastFinish;
  private final double[] ttftMs;
  private int ttftCount;
  private long promptTokens;
  private long cachedTokens;
  private long routedOverlap;
  private long routedErrorTokens;
  private long admissionErrorTokens;
  private long admissionPredicted;
  private long outputTokens;
  private int completed;
  private int rejected;
  private final List<Double> sampleTimes = new ArrayList<>();
  private final List<int[]> samples = new ArrayList<>();
  private final HitSeries hits;

  /** The router's index: bounded when the config says so. */
  private static KvIndex newIndex(SimConfig cfg) {
    return cfg.maxBlocks() > 0
        ? KvIndexes.concurrentCompressedTree(cfg.maxBlocks())
        : KvIndexes.concurrentCompressedTree();
  }

  public FleetSimulation(
      List<TraceRequest> trace,
      SimConfig cfg,
      Policy policy,
      Runnable progress,
      Predicate<RouterEvent> eventFilter) {
    this(trace, cfg, policy, progress, eventFilter, null);
  }

  /**
   * With {@code nats}: the engines' events go through NATS JetStream (publish, then the index
   * applies them as a replica of the run's subject) instead of in-process.
   */
  public FleetSimulation(
      List<TraceRequest> trace,
      SimConfig cfg,
      Policy policy,
      Runnable progress,
      Predicate<RouterEvent> eventFilter,
      SimNats nats) {
    this.trace = trace;
    this.cfg = cfg;
    this.policy = policy;
    this.progress = progress;
    this.eventFilter = eventFilter;
    this.ttftMs = new double[trace.size()];
    this.hits =
        new HitSeries(
            trace.get(0).timestampMs(),
            trace.get(trace.size() - 1).timestampMs(),
            Math.max(1, cfg.loadSamples()));

    KvRouter.Builder b =
        KvRouter.builder(cfg.blockSize())
            .nanoClock(loop::now)
            .requestExpiry(Duration.ofDays(3650))
            .seed(cfg.seed());
    if (policy == Policy.APPROX) {
      index = newIndex(cfg); // shadow: verified, never routed from
      router =
          b.overlapWeight(cfg.overlapWeight())
              .pressureWeight(cfg.pressureWeight())
              .approximate()
              .build();
      feed = nats == null ? null : nats.attach(policy, index, fleet(cfg));
      sink = feed != null ? feed : index::apply;
    } else {
      // with a host tier, kv routes on a TieredIndex of the same kind (docs/routing.md, "Blocks
      // beyond the GPU"); kv-device on the device index alone, which drops the host's events
      index =
          cfg.hostBlocks() > 0 && policy != Policy.KV_DEVICE
              ? TieredIndex.of(() -> newIndex(cfg))
              : newIndex(cfg);
      b.index(index);
      switch (policy) {
        case KV, KV_DEVICE, KV_MAIN ->
            b.overlapWeight(cfg.overlapWeight()).pressureWeight(cfg.pressureWeight());
        case ROUND_ROBIN -> b.selector(BaselineSelectors.roundRobin());
        case RANDOM -> b.selector(BaselineSelectors.random(cfg.seed()));
        case LEAST_LOADED -> b.selector(WorkerSelector.costBased(0.0, 0.0, cfg.seed()));
        case APPROX -> {}
      }
      if (cfg.hybrid() && policy == Policy.KV) b.kvCacheGroups(cfg.kvGroups());
      if (cfg.hybrid() && nats != null) {
        throw new IllegalArgumentException(
            "--kv-groups with --events: router events over NATS carry no KV cache group");
      }
      router = b.build();
      // through the router, so its eviction-pressure counts see the replicated events
      feed = nats == null ? null : nats.attach(policy, router.eventFeed(), fleet(cfg));
      sink = feed != null ? feed : router::applyEvent;
    }

    MockEngine.Listener listener =
        new MockEngine.Listener() {
          @Override
          public void firstToken(SimRequest r) {
            router.markPrefillCompleted(r.routerId);
            ttftMs[ttftCount++] = r.ttftNanos() / 1e6;
          }

          @Override
          public void finished(SimRequest r) {
            router.free(r.routerId);
            if (policy == Policy.APPROX && cfg.approxCorrection()) {
              // what the gateway does with usage.prompt_tokens_details.cached_tokens
              router.observeCachedTokens(
                  r.routedTo,
                  r.tokens(),
                  RouteOptions.defaults(),
                  r.routedOverlapTokens,
                  r.cachedTokens);
            }
            completed++;
            promptTokens += r.trace.inputLength();
            cachedTokens += r.cachedTokens;
            routedOverlap += Math.min(r.routedOverlapTokens, r.trace.inputLength());
            routedErrorTokens += Math.abs(r.routedOverlapTokens - r.cachedTokens);
            if (r.admissionPredictedTokens >= 0) {
              admissionPredicted += r.admissionPredictedTokens;
              admissionErrorTokens += Math.abs(r.admissionPredictedTokens - r.cachedTokens);
            }
            outputTokens += r.trace.outputLength();
            hits.add(r.trace.timestampMs(), r.trace.inputLength(), r.cachedTokens);
            lastFinish = Math.max(lastFinish, loop.now());
            r.dropTokens();
            oneDone();
          }

          @Override
          public void admitting(SimRequest r, Worker rank) {
            if (!cfg.hybrid()) return;
            // what routing would predict for this rank now, at the engine's own moment of truth
            r.admissionPredictedTokens =
                router.overlaps(r.tokens(), RouteOptions.defaults()).score(rank) * cfg.blockSize();
          }

          @Override
          public void rejected(SimRequest r) {
            router.free(r.routerId);
            r.dropTokens();
            rejected++;
            oneDone();
          }
        };
    engines = new MockEngine[cfg.workers()];
    ranks = new MockEngine.Rank[cfg.ranks()];
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
              listener,
              cfg.hostBlocks(),
              Math.round(cfg.hostMsPerBlock() * 1e6),
              this::publishHost,
              cfg.kvGroups(),
              this::publishGroup);
      for (int r = 0; r < cfg.dpSize(); r++) ranks[w * cfg.dpSize() + r] = engines[w].rank(r);
      router.registerWorker(
          w,
          cfg.dpSize(),
          cfg.blockSize(),
          policy == Policy.APPROX ? cfg.approxRegisteredBlocks() : cfg.gpuBlocks());
    }
  }

  /** Runs the whole trace and the final check. */
  public PolicyResult run() {
    final long start = System.nanoTime();
    final double t0 = trace.get(0).timestampMs();
    long id = 0;
    long lastArrival = 0;
    for (TraceRequest t : trace) {
      long at = Math.round((t.timestampMs() - t0) * 1e6 / cfg.speedup());
      SimRequest r = new SimRequest(id++, t, at);
      loop.at(at, () -> arrive(r));
      lastArrival = at;
    }
    long period = Math.max(1, lastArrival / Math.max(1, cfg.loadSamples()));
    loop.at(0, () -> sample(period));
    loop.run();

    Verification v;
    if (cfg.hybrid()) {
      List<HybridKvCache> caches = new ArrayList<>(ranks.length);
      for (MockEngine.Rank r : ranks) caches.add(r.hybrid);
      v =
          IndexCheck.verifyHybrid(
              index, policy == Policy.KV ? router : null, caches, trace, cfg.verifyPrompts());
    } else {
      List<PrefixCache> caches = new ArrayList<>(ranks.length);
      for (MockEngine.Rank r : ranks) caches.add(r.cache);
      v = IndexCheck.verify(index, caches, trace, cfg.verifyPrompts(), cfg.maxBlocks());
    }
    if (feed != null) feed.close(); // its thread writes the index
    router.close();
    index.close();

    long end = Math.max(lastFinish, 1);
    double makespanSec = end / 1e9;
    double[] meanLoad = new double[ranks.length];
    double[] util = new double[ranks.length];
    for (int i = 0; i < ranks.length; i++) {
      meanLoad[i] = ranks[i].loadIntegral(end) / end;
      util[i] = Math.min(1.0, ranks[i].prefillBusyNanos() / (double) end);
    }
    double[] sorted = Arrays.copyOf(ttftMs, ttftCount);
    Arrays.sort(sorted);
    List<String> names = new ArrayList<>(ranks.length);
    for (MockEngine.Rank r : ranks) names.add(rankName(r.worker, cfg.dpSize()));
    double[] times = new double[sampleTimes.size()];
    for (int i = 0; i < times.length; i++) times[i] = sampleTimes.get(i);
    return new PolicyResult(
        policy,
        trace.size(),
        completed,
        rejected,
        promptTokens,
        cachedTokens,
        routedOverlap,
        outputTokens,
        sorted,
        makespanSec,
        meanLoad,
        util,
        new LoadSeries(names, times, samples.toArray(new int[0][])),
        hits,
        eventsPublished,
        eventsApplied,
        v,
        System.nanoTime() - start,
        cfg.hybrid()
            ? new PolicyResult.Prediction(
                routedErrorTokens, admissionPredicted, admissionErrorTokens)
            : null);
  }

  /** Every rank of the fleet. */
  private static List<Worker> fleet(SimConfig cfg) {
    List<Worker> out = new ArrayList<>(cfg.ranks());
    for (int w = 0; w < cfg.workers(); w++) {
      for (int r = 0; r < cfg.dpSize(); r++) out.add(new Worker(w, r));
    }
    return out;
  }

  public static String rankName(Worker w, int dpSize) {
    return dpSize == 1 ? "w" + w.workerId() : "w" + w.workerId() + "." + w.dpRank();
  }

  private void arrive(SimRequest r) {
    int[] tokens = r.tokens();
    RouteDecision d = router.route(r.routerId, tokens);
    if (!(d instanceof RouteDecision.Routed routed)) {
      throw new IllegalStateException("the router did not route request " + r.id + ": " + d);
    }
    r.routedOverlapTokens = routed.overlapTokens();
    Worker w = routed.worker();
    r.routedTo = w;
    engines[(int) w.workerId()].submit(r, w.dpRank());
  }

  private void publish(RouterEvent e) {
    eventsPublished++;
    if (!eventFilter.test(e)) return;
    long delay = Math.round(cfg.eventDelayMs() * 1e6);
    if (delay == 0) {
      deliver(e);
    } else {
      loop.after(delay, () -> deliver(e));
    }
  }

  /**
   * A host-tier event: to the router's TieredIndex (kv), dropped by a device-only router
   * (kv-device, and every other policy's router, which has no tiers); never to the approx shadow
   * index, which is checked against the device caches. Delayed like device events. With NATS it is
   * published with its tier, and the replica (the router's event feed) puts it on the host tier or
   * drops it as the router would.
   */
  private void publishHost(RouterEvent e) {
    eventsPublished++;
    if (policy == Policy.APPROX) return;
    long delay = Math.round(cfg.eventDelayMs() * 1e6);
    Runnable apply =
        () -> {
          if (feed != null) {
            feed.accept(StorageTier.HOST, e);
          } else {
            router.applyEvent(Tier.HOST, e);
          }
          eventsApplied++;
        };
    if (delay == 0) apply.run();
    else loop.after(delay, apply);
  }

  /**
   * An event of a hybrid model's secondary KV cache group: to the router under kv (delayed like the
   * main group's, in order), dropped under every other policy.
   */
  private void publishGroup(int group, KvCacheGroup kind, RouterEvent e) {
    eventsPublished++;
    if (policy != Policy.KV) return;
    long delay = Math.round(cfg.eventDelayMs() * 1e6);
    Runnable apply =
        () -> {
          router.applyGroupEvent(group, kind, e);
          eventsApplied++;
        };
    if (delay == 0) apply.run();
    else loop.after(delay, apply);
  }

  private void deliver(RouterEvent e) {
    RouterEvent applied =
        cfg.jsonEvents() ? RouterEventJson.readEvent(RouterEventJson.writeEvent(e)) : e;
    sink.accept(applied);
    eventsApplied++;
  }

  private void oneDone() {
    done++;
    progress.run();
  }

  private void sample(long period) {
    int[] s = new int[ranks.length];
    for (int i = 0; i < ranks.length; i++) s[i] = ranks[i].inFlight();
    sampleTimes.add(loop.now() / 1e9);
    samples.add(s);
    if (done < trace.size()) loop.after(period, () -> sample(period));
  }
}
