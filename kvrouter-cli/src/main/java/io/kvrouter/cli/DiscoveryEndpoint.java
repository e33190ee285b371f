package io.kvrouter.cli;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.discovery.DiscoveredEngine;
import io.kvrouter.discovery.DiscoveryConfig;
import io.kvrouter.discovery.DiscoveryStatus;
import io.kvrouter.discovery.KubernetesDiscovery;
import io.kvrouter.server.ServerExtension;
import io.kvrouter.server.ServerHost;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What {@code --discovery kubernetes} adds to a server: {@code GET /discovery} (the discovery's
 * status and engines), its metrics, and its part of {@code GET /ready}; and it stops the discovery
 * when the server stops.
 *
 * <pre>
 * Implementation notes
 *
 * Given to the server (or the gateway) before it starts; routing() runs while the server is
 * built, keeps the ServerHost (the serve sink registers through it) and makes the metrics. The
 * discovery is started after the server (its sink needs the running server) and attached; until
 * then status() is null and /ready says the discovery is starting. discovery and host are
 * volatile: written once by the starting thread, read by request threads. notReadyReason holds
 * /ready back until the first full list of the pods is done and found at least one engine; while
 * the API server cannot be reached after that, the engines last known keep the server ready (the
 * status says disconnected). close() (the server's stop, after its requests finished) stops
 * watching; the engines stay registered until the server closes its indexes.
 * </pre>
 */
final class DiscoveryEndpoint implements ServerExtension {
  private static final JsonFactory JSON = new JsonFactory();

  private final DiscoveryConfig config;
  private volatile @Nullable KubernetesDiscovery discovery; // null until attached
  private volatile @Nullable ServerHost host; // null until routing()
  private volatile @Nullable DiscoveryMetrics metrics; // null until routing()

  DiscoveryEndpoint(DiscoveryConfig config) {
    this.config = config;
  }

  @Override
  public void routing(HttpRouting.Builder routing, ServerHost h) {
    host = h;
    metrics = new DiscoveryMetrics(h.metricsRegistry(), this::status);
    routing.get("/discovery", this::get);
  }

  /** The server's host (set once the server is built). */
  ServerHost host() {
    return host;
  }

  /** The metrics the sinks count in (set once the server is built). */
  DiscoveryMetrics metrics() {
    return metrics;
  }

  /** The discovery, started after the server. */
  void attach(KubernetesDiscovery d) {
    discovery = d;
  }

  /** The discovery's status, or null before it started. */
  DiscoveryStatus status() {
    KubernetesDiscovery d = discovery;
    return d == null ? null : d.status();
  }

  @Override
  public String notReadyReason() {
    DiscoveryStatus s = status();
    if (s == null) return "discovery: starting (" + config.describe() + ")";
    if (s.lastSync() == null) {
      return "discovery: the first list of the "
          + config.describe()
          + " has not succeeded yet"
          + (s.lastError() == null ? "" : ": " + s.lastError());
    }
    if (s.engines() == 0) {
      return "discovery: no engine among the Ready "
          + config.describe()
          + (s.skippedPods().isEmpty()
              ? ""
              : " (" + s.skippedPods().size() + " pod(s) skipped: GET /discovery says why)")
          + (s.lastError() == null ? "" : "; last error: " + s.lastError());
    }
    return null;
  }

  @Override
  public void close() {
    KubernetesDiscovery d = discovery;
    if (d != null) d.close();
  }

  private void get(ServerRequest req, ServerResponse res) {
    KubernetesDiscovery d = discovery;
    byte[] body = json(config, d == null ? null : d.status(), d == null ? List.of() : d.engines());
    res.header(HeaderNames.CONTENT_TYPE, "application/json");
    res.send(body);
  }

  /** {@code GET /discovery}'s body. */
  static byte[] json(DiscoveryConfig config, DiscoveryStatus s, List<DiscoveredEngine> engines) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("source", config.describe());
      g.writeBooleanField("started", s != null);
      if (s != null) {
        g.writeStringField("selector", s.selector());
        g.writeBooleanField("connected", s.connected());
        time(g, "last_sync", s.lastSync());
        time(g, "disconnected_since", s.disconnectedSince());
        g.writeStringField("last_error", s.lastError());
        time(g, "last_error_at", s.lastErrorAt());
        g.writeNumberField("draining", s.draining());
        g.writeNumberField("lists", s.lists());
        g.writeNumberField("invalid_pods", s.invalidPods());
        g.writeNumberField("add_failures", s.addFailures());
        g.writeObjectFieldStart("skipped_pods");
        for (Map.Entry<String, String> e : s.skippedPods().entrySet()) {
          g.writeStringField(e.getKey(), e.getValue());
        }
        g.writeEndObject();
      }
      g.writeArrayFieldStart("engines");
      for (DiscoveredEngine e : engines) {
        g.writeStartObject();
        g.writeStringField("id", e.id());
        g.writeStringField("pod", e.pod());
        g.writeNumberField("instance_id", e.instanceId());
        g.writeNumberField("dp_rank", e.dpRank());
        g.writeStringField("model_name", e.model());
        g.writeNumberField("block_size", e.blockSize());
        g.writeStringField("base_url", e.baseUrl());
        if (e.eventsEndpoint() != null) g.writeStringField("endpoint", e.eventsEndpoint());
        if (e.replayEndpoint() != null) {
          g.writeStringField("replay_endpoint", e.replayEndpoint());
        }
        if (e.topic() != null) g.writeStringField("topic", e.topic());
        g.writeStringField("role", e.role().wireName());
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    out.write('\n');
    return out.toByteArray();
  }

  private static void time(JsonGenerator g, String name, Instant t) throws IOException {
    if (t == null) {
      g.writeNullField(name);
    } else {
      g.writeStringField(name, t.toString());
    }
  }
}
