package io.kvrouter.gateway;

import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.BiPredicate;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The gateway's Prometheus metrics, registered in the server's registry so that one {@code GET
 * /metrics} has both (names and labels: docs/gateway.md). Thread-safe (the Prometheus client's data
 * points are).
 *
 * <pre>
 * Implementation notes
 *
 * Made once, when the gateway's routes are built; the fields are the stateful metrics the
 * request path updates (Proxy, PredictionCheck), the stage histogram's four data points looked up
 * once so a request pays no label lookup. The engine gauges are callbacks reading the gateway's
 * EngineStates at scrape time. retain() drops the per-engine series of engines that left, at
 * every health round.
 * </pre>
 */
final class GatewayMetrics {
  private static final double[] SECONDS = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60
  };
  private static final double[] STAGE_SECONDS = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 1
  };
  private static final double[] ERROR_TOKENS = {
    -8192, -4096, -2048, -1024, -512, -256, -128, -64, -32, -16, -1, 0, 16, 32, 64, 128, 256, 512,
    1024, 2048, 4096, 8192
  };

  final Counter requests;
  final Counter attemptFailures;
  final Counter retries;
  final Histogram ttft;
  final Histogram itl;
  final Histogram stage;

  /** The stage histogram's data points, looked up once (a request pays no label lookup). */
  final DistributionDataPoint parseStage;

  final DistributionDataPoint tokenizeStage;
  final DistributionDataPoint routeStage;
  final DistributionDataPoint upstreamStage;
  final Gauge openStreams;
  final Counter staleResends;
  final Counter engineMetricsFailures;

  /** Engine answers refused for their size, by the path they answered (a fixed set). */
  final Counter engineAnswersTooLarge;

  final PredictionMetrics prediction;
  final AdmissionMetrics admission;

  GatewayMetrics(
      PrometheusRegistry r, Supplier<Collection<EngineState>> engines, int maxTenantLabels) {
    requests =
        counter(
            r,
            "kvrouter_gateway_requests_total",
            "Client requests answered, by model, engine (instance id, none when no engine"
                + " answered), HTTP status and the attempt that answered",
            "model",
            "engine",
            "status",
            "attempt");
    attemptFailures =
        counter(
            r,
            "kvrouter_gateway_attempt_failures_total",
            "Attempts that failed before the first byte, by model, engine and reason",
            "model",
            "engine",
            "reason");
    retries =
        counter(
            r,
            "kvrouter_gateway_retries_total",
            "Requests sent to another engine after a failed attempt",
            "model");
    ttft =
        histogram(
            r,
            "kvrouter_gateway_time_to_first_token_seconds",
            "From the request's arrival to the first token written to the client",
            SECONDS,
            "model");
    itl =
        histogram(
            r,
            "kvrouter_gateway_inter_token_latency_seconds",
            "Between consecutive streamed chunks written to the client",
            SECONDS,
            "model");
    stage =
        histogram(
            r,
            "kvrouter_gateway_stage_seconds",
            "Time per stage of a request: parse (body to fields), tokenize (render and"
                + " tokenize), route (hash, match, choose; KvRouter.route), upstream (send to"
                + " the engine until its first byte)",
            STAGE_SECONDS,
            "stage");
    parseStage = stage.labelValues("parse");
    tokenizeStage = stage.labelValues("tokenize");
    routeStage = stage.labelValues("route");
    upstreamStage = stage.labelValues("upstream");
    engineMetricsFailures =
        counter(
            r,
            "kvrouter_gateway_engine_metrics_failures_total",
            "Reads of an engine's /metrics for its queue (--busy-engine-waiting) that failed or"
                + " found no queue gauge; the engine then counts as not busy");
    staleResends =
        counter(
            r,
            "kvrouter_gateway_stale_connection_resends_total",
            "Requests sent again on a new connection because the pooled one expired as it was"
                + " handed out (not the engine's failure)");
    engineAnswersTooLarge =
        counter(
            r,
            "kvrouter_gateway_engine_answers_too_large_total",
            "Engine answers read whole (its probe, /tokenize, /detokenize, engine tokenization)"
                + " refused because they were longer than 32 MiB, by the path answered",
            "path");
    openStreams =
        Gauge.builder()
            .name("kvrouter_gateway_open_streams")
            .help("Responses being relayed to clients now")
            .register(r);
    registerEngineGauges(r, engines);
    prediction = new PredictionMetrics(r);
    admission = new AdmissionMetrics(r, maxTenantLabels);
  }

  /**
   * The admission queue's metrics, by model, priority band and tenant: the tenant label takes at
   * most {@code maxTenantLabels} distinct values (the first seen), the others are counted under
   * {@code other}, so client-chosen tenant names cannot grow the series without bound. Updated
   * under Admission's lock (the label set too).
   */
  static final class AdmissionMetrics {
    static final String OTHER = "other";
    final Gauge depth;
    final Counter queued;
    final Histogram waited;
    final Counter rejections;
    final Counter cancelled;
    final Counter rateLimited;
    final Gauge holderWaiting;
    final Counter holderWaits;
    final Counter grants;
    final Counter holderReleases;
    final Counter evicted;
    private final int maxTenantLabels;
    private final Set<String> tenants = new HashSet<>();

    private AdmissionMetrics(PrometheusRegistry r, int maxTenantLabels) {
      this.maxTenantLabels = maxTenantLabels;
      depth =
          Gauge.builder()
              .name("kvrouter_gateway_queue_depth")
              .help("Requests waiting for a saturated model, by model, priority band and tenant")
              .labelNames("model", "band", "tenant")
              .register(r);
      queued =
          counter(
              r,
              "kvrouter_gateway_queued_total",
              "Requests that had to wait because every engine of their model was busy",
              "model",
              "band",
              "tenant");
      waited =
          histogram(
              r,
              "kvrouter_gateway_queue_wait_seconds",
              "How long a request waited in the admission queue (admitted, refused or left)",
              SECONDS,
              "model",
              "band",
              "tenant");
      rejections =
          counter(
              r,
              "kvrouter_gateway_queue_rejections_total",
              "Requests refused with 429 by the admission queue, by reason: queue_full,"
                  + " queue_timeout",
              "model",
              "band",
              "tenant",
              "reason");
      rateLimited =
          counter(
              r,
              "kvrouter_gateway_rate_limited_total",
              "Requests refused with 429 rate_limit_exceeded by their tenant's token-rate limit"
                  + " (--tenant-token-rate), by tenant",
              "tenant");
      holderWaiting =
          Gauge.builder()
              .name("kvrouter_gateway_holder_waiting")
              .help(
                  "Requests waiting for the busy engine that holds their prompt's prefix"
                      + " (docs/routing.md, Waiting for the prefix holder), by model")
              .labelNames("model")
              .register(r);
      holderWaits =
          counter(
              r,
              "kvrouter_gateway_holder_waits_total",
              "Requests that waited for the busy engine holding their prefix instead of starting"
                  + " on another, because that cost fewer prefill tokens",
              "model");
      holderReleases =
          counter(
              r,
              "kvrouter_gateway_holder_releases_total",
              "Requests that waited for their prefix holder and were sent back to route because"
                  + " the holder can no longer be waited for, by reason: holder_gone (unregistered),"
                  + " holder_at_request_limit",
              "model",
              "reason");
      grants =
          counter(
              r,
              "kvrouter_gateway_queue_grants_total",
              "Waiting requests granted a place, by what made room: prefill_end (an engine's"
                  + " first token of an answer), request_end (an answer ended or a route was"
                  + " freed), after_grant (room left after the last granted request routed), recheck (the health round found"
                  + " room no freed route announced: an expired request, a new engine),"
                  + " engine_queue (an engine's own queue drained below --busy-engine-waiting)",
              "model",
              "trigger");
      evicted =
          counter(
              r,
              "kvrouter_gateway_queue_evictions_total",
              "Requests an engine held, with nothing sent to their client yet, whose place a"
                  + " waiting request of a higher band took back (--evict-lower-bands): aborted"
                  + " upstream and queued again at the head of their band",
              "model",
              "band",
              "tenant");
      cancelled =
          counter(
              r,
              "kvrouter_gateway_queue_cancelled_total",
              "Requests whose client left while they waited in the admission queue",
              "model",
              "band",
              "tenant");
    }

    /** The label of a tenant: its name while fewer than the cap are in use, else "other". */
    String tenantLabel(String tenant) {
      if (tenants.contains(tenant)) return tenant;
      if (tenants.size() < maxTenantLabels && !tenant.equals(OTHER)) {
        tenants.add(tenant);
        return tenant;
      }
      return OTHER;
    }

    void entered(String model, int band, String tenant) {
      String b = Admission.BAND_NAMES[band];
      depth.labelValues(model, b, tenant).inc();
      queued.labelValues(model, b, tenant).inc();
    }

    void left(String model, int band, String tenant, long waitedNanos) {
      String b = Admission.BAND_NAMES[band];
      depth.labelValues(model, b, tenant).dec();
      waited.labelValues(model, b, tenant).observe(waitedNanos / 1e9);
    }

    void rejected(String model, int band, String tenant, String reason) {
      rejections.labelValues(model, Admission.BAND_NAMES[band], tenant, reason).inc();
    }

    void cancelled(String model, int band, String tenant) {
      cancelled.labelValues(model, Admission.BAND_NAMES[band], tenant).inc();
    }
  }

  /**
   * The {@code kvrouter_prefix_prediction_*} family (names pinned by DESIGN.md): what
   * PredictionCheck records of each request's predicted and reported cached tokens.
   */
  static final class PredictionMetrics {
    final Histogram error;
    final Counter outcomes;
    final Counter promptMismatch;

    private PredictionMetrics(PrometheusRegistry r) {
      error =
          histogram(
              r,
              "kvrouter_prefix_prediction_error_tokens",
              "Cached prompt tokens the engine reported minus those the router predicted (capped"
                  + " by what the engine can report), per request",
              ERROR_TOKENS,
              "model",
              "engine");
      outcomes =
          counter(
              r,
              "kvrouter_prefix_prediction_total",
              "Requests whose predicted overlap was compared with the engine's cached_tokens, by"
                  + " outcome: exact, engine_fewer, engine_more",
              "model",
              "engine",
              "outcome");
      promptMismatch =
          counter(
              r,
              "kvrouter_prefix_prediction_prompt_mismatch_total",
              "Requests whose engine counted other prompt_tokens than the gateway tokenized (a"
                  + " tokenizer or chat template mismatch)",
              "model",
              "engine");
    }
  }

  /** A counter registered in {@code r}, with these labels (none: no labelNames call). */
  private static Counter counter(PrometheusRegistry r, String name, String help, String... labels) {
    Counter.Builder b = Counter.builder().name(name).help(help);
    if (labels.length > 0) b.labelNames(labels);
    return b.register(r);
  }

  /** A classic histogram with these upper bounds, registered in {@code r}. */
  private static Histogram histogram(
      PrometheusRegistry r, String name, String help, double[] bounds, String... labels) {
    return Histogram.builder()
        .name(name)
        .help(help)
        .labelNames(labels)
        .classicOnly()
        .classicUpperBounds(bounds)
        .register(r);
  }

  /** Each engine's health and circuit breaker state, read at scrape time. */
  private static void registerEngineGauges(
      PrometheusRegistry r, Supplier<Collection<EngineState>> engines) {
    GaugeWithCallback.builder()
        .name("kvrouter_gateway_engine_healthy")
        .help("1 while an engine's health check answers, 0 while it is out of routing")
        .labelNames("base_url")
        .callback(
            cb -> {
              for (EngineState e : engines.get()) cb.call(e.healthy() ? 1 : 0, e.baseUrl);
            })
        .register(r);
    GaugeWithCallback.builder()
        .name("kvrouter_gateway_circuit_state")
        .help("An engine's circuit breaker: 0 closed, 1 half-open, 2 open")
        .labelNames("base_url")
        .callback(
            cb -> {
              long now = System.nanoTime();
              for (EngineState e : engines.get()) cb.call(e.breaker(now).ordinal(), e.baseUrl);
            })
        .register(r);
  }

  /**
   * Drops the series of engines that are gone: every per-engine series (labels model, engine first)
   * for which {@code keep(model, engine)} is false. The health round calls it (Gateway.prune).
   */
  void retain(BiPredicate<String, String> keep) {
    Function<List<String>, Boolean> gone = l -> !keep.test(l.get(0), l.get(1));
    requests.removeIf(gone);
    attemptFailures.removeIf(gone);
    prediction.error.removeIf(gone);
    prediction.outcomes.removeIf(gone);
    prediction.promptMismatch.removeIf(gone);
  }
}
