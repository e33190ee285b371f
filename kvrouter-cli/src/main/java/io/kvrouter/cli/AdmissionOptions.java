package io.kvrouter.cli;

import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.gateway.AdmissionConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import picocli.CommandLine.Option;

/**
 * The gateway's admission flags (docs/gateway.md, "Admission"): the queue in front of a model whose
 * every engine is busy (the busy limits are the routing options' {@code --busy-*}). Declared once
 * here as a picocli mixin; {@link #config()} builds the gateway's {@link AdmissionConfig}.
 */
final class AdmissionOptions {
  private static final AdmissionConfig D = AdmissionConfig.DEFAULTS;

  @Option(
      names = "--max-queue-depth",
      paramLabel = "N",
      description =
          "Admission: at most N requests wait per model while every engine of the model is busy"
              + " (--busy-requests, --busy-prefill-tokens, --busy-block-fraction); more are refused"
              + " with 429 and Retry-After. 0: no queue, 503 all_busy (default: ${DEFAULT-VALUE}).")
  int maxQueueDepth = D.maxQueueDepth();

  @Option(
      names = "--max-queue-time",
      paramLabel = "TIME",
      description =
          "Admission: a request waits at most this long (e.g. 30s, 500ms, 2m), then is refused"
              + " with 429 (default: 30s).")
  String maxQueueTime = "30s";

  @Option(
      names = "--queue-starvation-limit",
      paramLabel = "N",
      description =
          "Admission: a waiting priority band is passed over at most N times in a row by higher"
              + " bands; 0: strict priority (default: ${DEFAULT-VALUE}).")
  int starvationLimit = D.starvationLimit();

  @Option(
      names = "--holder-wait",
      negatable = true,
      description =
          "Admission: a request the router sends to another engine than the busy one holding its"
              + " prefix waits for that holder when that costs fewer prefill tokens"
              + " (docs/routing.md, \"Waiting for the prefix holder\"); --no-holder-wait: never"
              + " (default: ${DEFAULT-VALUE}).")
  boolean holderWait = true;

  @Option(
      names = "--busy-engine-waiting",
      paramLabel = "N",
      description =
          "Admission: an engine that says at least N requests wait in its own queue (its"
              + " /metrics: vllm:num_requests_waiting, sglang:num_queue_reqs,"
              + " llamacpp:requests_deferred) is busy: routing passes it by, and while every"
              + " engine of a model is so, requests wait in the queue. 0: the engines' metrics are"
              + " not read (default: ${DEFAULT-VALUE}).")
  long busyEngineWaiting = 0;

  @Option(
      names = "--engine-metrics-interval-ms",
      paramLabel = "MS",
      description =
          "Admission: how often each engine's /metrics is read for --busy-engine-waiting"
              + " (default: ${DEFAULT-VALUE}).")
  long engineMetricsIntervalMs = 1000;

  @Option(
      names = "--tenant-from",
      paramLabel = "SOURCE",
      description =
          "Admission: a request's tenant: key (its API key, as key-<12 hex digits of its"
              + " SHA-256>), header (x-kvrouter-tenant) or user (the body's user field)"
              + " (default: header).")
  String tenantFrom = "header";

  @Option(
      names = "--tenant-weight",
      paramLabel = "NAME=W",
      description =
          "Admission: tenant NAME's share of a saturated model (> 0; unlisted tenants weigh 1)."
              + " Repeatable.")
  Map<String, String> tenantWeights = new LinkedHashMap<>();

  @Option(
      names = "--default-decode-tokens",
      paramLabel = "N",
      description =
          "Admission: decode tokens a request without max_tokens is expected to cost"
              + " (default: ${DEFAULT-VALUE}).")
  int defaultDecodeTokens = D.defaultDecodeTokens();

  @Option(
      names = "--max-tenant-labels",
      paramLabel = "N",
      description =
          "Admission: distinct tenant labels in the queue metrics; the others count as 'other'"
              + " (default: ${DEFAULT-VALUE}).")
  int maxTenantLabels = D.maxTenantLabels();

  @Option(
      names = "--tenant-token-rate",
      paramLabel = "[NAME=]TOKENS_PER_S",
      description =
          "Token-rate limit: TOKENS_PER_S alone is every tenant's rate, NAME=TOKENS_PER_S one"
              + " tenant's; a request costs its uncached prompt tokens (as the router predicts"
              + " them) plus max_tokens (or --default-decode-tokens), settled on the engine's"
              + " usage; one over its tenant's rate is refused with 429 rate_limit_exceeded and"
              + " Retry-After. Applies with or without --busy-requests. Repeatable (default: no"
              + " limit).")
  List<String> tenantTokenRates = new ArrayList<>();

  @Option(
      names = "--tenant-token-burst",
      paramLabel = "TIME",
      description =
          "Token-rate limit: a tenant's bucket holds this long's worth of its rate (e.g. 10s,"
              + " 500ms, 2m) (default: 10s).")
  String tenantTokenBurst = "10s";

  @Option(
      names = "--max-rate-tenants",
      paramLabel = "N",
      description =
          "Token-rate limit: tenants whose buckets are kept at once; past it the least used are"
              + " dropped and start again full (default: ${DEFAULT-VALUE}).")
  int maxRateTenants = TokenRateConfig.OFF.maxTenants();

