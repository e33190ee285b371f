package io.kvrouter.route;

import io.kvrouter.index.OverlapScores;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Routing for a fleet of prefill and decode engines (docs/routing.md, Disaggregated serving): for
 * each request, either one engine that serves it whole (aggregated) or a pair, a prefill rank
 * chosen by KV overlap and prefill load and a decode rank chosen by decode load, with the
 * conditional rule deciding which and the decision saying why.
 *
 * <pre>{@code
 * PairRouter pairs = new PairRouter(router, PairRouter.Config.defaults());
 * PairDecision d = pairs.route(requestId, tokens, RouteOptions.defaults(), prefillIds, decodeIds);
 * switch (d) {
 *   case PairDecision.Disaggregated x -> handOver(x.prefill(), x.decode()); // free both ids after
 *   case PairDecision.Aggregated a -> forward(a.routed());                   // free requestId
 *   case PairDecision.Refused r -> reply503(r.decision());                   // nothing recorded
 * }
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * A layer over one KvRouter (the model's: one index, one set of ActiveSequences); it keeps no
 * state of its own, so it is as thread-safe as the router. A disaggregated request is two
 * requests in the router's bookkeeping: the prefill under prefillId(requestId) on the prefill
 * rank, the decode under requestId on the decode rank; an aggregated one is requestId alone.
 * The caller frees what the decision recorded (see PairDecision).
 *
 * route(): (1) the overlaps of every rank (KvRouter.overlaps, no bookkeeping), and from them the
 * prompt tokens that the best decode-capable rank does not cache (uncached); (2) the conditional
 * rule, in order: no prefill rank allowed, uncached below minUncachedTokens, every allowed prefill
 * rank's queued prefill tokens (WorkerLoad.activePrefillTokens) above maxPrefillQueueTokens: any
 * of these serves the request aggregated, routed by the router's own cost among the
 * decode-capable ranks; (3) else the prefill is routed among the prefill ranks by the router's
 * cost (overlap and prefill load); if all of them are busy the request goes aggregated after all;
 * (4) the decode rank: the decode-capable worker with the fewest active blocks (decode load: the
 * KV its decodes in flight hold), ties to the larger overlap (fewer blocks to pull), then the
 * lower id, recorded through KvRouter.route restricted to that worker; a busy one is skipped for
 * the next. If none can take it the prefill is freed again and the decision is Refused. Between
 * the load read in (4) and the recording another request may route: the pick is then one
 * request stale, which a load balancer can afford; the recording itself is the router's, exact.
 * </pre>
 */
public final class PairRouter {
  /** The suffix of the router request id a disaggregated request's prefill is recorded under. */
  public static final String PREFILL_SUFFIX = "#prefill";

  /**
   * The conditional rule.
   *
   * @param minUncachedTokens a request whose prompt tokens not cached on the best decode-capable
   *     rank are fewer than this is served aggregated (llm-d's {@code nonCachedTokens}, Dynamo's
   *     {@code max_local_prefill_length}); 0 disaggregates every request a prefill rank can take
   * @param maxPrefillQueueTokens when every allowed prefill rank has more prefill tokens queued
   *     than this, the request is served aggregated; {@code Long.MAX_VALUE}: no limit
   */
  public record Config(int minUncachedTokens, long maxPrefillQueueTokens) {
    public Config {
      if (minUncachedTokens < 0) {
        throw new IllegalArgumentException(
            "minUncachedTokens must be >= 0, got " + minUncachedTokens);
      }
      if (maxPrefillQueueTokens < 0) {
        throw new IllegalArgumentException(
            "maxPrefillQueueTokens must be >= 0, got " + maxPrefillQueueTokens);
      }
    }

    /** {@value #DEFAULT_MIN_UNCACHED_TOKENS} uncached tokens, no prefill queue limit. */
    public static Config defaults() {
      return new Config(DEFAULT_MIN_UNCACHED_TOKENS, Long.MAX_VALUE);
    }
  }

  /**
   * The default {@link Config#minUncachedTokens}: Dynamo's {@code max_local_prefill_length}
   * default.
   */
  public static final int DEFAULT_MIN_UNCACHED_TOKENS = 1000;

  private final KvRouter router;
  private final Config config;

  public PairRouter(KvRouter router, Config config) {
    this.router = Objects.requireNonNull(router, "router");
    this.config = Objects.requireNonNull(config, "config");
  }

  public Config config() {
    return config;
  }

  /** The router request id of {@code requestId}'s prefill. */
  public static String prefillId(String requestId) {
    return requestId + PREFILL_SUFFIX;
  }

  /**
   * Routes one request to a prefill/decode pair or to one engine.
   *
   * @param options salts, and the worker ids allowed at all (null: any); intersected with the role
   *     sets
   * @param prefillIds worker ids of role prefill
   * @param decodeIds worker ids that can decode: role decode or both
   * @throws IllegalArgumentException when {@code requestId} (or its prefill id) is in flight
   */
  public PairDecision route(
      String requestId,
      int[] tokens,
      RouteOptions options,
      Set<Long> prefillIds,
      Set<Long> decodeIds) {
    Objects.requireNonNull(requestId, "requestId");
    Set<Long> p = allowed(options, prefillIds);
    Set<Long> d = allowed(options, decodeIds);
    if (d.isEmpty()) {
      return new PairDecision.Refused(new RouteDecision.NoWorkers(), -1);
    }
    final int bs = router.blockSize();
    OverlapScores scores = router.overlaps(tokens, options);
    Map<Long, Integer> overlap = new HashMap<>(); // blocks, best rank of each worker
    for (int i = 0, n = scores.size(); i < n; i++) {
      overlap.merge(scores.worker(i).workerId(), scores.scoreAt(i), Math::max);
    }
    int best = 0;
    for (Long id : d) best = Math.max(best, overlap.getOrDefault(id, 0));
    int uncached = Math.max(0, tokens.length - best * bs);

    PairDecision.Reason reason = null;
    if (p.isEmpty()) {
      reason = PairDecision.Reason.NO_PREFILL_ENGINE;
    } else if (uncached < config.minUncachedTokens()) {
      reason = PairDecision.Reason.FEW_UNCACHED_TOKENS;
    } else if (config.maxPrefillQueueTokens() != Long.MAX_VALUE
        && minPrefillQueue(p) > config.maxPrefillQueueTokens()) {
      reason = PairDecision.Reason.PREFILL_QUEUE_FULL;
    }
    RouteDecision.Routed prefill = null;
    if (reason == null) {
      RouteDecision pd = router.route(prefillId(requestId), tokens, only(options, p));
      if (pd instanceof RouteDecision.Routed r) prefill = r;
      else reason = PairDecision.Reason.PREFILL_BUSY;
    }
    if (reason != null) {
      RouteDecision a = router.route(requestId, tokens, only(options, d));
      if (a instanceof RouteDecision.Routed r) {
        return new PairDecision.Aggregated(r, reason, uncached, config.minUncachedTokens());
      }
      return new PairDecision.Refused(a, uncached);
    }
    String pid = prefillId(requestId);
    boolean done = false;
    try {
      RouteDecision last = null;
      for (long id : decodeOrder(d, overlap)) {
        RouteDecision dd = router.route(requestId, tokens, only(options, Set.of(id)));
        if (dd instanceof RouteDecision.Routed r) {
          done = true;
          return new PairDecision.Disaggregated(
              Objects.requireNonNull(prefill), pid, r, uncached, config.minUncachedTokens());
        }
        last = dd;
      }
      // no decode-capable worker registered: refused as when there is none
      return new PairDecision.Refused(
          last != null ? last : new RouteDecision.NoWorkers(), uncached);
    } finally {
      if (!done) router.free(pid);
    }
  }

  /** The allowed ids of a role: {@code role} ∩ the options' allowed ids. */
  private static Set<Long> allowed(RouteOptions options, Set<Long> role) {
    Set<Long> a = options.allowedWorkerIds();
    if (a == null) return role;
    Set<Long> out = new HashSet<>();
    for (Long id : role) if (a.contains(id)) out.add(id);
    return out;
  }

  private static RouteOptions only(RouteOptions o, Set<Long> ids) {
    return new RouteOptions(o.loraName(), o.namespace(), ids);
  }

  private long minPrefillQueue(Set<Long> prefill) {
    long min = Long.MAX_VALUE;
    for (WorkerLoad l : router.loads()) {
      if (prefill.contains(l.worker().workerId())) min = Math.min(min, l.activePrefillTokens());
    }
    return min == Long.MAX_VALUE ? 0 : min;
  }

  /**
   * Decode-capable workers, least active blocks first (their lightest rank), then larger overlap,
   * then lower id.
   */
  @SuppressWarnings("NullAway") // unboxes active.get(id) for ids that are active's own keys
  private List<Long> decodeOrder(Set<Long> decode, Map<Long, Integer> overlap) {
    Map<Long, Integer> active = new HashMap<>();
    for (WorkerLoad l : router.loads()) {
      long id = l.worker().workerId();
      if (decode.contains(id)) active.merge(id, l.activeBlocks(), Math::min);
    }
    List<Long> ids = new ArrayList<>(active.keySet());
    ids.sort(
        (a, b) -> {
          int c = Integer.compare(active.get(a), active.get(b));
          if (c != 0) return c;
          c = Integer.compare(overlap.getOrDefault(b, 0), overlap.getOrDefault(a, 0));
          return c != 0 ? c : Long.compareUnsigned(a, b);
        });
    return ids;
  }
}
