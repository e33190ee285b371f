package io.kvrouter.gateway;

import com.github.benmanes.caffeine.cache.Ticker;
import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerRequest;
import io.kvrouter.event.Worker;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost;
import io.prometheus.metrics.core.datapoints.CounterDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Session affinity (docs/gateway.md, "Sessions"): reads a request's session key, tells the proxy
 * where its session is bound, records where each turn went, and shares the bindings with the other
 * gateways when they sync.
 *
 * <pre>
 * Implementation notes
 *
 * Holds the SessionConfig, the SessionTable (bounded, TTL) and, with --sync, the SessionSync
 * that publishes local bindings and applies remote ones (Sink, on the NATS dispatcher thread).
 * Proxy calls key() once per request, binding() before each attempt routes and routed() after an
 * attempt was routed (and answered() with a response id, previous_response_id mode). The metric
 * data points are looked up once: a turn pays no label lookup.
 *
 * Remote bindings name the engine by base URL: resolve() maps it to this gateway's rank of the
 * model (the one with that URL and dp rank), else to the worker id the publisher used (gateways
 * given the same --engine list or the same registrations agree on ids).
 * </pre>
 */
final class Sessions implements SessionSync.Sink, AutoCloseable {
  private final SessionConfig config;
  private final SessionTable table;
  private final @Nullable HeaderName header;
  private final String origin;
  private final ServerHost host;
  private volatile @Nullable SessionSync sync;

  private final CounterDataPoint newSessions;
  private final CounterDataPoint kept;
  private final CounterDataPoint moved;
  private final CounterDataPoint published;
  private final CounterDataPoint applied;
  private final CounterDataPoint refused;

  Sessions(
      SessionConfig config, String origin, ServerHost host, PrometheusRegistry r, Ticker ticker) {
    this.config = config;
    this.origin = origin;
    this.host = host;
    this.header = config.header() == null ? null : HeaderNames.create(config.header());
    Counter evictions =
        Counter.builder()
            .name("kvrouter_session_evictions_total")
            .help(
                "Sessions this gateway forgot because it held --session-max-keys of them (not"
                    + " those whose TTL ran out)")
            .register(r);
    this.table = new SessionTable(config.maxKeys(), config.ttl(), ticker, origin, evictions::inc);
    GaugeWithCallback.builder()
        .name("kvrouter_session_keys")
        .help("Sessions this gateway holds bound to an engine (at most --session-max-keys)")
        .callback(cb -> cb.call(table.size()))
        .register(r);
    Counter routes =
        Counter.builder()
            .name("kvrouter_session_routes_total")
            .help(
                "Routed turns of sessions: new (no binding yet), kept (on the session's engine),"
                    + " moved (elsewhere: unhealthy, busy, or outweighed in soft mode)")
            .labelNames("outcome")
            .register(r);
    newSessions = routes.labelValues("new");
    kept = routes.labelValues("kept");
    moved = routes.labelValues("moved");
    Counter sync =
        Counter.builder()
            .name("kvrouter_session_sync_total")
            .help(
                "Session bindings published to the other gateways, applied from them, or refused"
                    + " (a message that does not decode)")
            .labelNames("direction")
            .register(r);
    published = sync.labelValues("published");
    applied = sync.labelValues("applied");
    refused = sync.labelValues("refused");
  }

  /** Starts sharing the bindings over {@code s}. */
  void sync(SessionSync s) {
    this.sync = s;
  }

  SessionConfig config() {
    return config;
  }

  boolean hard() {
    return config.mode() == SessionConfig.Mode.HARD;
  }

  /**
   * The table key of the request's session, or null when it names none.
   *
   * @throws OpenAiError 400 when the key is longer than {@link SessionConfig#MAX_KEY_CHARS}
   */
  @Nullable String key(String model, ClientRequest req, ServerRequest sreq) {
    String k =
        switch (config.source()) {
          case HEADER -> sreq.headers().first(header).orElse(null);
          case USER -> req.user;
          case PREVIOUS_RESPONSE_ID -> req.previousResponseId;
        };
    if (k == null || k.isEmpty()) return null;
    if (k.length() > SessionConfig.MAX_KEY_CHARS) {
      String where =
          config.source() == SessionConfig.Source.HEADER
              ? "header " + config.header()
              : config.describeSource();
      throw OpenAiError.invalid(
          null,
          config.source() == SessionConfig.Source.HEADER ? null : config.describeSource(),
          "the session key ("
              + where
              + ") has "
              + k.length()
              + " characters; at most "
              + SessionConfig.MAX_KEY_CHARS
              + " are accepted");
    }
    return SessionTable.key(model, k);
  }

  /** Where the session of {@code key} is bound (a turn), or null. */
  SessionTable.@Nullable Binding binding(String key) {
    return table.get(key);
  }

  /**
   * An attempt of the session {@code key} was routed to {@code w} ({@code before}: the binding the
   * attempt saw): counts the turn, binds the session there and publishes a new binding.
   */
  void routed(
      String model,
      String key,
      Worker w,
      @Nullable String baseUrl,
      SessionTable.@Nullable Binding before) {
    if (before == null) newSessions.inc();
    else if (before.worker().equals(w)) kept.inc();
    else moved.inc();
    bind(model, key, w, baseUrl);
  }

  /** The answer of a turn routed to {@code w} has the response id {@code id}: bound there too. */
  void answered(String model, String id, Worker w, @Nullable String baseUrl) {
    if (id.isEmpty() || id.length() > SessionConfig.MAX_KEY_CHARS) return;
    bind(model, SessionTable.key(model, id), w, baseUrl);
  }

  private void bind(String model, String key, Worker w, @Nullable String baseUrl) {
    SessionTable.Binding b = table.bind(key, w, System.currentTimeMillis());
    SessionSync s = sync;
    if (b != null && s != null) {
      int cut = key.indexOf('\u0000');
      s.publish(model, key.substring(cut + 1), baseUrl, w.workerId(), w.dpRank(), b.stamp());
      published.inc();
    }
  }

  @Override
  public void apply(SessionSync.Wire m) {
    Worker w = resolve(m);
    if (table.bindRemote(SessionTable.key(m.model(), m.key()), w, m.stamp(), m.origin())) {
      applied.inc();
    }
  }

  @Override
  public void refused(String why) {
    refused.inc();
    Gateway.LOG.fine(() -> "a session binding from another gateway was refused: " + why);
  }

  /** This gateway's rank of the binding's engine, else the publisher's worker id. */
  private Worker resolve(SessionSync.Wire m) {
    if (m.baseUrl() != null) {
      for (RouterModel model : host.models()) {
        if (!model.modelName().equals(m.model())) continue;
        List<RouterModel.Rank> ranks = model.ranks();
        for (int i = 0, n = ranks.size(); i < n; i++) {
          RouterModel.Rank r = ranks.get(i);
          if (m.baseUrl().equals(r.baseUrl()) && r.worker().dpRank() == m.dpRank()) {
            return r.worker();
          }
        }
      }
    }
    return new Worker(m.workerId(), m.dpRank());
  }

  /** The table (tests). */
  SessionTable table() {
    return table;
  }

  /** This gateway's name in the bindings it publishes. */
  String origin() {
    return origin;
  }

  @Override
  public void close() {
    SessionSync s = sync;
    if (s != null) s.close();
  }
}
