package io.kvrouter.server;

import static io.kvrouter.server.http.HttpPlumbing.Access.ALWAYS;
import static io.kvrouter.server.http.HttpPlumbing.Access.MUTATING;
import static io.kvrouter.server.http.HttpPlumbing.Access.READ;
import static io.kvrouter.server.http.HttpPlumbing.param;
import static io.kvrouter.server.http.HttpPlumbing.send;

import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.http.Status;
import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.event.Worker;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.server.http.HttpPlumbing;
import io.kvrouter.server.http.Utf8;
import io.kvrouter.transport.kvevents.ClearScope;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.time.Duration;
import java.util.Locale;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The HTTP endpoints of {@code docs/service.md}. Each one parses its request ({@link Requests}),
 * acts on the {@link Registry}, an index's router or {@link EventIngest}, and writes the answer
 * ({@link JsonOut}); {@link HttpPlumbing} does the rest (routing, auth, bodies, errors, metrics).
 *
 * <pre>
 * Implementation notes
 *
 * Every endpoint runs on its request's virtual thread (Helidon) and holds no state of its own:
 * what is shared lives in the Registry, its ModelIndex objects and ServerMetrics. A request is
 * parsed whole before anything changes, so a bad one changes nothing. Endpoints send their own
 * success answer and return its status; refusals are ApiExceptions that HttpPlumbing answers.
 * /metrics is rendered by the MetricsRenderer (its own thread, one rendering shared by concurrent
 * scrapes) and sent whole.
 * </pre>
 */
final class Api {
  /** The header that names a {@code POST /events} batch for safe retries (docs/service.md). */
  static final HeaderName IDEMPOTENCY_KEY = HeaderNames.create("Idempotency-Key");

  private final HttpPlumbing http;
  private final Registry registry;
  private final ServerMetrics metrics;
  private final MetricsRenderer renderer;
  private final EventIngest events;
  private final Duration zmqConnectTimeout;
  private final Supplier<Readiness> readiness;
  private final Set<String> allowedEngineHosts;
  private final Dashboard dashboard;

  /** The tracer of the route span (docs/observability.md); null: tracing off. Set before start. */
  private Tracer tracer;

  Api(
      HttpPlumbing http,
      Registry registry,
      ServerMetrics metrics,
      EventIngest events,
      Duration zmqConnectTimeout,
      Supplier<Readiness> readiness,
      Set<String> allowedEngineHosts,
      Dashboard dashboard) {
    this.http = http;
    this.registry = registry;
    this.metrics = metrics;
    this.renderer = new MetricsRenderer(metrics::write);
    this.events = events;
    this.zmqConnectTimeout = zmqConnectTimeout;
    this.readiness = readiness;
    this.allowedEngineHosts = allowedEngineHosts;
    this.dashboard = dashboard;
  }

  /** Bounds the blocks held by routed requests in flight; null: unbounded. Set before start. */
  void routeBudget(RouteBudget b) {
    this.routeBudget = b;
  }

  private RouteBudget routeBudget;

  /** Traces {@code POST /route} with a {@code kvrouter.route} span under the server span. */
  void tracing(Tracer t) {
    this.tracer = t;
  }

  /**
   * Adds every endpoint, 405 for a known path with another method, then {@code extra}'s routes (a
   * ServerExtension's, or null), and 404 for the rest.
   */
  void routing(HttpRouting.Builder r, Consumer<HttpRouting.Builder> extra) {
    http.add(r, Method.POST, "/register", MUTATING, this::register);
    http.add(r, Method.POST, "/unregister", MUTATING, this::unregister);
    http.add(r, Method.GET, "/workers", READ, this::workers);
    http.add(r, Method.POST, "/query", READ, this::query);
    http.add(r, Method.POST, "/query_by_hash", READ, this::queryByHash);
    http.add(r, Method.POST, "/route", MUTATING, this::route);
    http.add(r, Method.POST, "/requests/{id}/prefill_complete", MUTATING, this::prefillComplete);
    http.add(r, Method.POST, "/requests/{id}/free", MUTATING, this::free);
    http.add(r, Method.POST, "/events", MUTATING, this::events);
    http.add(r, Method.GET, "/dump", READ, this::dump);
    http.add(r, Method.GET, "/health", ALWAYS, this::health);
    http.add(r, Method.GET, "/ready", ALWAYS, this::ready);
    http.add(r, Method.GET, "/metrics", ALWAYS, this::metrics);
    // the page holds no data; what it shows comes from /dashboard/data, guarded as the admin
    // endpoints are (docs/observability.md, "Dashboard")
    http.add(r, Method.GET, "/dashboard", READ, dashboard::page);
    http.add(r, Method.GET, "/dashboard/data", MUTATING, dashboard::data);
    if (extra != null) extra.accept(r);
    http.addUnmatched(r);
  }

  // ------------------------------------------------------------------ registration

