package io.kvrouter.gateway;

import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Collection;
import java.util.function.Supplier;

/**
 * The gateway's Prometheus metrics, registered in the server's registry so that one {@code GET
 * /metrics} has both (names and labels: docs/gateway.md). Thread-safe (the Prometheus client's data
 * points are).
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
  final Histogram predictionError;
  final Counter predictions;
  final Counter promptMismatch;

  GatewayMetrics(PrometheusRegistry r, Supplier<Collection<EngineState>> engines) {
    requests =
        Counter.builder()
            .name("kvrouter_gateway_requests_total")
            .help(
                "Client requests answered, by model, engine (instance id, none when no engine"
                    + " answered), HTTP status and the attempt that answered")
            .labelNames("model", "engine", "status", "attempt")
            .register(r);
    attemptFailures =
        Counter.builder()
            .name("kvrouter_gateway_attempt_failures_total")
            .help("Attempts that failed before the first byte, by model, engine and reason")
            .labelNames("model", "engine", "reason")
            .register(r);
    retries =
        Counter.builder()
            .name("kvrouter_gateway_retries_total")
            .help("Requests sent to another engine after a failed attempt")
            .labelNames("model")
            .register(r);
    ttft =
        Histogram.builder()
            .name("kvrouter_gateway_time_to_first_token_seconds")
            .help("From the request's arrival to the first token written to the client")
            .labelNames("model")
            .classicOnly()
            .classicUpperBounds(SECONDS)
            .register(r);
    itl =
        Histogram.builder()
            .name("kvrouter_gateway_inter_token_latency_seconds")
            .help("Between consecutive streamed chunks written to the client")
            .labelNames("model")
            .classicOnly()
            .classicUpperBounds(SECONDS)
            .register(r);
    stage =
        Histogram.builder()
            .name("kvrouter_gateway_stage_seconds")
            .help(
                "Time per stage of a request: parse (body to fields), tokenize (render and"
                    + " tokenize), route (hash, match, choose; KvRouter.route), upstream (send to"
                    + " the engine until its first byte)")
            .labelNames("stage")
            .classicOnly()
            .classicUpperBounds(STAGE_SECONDS)
            .register(r);
    parseStage = stage.labelValues("parse");
    tokenizeStage = stage.labelValues("tokenize");
    routeStage = stage.labelValues("route");
    upstreamStage = stage.labelValues("upstream");
    staleResends =
        Counter.builder()
            .name("kvrouter_gateway_stale_connection_resends_total")
            .help(
                "Requests sent again on a new connection because the pooled one expired as it was"
                    + " handed out (not the engine's failure)")
            .register(r);
    openStreams =
        Gauge.builder()
            .name("kvrouter_gateway_open_streams")
            .help("Responses being relayed to clients now")
            .register(r);
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
    predictionError =
        Histogram.builder()
            .name("kvrouter_prefix_prediction_error_tokens")
            .help(
                "Cached prompt tokens the engine reported minus those the router predicted (capped"
                    + " by what the engine can report), per request")
            .labelNames("model", "engine")
            .classicOnly()
            .classicUpperBounds(ERROR_TOKENS)
            .register(r);
    predictions =
        Counter.builder()
            .name("kvrouter_prefix_prediction_total")
            .help(
                "Requests whose predicted overlap was compared with the engine's cached_tokens, by"
                    + " outcome: exact, engine_fewer, engine_more")
            .labelNames("model", "engine", "outcome")
            .register(r);
    promptMismatch =
        Counter.builder()
            .name("kvrouter_prefix_prediction_prompt_mismatch_total")
            .help(
                "Requests whose engine counted other prompt_tokens than the gateway tokenized (a"
                    + " tokenizer or chat template mismatch)")
            .labelNames("model", "engine")
            .register(r);
  }

  /**
   * Drops the series of engines that are gone: every per-engine series (labels model, engine first)
   * for which {@code keep(model, engine)} is false. The health round calls it (Gateway.prune).
   */
  void retain(java.util.function.BiPredicate<String, String> keep) {
    java.util.function.Function<java.util.List<String>, Boolean> gone =
        l -> !keep.test(l.get(0), l.get(1));
    requests.removeIf(gone);
    attemptFailures.removeIf(gone);
    predictionError.removeIf(gone);
    predictions.removeIf(gone);
    promptMismatch.removeIf(gone);
  }
}
