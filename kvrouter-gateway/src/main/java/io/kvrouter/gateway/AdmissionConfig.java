package io.kvrouter.gateway;

import io.kvrouter.admission.TokenRateConfig;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The gateway's admission settings (docs/gateway.md, "Admission"): how long and how many requests
 * may wait in front of a model whose every engine is busy (the router's busy limits: {@code
 * --busy-requests}, {@code --busy-prefill-tokens}, {@code --busy-block-fraction}), and how the
 * queue orders them.
 *
 * @param maxQueueDepth requests that may wait per model; 0: no queue (a request that finds every
 *     engine busy is refused with 503 {@code all_busy}, as without admission)
 * @param maxQueueTime the longest a request waits before it is refused with 429
 * @param starvationLimit a waiting priority band is passed over at most this many times in a row by
 *     higher bands; 0: strict priority
 * @param tenantFrom where a request's tenant comes from
 * @param tenantWeights tenant name to its share (> 0); unlisted tenants weigh 1
 * @param defaultDecodeTokens the decode tokens a request without {@code max_tokens} is expected to
 *     cost
 * @param maxTenantLabels distinct tenant label values the queue metrics use; further tenants are
 *     counted under {@code other}
 * @param tokenRates per-tenant token-rate limits (docs/gateway.md, "Token-rate limits"); they apply
 *     whether or not requests ever wait (default {@link TokenRateConfig#OFF})
 * @param maxEvictions eviction of in-flight lower-band work (docs/gateway.md, "Evicting lower-band
 *     work in flight"): how many times one request may be evicted; 0: never (the default)
 * @param excessFactor the excess rule (docs/routing.md, "A tenant that sends far more than the
 *     others"): a waiting tenant that sent more than this many times the mean of what the other
 *     waiting tenants sent (requests per unit of weight, decaying by e every maxQueueTime) waits
 *     behind them in every band; 0: off, else >= 1 ({@link #DEFAULTS}: 4)
 */
public record AdmissionConfig(
    int maxQueueDepth,
    Duration maxQueueTime,
    int starvationLimit,
    TenantSource tenantFrom,
    Map<String, Double> tenantWeights,
    int defaultDecodeTokens,
    int maxTenantLabels,
    TokenRateConfig tokenRates,
    int maxEvictions,
    double excessFactor) {

  /** Where a request's tenant name comes from. */
  public enum TenantSource {
    /** The client's API key ({@code Authorization: Bearer}), as {@code key-} + 12 hex digits. */
    KEY,
    /** The {@code x-kvrouter-tenant} header. */
    HEADER,
    /** The OpenAI {@code user} body field. */
    USER
  }

  /** The excess factor of {@link #DEFAULTS} (docs/SIMULATION.md, "sixth pass"). */
  public static final double DEFAULT_EXCESS_FACTOR = 4;

  /**
   * Queue depth 1024, wait 30 s, strict priority, tenants from the header, 256 decode tokens, the
   * excess rule at {@link #DEFAULT_EXCESS_FACTOR}.
   */
  public static final AdmissionConfig DEFAULTS =
      new AdmissionConfig(1024, Duration.ofSeconds(30), 0, TenantSource.HEADER, Map.of(), 256, 32)
          .withExcessFactor(DEFAULT_EXCESS_FACTOR);

  /** The settings without eviction of in-flight lower-band work, the excess rule off. */
  public AdmissionConfig(
      int maxQueueDepth,
      Duration maxQueueTime,
      int starvationLimit,
      TenantSource tenantFrom,
      Map<String, Double> tenantWeights,
      int defaultDecodeTokens,
      int maxTenantLabels,
      TokenRateConfig tokenRates) {
    this(
        maxQueueDepth,
        maxQueueTime,
        starvationLimit,
        tenantFrom,
        tenantWeights,
        defaultDecodeTokens,
        maxTenantLabels,
        tokenRates,
        0,
        0);
  }

  /** The settings without token-rate limits ({@link TokenRateConfig#OFF}). */
  public AdmissionConfig(
      int maxQueueDepth,
      Duration maxQueueTime,
      int starvationLimit,
      TenantSource tenantFrom,
      Map<String, Double> tenantWeights,
      int defaultDecodeTokens,
      int maxTenantLabels) {
    this(
        maxQueueDepth,
        maxQueueTime,
        starvationLimit,
        tenantFrom,
        tenantWeights,
        defaultDecodeTokens,
        maxTenantLabels,
        TokenRateConfig.OFF);
  }

  public AdmissionConfig {
    if (maxQueueDepth < 0) {
      throw new IllegalArgumentException(
          "maxQueueDepth must be >= 0 (0: no queue), got " + maxQueueDepth);
    }
    Objects.requireNonNull(maxQueueTime, "maxQueueTime");
    if (maxQueueTime.isNegative() || maxQueueTime.isZero()) {
      throw new IllegalArgumentException("maxQueueTime must be > 0, got " + maxQueueTime);
    }
    if (starvationLimit < 0) {
      throw new IllegalArgumentException(
          "starvationLimit must be >= 0 (0: strict), got " + starvationLimit);
    }
    Objects.requireNonNull(tenantFrom, "tenantFrom");
    for (Map.Entry<String, Double> e : tenantWeights.entrySet()) {
      double w = e.getValue();
      if (!(w > 0) || Double.isInfinite(w)) {
        throw new IllegalArgumentException(
            "the weight of tenant '" + e.getKey() + "' must be finite and > 0, got " + w);
      }
    }
    tenantWeights = Collections.unmodifiableMap(new LinkedHashMap<>(tenantWeights));
    if (defaultDecodeTokens < 0) {
      throw new IllegalArgumentException(
          "defaultDecodeTokens must be >= 0, got " + defaultDecodeTokens);
    }
    if (maxTenantLabels < 1) {
      throw new IllegalArgumentException("maxTenantLabels must be >= 1, got " + maxTenantLabels);
    }
    Objects.requireNonNull(tokenRates, "tokenRates");
    if (maxEvictions < 0) {
      throw new IllegalArgumentException(
          "maxEvictions must be >= 0 (0: no eviction), got " + maxEvictions);
    }
    if (!(excessFactor == 0 || excessFactor >= 1) || Double.isInfinite(excessFactor)) {
      throw new IllegalArgumentException(
          "excessFactor must be 0 (off) or finite and >= 1, got " + excessFactor);
    }
  }

  /** These settings with {@code rates} as the per-tenant token-rate limits. */
  public AdmissionConfig withTokenRates(TokenRateConfig rates) {
    return new AdmissionConfig(
        maxQueueDepth,
        maxQueueTime,
        starvationLimit,
        tenantFrom,
        tenantWeights,
        defaultDecodeTokens,
        maxTenantLabels,
        rates,
        maxEvictions,
        excessFactor);
  }

  /**
   * These settings with eviction of in-flight lower-band work (docs/gateway.md, "Evicting
   * lower-band work in flight"): one request is evicted at most {@code max} times; 0: off.
   */
  public AdmissionConfig withMaxEvictions(int max) {
    return new AdmissionConfig(
        maxQueueDepth,
        maxQueueTime,
        starvationLimit,
        tenantFrom,
        tenantWeights,
        defaultDecodeTokens,
        maxTenantLabels,
        tokenRates,
        max,
        excessFactor);
  }

  /**
   * These settings with the excess rule at {@code factor} (docs/routing.md, "A tenant that sends
   * far more than the others"); 0: off.
   */
  public AdmissionConfig withExcessFactor(double factor) {
    return new AdmissionConfig(
        maxQueueDepth,
        maxQueueTime,
        starvationLimit,
        tenantFrom,
        tenantWeights,
        defaultDecodeTokens,
        maxTenantLabels,
        tokenRates,
        maxEvictions,
        factor);
  }

  /** Whether requests may wait (a queue depth above 0). */
  public boolean queues() {
    return maxQueueDepth > 0;
  }

  /** A tenant's weight: its configured one, else 1. */
  public double weight(String tenant) {
    Double w = tenantWeights.get(tenant);
    return w == null ? 1.0 : w;
  }
}
