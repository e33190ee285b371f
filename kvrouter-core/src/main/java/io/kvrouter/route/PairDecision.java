package io.kvrouter.route;

import java.util.Locale;

/**
 * What {@link PairRouter#route} decided: a prefill/decode pair, one engine for the whole request
 * (and why), or nothing. A {@link Disaggregated} decision recorded two router requests, the
 * prefill's ({@link Disaggregated#prefillRequestId()}) and the decode's (the request id); an {@link
 * Aggregated} one the request id; {@link Refused} nothing. The caller frees what was recorded.
 */
public sealed interface PairDecision {

  /** Why a request was served aggregated, or that it was not. */
  enum Reason {
    /** Disaggregated: enough uncached prompt tokens and a prefill rank took it. */
    DISAGGREGATED("uncached prompt tokens at or above the threshold"),
    /** No prefill engine allowed (none registered, healthy or untried). */
    NO_PREFILL_ENGINE("no prefill engine can take it"),
    /** Few prompt tokens are uncached on the best decode-capable engine. */
    FEW_UNCACHED_TOKENS("uncached prompt tokens below the threshold"),
    /** Every allowed prefill engine has more prefill tokens queued than the limit. */
    PREFILL_QUEUE_FULL("every prefill engine's queue is over the limit"),
    /** Every allowed prefill engine is over a busy threshold. */
    PREFILL_BUSY("every prefill engine is busy");

    private final String text;

    Reason(String text) {
      this.text = text;
    }

    /** A short phrase for logs and headers. */
    public String text() {
      return text;
    }

    /** The header form, e.g. {@code few_uncached_tokens}. */
    public String wireName() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  /** The path taken: {@code "disaggregated"}, {@code "aggregated"} or {@code "refused"}. */
  String path();

  /** One line saying which path and why. */
  String why();

  /**
   * Prefill on {@code prefill} (recorded under {@code prefillRequestId}), then decode on {@code
   * decode} (recorded under the request id).
   *
   * @param uncachedTokens prompt tokens the best decode-capable rank does not cache
   * @param threshold the rule's threshold (its minimum of uncached tokens)
   */
  record Disaggregated(
      RouteDecision.Routed prefill,
      String prefillRequestId,
      RouteDecision.Routed decode,
      int uncachedTokens,
      int threshold)
      implements PairDecision {
    @Override
    public String path() {
      return "disaggregated";
    }

    @Override
    public String why() {
      return "disaggregated: "
          + uncachedTokens
          + " uncached prompt tokens >= threshold "
          + threshold
          + "; prefill on "
          + Long.toUnsignedString(prefill.worker().workerId())
          + " (overlap "
          + prefill.overlapTokens()
          + " tokens), decode on "
          + Long.toUnsignedString(decode.worker().workerId());
    }
  }

  /**
   * The whole request on {@code routed} (recorded under the request id), because of {@code reason}.
   */
  record Aggregated(RouteDecision.Routed routed, Reason reason, int uncachedTokens, int threshold)
      implements PairDecision {
    @Override
    public String path() {
      return "aggregated";
    }

    @Override
    public String why() {
      String w = "aggregated on " + Long.toUnsignedString(routed.worker().workerId()) + ": ";
      return reason == Reason.FEW_UNCACHED_TOKENS
          ? w + uncachedTokens + " uncached prompt tokens < threshold " + threshold
          : w + reason.text();
    }
  }

  /**
   * No decode-capable engine could take the request ({@code decision} is the router's {@link
   * RouteDecision.AllBusy} or {@link RouteDecision.NoWorkers}); nothing recorded.
   */
  record Refused(RouteDecision decision, int uncachedTokens) implements PairDecision {
    @Override
    public String path() {
      return "refused";
    }

    @Override
    public String why() {
      return decision instanceof RouteDecision.AllBusy
          ? "refused: every decode engine is busy"
          : "refused: no decode engine can take it";
    }
  }
}
