package io.kvrouter.server;

import io.kvrouter.index.IndexStats;
import io.prometheus.metrics.core.datapoints.CounterDataPoint;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The service's Prometheus metrics ({@code kvrouter_*}, base units, counters ending in {@code
 * _total}) and the JVM's, in one registry per server, written in the text exposition format.
 *
 * <pre>
 * Implementation notes
 *
 * Counters and histograms the request path updates are stateful Prometheus metrics; the data
 * point of each label combination is looked up once and cached (httpPoints per endpoint and
 * status class, one findMatches point per index), so a request pays an atomic add, not a label
 * lookup. What the indexes already count (IndexStats: events by type and outcome, blocks held)
 * and the registrations are read by callbacks at scrape time from the live indexes; when the
 * Registry drops an index it adds its last IndexStats to retired, so those counters stay
 * monotonic when a model is registered again. Everything here is thread-safe.
 * </pre>
 */
final class ServerMetrics {
  private static final String[] STATUS_CLASSES = {"1xx", "2xx", "3xx", "4xx", "5xx"};

  private final PrometheusRegistry registry = new PrometheusRegistry();
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

  private final Map<String, CounterDataPoint[]> httpCounts = new ConcurrentHashMap<>();
  private final Map<String, DistributionDataPoint[]> httpTimes = new ConcurrentHashMap<>();
  private final Map<ModelKey, IndexStats> retired = new ConcurrentHashMap<>();
  private final CounterDataPoint httpEventsReceived;

  ServerMetrics(Supplier<Collection<ModelIndex>> indexes) {
    httpEventsReceived = eventsReceived.labelValues("http");
    decodeErrors.labelValues("http");
    CounterWithCallback.builder()
        .name("kvrouter_events_applied_total")
        .help(
            "KV events the indexes applied, by type and outcome (applied, or rejected because"
                + " the worker did not hold the parent block)")
        .labelNames("model_name", "routing_group", "type", "outcome")
        .callback(
            cb -> {
              for (Map.Entry<ModelKey, IndexStats> e : statsByKey(indexes.get()).entrySet()) {
                ModelKey k = e.getKey();
                IndexStats s = e.getValue();
                String m = k.modelName();
                String g = k.routingGroup();
                cb.call(s.storedEvents(), m, g, "stored", "applied");
                cb.call(s.parentMissing(), m, g, "stored", "parent_missing");
                cb.call(s.removedEvents(), m, g, "removed", "applied");
                cb.call(s.clearedEvents(), m, g, "cleared", "applied");
              }
            })
        .register(registry);
    CounterWithCallback.builder()
        .name("kvrouter_removed_blocks_missing_total")
        .help("Blocks named by Removed events that the worker did not hold (skipped)")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (Map.Entry<ModelKey, IndexStats> e : statsByKey(indexes.get()).entrySet()) {
                cb.call(
                    e.getValue().blocksMissing(),
                    e.getKey().modelName(),
                    e.getKey().routingGroup());
              }
            })
        .register(registry);
    CounterWithCallback.builder()
        .name("kvrouter_index_evicted_blocks_total")
        .help("(worker rank, block) pairs a bounded index dropped to stay within --max-blocks")
        .labelNames("model_name", "routing_group")
        .callback(
            cb ->
                statsByKey(indexes.get())
                    .forEach((k, s) -> cb.call(s.evictedBlocks(), k.modelName(), k.routingGroup())))
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_workers")
        .help("Registered worker ranks per model and routing group")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                cb.call(m.registrations.size(), m.key.modelName(), m.key.routingGroup());
              }
            })
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_blocks_indexed")
        .help("(worker rank, block) pairs held in the index per model and routing group")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                cb.call(
                    m.router.index().stats().blocksIndexed(),
                    m.key.modelName(),
                    m.key.routingGroup());
              }
            })
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_requests_in_flight")
        .help("Routed requests not yet freed (nor expired) per model and routing group")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                cb.call(m.router.inFlight(), m.key.modelName(), m.key.routingGroup());
              }
            })
        .register(registry);
    JvmMetrics.builder().register(registry);
  }

  private Map<ModelKey, IndexStats> statsByKey(Collection<ModelIndex> live) {
    Map<ModelKey, IndexStats> out = new java.util.TreeMap<>(retired);
    for (ModelIndex m : live) out.merge(m.key, m.router.index().stats(), IndexStats::plus);
    return out;
  }

  /** Remembers the counters of an index that is being dropped. */
  void retire(ModelIndex m) {
    retired.merge(m.key, m.router.index().stats(), IndexStats::plus);
  }

  /** The findMatches timer of one index. */
  DistributionDataPoint findMatches(ModelKey key) {
    return findMatchesSeconds.labelValues(key.modelName(), key.routingGroup());
  }

  /** Counts one answered HTTP request. */
  void http(String endpoint, int status, long nanos) {
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
