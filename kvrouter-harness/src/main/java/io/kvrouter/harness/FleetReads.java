package io.kvrouter.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;

/**
 * What {@code bench fleet} reads from its gateways over HTTP, besides the load: readiness, JSON
 * documents (/workers, /dump, an engine's /mock/cache), and the figures of their /metrics (events
 * applied, the router's event lag, sequence sync, failed attempts, admission queues).
 *
 * <pre>
 * Implementation notes
 *
 * Holds the bench's one HttpClient (shared with the load) and nothing else; every method is one
 * or more blocking GETs on the calling thread, after the load ended (awaitReady before it). A
 * Prometheus text line is "name{labels} value": a figure is the sum of the values of the lines
 * that start with a given prefix (name and "{" when labelled, so that another metric whose name
 * extends it does not count), over every gateway given. queueFigures also splits the admission
 * counters by the values of their band and tenant labels.
 * </pre>
 */
final class FleetReads {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpClient http;

  FleetReads(HttpClient http) {
    this.http = http;
  }

  private String text(String url) throws Exception {
    return http.send(
            HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString())
        .body();
  }

  /** GET {@code url} as JSON; anything but 200 is an IllegalStateException. */
  JsonNode json(String url) throws Exception {
    HttpResponse<byte[]> r =
        http.send(
            HttpRequest.newBuilder(URI.create(url)).build(),
            HttpResponse.BodyHandlers.ofByteArray());
    if (r.statusCode() != 200) throw new IllegalStateException(url + ": " + r.statusCode());
    return JSON.readTree(r.body());
  }

  /** Waits (up to 60 s) until the gateway's /ready is 200. */
  void awaitReady(String gateway) throws Exception {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (true) {
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create(gateway + "/ready")).build(),
              HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() == 200) return;
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(gateway + " not ready within 60 s: " + r.body());
      }
      Thread.sleep(20);
    }
  }

  /** The events the gateway's router applied, summed over its workers' ranks (/workers). */
  long eventsApplied(String gateway) throws Exception {
    long sum = 0;
    for (JsonNode w : json(gateway + "/workers")) {
      for (JsonNode r : w.path("ranks")) sum += r.path("zmq").path("events_applied").asLong();
    }
    return sum;
  }

  /**
   * The router's mean event lag, publish (the batch's ts) to applied, over all its ZMQ listeners:
   * kvrouter_zmq_event_lag_microseconds_total over kvrouter_zmq_event_lag_batches_total; -1 without
   * a batch.
   */
  double routerLagMs(String gateway) throws Exception {
    double micros = 0, batches = 0;
    for (String line : text(gateway + "/metrics").split("\n")) {
      if (line.startsWith("kvrouter_zmq_event_lag_microseconds_total{")) {
        micros += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      } else if (line.startsWith("kvrouter_zmq_event_lag_batches_total{")) {
        batches += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return batches == 0 ? -1 : micros / batches / 1000;
  }

  /**
   * Sequence sync figures summed over the gateways' /metrics, read once every gateway counts no
   * peer request in flight any more (every request was freed where it was routed, so a peer request
   * left over would be a stuck load: run.syncSettled stays false after 30 s).
   */
  void syncFigures(List<String> gateways, PolicyRun run) throws Exception {
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!(run.syncSettled = metricSum(gateways, "kvrouter_sync_peer_requests{") == 0)
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    run.syncApplied = (long) metricSum(gateways, "kvrouter_sync_changes_applied_total{");
    double lagSum = metricSum(gateways, "kvrouter_sync_lag_seconds_sum{");
    double lagCount = metricSum(gateways, "kvrouter_sync_lag_seconds_count{");
    run.syncLagMs = lagCount == 0 ? -1 : lagSum / lagCount * 1000;
  }

  /** The gateways' failed attempts by reason and their stale-connection resends. */
  void gatewayFailures(List<String> gateways, PolicyRun run) throws Exception {
    String failures = "kvrouter_gateway_attempt_failures_total{";
    for (String g : gateways) {
      for (String line : text(g + "/metrics").split("\n")) {
        if (!line.startsWith(failures)) continue;
        int at = line.indexOf("reason=\"");
        if (at < 0) continue;
        String reason = line.substring(at + 8, line.indexOf('"', at + 8));
        long v = (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        if (v > 0) run.attemptFailures.merge(reason, v, Long::sum);
      }
    }
    run.staleResends =
        (long) metricSum(gateways, "kvrouter_gateway_stale_connection_resends_total");
  }

  /**
   * The gateways' admission figures (bench fleet --admission): waits, and the queued and refused
   * requests by the band and tenant labels of kvrouter_gateway_queued_total and
   * kvrouter_gateway_queue_rejections_total, the evicted ones by those of
   * kvrouter_gateway_queue_evictions_total, and the rate-limited ones by the tenant label of
   * kvrouter_gateway_rate_limited_total.
   */
  void queueFigures(List<String> gateways, PolicyRun run) throws Exception {
    String queued = "kvrouter_gateway_queued_total{";
    long waits = 0;
    for (String g : gateways) {
      String metrics = text(g + "/metrics");
      waits += (long) metricSum(metrics, queued);
      waits += (long) metricSum(metrics, "kvrouter_gateway_holder_waits_total{");
      for (String line : metrics.split("\n")) {
        if (!line.startsWith(queued)) continue;
        long v = (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        if (v > 0) run.queuedByBandTenant.merge(bandTenant(line), v, Long::sum);
      }
      for (String line : metrics.split("\n")) {
        if (!line.startsWith("kvrouter_gateway_queue_rejections_total{")) continue;
        long v = (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        if (v > 0) run.refusedByBandTenant.merge(bandTenant(line), v, Long::sum);
      }
      for (String line : metrics.split("\n")) {
        if (!line.startsWith("kvrouter_gateway_queue_evictions_total{")) continue;
        long v = (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        if (v > 0) run.evictedByBandTenant.merge(bandTenant(line), v, Long::sum);
      }
      for (String line : metrics.split("\n")) {
        if (!line.startsWith("kvrouter_gateway_rate_limited_total{")) continue;
        long v = (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        if (v > 0) run.rateLimitedByTenant.merge(label(line, "tenant"), v, Long::sum);
      }
    }
    run.gatewayWaits = waits;
  }

  private static String bandTenant(String line) {
    return label(line, "band") + "/" + label(line, "tenant");
  }

  /** The value of label {@code name} in a Prometheus sample line, or "?" when it has none. */
  static String label(String line, String name) {
    int at = line.indexOf(name + "=\"");
    if (at < 0) return "?";
    int from = at + name.length() + 2;
    return line.substring(from, line.indexOf('"', from));
  }

  /** The sum over the gateways' /metrics of the samples whose line starts with {@code prefix}. */
  double metricSum(List<String> gateways, String prefix) throws Exception {
    double sum = 0;
    for (String g : gateways) sum += metricSum(text(g + "/metrics"), prefix);
    return sum;
  }

  /** The sum of the samples of Prometheus text {@code metrics} whose line starts with prefix. */
  static double metricSum(String metrics, String prefix) {
    double sum = 0;
    for (String line : metrics.split("\n")) {
      double v;
      try {
        v = Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      } catch (RuntimeException notANumber) {
        continue;
      }
      if (line.startsWith(prefix)) sum += v;
    }
    return sum;
  }
}
