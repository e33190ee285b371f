package io.kvrouter.gateway;

import com.github.benmanes.caffeine.cache.Ticker;
import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.http.Status;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webclient.api.WebClient;
import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.event.Worker;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerExtension;
import io.kvrouter.server.ServerHost;
import io.kvrouter.server.http.HttpPlumbing;
import io.kvrouter.tokenize.EngineApi;
import io.kvrouter.tokenize.EngineTokenizer;
import io.kvrouter.tokenize.TokenizerException;
import io.kvrouter.transport.nats.NatsConnections;
import io.nats.client.Connection;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.propagation.TextMapPropagator;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * The OpenAI-compatible front door (docs/gateway.md): a {@link KvRouterServer} that also serves
 * {@code /v1/chat/completions}, {@code /v1/completions}, {@code /v1/models}, {@code /tokenize} and
 * {@code /detokenize}, tokenizing each request as its engines do, routing it by KV overlap and
 * load, forwarding it unchanged and streaming the answer back.
 *
 * <pre>{@code
 * try (Gateway g = Gateway.start(KvRouterServer.Config.builder().port(0).build(),
 *     GatewayConfig.builder().model("qwen3", Path.of("/models/Qwen3-8B")).build())) {
 *   g.register(EngineSpec.parse("http://10.0.0.5:8000;events=tcp://10.0.0.5:5557"));
 *   System.out.println(g.url());
 * }
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * What lives where: this class starts and stops the gateway, registers static engines, adds the
 * routes and guards them (client API key, serving state, refusals as OpenAI errors), and holds
 * what the endpoints share (configuration, the proxy's WebClient, request ids, metrics). The
 * endpoints are Proxy (/v1/chat/completions, /v1/completions), ModelCatalog (the tokenizers,
 * what a request's model names, /v1/models) and TokenizeEndpoints (/tokenize, /detokenize);
 * Engines keeps what is known per engine, EngineHealth checks them.
 *
 * One process, one web server: start() starts a KvRouterServer with this gateway's Extension,
 * which adds the routes above beside the router's own; every request runs on its own virtual
 * thread (Helidon), which does the whole job blocking: read the body (the server's reader: body
 * limit, read deadline), parse it once (ClientRequest), tokenize (a Tokenizer per --model,
 * loaded at start, with its segment cache; or an engine's /tokenize), route with the index's
 * KvRouter, forward with one shared Helidon WebClient (blocking, pooled connections per engine,
 * a per-request read timeout = --engine-timeout-ms) and relay (Relay). The proxy's client and
 * the health checker's have separate connection pools (not Helidon's JVM-wide shared one): a
 * pooled connection's idle monitor gives up on it after as long as the read timeout of its last
 * request, and a request handed it at that moment fails; with one timeout per pool that is
 * --engine-timeout-ms of idleness, never a health check's 2 s. Nothing is shared between
 * requests but the router (thread-safe), the engine states (EngineState), the metrics and the
 * prediction windows.
 *
 * Bookkeeping: a request is routed once per attempt, and every attempt that routed frees its
 * request id exactly once, in a finally around the attempt, whatever happens to it; the next
 * attempt routes again with the failed instance excluded. markPrefillCompleted is called at the
 * first token written to the client (streams) or when the engine's answer starts (whole bodies).
 *
 * Admission (Admission, docs/gateway.md "Admission"): when the router answers AllBusy (every
 * engine of the model over the busy limits), Proxy queues the request in its model's FairQueue
 * instead of refusing it; each freed route and each ended prefill (markPrefillCompleted) grants
 * the next waiter when a rank has room by the router's busy limits (busyLimits, the server's
 * routing settings), and a routed request may wait for the busy rank holding its prefix
 * (Admission.ModelQueue.waitForHolder). Admission is made with the
 * metrics, in the Extension's routing; its queues of models gone are dropped by prune().
 * Token-rate limits (TenantRates, docs/gateway.md "Token-rate limits"), made there too when
 * --tenant-token-rate is set (rates is null otherwise), apply before routing whether or not the
 * model is saturated; their clock is the one start() was given (System::nanoTime but in tests).
 *
 * Readiness: the Extension's notReadyReason (GatewayReadiness) holds GET /ready at 503 until
 * every --model has an engine rank that answered its health check, is healthy, not draining,
 * has its KV events listener connected and can decode. An engine the gateway registers itself
 * (register: --engine, or a discovered one) is checked at once on the registering thread, and one
 * that does not answer is kept registered but out of routing, with a warning. drain() (Drains)
 * takes a rank out gently: no new requests, the ones in flight finish within a bound, then it is
 * unregistered.
 *
 * The health checker (EngineHealth) is one virtual thread: every --health-interval it GETs /health of every
 * registered base URL (each check on its own virtual thread, joined) and updates EngineState.
 * Before each round, prune() drops everything kept per engine (EngineState, engine tokenizers,
 * PredictionCheck's windows, metric series) of engines no longer registered; ModelIndex drops its
 * prediction counters of a rank when it is unregistered. close() stops it.
 * </pre>
 */
public final class Gateway implements AutoCloseable {
  static final Logger LOG = Logger.getLogger(Gateway.class.getName());
  static final HeaderName X_REQUEST_ID = HeaderNames.create("x-request-id");
  static final HeaderName X_WORKER = HeaderNames.create("x-kvrouter-worker");
  static final HeaderName X_DP_RANK = HeaderNames.create("x-kvrouter-dp-rank");

  /** vLLM's and SGLang's header naming the data-parallel rank a request is for. */
  static final HeaderName X_DATA_PARALLEL_RANK = HeaderNames.create("X-data-parallel-rank");

  static final HeaderName X_OVERLAP = HeaderNames.create("x-kvrouter-overlap-tokens");
  static final HeaderName X_ATTEMPTS = HeaderNames.create("x-kvrouter-attempts");
  static final HeaderName X_GROUP = HeaderNames.create("x-kvrouter-routing-group");
  static final HeaderName X_PATH = HeaderNames.create("x-kvrouter-path");
  static final HeaderName X_PATH_REASON = HeaderNames.create("x-kvrouter-path-reason");
  static final HeaderName X_PREFILL_WORKER = HeaderNames.create("x-kvrouter-prefill-worker");
  static final HeaderName X_PRIORITY = HeaderNames.create("x-kvrouter-priority");
  static final HeaderName X_TENANT = HeaderNames.create("x-kvrouter-tenant");
  private static final int MAX_TENANT_CHARS = 64;
  private static final String JSON = "application/json";

  final GatewayConfig config;
  private final ModelCatalog catalog;
  final Engines engines;
  final WebClient client;
  private final EngineHealth health;
  final @Nullable EngineQueueWatch queueWatch; // null: --busy-engine-waiting is off
  final LoraPlacement lora;
  private final Drains drains = new Drains();

  /** The JSON values the requests in flight hold (GatewayConfig.maxInflightValues). */
  final ValueBudget values;

  /** Where chat templates are rendered and prompts encoded: off the carrier threads. */
  final TokenizePool tokenizers = new TokenizePool(Runtime.getRuntime().availableProcessors());

  private final byte[] apiKeyHash;
  private final String idPrefix =
      "gw-" + Integer.toHexString(ThreadLocalRandom.current().nextInt() | 0x10000000) + "-";
  private final AtomicLong ids = new AtomicLong();
  private final AtomicLong staticIds = new AtomicLong();
  ServerHost host;
  GatewayMetrics metrics;
  PredictionCheck predictions;
  Admission admission;

  /** The per-tenant token-rate limits (TenantRates); null: none configured. */
  TenantRates rates;

  /** The clock of the token-rate limits (System::nanoTime; a test's own). */
  private final LongSupplier rateClock;

  /** The router's busy limits (the server's routing settings): whether a rank has room. */
  private RoutingSettings busyLimits = RoutingSettings.DEFAULTS;

  Sessions sessions; // null: session affinity off
  private KvRouterServer server;

  /** The tracer of the request spans (docs/observability.md); null: tracing off. */
  final Tracer tracer;

  /** Writes the traceparent of engine requests when tracing is on. */
  final TextMapPropagator propagator;

  private Gateway(GatewayConfig config, OpenTelemetry otel, LongSupplier rateClock) {
    this.config = config;
    this.rateClock = rateClock;
    this.values = new ValueBudget(config.maxInflightValues());
    boolean traced = otel != null && otel != OpenTelemetry.noop();
    this.tracer = traced ? otel.getTracer("io.kvrouter.gateway") : null;
    this.propagator =
        traced ? otel.getPropagators().getTextMapPropagator() : TextMapPropagator.noop();
    this.catalog = new ModelCatalog(config);
    this.engines = new Engines(config);
    // Each client keeps its own pool (Helidon shares one JVM-wide pool by default): a pooled
    // connection expires after as long idle as the read timeout of its last request, and a request
    // handed that connection in its last ~0.1 s fails with a SocketTimeoutException. A proxy
    // request on a connection a health check used last (2 s) failed so, as a false 504, in
    // bench fleet runs (docs/gateway.md, Pooled connections).
    this.client =
        WebClient.builder()
            .shareConnectionCache(false)
            .socketOptions(s -> s.connectTimeout(config.connectTimeout()))
            .readTimeout(config.engineTimeout())
            .followRedirects(false)
            .addService(new CloseUnframedAnswers())
            .build();
    this.health = new EngineHealth(this, config);
    this.queueWatch = config.busyEngineWaiting() > 0 ? new EngineQueueWatch(this, config) : null;
    this.lora = new LoraPlacement(config.loraPlacement(), client, config.engineApiKey());
    this.apiKeyHash = config.apiKey() == null ? null : sha256(config.apiKey());
  }

  /**
   * Starts a router server with the gateway's endpoints and the health checker.
   *
   * @throws KvRouterServer.StartException as {@link KvRouterServer#start} does
   * @throws TokenizerException when a model's tokenizer directory cannot be loaded
   */
  public static Gateway start(KvRouterServer.Config serverConfig, GatewayConfig config) {
    return start(serverConfig, config, null);
  }

  /**
   * Starts a gateway as {@link #start(KvRouterServer.Config, GatewayConfig)} does, with another
   * extension's routes before the gateway's (null: none): its {@link
   * ServerExtension#notReadyReason()} is asked before the gateway's, and it is closed after the
   * gateway's resources ({@link ServerExtension#of}).
   */
  public static Gateway start(
      KvRouterServer.Config serverConfig, GatewayConfig config, ServerExtension more) {
    return start(serverConfig, config, more, null);
  }

  /**
   * Starts a gateway as {@link #start(KvRouterServer.Config, GatewayConfig, ServerExtension)} does,
   * traced with {@code openTelemetry} (docs/observability.md, "Traces"): a server span per request,
   * continuing the client's {@code traceparent}, with a child span per stage (parse, tokenize,
   * route, queue wait, each upstream attempt, prediction check), and the engine request's {@code
   * traceparent} naming its upstream span. Null or {@link OpenTelemetry#noop()}: no spans; a
   * client's {@code traceparent} is still forwarded to the engine, with the client's trace id and a
   * new span id.
   */
  public static Gateway start(
      KvRouterServer.Config serverConfig,
      GatewayConfig config,
      ServerExtension more,
      OpenTelemetry openTelemetry) {
    return start(serverConfig, config, more, openTelemetry, System::nanoTime);
  }

  /**
   * Starts a gateway as {@link #start(KvRouterServer.Config, GatewayConfig, ServerExtension,
   * OpenTelemetry)} does, its token-rate limits (TenantRates) timed by {@code rateClock} (nanos):
   * for tests.
   */
  static Gateway start(
      KvRouterServer.Config serverConfig,
      GatewayConfig config,
      ServerExtension more,
      OpenTelemetry openTelemetry,
      LongSupplier rateClock) {
    Gateway g = new Gateway(config, openTelemetry, rateClock);
    g.busyLimits = serverConfig.routing();
    if (g.lora.enabled()) {
      // LoRA placement: the lora term joins each model router's cost of named terms
      RoutingSettings r = serverConfig.routing();
      Supplier<WorkerSelector> base =
          serverConfig.selector() != null
              ? serverConfig.selector()
              : () ->
                  WorkerSelector.costBased(
                      r.overlapWeight(), r.pressureWeight(), r.temperature(), r.seed());
      serverConfig = serverConfig.withSelector(g.lora.selector(base));
    }
    if (config.apiKey() != null && serverConfig.edge().authToken() == null) {
      // secure by default (docs/gateway.md, "Security"): without --auth-token, the router's
      // mutating endpoints (POST /register, /unregister, /events, /route ...) take the client API
      // key, so that a client without it cannot register its own engine or remove the real ones
      serverConfig = serverConfig.withAuthToken(config.apiKey());
      LOG.info(
          "--api-key without --auth-token: the router's mutating endpoints (POST /register,"
              + " /unregister, /events, /route, /requests/*) need 'Authorization: Bearer' with"
              + " the API key; set --auth-token for a separate admin token");
    }
    try {
      ServerExtension own = g.new Extension();
      g.server =
          KvRouterServer.start(
              serverConfig, more == null ? own : ServerExtension.of(more, own), openTelemetry);
    } catch (RuntimeException e) {
      g.closeResources();
      throw e;
    }
    if (g.sessions != null) {
      try {
        g.startSessionSync(serverConfig.effectiveSync());
      } catch (RuntimeException e) {
        g.close();
        throw e;
      }
    }
    g.health.start();
    if (g.queueWatch != null) g.queueWatch.start();
    return g;
  }

  /**
   * Shares the session bindings over the sync NATS server ({@code url}; null: sync is off, the
   * bindings stay this gateway's).
   */
  private void startSessionSync(String url) {
    if (url == null) return;
    Connection nc =
        NatsConnections.connect("--sync", url, "kvrouter-gateway-sessions-" + sessions.origin());
    sessions.sync(new SessionSync(nc, true, sessions.origin(), sessions));
  }

  /** The server (router endpoints, port, stop). */
  public KvRouterServer server() {
    return server;
  }

  public String url() {
    return server.url();
  }

  public int port() {
    return server.port();
  }

  /**
   * Registers a static engine (as {@code POST /register} with {@code base_url} would).
   *
   * @param defaultBlockSize used when the spec gives none
   * @throws IllegalArgumentException when the spec lacks a model and the gateway serves several, or
   *     the server refuses the registration, or the engine answers and does not serve the model's
   *     name (the message says why)
   */
  public RouterModel register(EngineSpec e, int defaultBlockSize) {
    String model = e.model();
    if (model == null) {
      if (config.models().size() != 1) {
        throw new IllegalArgumentException(
            "--engine " + e.baseUrl() + ": give ;model=NAME (the gateway serves several models)");
      }
      model = config.models().keySet().iterator().next();
    }
    long id = e.instanceId() >= 0 ? e.instanceId() : staticIds.incrementAndGet();
    RouterModel m;
    try {
      m =
          host.register(
              new ServerHost.Registration(
                  model,
                  null,
                  e.blockSize() > 0 ? e.blockSize() : defaultBlockSize,
                  id,
                  e.dpRank(),
                  e.baseUrl(),
                  e.events(),
                  e.replay(),
                  e.topic(),
                  e.role(),
                  e.clearScope()));
    } catch (ServerHost.HttpError x) {
      throw new IllegalArgumentException("--engine " + e.baseUrl() + ": " + x.getMessage(), x);
    }
    // what it is (its dialect, context, KV capacity), before the first request if it answers
    boolean answers = checkRegistered(e.baseUrl(), model);
    EngineApi learnt = answers ? engines.learn(e.baseUrl(), host).join() : null;
    String refused = engines.refusal(model);
    if (answers
        && learnt == null
        && refused != null
        && refused.startsWith("engine " + e.baseUrl() + " ")) {
      throw new IllegalArgumentException("--engine " + e.baseUrl() + ": " + refused);
    }
    if (answers && learnt == null) {
      LOG.warning(
          "engine "
              + e.baseUrl()
              + " does not answer yet: its API (dialect, context length, KV capacity) is learnt"
              + " when it does (at a health check)");
    }
    return m;
  }

  /**
   * Checks an engine just registered: one that does not answer {@code GET /health} stays
   * registered, out of routing until it answers a health check, and is named in a warning.
   *
   * @return whether it answered
   */
  private boolean checkRegistered(String baseUrl, String model) {
    EngineState s = engines.engine(baseUrl);
    String why = health.checkNow(s);
    if (why != null) {
      LOG.warning(
          "engine "
              + baseUrl
              + " (model "
              + model
              + ") is registered but does not answer: "
              + why
              + "; out of routing until it answers its health check (every "
              + config.healthInterval().toMillis()
              + " ms)");
    }
    return why == null;
  }

  /**
   * One round of health checks of every engine now, on the caller's thread, beside the periodic
   * rounds (tests drive rounds with it instead of waiting for the interval).
   */
  void checkHealthNow() {
    health.checkAll();
  }

  /**
   * Whether the engine at {@code baseUrl} answered its last health check (false for a URL never
   * checked, or failing).
   */
  public boolean answersHealthChecks(String baseUrl) {
    EngineState s = engines.get(baseUrl);
    return s != null && s.answered() && s.healthy();
  }

  /**
   * Takes one rank out gently: from now on no new request is routed to its engine (its base URL),
   * the requests in flight on the rank finish, for at most {@code bound}, then the rank is
   * unregistered (as {@code POST /unregister}; answers still streaming keep streaming).
   *
   * @param model the rank's model (in the default routing group)
   * @return completes once the rank is unregistered, with the number of its requests that were
   *     still in flight then (0: drained); at once with 0 when the rank is not registered;
   *     exceptionally when the gateway stops first or the unregistration fails
   */
  public CompletionStage<Integer> drain(String model, long instanceId, int dpRank, Duration bound) {
    return drains.drain(host, engines, model, null, new Worker(instanceId, dpRank), bound);
  }

  /** Stops the server (draining requests in flight within its grace period), then the gateway. */
  @Override
  public void close() {
    if (server != null) server.stop(); // calls Extension.close()
    else closeResources();
  }

  private void closeResources() {
    drains.close();
    tokenizers.close();
    if (sessions != null) sessions.close();
    health.stop();
    if (queueWatch != null) queueWatch.stop();
    catalog.close();
    // the pools are this gateway's own: close their idle connections (and monitor threads)
    client.closeResource();
    health.closeClient();
  }

  /** The routes, given to the server. */
  private final class Extension implements ServerExtension {
    @Override
    public void routing(HttpRouting.Builder r, ServerHost h) {
      host = h;
      metrics =
          new GatewayMetrics(
              h.metricsRegistry(), engines::states, config.admission().maxTenantLabels());
      engines.onAnswerTooLarge(path -> metrics.engineAnswersTooLarge.labelValues(path).inc());
      admission =
          new Admission(
              config.admission(),
              busyLimits,
              config.holderWait(),
              metrics.admission,
              Gateway.this::engineQueueFull);
      TokenRateConfig tr = config.admission().tokenRates();
      rates = tr.on() ? new TenantRates(tr, rateClock) : null;
      predictions = new PredictionCheck(metrics, config.warnInterval().toNanos());
      if (config.sessions().on()) {
        String origin = idPrefix.substring(0, idPrefix.length() - 1);
        sessions =
            new Sessions(config.sessions(), origin, h, h.metricsRegistry(), Ticker.systemTicker());
      }
      Proxy proxy = new Proxy(Gateway.this);
      route(
          r,
          Method.POST,
          "/v1/chat/completions",
          (q, s) -> proxy.handle(ClientRequest.Kind.CHAT, "/v1/chat/completions", q, s));
      route(
          r,
          Method.POST,
          "/v1/completions",
          (q, s) -> proxy.handle(ClientRequest.Kind.COMPLETION, "/v1/completions", q, s));
      TokenizeEndpoints tokens = new TokenizeEndpoints(Gateway.this);
      route(
          r,
          Method.GET,
          "/v1/models",
          (q, s) -> catalog.models(host, m -> engines.maxModelLen(host, m), q, s));
      route(r, Method.POST, "/tokenize", tokens::tokenize);
      route(r, Method.POST, "/detokenize", tokens::detokenize);
      r.any(
          "/v1/*",
          timed(
              "/v1/*",
              (q, s) -> {
                throw new OpenAiError(
                    404,
                    "invalid_request_error",
                    "unknown_url",
                    null,
                    "Unknown request URL: "
                        + q.prologue().method().text()
                        + " "
                        + q.path().path()
                        + ". This gateway serves POST /v1/chat/completions, POST /v1/completions"
                        + " and GET /v1/models.");
              }));
    }

    @Override
    public String notReadyReason() {
      return GatewayReadiness.reason(
          config.models().keySet(), host.models(), engines, health::wake);
    }

    @Override
    public EngineStatus engineStatus(String baseUrl) {
      EngineState s = engines.get(baseUrl);
      if (s == null) return null;
      String health =
          s.draining()
              ? "draining"
              : !s.answered() ? "unchecked" : s.healthy() ? "healthy" : "unhealthy";
      return new EngineStatus(health, s.breaker(System.nanoTime()).name().toLowerCase(Locale.ROOT));
    }

    @Override
    public int queueDepth(RouterModel model) {
      return admission == null ? -1 : admission.depth(model);
    }

    @Override
    public void registered(RouterModel model, RouterModel.Rank rank) {
      String url = rank.baseUrl();
      if (url == null) return;
      EngineApi known = engines.api(url);
      if (known != null) {
        engines.capacity(host, url, known, rank);
      } else {
        // not waited for: the probe sets the capacity itself when it answers, and completes its
        // future with null rather than failing when it does not (a health round asks again)
        CompletableFuture<EngineApi> unused = engines.learn(url, host);
      }
    }

    @Override
    public void close() {
      closeResources();
    }
  }

  /** One endpoint of the gateway; throws OpenAiError for its refusals. */
  @FunctionalInterface
  interface Endpoint {
    void handle(ServerRequest req, ServerResponse res) throws Exception;
  }

  private void route(HttpRouting.Builder r, Method m, String path, Endpoint e) {
    r.route(m, path, timed(path, e));
    r.any(
        path,
        timed(
            path,
            (q, s) -> {
              s.header(HeaderNames.ALLOW, m.text());
              throw new OpenAiError(
                  405,
                  "invalid_request_error",
                  "method_not_allowed",
                  null,
                  q.prologue().method().text()
                      + " is not allowed on "
                      + path
                      + "; use "
                      + m.text());
            }));
  }

  /**
   * {@code e} guarded, with its answer's writes timed (ServerHost.timedWrites): a client that does
   * not read its answer for the write timeout has its connection closed, counted in
   * kvrouter_http_write_timeouts_total{endpoint="{@code endpoint}"}; the relay then meets a failed
   * write, as when the client leaves, and aborts the engine's request and frees its route.
   */
  private Handler timed(String endpoint, Endpoint e) {
    return host.timedWrites(endpoint, guarded(e));
  }

  /** Client API key, serving state, and the mapping of refusals to OpenAI error answers. */
  private Handler guarded(Endpoint e) {
    return (req, res) -> {
      boolean close = HttpPlumbing.wantsClose(req);
      if (close) res.header(HeaderNames.CONNECTION, "close");
      try {
        if (!permits(req.headers().first(HeaderNames.AUTHORIZATION).orElse(null))) {
          res.header(HeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"kvrouter-gateway\"");
          throw new OpenAiError(
              401,
              "invalid_request_error",
              "invalid_api_key",
              null,
              "Incorrect API key provided: this gateway needs 'Authorization: Bearer <key>' with"
                  + " its client API key (--api-key).");
        }
        if (!host.serving()) {
          throw OpenAiError.unavailable(
              "not_ready",
              "the gateway is not serving (starting or stopping): GET /ready says why");
        }
        e.handle(req, res);
      } catch (OpenAiError x) {
        sendError(res, x);
      } catch (ServerHost.HttpError x) {
        if (x.connectionLost()) res.header(HeaderNames.CONNECTION, "close");
        try {
          sendError(
              res,
              new OpenAiError(
                  x.status(),
                  "invalid_request_error",
                  x.status() == 413 ? "request_too_large" : null,
                  null,
                  x.getMessage()));
        } catch (RuntimeException gone) {
          // the client is gone
        }
      }
      // Connection: close (whole answers and streams alike): Helidon would keep reading
      if (close) throw HttpPlumbing.closeAfterAnswer(req, res);
    };
  }

  static void sendError(ServerResponse res, OpenAiError x) {
    if (res.isSent()) return;
    res.status(Status.create(x.status));
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(x.body());
  }

  private boolean permits(String authorization) {
    if (apiKeyHash == null) return true;
    if (authorization == null || !authorization.regionMatches(true, 0, "bearer ", 0, 7)) {
      return false;
    }
    return MessageDigest.isEqual(apiKeyHash, sha256(authorization.substring(7).trim()));
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  // ------------------------------------------------------------------ shared by the endpoints

  /**
   * A request's priority band (Admission.band): the {@code x-kvrouter-priority} header when given
   * (an integer, lower first as vLLM's {@code priority}, or high, normal, low), else the body's
   * {@code priority}.
   *
   * @throws OpenAiError 400 for a header that is neither
   */
  int band(ServerRequest req, ClientRequest r) {
    String h = req.headers().first(X_PRIORITY).orElse(null);
    if (h == null) return Admission.band(r.priority);
    String v = h.trim();
    for (int b = 0; b < Admission.BANDS; b++) {
      if (Admission.BAND_NAMES[b].equalsIgnoreCase(v)) return b;
    }
    try {
      return Admission.band(Long.parseLong(v));
    } catch (NumberFormatException e) {
      throw OpenAiError.invalid(
          "invalid_priority",
          null,
          "header x-kvrouter-priority must be an integer (lower first, as vLLM's priority) or"
              + " high, normal or low; got '"
              + (v.length() > 40 ? v.substring(0, 40) + "..." : v)
              + "'");
    }
  }

  /**
   * A request's tenant, from where --tenant-from says (the API key as {@code key-} and the first 12
   * hex digits of its SHA-256, the {@code x-kvrouter-tenant} header, or the body's {@code user});
   * {@code anonymous} when it has none. At most 64 characters.
   */
  String tenant(ServerRequest req, ClientRequest r) {
    String t =
        switch (config.admission().tenantFrom()) {
          case HEADER -> req.headers().first(X_TENANT).orElse(null);
          case USER -> r.user;
          case KEY -> {
            String a = req.headers().first(HeaderNames.AUTHORIZATION).orElse(null);
            if (a == null || !a.regionMatches(true, 0, "bearer ", 0, 7)) yield null;
            yield "key-" + HexFormat.of().formatHex(sha256(a.substring(7).trim()), 0, 6);
          }
        };
    if (t == null || t.isBlank()) return "anonymous";
    t = t.strip();
    return t.length() > MAX_TENANT_CHARS ? t.substring(0, MAX_TENANT_CHARS) : t;
  }

  /** The request id: the client's {@code x-request-id} when usable, else a new one. */
  String requestId(ServerRequest req) {
    String id = req.headers().first(X_REQUEST_ID).orElse(null);
    if (id != null && id.length() <= 256 && !id.isEmpty()) {
      boolean ok = true;
      for (int i = 0; i < id.length() && ok; i++) {
        char c = id.charAt(i);
        ok = c > 0x20 && c < 0x7f && c != '/';
      }
      if (ok) return id;
    }
    return idPrefix + ids.incrementAndGet();
  }

  /** A fresh suffix for a client id that is already in flight. */
  long nextSuffix() {
    return ids.incrementAndGet();
  }

  /** What the body's {@code model} names; see {@link ModelCatalog#target}. */
  ModelCatalog.Target target(String model, String group) {
    return catalog.target(host, model, group);
  }

  /**
   * What the request's {@code model} names, after refusing a chat template the request brings
   * unless trusted (ModelCatalog.checkTemplate).
   */
  ModelCatalog.Target target(ClientRequest r, String group) {
    catalog.checkTemplate(r.chat);
    ModelCatalog.Target t = catalog.target(host, r.model, group);
    if (host.model(t.baseModel(), group) == null) {
      String why = engines.refusal(t.baseModel());
      if (why != null) throw OpenAiError.unavailable("no_engines", why);
    }
    return t;
  }

  /** The engine state of a base URL (made on first sight). */
  EngineState engine(String baseUrl) {
    return engines.engine(baseUrl);
  }

  /** An engine of {@code m} that may be used now, or null. */
  String anyUsableEngine(RouterModel m) {
    return engines.anyUsable(m);
  }

  /** The engine-delegated tokenizer of an engine (one per base URL and model name). */
  EngineTokenizer engineTokenizer(String baseUrl, String model) {
    return engines.tokenizer(baseUrl, model);
  }

  /** Code of the 502 of an engine answer refused for its size. */
  static final String ANSWER_TOO_LARGE = "engine_answer_too_large";

  /**
   * The 502 of an engine-delegated tokenization that failed: {@code engine_answer_too_large}
   * (counted) when the engine's answer passed EngineTokenizer.MAX_ANSWER_BYTES, else {@code
   * engine_tokenize_failed}.
   */
  OpenAiError engineTokenizeFailed(TokenizerException e) {
    if (e instanceof EngineTokenizer.AnswerTooLargeException t) {
      metrics.engineAnswersTooLarge.labelValues(t.path()).inc();
      return new OpenAiError(502, "server_error", ANSWER_TOO_LARGE, null, e.getMessage());
    }
    return new OpenAiError(502, "server_error", "engine_tokenize_failed", null, e.getMessage());
  }

  /**
   * Sends {@code body} with a request {@code make} builds and reads the answer's status line and
   * headers. When the pooled connection it went on expired as it was handed out (Helidon's idle
   * monitor gave up on it: Proxy.failure's "stale_connection") the engine is not at fault and has
   * answered nothing: the request is sent once more, on a connection of its own ({@code Connection:
   * close}), and counted in kvrouter_gateway_stale_connection_resends_total. The engine may have
   * read the first copy; its connection is closed, so vLLM (and the mock engine, at its next write)
   * aborts it.
   */
  HttpClientResponse submit(
      Supplier<HttpClientRequest> make, byte[] body, String what, String url) {
    try {
      return make.get().submit(body);
    } catch (RuntimeException e) {
      if (!Proxy.failure(e).reason().equals(Proxy.STALE)) throw e;
      metrics.staleResends.inc();
      LOG.log(
          Level.FINE,
          () -> what + " to " + url + ": a pooled connection expired as it was taken; sent again");
      return make.get().header(HeaderNames.CONNECTION, "close").submit(body);
    }
  }

  // ------------------------------------------------------------------ engines

  /** One round of health checks of every registered base URL (after pruning: {@link #prune}). */
  void checkAll() {
    health.checkAll();
  }

  /** The base URLs of the registered engines (EngineQueueWatch's rounds). */
  Set<String> engineUrls() {
    Set<String> urls = new HashSet<>();
    for (RouterModel m : host.models()) {
      for (RouterModel.Rank r : m.ranks()) {
        if (r.baseUrl() != null) urls.add(r.baseUrl());
      }
    }
    return urls;
  }

  /**
   * Whether the engine of rank {@code w} of {@code m} says its own queue is at the busy limit
   * (--busy-engine-waiting; false when that is off or the engine's queue is not known).
   */
  boolean engineQueueFull(RouterModel m, Worker w) {
    long limit = config.busyEngineWaiting();
    if (limit <= 0) return false;
    String url = m.baseUrl(w);
    return url != null && EngineQueueWatch.busy(engines.engine(url).engineWaiting(), limit);
  }

  /** Drops what is kept of engines no longer registered; see {@link Engines#prune}. */
  Set<String> prune() {
    admission.retain(host.models());
    return engines.prune(host, predictions, metrics);
  }

  /** Engine tokenizers kept (tests). */
  int engineTokenizerCount() {
    return engines.tokenizerCount();
  }

  /** The engine states (tests). */
  Collection<EngineState> engineStates() {
    return engines.states();
  }

  static Duration ms(long ms) {
    return Duration.ofMillis(ms);
  }

  /** For messages. */
  static String describe(Worker w) {
    return Long.toUnsignedString(w.workerId()) + (w.dpRank() == 0 ? "" : "/" + w.dpRank());
  }

  /** Options of one attempt. */
  static RouteOptions options(ModelCatalog.Target t, String cacheSalt, Set<Long> allowed) {
    return new RouteOptions(t.lora(), cacheSalt, allowed);
  }

  /** For switch exhaustiveness in Proxy. */
  static boolean routed(RouteDecision d) {
    return d instanceof RouteDecision.Routed;
  }
}