  private int register(ServerRequest req, ServerResponse res) throws IOException {
    Requests.Register r = Requests.register(http.body(req));
    checkHost(r.baseUrl());
    ModelIndex m = registry.register(r, zmqConnectTimeout);
    Registration now = m.registrations.get(r.worker());
    if (now == null) {
      // with NATS, another replica's /unregister of the same rank was applied right after ours
      throw ApiException.conflict(
          "rank registered, then unregistered by a concurrent /unregister before this answer");
    }
    return send(res, 201, JsonOut.registration(m, now));
  }

  /**
   * Registers one rank as {@code POST /register} does, without waiting longer than {@code
   * connectWait} for its engine (the warm start registers every dumped rank this way).
   */
  ModelIndex register(
      ModelKey key,
      int blockSize,
      Worker w,
      String endpoint,
      String replay,
      String topic,
      int engineBlockSize,
      long capacityBlocks,
      String baseUrl,
      EngineRole role,
      ClearScope clearScope,
      KvSource kvSource,
      Duration connectWait) {
    return registry.register(
        new Requests.Register(
            key,
            blockSize,
            w,
            endpoint,
            replay,
            topic,
            engineBlockSize,
            capacityBlocks,
            BaseUrls.check(baseUrl),
            role,
            clearScope,
            kvSource),
        connectWait);
  }

  /**
   * A 403 when an allow-list is set (--allowed-engine-hosts) and {@code baseUrl}'s host is not in
   * it.
   */
  private void checkHost(String baseUrl) {
    if (baseUrl == null || allowedEngineHosts.isEmpty()) return;
    String host = URI.create(baseUrl).getHost();
    if (host != null && allowedEngineHosts.contains(host.toLowerCase(Locale.ROOT))) return;
    metrics.registrationRefused("host_not_allowed");
    throw new ApiException(
        403,
        "base_url: host '"
            + host
            + "' is not among the hosts engines may be registered at (--allowed-engine-hosts);"
            + " nothing was registered");
  }

  private int unregister(ServerRequest req, ServerResponse res) throws IOException {
    Requests.Unregister u = Requests.unregister(http.body(req));
    return send(res, 200, JsonOut.removed(registry.unregister(u)));
  }

  /** Unregisters as {@code POST /unregister} does; returns how many ranks were removed. */
  int unregister(Requests.Unregister u) {
    return registry.unregister(u).size();
  }

  /** The body of a request, as the endpoints read it (for a ServerExtension). */
  byte[] body(ServerRequest req) throws IOException {
    return http.body(req);
  }

  /** See {@link HttpPlumbing#watchClient}. */
  boolean watchClient(Runnable onGone) {
    return http.watchClient(onGone);
  }

  /** See {@link HttpPlumbing#timedWrites}. */
  Handler timedWrites(String endpoint, Handler h) {
    return http.timedWrites(endpoint, h);
  }

  /** See {@link HttpPlumbing#writesIdle}. */
  void writesIdle() {
    http.writesIdle();
  }

  /**
   * The {@code routing_group} query parameter, or Dynamo's {@code tenant_id} for it (null when
   * neither is given); a 400 when both are given and disagree, as in bodies.
   */
  private static String groupParam(ServerRequest req) {
    String group = param(req, "routing_group");
    String tenant = param(req, "tenant_id");
    if (group != null && tenant != null && !group.equals(tenant)) {
      throw ApiException.badRequest(
          "routing_group and tenant_id (its Dynamo name) disagree: '"
              + group
              + "' vs '"
              + tenant
              + "'");
    }
    return group != null ? group : tenant;
  }

  private int workers(ServerRequest req, ServerResponse res) {
    Requests.Filter f = Requests.filter(param(req, "model_name"), groupParam(req));
    return send(res, 200, JsonOut.workers(registry.indexes(f)));
  }

  // ------------------------------------------------------------------ queries and routing

  private int query(ServerRequest req, ServerResponse res) throws IOException {
    Requests.Query q = Requests.query(http.body(req));
    ModelIndex m = registry.require(q.key());
    long[] hashes = m.localHashes(q.tokens(), q.loraName(), q.cacheSalt());
    return send(res, 200, JsonOut.scores(m.findMatches(hashes), m.findTiered(hashes), m.blockSize));
  }

  private int queryByHash(ServerRequest req, ServerResponse res) throws IOException {
    Requests.HashQuery q = Requests.queryByHash(http.body(req));
    ModelIndex m = registry.require(q.key());
    return send(
        res,
        200,
        JsonOut.scores(m.findMatches(q.localHashes()), m.findTiered(q.localHashes()), m.blockSize));
  }

