package io.kvrouter.server;

import io.kvrouter.server.http.HttpPlumbing;
import io.prometheus.metrics.core.datapoints.CounterDataPoint;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The service's Prometheus metrics ({@code kvrouter_*}, base units, counters ending in {@code
 * _total}) and the JVM's, in one registry per server, written in the text exposition format.
 *
 * <pre>
 * Implementation notes
 *
 * Counters and histograms the request path updates are stateful Prometheus metrics; the data
 * point of each label combination is looked up once and cached (httpCounts and httpTimes per
 * endpoint and status class, one findMatches point per index), so a request pays an atomic add,
 * not a label lookup. The metrics read at scrape time by callbacks live in their own classes, one
 * per subsystem, registered in this registry by the constructor: ZmqMetrics (the listeners),
 * NatsMetrics (the indexes' NATS replicas), SyncMetrics (sequence sync) and IndexMetrics (what
 * the indexes count, the registrations, requests in flight). Each keeps the last counts of a
 * stopped listener or replica while its index lives (retire(), called by the Registry and the
 * listeners' owners), so a rank registered again adds to them. When an index is dropped (its last
 * rank unregistered), forget() removes every series naming its model and routing group, here and
 * in the subsystems, so /metrics stays bounded by what is registered now (issue 31, #10); a model
 * registered again starts its counters from 0, which Prometheus reads as a counter reset.
 * Everything here is thread-safe.
 * </pre>
 */
final class ServerMetrics implements HttpPlumbing.Metrics {
  private static final String[] STATUS_CLASSES = {"1xx", "2xx", "3xx", "4xx", "5xx"};

  private final PrometheusRegistry registry = new PrometheusRegistry();

  /** The registry /metrics writes (a ServerExtension registers its own metrics in it). */
  PrometheusRegistry registry() {
    return registry;
  }

  private final PrometheusTextFormatWriter writer = PrometheusTextFormatWriter.create();

  private final Counter httpRequests =
      Counter.builder()
          .name("kvrouter_http_requests_total")
          .help("HTTP requests answered, by endpoint and status class")
          .labelNames("endpoint", "status_class")
          .register(registry);
  private final Histogram httpSeconds =
      Histogram.builder()
          .name("kvrouter_http_request_duration_seconds")
          .help("Time from routing a request to its handler until its answer was written")
          .labelNames("endpoint", "status_class")
          .classicOnly()
          .classicUpperBounds(
              0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
              2.5, 5, 10)
          .register(registry);
  private final Histogram findMatchesSeconds =
      Histogram.builder()
          .name("kvrouter_find_matches_duration_seconds")
          .help("Time of one index findMatches call for /query and /query_by_hash")
          .labelNames("model_name", "routing_group")
          .classicOnly()
          .classicUpperBounds(
              0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
              0.001, 0.0025, 0.005, 0.01)
          .register(registry);
  private final Counter routeDecisions =
      Counter.builder()
          .name("kvrouter_route_decisions_total")
          .help("Requests routed, by chosen worker rank")
          .labelNames("model_name", "routing_group", "instance_id", "dp_rank")
          .register(registry);
  private final Counter routeRejections =
      Counter.builder()
          .name("kvrouter_route_rejections_total")
          .help("Requests not routed: every allowed worker busy, or no worker to consider")
          .labelNames("model_name", "routing_group", "reason")
          .register(registry);
  private final Counter eventsReceived =
      Counter.builder()
          .name("kvrouter_events_received_total")
          .help("KV events accepted for application, by source")
          .labelNames("source")
          .register(registry);
  private final Counter eventBatchesRejected =
      Counter.builder()
          .name("kvrouter_event_batches_rejected_total")
          .help("Event batches refused whole (nothing applied), by reason")
          .labelNames("source", "reason")
          .register(registry);
  private final Counter decodeErrors =
      Counter.builder()
          .name("kvrouter_event_decode_errors_total")
          .help("Event payloads that could not be decoded, by source")
          .labelNames("source")
          .register(registry);

  private final Counter natsPublishDuplicates =
      Counter.builder()
          .name("kvrouter_nats_publish_duplicates_total")
          .help(
              "Events of POST /events batches that the NATS stream already held (a retry with"
                  + " the same Idempotency-Key): acknowledged, not stored again")
          .register(registry);

  private final Counter registrationLog =
      Counter.builder()
          .name("kvrouter_nats_registration_ops_total")
          .help(
              "Operations of the NATS registration log applied by this server (every replica's,"
                  + " its own included), by op (register, unregister, unknown, none) and outcome"
                  + " (applied; refused: a 409 or 404 every replica meets; malformed; skipped; failed)")
          .labelNames("op", "outcome")
          .register(registry);

  private final Counter clientResets =
      Counter.builder()
          .name("kvrouter_http_client_resets_total")
          .help(
              "Answers the client did not take whole: its connection reset or closed while the"
                  + " answer was written, by endpoint (not counted in kvrouter_http_requests_total)")
          .labelNames("endpoint")
          .register(registry);

  private final Counter writeTimeouts =
      Counter.builder()
          .name("kvrouter_http_write_timeouts_total")
          .help(
              "Connections closed because the client did not read its answer within the write"
                  + " timeout (--write-timeout-ms), by endpoint")
          .labelNames("endpoint")
          .register(registry);

  private final Counter registrationsRefused =
      Counter.builder()
          .name("kvrouter_registrations_refused_total")
          .help(
              "POST /register refused by a bound, by reason (limit: --max-registrations ranks are"
                  + " registered; host_not_allowed: base_url not in --allowed-engine-hosts)")
          .labelNames("reason")
          .register(registry);

  private final Map<String, CounterDataPoint[]> httpCounts = new ConcurrentHashMap<>();
  private final Map<String, DistributionDataPoint[]> httpTimes = new ConcurrentHashMap<>();
  private final CounterDataPoint httpEventsReceived;
  private final CounterDataPoint zmqEventsReceived;

  private final ZmqMetrics zmq;

  ServerMetrics(Supplier<Collection<ModelIndex>> indexes) {
    httpEventsReceived = eventsReceived.labelValues("http");
    zmqEventsReceived = eventsReceived.labelValues("zmq");
    decodeErrors.labelValues("http");
    zmq = new ZmqMetrics(registry, indexes);
    // these read the live indexes at scrape time only: nothing to keep or forget here
    new NatsMetrics(registry, indexes);
    new SyncMetrics(registry, indexes);
    new IndexMetrics(registry, indexes);
    JvmMetrics.builder().register(registry);
  }

  /** Registers the gauges of the request bodies being received (HttpPlumbing); call it once. */
  void bodies(HttpPlumbing http) {
    GaugeWithCallback.builder()
        .name("kvrouter_http_body_bytes_held")
        .help(
            "Bytes the request bodies being received hold now (their buffers), across all"
                + " connections")
        .callback(cb -> cb.call(http.bodyBytesHeld()))
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_http_body_bytes_budget")
        .help(
            "Most bytes request bodies may hold at once (--max-inflight-body-size); a body that"
                + " would grow past it gets 503")
        .callback(cb -> cb.call(http.bodyBytesBudget()))
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_http_bodies_reading")
        .help("Request bodies being received now, also those whose first byte has not come")
        .callback(cb -> cb.call(http.bodiesBeingRead()))
        .register(registry);
  }

  /** Keeps the counters of a listener that was stopped, so the counters stay monotonic. */
  void retire(ModelKey key, ZmqListener l) {
    zmq.retire(key, l);
  }

  /** {@code kvrouter_events_received_total{source="zmq"}}. */
  CounterDataPoint zmqEventsReceived() {
    return zmqEventsReceived;
  }

  /**
   * Removes every series that names the model and routing group of an index that was dropped (its
   * last rank unregistered): a model registered again starts its counters from 0.
   */
  void forget(ModelKey key) {
    zmq.forget(key);
    Function<List<String>, Boolean> named =
        labels -> labels.get(0).equals(key.modelName()) && labels.get(1).equals(key.routingGroup());
    findMatchesSeconds.remove(key.modelName(), key.routingGroup());
    routeDecisions.removeIf(named);
    routeRejections.removeIf(named);
  }

  /** The element-wise sum of two counter arrays of equal length (a new array). */
  static long[] sum(long[] a, long[] b) {
    long[] v = a.clone();
    for (int i = 0; i < v.length; i++) v[i] += b[i];
    return v;
  }

  /** The findMatches timer of one index. */
  DistributionDataPoint findMatches(ModelKey key) {
    return findMatchesSeconds.labelValues(key.modelName(), key.routingGroup());
  }

  /** Counts one answered HTTP request. */
  @Override
  public void http(String endpoint, int status, long nanos) {
    int c = Math.min(Math.max(status / 100, 1), 5) - 1;
    CounterDataPoint[] counts =
        httpCounts.computeIfAbsent(endpoint, e -> new CounterDataPoint[STATUS_CLASSES.length]);
    CounterDataPoint count = counts[c];
    if (count == null) counts[c] = count = httpRequests.labelValues(endpoint, STATUS_CLASSES[c]);
    count.inc();
    DistributionDataPoint[] times =
        httpTimes.computeIfAbsent(endpoint, e -> new DistributionDataPoint[STATUS_CLASSES.length]);
    DistributionDataPoint time = times[c];
    if (time == null) times[c] = time = httpSeconds.labelValues(endpoint, STATUS_CLASSES[c]);
    time.observe(nanos / 1e9);
  }

  @Override
  public void clientReset(String endpoint) {
    clientResets.labelValues(endpoint).inc();
  }

  @Override
  public void writeTimeout(String endpoint) {
    writeTimeouts.labelValues(endpoint).inc();
  }

  void registrationRefused(String reason) {
    registrationsRefused.labelValues(reason).inc();
  }

  void routed(ModelKey key, long instanceId, int dpRank) {
    routeDecisions
        .labelValues(
            key.modelName(),
            key.routingGroup(),
            Long.toUnsignedString(instanceId),
            Integer.toString(dpRank))
        .inc();
  }

  void routeRejected(ModelKey key, String reason) {
    routeRejections.labelValues(key.modelName(), key.routingGroup(), reason).inc();
  }

  void eventsReceived(int n) {
    httpEventsReceived.inc(n);
  }

  void registrationLog(String op, String outcome) {
    registrationLog.labelValues(op, outcome).inc();
  }

  void natsPublishDuplicates(int n) {
    if (n > 0) natsPublishDuplicates.inc(n);
  }

  void eventBatchRejected(String reason) {
    eventBatchesRejected.labelValues("http", reason).inc();
  }

  void decodeError() {
    decodeErrors.labelValues("http").inc();
  }

  /** The content type of {@link #write}. */
  String contentType() {
    return writer.getContentType();
  }

  /** Writes every metric in the Prometheus text format. */
  void write(OutputStream out) throws IOException {
    writer.write(out, registry.scrape());
  }
}
