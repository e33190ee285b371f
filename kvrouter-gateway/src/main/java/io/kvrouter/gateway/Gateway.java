package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
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
import io.kvrouter.event.Worker;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerExtension;
import io.kvrouter.server.ServerHost;
import io.kvrouter.tokenize.EngineTokenizer;
import io.kvrouter.tokenize.Tokenizer;
import io.kvrouter.tokenize.TokenizerException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

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
 * The health checker is one virtual thread: every --health-interval it GETs /health of every
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
  private static final String JSON = "application/json";

  final GatewayConfig config;
  private final Map<String, Tokenizer> tokenizers;
  private final Map<String, EngineTokenizer> engineTokenizers = new ConcurrentHashMap<>();
  final ConcurrentHashMap<String, EngineState> engines = new ConcurrentHashMap<>();
  final WebClient client;
  private final WebClient healthClient;
  private final byte[] apiKeyHash;
  private final String idPrefix =
      "gw-" + Integer.toHexString(ThreadLocalRandom.current().nextInt() | 0x10000000) + "-";
  private final AtomicLong ids = new AtomicLong();
  private final AtomicLong staticIds = new AtomicLong();
  ServerHost host;
  GatewayMetrics metrics;
  PredictionCheck predictions;
  private KvRouterServer server;
  private Thread healthThread;
  private volatile boolean closed;

  private Gateway(GatewayConfig config) {
    this.config = config;
    Map<String, Tokenizer> toks = new LinkedHashMap<>();
    try {
      for (Map.Entry<String, Path> e : config.models().entrySet()) {
        if (e.getValue() != null) toks.put(e.getKey(), Tokenizer.load(e.getValue()));
      }
    } catch (RuntimeException e) {
      for (Tokenizer t : toks.values()) t.close();
      throw e;
    }
    this.tokenizers = Map.copyOf(toks);
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
            .build();
    this.healthClient =
        WebClient.builder()
            .shareConnectionCache(false)
            .socketOptions(s -> s.connectTimeout(config.healthTimeout()))
            .readTimeout(config.healthTimeout())
            .followRedirects(false)
            .build();
    this.apiKeyHash = config.apiKey() == null ? null : sha256(config.apiKey());
  }

  /**
   * Starts a router server with the gateway's endpoints and the health checker.
   *
   * @throws KvRouterServer.StartException as {@link KvRouterServer#start} does
   * @throws TokenizerException when a model's tokenizer directory cannot be loaded
   */
  public static Gateway start(KvRouterServer.Config serverConfig, GatewayConfig config) {
    Gateway g = new Gateway(config);
    try {
      g.server = KvRouterServer.start(serverConfig, g.new Extension());
    } catch (RuntimeException e) {
      g.closeResources();
      throw e;
    }
    g.healthThread = Thread.ofVirtual().name("kvrouter-gateway-health").start(g::healthLoop);
    return g;
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
   *     the server refuses the registration (the message says why)
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
    try {
      return host.register(
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
  }

  /** Stops the server (draining requests in flight within its grace period), then the gateway. */
  @Override
  public void close() {
    if (server != null) server.stop(); // calls Extension.close()
    else closeResources();
  }

  private void closeResources() {
    closed = true;
    Thread t = healthThread;
    if (t != null) {
      t.interrupt();
      try {
        t.join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    for (Tokenizer tok : tokenizers.values()) tok.close();
    // the pools are this gateway's own: close their idle connections (and monitor threads)
    client.closeResource();
    healthClient.closeResource();
  }

  /** The routes, given to the server. */
  private final class Extension implements ServerExtension {
    @Override
    public void routing(HttpRouting.Builder r, ServerHost h) {
      host = h;
      metrics = new GatewayMetrics(h.metricsRegistry(), () -> engines.values());
      predictions = new PredictionCheck(metrics, config.warnInterval().toNanos());
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
      route(r, Method.GET, "/v1/models", Gateway.this::models);
      route(r, Method.POST, "/tokenize", Gateway.this::tokenize);
      route(r, Method.POST, "/detokenize", Gateway.this::detokenize);
      r.any(
          "/v1/*",
          guarded(
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
    r.route(m, path, guarded(e));
    r.any(
        path,
        guarded(
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

  /** Client API key, serving state, and the mapping of refusals to OpenAI error answers. */
  private Handler guarded(Endpoint e) {
    return (req, res) -> {
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
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  // ------------------------------------------------------------------ shared by the endpoints

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

  /** A model a request names: its base model and LoRA adapter. */
  record Target(String baseModel, String lora, Tokenizer tokenizer) {}

  /**
   * What the body's {@code model} names.
   *
   * @throws OpenAiError 404 when the gateway neither serves it (--model, --lora) nor has engines
   *     registered for it
   */
  Target target(String model, String group) {
    String base = config.loras().getOrDefault(model, model);
    String lora = base.equals(model) ? null : model;
    if (!config.models().containsKey(base) && host.model(base, group) == null) {
      throw new OpenAiError(
          404,
          "invalid_request_error",
          "model_not_found",
          "model",
          "The model `"
              + model
              + "` does not exist: this gateway serves "
              + String.join(", ", servedNames())
              + " (GET /v1/models).");
    }
    return new Target(base, lora, tokenizers.get(base));
  }

  private List<String> servedNames() {
    Set<String> names = new java.util.TreeSet<>(config.models().keySet());
    for (RouterModel m : host.models()) names.add(m.modelName());
    names.addAll(config.loras().keySet());
    return names.isEmpty() ? List.of("(no model yet)") : new ArrayList<>(names);
  }

  /** The engine state of a base URL (made on first sight). */
  EngineState engine(String baseUrl) {
    EngineState s = engines.get(baseUrl);
    if (s != null) return s;
    return engines.computeIfAbsent(
        baseUrl, u -> new EngineState(u, config.breakerFailures(), config.breakerOpen().toNanos()));
  }

  /** An engine of {@code m} that may be used now, or null. */
  String anyUsableEngine(RouterModel m) {
    if (m == null) return null;
    long now = System.nanoTime();
    for (RouterModel.Rank r : m.ranks()) {
      if (r.baseUrl() != null && engine(r.baseUrl()).usable(now)) return r.baseUrl();
    }
    return null;
  }

  /** The engine-delegated tokenizer of an engine (one per base URL and model name). */
  EngineTokenizer engineTokenizer(String baseUrl, String model) {
    return engineTokenizers.computeIfAbsent(
        baseUrl + "\u0000" + model,
        k -> new EngineTokenizer(URI.create(baseUrl), model, config.engineTimeout()));
  }

  // ------------------------------------------------------------------ /v1/models

  private void models(ServerRequest req, ServerResponse res) throws IOException {
    long created = System.currentTimeMillis() / 1000;
    Set<String> served = new java.util.TreeSet<>();
    for (RouterModel m : host.models()) {
      for (RouterModel.Rank r : m.ranks()) {
        if (r.baseUrl() != null) {
          served.add(m.modelName());
          break;
        }
      }
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.writeStartObject();
      g.writeStringField("object", "list");
      g.writeArrayFieldStart("data");
      for (String name : served) {
        card(g, name, null, created);
        for (Map.Entry<String, String> l : config.loras().entrySet()) {
          if (l.getValue().equals(name)) card(g, l.getKey(), name, created);
        }
      }
      g.writeEndArray();
      g.writeEndObject();
      g.writeRaw('\n');
    }
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(out.toByteArray());
  }

  private void card(JsonGenerator g, String id, String parent, long created) throws IOException {
    g.writeStartObject();
    g.writeStringField("id", id);
    g.writeStringField("object", "model");
    g.writeNumberField("created", created);
    g.writeStringField("owned_by", "kvrouter");
    g.writeStringField("root", parent == null ? id : parent);
    if (parent == null) g.writeNullField("parent");
    else g.writeStringField("parent", parent);
    Tokenizer t = tokenizers.get(parent == null ? id : parent);
    if (t != null && t.modelMaxLength() > 0 && t.modelMaxLength() < Integer.MAX_VALUE) {
      g.writeNumberField("max_model_len", t.modelMaxLength());
    }
    g.writeArrayFieldStart("permission");
    g.writeEndArray();
    g.writeEndObject();
  }

  // ------------------------------------------------------------------ /tokenize, /detokenize

  private void tokenize(ServerRequest req, ServerResponse res) throws Exception {
    byte[] body = host.body(req);
    ClientRequest c;
    try {
      c = ClientRequest.parse(ClientRequest.Kind.CHAT, body);
    } catch (OpenAiError e) {
      if (!"messages".equals(e.param)) throw e;
      c = ClientRequest.parse(ClientRequest.Kind.COMPLETION, body);
    }
    Target t = target(c.model, null);
    if (t.tokenizer() == null) {
      passToEngine(t, "/tokenize", body, res);
      return;
    }
    int[] ids;
    try {
      ids =
          c.kind == ClientRequest.Kind.CHAT
              ? t.tokenizer().applyChatTemplate(c.chat).ids()
              : c.promptIds != null
                  ? c.promptIds
                  : t.tokenizer().encode(c.promptText, c.addSpecialTokens);
    } catch (TokenizerException e) {
      throw OpenAiError.invalid(null, null, e.getMessage());
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream(16 + ids.length * 7);
    try (JsonGenerator g = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.writeStartObject();
      g.writeNumberField("count", ids.length);
      long max = t.tokenizer().modelMaxLength();
      g.writeNumberField("max_model_len", max > 0 && max < Integer.MAX_VALUE ? max : 0);
      g.writeArrayFieldStart("tokens");
      for (int id : ids) g.writeNumber(Integer.toUnsignedLong(id));
      g.writeEndArray();
      g.writeNullField("token_strs");
      g.writeEndObject();
      g.writeRaw('\n');
    }
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(out.toByteArray());
  }

  private void detokenize(ServerRequest req, ServerResponse res) throws Exception {
    byte[] body = host.body(req);
    String model = null;
    int[] tokens = null;
    try (JsonParser p = Json.FACTORY.createParser(body)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw OpenAiError.invalid(null, null, "expected a JSON object");
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String f = p.currentName();
        JsonToken t = p.nextToken();
        if (f.equals("model") && t == JsonToken.VALUE_STRING) {
          model = p.getText();
        } else if (f.equals("tokens") && t == JsonToken.START_ARRAY) {
          int[] b = new int[64];
          int n = 0;
          while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t != JsonToken.VALUE_NUMBER_INT) {
              throw OpenAiError.invalid(null, "tokens", "'tokens' must be integers");
            }
            if (n == b.length) b = java.util.Arrays.copyOf(b, n * 2);
            b[n++] = (int) p.getLongValue();
          }
          tokens = java.util.Arrays.copyOf(b, n);
        } else {
          p.skipChildren();
        }
      }
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw OpenAiError.invalid(
          null,
          null,
          "We could not parse the JSON body of your request: " + e.getOriginalMessage());
    }
    if (model == null) {
      throw OpenAiError.invalid(null, "model", "you must provide a model parameter");
    }
    if (tokens == null)
      throw OpenAiError.invalid(null, "tokens", "'tokens' is a required property");
    Target t = target(model, null);
    if (t.tokenizer() == null) {
      passToEngine(t, "/detokenize", body, res);
      return;
    }
    String text = t.tokenizer().decode(tokens, false);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.writeStartObject();
      g.writeStringField("prompt", text);
      g.writeEndObject();
      g.writeRaw('\n');
    }
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(out.toByteArray());
  }

  /** Forwards a body unchanged to a usable engine of the model and relays its whole answer. */
  private void passToEngine(Target t, String path, byte[] body, ServerResponse res) {
    String url = anyUsableEngine(host.model(t.baseModel(), null));
    if (url == null) {
      throw OpenAiError.unavailable(
          "no_engines", "no engine of model '" + t.baseModel() + "' can take the request now");
    }
    java.util.function.Supplier<HttpClientRequest> rq =
        () -> {
          HttpClientRequest q =
              client.post().uri(url + path).header(HeaderNames.CONTENT_TYPE, JSON);
          if (config.engineApiKey() != null) {
            q.header(HeaderNames.AUTHORIZATION, "Bearer " + config.engineApiKey());
          }
          return q;
        };
    try (HttpClientResponse up = submit(rq, body, path, url)) {
      byte[] answer = up.inputStream().readAllBytes();
      res.status(up.status());
      res.header(
          HeaderNames.CONTENT_TYPE, up.headers().first(HeaderNames.CONTENT_TYPE).orElse(JSON));
      res.send(answer);
    } catch (IOException | RuntimeException e) {
      throw new OpenAiError(
          502,
          "server_error",
          "engine_unreachable",
          null,
          "engine " + url + " did not answer " + path + ": " + e.getMessage());
    }
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
      java.util.function.Supplier<HttpClientRequest> make, byte[] body, String what, String url) {
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

  // ------------------------------------------------------------------ health checks

  private void healthLoop() {
    long interval = config.healthInterval().toMillis();
    while (!closed) {
      try {
        Thread.sleep(interval);
      } catch (InterruptedException e) {
        return;
      }
      try {
        checkAll();
      } catch (RuntimeException e) {
        LOG.log(Level.WARNING, "health check round failed", e);
      }
    }
  }

  /** One round of health checks of every registered base URL (after pruning: {@link #prune}). */
  void checkAll() {
    Set<String> urls = prune();
    List<Thread> checks = new ArrayList<>(urls.size());
    for (String u : urls) {
      EngineState s = engine(u);
      checks.add(Thread.ofVirtual().start(() -> check(s)));
    }
    for (Thread t : checks) {
      try {
        t.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  private void check(EngineState s) {
    boolean ok;
    try (HttpClientResponse r = health(s.baseUrl, false)) {
      ok = r.status().code() == 200;
    } catch (RuntimeException e) {
      ok = false;
    }
    if (s.checked(ok, config.unhealthyAfter())) {
      if (s.healthy()) {
        LOG.info("engine " + s.baseUrl + " answers its health check again: back in routing");
      } else {
        LOG.warning(
            "engine "
                + s.baseUrl
                + " failed "
                + config.unhealthyAfter()
                + " health checks in a row: out of routing until it answers (its index is kept)");
      }
    }
  }

  /**
   * Drops what the gateway keeps per engine for engines no longer registered: their EngineState,
   * engine tokenizers, prediction windows and metric series (a model's, when its last engine left).
   * Called at every health round, so an engine unregistered (or a fleet whose engines come and go
   * under new ids) leaves nothing behind after one --health-interval-ms; a request in flight to it
   * may make an entry again, which the next round drops.
   *
   * @return the registered base URLs
   */
  Set<String> prune() {
    Set<String> urls = new HashSet<>();
    Set<String> modelUrls = new HashSet<>();
    Set<String> modelEngines = new HashSet<>();
    Set<String> models = new HashSet<>(config.models().keySet());
    for (RouterModel m : host.models()) {
      models.add(m.modelName());
      for (RouterModel.Rank r : m.ranks()) {
        modelEngines.add(m.modelName() + "\u0000" + Long.toUnsignedString(r.worker().workerId()));
        if (r.baseUrl() != null) {
          urls.add(r.baseUrl());
          modelUrls.add(m.modelName() + "\u0000" + r.baseUrl());
        }
      }
    }
    engines.keySet().retainAll(urls);
    engineTokenizers.keySet().removeIf(k -> !urls.contains(k.substring(0, k.indexOf('\u0000'))));
    if (predictions != null) predictions.retain(modelUrls, urls);
    if (metrics != null) {
      metrics.retain(
          (model, engine) ->
              engine.equals("none")
                  ? models.contains(model)
                  : modelEngines.contains(model + "\u0000" + engine));
    }
    return urls;
  }

  /** Engine tokenizers kept (tests). */
  int engineTokenizerCount() {
    return engineTokenizers.size();
  }

  /**
   * {@code GET /health}; once more on a connection of its own when the pooled one expired as it was
   * taken (see submit: possible when --health-interval-ms is below --health-timeout-ms).
   */
  private HttpClientResponse health(String baseUrl, boolean fresh) {
    HttpClientRequest rq = healthClient.get().uri(baseUrl + "/health");
    if (fresh) return rq.header(HeaderNames.CONNECTION, "close").request();
    try {
      return rq.request();
    } catch (RuntimeException e) {
      if (!Proxy.failure(e).reason().equals(Proxy.STALE)) throw e;
      return health(baseUrl, true);
    }
  }

  /** The engine states (tests). */
  Collection<EngineState> engineStates() {
    return engines.values();
  }

  static Duration ms(long ms) {
    return Duration.ofMillis(ms);
  }

  /** For messages. */
  static String describe(Worker w) {
    return Long.toUnsignedString(w.workerId()) + (w.dpRank() == 0 ? "" : "/" + w.dpRank());
  }

  /** Options of one attempt. */
  static RouteOptions options(Target t, String cacheSalt, Set<Long> allowed) {
    return new RouteOptions(t.lora(), cacheSalt, allowed);
  }

  /** For switch exhaustiveness in Proxy. */
  static boolean routed(RouteDecision d) {
    return d instanceof RouteDecision.Routed;
  }
}
