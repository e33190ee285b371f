package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.route.Candidate;
import io.kvrouter.route.CandidateCost;
import io.kvrouter.route.RouteDecision;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.common.AttributesBuilder;
import io.opentelemetry.api.trace.Span;
import java.util.List;

/**
 * What a route span of {@code serve} and of the gateway says about the router's decision
 * (docs/observability.md, "Traces"): the outcome, the chosen worker rank, its predicted overlap and
 * cost as attributes, and one {@code kvrouter.candidate} event per candidate with its load terms
 * and cost (so the trace shows why the choice was made).
 *
 * <pre>
 * Implementation notes
 *
 * Stateless; called only with tracing on, by the request's own thread, on a span it owns. The
 * router's candidate list is built lazily (PricedCandidates): walking it here builds its elements,
 * which only a traced request pays for.
 * </pre>
 */
public final class RouteSpans {
  /** {@code routed}, {@code all_busy} or {@code no_workers}. */
  public static final AttributeKey<String> OUTCOME =
      AttributeKey.stringKey("kvrouter.route.outcome");

  /** The worker (instance) id, unsigned decimal. */
  public static final AttributeKey<String> WORKER_ID = AttributeKey.stringKey("kvrouter.worker.id");

  public static final AttributeKey<Long> DP_RANK = AttributeKey.longKey("kvrouter.worker.dp_rank");

  /** Leading prompt blocks the chosen rank caches, as the index predicts. */
  public static final AttributeKey<Long> OVERLAP_BLOCKS =
      AttributeKey.longKey("kvrouter.overlap.blocks");

  /** {@code overlap blocks × block size}: the predicted cached prompt tokens. */
  public static final AttributeKey<Long> OVERLAP_TOKENS =
      AttributeKey.longKey("kvrouter.overlap.tokens");

  public static final AttributeKey<Double> COST = AttributeKey.doubleKey("kvrouter.cost");
  public static final AttributeKey<Long> CANDIDATES = AttributeKey.longKey("kvrouter.candidates");
  public static final AttributeKey<Long> BUSY = AttributeKey.longKey("kvrouter.busy");
  public static final AttributeKey<Long> CACHED_BLOCKS =
      AttributeKey.longKey("kvrouter.cached_blocks");
  public static final AttributeKey<Double> PREFILL_BLOCKS =
      AttributeKey.doubleKey("kvrouter.prefill_blocks");
  public static final AttributeKey<Long> DECODE_BLOCKS =
      AttributeKey.longKey("kvrouter.decode_blocks");

  /**
   * The prefix of a candidate event's attribute per named term of the cost ({@code
   * kvrouter.score.prefill}, {@code kvrouter.score.decode}, ... {@code kvrouter.score.lora}): the
   * term's weighted contribution to that candidate's cost.
   */
  public static final String SCORE_PREFIX = "kvrouter.score.";

  /** The name of the event of one candidate. */
  public static final String CANDIDATE_EVENT = "kvrouter.candidate";

  private RouteSpans() {}

  /** Records {@code d} on {@code span}. */
  public static void decision(Span span, RouteDecision d) {
    switch (d) {
      case RouteDecision.Routed r -> {
        span.setAttribute(OUTCOME, "routed");
        span.setAttribute(WORKER_ID, Long.toUnsignedString(r.worker().workerId()));
        span.setAttribute(DP_RANK, r.worker().dpRank());
        span.setAttribute(OVERLAP_BLOCKS, r.overlapBlocks());
        span.setAttribute(OVERLAP_TOKENS, r.overlapTokens());
        span.setAttribute(COST, r.cost());
        span.setAttribute(CANDIDATES, r.candidates().size());
        span.setAttribute(BUSY, r.busy().size());
        List<CandidateCost> cs = r.candidates();
        List<String> terms = r.scorerNames();
        for (int i = 0, n = cs.size(); i < n; i++) {
          CandidateCost c = cs.get(i);
          AttributesBuilder b = candidate(c.candidate()).toBuilder().put(COST, c.cost());
          // each named term's share of the cost (docs/routing.md, "Scorers")
          for (int j = 0; j < terms.size(); j++) {
            double v = r.contribution(i, j);
            if (!Double.isNaN(v)) b.put(AttributeKey.doubleKey(SCORE_PREFIX + terms.get(j)), v);
          }
          span.addEvent(CANDIDATE_EVENT, b.build());
        }
      }
      case RouteDecision.AllBusy b -> {
        span.setAttribute(OUTCOME, "all_busy");
        span.setAttribute(CANDIDATES, 0);
        span.setAttribute(BUSY, b.candidates().size());
        for (Candidate c : b.candidates()) span.addEvent(CANDIDATE_EVENT, candidate(c));
      }
      case RouteDecision.NoWorkers n -> span.setAttribute(OUTCOME, "no_workers");
    }
  }

  private static Attributes candidate(Candidate c) {
    Worker w = c.worker();
    return Attributes.builder()
        .put(WORKER_ID, Long.toUnsignedString(w.workerId()))
        .put(DP_RANK, w.dpRank())
        .put(OVERLAP_BLOCKS, c.overlapBlocks())
        .put(CACHED_BLOCKS, c.cachedBlocks())
        .put(PREFILL_BLOCKS, c.prefillBlocks())
        .put(DECODE_BLOCKS, c.decodeBlocks())
        .build();
  }
}