  private int route(ServerRequest req, ServerResponse res) throws IOException {
    Requests.Route q = Requests.route(http.body(req));
    ModelIndex m = registry.require(q.key());
    if (routeBudget != null) routeBudget.check(m, q.tokens().length / m.blockSize, res);
    Span span = tracer == null ? null : routeSpan(q, m);
    RouteDecision d;
    m.samplePrompt(q.tokens(), q.options().loraName(), q.options().namespace());
    try {
      d = m.router.route(q.requestId(), q.tokens(), q.options());
    } catch (IllegalArgumentException e) {
      if (span != null) span.setStatus(StatusCode.ERROR, e.getMessage()).end();
      throw ApiException.conflict(e.getMessage());
    }
    if (span != null) {
      RouteSpans.decision(span, d);
      span.end();
    }
    switch (d) {
      case RouteDecision.Routed r -> {
        metrics.routed(m.key, r.worker().workerId(), r.worker().dpRank());
        dashboard.sampler().routed(m, r.worker(), q.tokens().length, r.overlapTokens());
        return send(res, 200, JsonOut.routed(q.requestId(), r));
      }
      case RouteDecision.AllBusy b -> {
        metrics.routeRejected(m.key, "all_busy");
        return send(res, 503, JsonOut.allBusy(m.key, b));
      }
      case RouteDecision.NoWorkers n -> {
        metrics.routeRejected(m.key, "no_workers");
        throw new ApiException(
            503,
            "no registered worker of "
                + m.key.describe()
                + " is allowed by allowed_instances; nothing recorded");
      }
    }
  }

  /** The route span of a traced {@code POST /route}, a child of the server span (current). */
  private Span routeSpan(Requests.Route q, ModelIndex m) {
    return tracer
        .spanBuilder("kvrouter.route")
        .setAttribute(REQUEST_ID, q.requestId())
        .setAttribute(MODEL, m.key.modelName())
        .setAttribute(PROMPT_TOKENS, q.tokens().length)
        .setAttribute(BLOCKS, q.tokens().length / Math.max(1, m.blockSize))
        .startSpan();
  }

  private static final AttributeKey<String> REQUEST_ID =
      AttributeKey.stringKey("kvrouter.request_id");
  private static final AttributeKey<String> MODEL = AttributeKey.stringKey("gen_ai.request.model");
  private static final AttributeKey<Long> PROMPT_TOKENS =
      AttributeKey.longKey("gen_ai.usage.input_tokens");
  private static final AttributeKey<Long> BLOCKS = AttributeKey.longKey("kvrouter.blocks");

  private int prefillComplete(ServerRequest req, ServerResponse res) {
    return requestDone(req, res, true);
  }

  private int free(ServerRequest req, ServerResponse res) {
    return requestDone(req, res, false);
  }

  /**
   * Marks prefill complete or frees a request in every index that has it in flight, or only in
   * those the {@code model_name} and {@code routing_group} query parameters name.
   */
  private int requestDone(ServerRequest req, ServerResponse res, boolean prefill) {
    String id = req.path().pathParameters().get("id");
    Requests.Filter f = Requests.filter(param(req, "model_name"), groupParam(req));
    registry.requestDone(id, f, prefill);
    return send(res, 200, JsonOut.requestState(id, prefill ? "decoding" : "freed"));
  }

  // ------------------------------------------------------------------ events, dump, operations

  private int events(ServerRequest req, ServerResponse res) throws IOException {
    ModelKey key =
        events.target(
            Requests.name("model_name", param(req, "model_name")),
            Requests.name("routing_group", groupParam(req)));
    String idempotencyKey =
        events.idempotencyKey(req.headers().first(IDEMPOTENCY_KEY).orElse(null));
    byte[] body = http.bytes(req);
    String bad = Utf8.check(body, body.length);
    if (bad != null) {
      // as the batch decoder's refusals: counted as a decode error of a rejected batch
      metrics.decodeError();
      metrics.eventBatchRejected("decode_error");
      throw ApiException.badRequest("events: " + bad + "; nothing was applied");
    }
    int applied = events.ingest(key, body, idempotencyKey);
    return send(res, 200, JsonOut.applied(applied));
  }

  private int dump(ServerRequest req, ServerResponse res) throws IOException {
    HttpPlumbing.startJson(res);
    try (OutputStream out = res.outputStream()) {
      JsonOut.dump(out, registry.indexes());
    }
    return 200;
  }

  private int health(ServerRequest req, ServerResponse res) {
    return send(res, 200, JsonOut.health());
  }

  private int ready(ServerRequest req, ServerResponse res) {
    Readiness r = readiness.get();
    return send(res, r.ready() ? 200 : 503, JsonOut.ready(r, registry.indexes().size()));
  }

  private int metrics(ServerRequest req, ServerResponse res) throws IOException {
    // rendered off the carrier threads, shared by concurrent scrapes, then written whole with no
    // lock held (MetricsRenderer; issue 31, #7)
    byte[] body = renderer.render();
    res.status(Status.OK_200);
    res.header(HeaderNames.CONTENT_TYPE, metrics.contentType());
    res.send(body);
    return 200;
  }
}