  @Option(
      names = "--evict-lower-bands",
      description =
          "Admission: when a request waits because every engine is busy, take back the place of"
              + " one request of a lower band that an engine holds but that has sent its client"
              + " nothing yet (the lowest band, the one sent last): it is aborted upstream and waits"
              + " again at the head of its band, its wait bound from its arrival (docs/gateway.md,"
              + " \"Evicting lower-band work in flight\") (default: off).")
  boolean evictLowerBands;

  @Option(
      names = "--max-evictions",
      paramLabel = "N",
      defaultValue = "1",
      description =
          "Admission: with --evict-lower-bands, one request is evicted at most N times, then it"
              + " keeps its place (default: ${DEFAULT-VALUE}).")
  int maxEvictions;

  @Option(
      names = "--tenant-excess-factor",
      paramLabel = "K",
      defaultValue = "4",
      description =
          "Admission: a waiting tenant that sent more than K times the mean of what the other"
              + " waiting tenants sent (requests per unit of weight over about --max-queue-time)"
              + " waits behind them in every band, so one that sends far more than the others is"
              + " served with what they leave (docs/routing.md, \"A tenant that sends far more"
              + " than the others\"); 0: off, else >= 1 (default: ${DEFAULT-VALUE}).")
  double tenantExcessFactor;

  /** The token-rate limits these flags give. */
  TokenRateConfig tokenRates() {
    return tokenRates(tenantTokenRates, tenantTokenBurst, maxRateTenants);
  }

  /**
   * The token-rate limits of {@code --tenant-token-rate} values, {@code --tenant-token-burst} and
   * the tenants kept (also simulate's and bench fleet's flags, AdmissionCompareOptions).
   */
  static TokenRateConfig tokenRates(
      List<String> tenantTokenRates, String tenantTokenBurst, int maxRateTenants) {
    double defaultRate = 0;
    boolean defaultSet = false;
    Map<String, Double> rates = new LinkedHashMap<>();
    for (String v : tenantTokenRates) {
      int eq = v.lastIndexOf('=');
      String name = eq < 0 ? null : v.substring(0, eq).strip();
      String num = eq < 0 ? v.strip() : v.substring(eq + 1).strip();
      double r;
      try {
        r = Double.parseDouble(num);
      } catch (NumberFormatException x) {
        throw new IllegalArgumentException(
            "--tenant-token-rate " + v + ": TOKENS_PER_S must be a number");
      }
      if (name == null) {
        if (defaultSet) {
          throw new IllegalArgumentException(
              "--tenant-token-rate " + v + ": a default rate was given already");
        }
        defaultSet = true;
        defaultRate = r;
      } else if (name.isEmpty()) {
        throw new IllegalArgumentException("--tenant-token-rate " + v + ": NAME is empty");
      } else {
        rates.put(name, r);
      }
    }
    if (defaultSet && !(defaultRate > 0)) {
      throw new IllegalArgumentException(
          "--tenant-token-rate " + defaultRate + ": the rate must be > 0");
    }
    return new TokenRateConfig(
        defaultRate, rates, duration("--tenant-token-burst", tenantTokenBurst), maxRateTenants);
  }

  /** How often one request may be evicted: 0 without --evict-lower-bands. */
  private int evictions() {
    if (maxEvictions < 1) {
      throw new IllegalArgumentException("--max-evictions must be >= 1, got " + maxEvictions);
    }
    return evictLowerBands ? maxEvictions : 0;
  }

  /** The configuration these flags give. */
  AdmissionConfig config() {
    Map<String, Double> weights = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : tenantWeights.entrySet()) {
      try {
        weights.put(e.getKey(), Double.parseDouble(e.getValue()));
      } catch (NumberFormatException x) {
        throw new IllegalArgumentException(
            "--tenant-weight " + e.getKey() + "=" + e.getValue() + ": W must be a number");
      }
    }
    AdmissionConfig.TenantSource from =
        switch (tenantFrom.toLowerCase(Locale.ROOT)) {
          case "key" -> AdmissionConfig.TenantSource.KEY;
          case "header" -> AdmissionConfig.TenantSource.HEADER;
          case "user" -> AdmissionConfig.TenantSource.USER;
          default ->
              throw new IllegalArgumentException(
                  "--tenant-from must be key, header or user, got '" + tenantFrom + "'");
        };
    try {
      return new AdmissionConfig(
          maxQueueDepth,
          duration("--max-queue-time", maxQueueTime),
          starvationLimit,
          from,
          weights,
          defaultDecodeTokens,
          maxTenantLabels,
          tokenRates(),
          evictions(),
          tenantExcessFactor);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("admission flags: " + e.getMessage(), e);
    }
  }

  /** A duration as {@code 500ms}, {@code 30s}, {@code 2m} (a bare number: seconds). */
  static Duration duration(String flag, String v) {
    String s = v.trim().toLowerCase(Locale.ROOT);
    long unit = 1000;
    if (s.endsWith("ms")) {
      unit = 1;
      s = s.substring(0, s.length() - 2);
    } else if (s.endsWith("s")) {
      s = s.substring(0, s.length() - 1);
    } else if (s.endsWith("m")) {
      unit = 60_000;
      s = s.substring(0, s.length() - 1);
    }
    try {
      long n = Long.parseLong(s.trim());
      if (n <= 0) throw new NumberFormatException();
      return Duration.ofMillis(Math.multiplyExact(n, unit));
    } catch (NumberFormatException | ArithmeticException e) {
      throw new IllegalArgumentException(
          flag + " must be a positive duration such as 500ms, 30s or 2m, got '" + v + "'");
    }
  }
}
