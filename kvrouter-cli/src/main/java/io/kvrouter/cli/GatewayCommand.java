package io.kvrouter.cli;

import io.kvrouter.discovery.DiscoveryConfig;
import io.kvrouter.discovery.KubernetesDiscovery;
import io.kvrouter.gateway.EngineSpec;
import io.kvrouter.gateway.Gateway;
import io.kvrouter.gateway.GatewayConfig;
import io.kvrouter.gateway.LoraPlacementConfig;
import io.kvrouter.gateway.SessionConfig;
import io.kvrouter.route.LoraCost;
import io.kvrouter.route.PairRouter;
import io.kvrouter.route.Scorer;
import io.kvrouter.route.Scorers;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.tokenize.TokenizerException;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.logging.Level;
import java.util.logging.Logger;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvrouter gateway}: the OpenAI-compatible front door (docs/gateway.md) until SIGTERM or
 * Ctrl-C.
 *
 * <pre>
 * Implementation notes
 *
 * As ServeCommand: picocli options; --config names a properties file whose keys are the long
 * flag names without dashes (the repeatable model, lora and engine take several values
 * separated by whitespace), turned into arguments placed before the command line's own, so the
 * command line wins. Start failures are one line on err and exit 1, bad flags exit 2. Static
 * engines (--engine) are registered after the server started, as POST /register would; one that
 * cannot be registered (its ZMQ endpoint does not answer in --zmq-connect-timeout-ms) stops
 * the start with exit 1, one whose HTTP API does not answer is registered out of routing and
 * named in a warning. With --discovery kubernetes (DiscoveryOptions) the gateway starts with a
 * DiscoveryEndpoint (GET /discovery, metrics, its part of /ready), then the discovery with a
 * GatewaySink. SIGTERM or SIGINT (Signals) wakes the command's thread, which stops the gateway
 * gracefully (/ready 503 at once, streams in flight finish within --shutdown-grace-seconds) and
 * returns 0; a shutdown hook stops it too when the JVM exits otherwise.
 * </pre>
 */
@Command(
    name = "gateway",
    mixinStandardHelpOptions = true,
    resourceBundle = "io.kvrouter.cli.GatewayHelp",
    sortOptions = false,
    description = {
      "The OpenAI-compatible front door: /v1/chat/completions, /v1/completions, /v1/models,"
          + " /tokenize, /detokenize, tokenized as the engines do, routed by KV overlap and load,"
          + " streamed back; plus every endpoint of 'kvrouter serve' (/register, /workers, /route,"
          + " /metrics ...).",
      "Example: kvrouter gateway --port 8080 --model qwen3=/models/Qwen3-8B"
          + " --engine 'http://10.0.0.5:8000;events=tcp://10.0.0.5:5557;replay=tcp://10.0.0.5:5558'"
    },
    exitCodeListHeading = "Exit codes:%n",
    exitCodeList = {
      "0:stopped by SIGTERM or Ctrl-C (SIGINT): /ready answered 503 at once, the streams in"
          + " flight finished (or --shutdown-grace-seconds ran out)",
      "1:could not start (address in use, a tokenizer directory unusable, a static engine's ZMQ"
          + " endpoint not answering)",
      "2:bad flags or --config file",
      "143:a second SIGTERM while stopping (130: a second Ctrl-C): stopped at once"
    })
public final class GatewayCommand implements Callable<Integer> {
  static final String API_KEY_ENV = "KVROUTER_API_KEY";
  static final String ENGINE_KEY_ENV = "KVROUTER_ENGINE_API_KEY";
  private static final Logger HELIDON_LOG = Logger.getLogger("io.helidon");

  @Spec CommandSpec spec;

  @Mixin RoutingOptions routing = new RoutingOptions();

  @Mixin ReplicaOptions replica = new ReplicaOptions();

  @Mixin DiscoveryOptions discovery = new DiscoveryOptions();

  @Mixin AdmissionOptions admission = new AdmissionOptions();

  @Mixin ChatTemplateOptions chatTemplate = new ChatTemplateOptions();

  @Mixin TracingOptions tracing = new TracingOptions();

  @Mixin EdgeOptions edge = new EdgeOptions(8080, 30);

  @Option(
      names = "--trust-request-chat-template",
      description =
          "Accept a request's own chat_template (vLLM's flag): it is used to tokenize and route"
              + " the request, and forwarded. Without it such a request is refused with vLLM's"
              + " 400.")
  boolean trustRequestChatTemplate;

  @Option(
      names = "--model",
      paramLabel = "NAME=DIR",
      description =
          "Serve model NAME, tokenized with the Hugging Face tokenizer directory DIR"
              + " (tokenizer.json, tokenizer_config.json). NAME alone: tokenized by its engines'"
              + " /tokenize. Repeatable.")
  List<String> models = new ArrayList<>();

  @Option(
      names = "--lora",
      paramLabel = "ADAPTER=BASE",
      description =
          "A LoRA adapter served by BASE's engines; its requests route with hashes salted by the"
              + " adapter name. Repeatable.")
  List<String> loras = new ArrayList<>();

  @Option(
      names = "--lora-placement",
      description =
          "Place LoRA adapters' requests where the adapter is resident: learn each engine's"
              + " resident adapters (its /v1/models at every health round, and the requests routed"
              + " there) and add a load's cost to the routing cost of the engines without it"
              + " (docs/gateway.md, \"LoRA adapters\"): the lora term of the cost, weight"
              + " --scorer lora=W, default 1. Off: every engine of BASE counts as serving every"
              + " adapter.")
  boolean loraPlacement;

  @Option(
      names = "--max-loras",
      paramLabel = "K",
      defaultValue = "0",
      description =
          "The engines' --max-loras: a load on an engine holding K adapters also costs an"
              + " eviction (default: ${DEFAULT-VALUE}, unknown: never priced as an eviction).")
  int maxLoras;

  @Option(
      names = "--lora-load-cost",
      paramLabel = "BLOCKS",
      description =
          "Cost of loading an adapter, in blocks of prefill work (default: ${DEFAULT-VALUE}).")
  double loraLoadCost = LoraCost.defaults().loadCost();

  @Option(
      names = "--lora-eviction-cost",
      paramLabel = "BLOCKS",
      description = "Added cost when the load evicts another adapter (default: ${DEFAULT-VALUE}).")
  double loraEvictionCost = LoraCost.defaults().evictionCost();

  @Option(
      names = "--lora-load-first",
      description =
          "With --lora-placement: load the adapter on the chosen engine (POST"
              + " /v1/load_lora_adapter) before sending it a request for an adapter it does not"
              + " have resident; vLLM needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True.")
  boolean loraLoadFirst;

  @Option(
      names = "--lora-path",
      paramLabel = "ADAPTER=PATH",
      description =
          "The lora_path --lora-load-first sends for ADAPTER (default: the adapter's name)."
              + " Repeatable.")
  List<String> loraPaths = new ArrayList<>();

  @Option(
      names = "--engine",
      paramLabel = "SPEC",
      description =
          "A static engine: 'http://host:8000;events=tcp://host:5557;replay=tcp://host:5558'"
              + " (optional ;model=NAME;block_size=N;instance_id=N;dp_rank=R;topic=T;"
              + "role=prefill|decode|both). Repeatable;"
              + " engines may also POST /register with base_url.")
  List<String> engines = new ArrayList<>();

  @Option(
      names = "--block-size",
      paramLabel = "N",
      description =
          "KV block size of --engine entries that give none (default: ${DEFAULT-VALUE}, vLLM's).")
  int blockSize = 16;

  @Option(
      names = "--api-key",
      paramLabel = "KEY",
      description =
          "Key clients must send (Authorization: Bearer KEY) on /v1/*, /tokenize, /detokenize (default: $"
              + API_KEY_ENV
              + ", else none).")
  String apiKey;

  @Option(
      names = "--engine-api-key",
      paramLabel = "KEY",
      description = "Key sent to the engines (default: $" + ENGINE_KEY_ENV + ", else none).")
  String engineApiKey;

  @Option(
      names = "--max-attempts",
      paramLabel = "N",
      description = "Engines tried per request before its first byte (default: ${DEFAULT-VALUE}).")
  int maxAttempts = 2;

  @Option(
      names = "--pd-min-uncached-tokens",
      paramLabel = "N",
      description =
          "With prefill and decode engines: a request with fewer prompt tokens than this not"
              + " cached on the best decode engine is served whole by a decode engine"
              + " (default: ${DEFAULT-VALUE}; 0: every request a prefill engine can take is"
              + " disaggregated).")
  int pdMinUncachedTokens = PairRouter.DEFAULT_MIN_UNCACHED_TOKENS;

  @Option(
      names = "--pd-max-prefill-queue-tokens",
      paramLabel = "N",
      description =
          "With prefill and decode engines: when every prefill engine has more prefill tokens"
              + " in flight than this, requests are served whole by a decode engine (default:"
              + " no limit).")
  Long pdMaxPrefillQueueTokens;

  @Option(
      names = "--connect-timeout-ms",
      paramLabel = "MS",
      description = "TCP connect timeout to engines (default: ${DEFAULT-VALUE}).")
  long connectTimeoutMs = 2000;

  @Option(
      names = "--engine-timeout-ms",
      paramLabel = "MS",
      description =
          "Longest silence of an engine before its first byte (then retried elsewhere) and between bytes (default: ${DEFAULT-VALUE}).")
  long engineTimeoutMs = 120_000;

  @Option(
      names = "--health-interval-ms",
      paramLabel = "MS",
      description = "GET /health of every engine this often (default: ${DEFAULT-VALUE}).")
  long healthIntervalMs = 5000;

  @Option(
      names = "--health-timeout-ms",
      paramLabel = "MS",
      description = "Timeout of one health check (default: ${DEFAULT-VALUE}).")
  long healthTimeoutMs = 2000;

  @Option(
      names = "--unhealthy-after",
      paramLabel = "N",
      description =
          "Failed health checks in a row that take an engine out of routing (default: ${DEFAULT-VALUE}).")
  int unhealthyAfter = 2;

  @Option(
      names = "--breaker-failures",
      paramLabel = "N",
      description =
          "Failed attempts in a row that open an engine's circuit breaker (default: ${DEFAULT-VALUE}).")
  int breakerFailures = 3;

  @Option(
      names = "--breaker-open-ms",
      paramLabel = "MS",
      description =
          "How long an open breaker keeps its engine out before a probe (default: ${DEFAULT-VALUE}).")
  long breakerOpenMs = 10_000;

  @Option(
      names = "--max-request-values",
      paramLabel = "N",
      description =
          "The most JSON values one request's messages, tools and chat_template_kwargs may hold;"
              + " more is a 413 request_too_large (default: ${DEFAULT-VALUE}).")
  long maxRequestValues = GatewayConfig.DEFAULT_MAX_REQUEST_VALUES;

  @Option(
      names = "--max-inflight-values",
      paramLabel = "N",
      description =
          "The most of those values held by all requests in flight at once; a request that would"
              + " pass it is a 429 gateway_busy with Retry-After (default: ${DEFAULT-VALUE}).")
  long maxInflightValues = GatewayConfig.DEFAULT_MAX_INFLIGHT_VALUES;

  @Option(
      names = "--config",
      paramLabel = "FILE",
      description =
          "Properties file whose keys are these flags' long names without dashes; model, lora, engine and scorer take several values separated by whitespace; flags on the command line win.")
  Path config;

  @Option(names = "--verbose", description = "Keep Helidon's INFO log lines.")
  boolean verbose;

  /** The --config keys that may hold several values separated by whitespace. */
  static final List<String> MULTI = List.of("model", "lora", "engine", "scorer", "lora-path");

  /** The session scorer's weight in soft mode when no --scorer session=W gives one. */
  static final double DEFAULT_SESSION_WEIGHT = 32;

  @Option(
      names = "--session-mode",
      paramLabel = "MODE",
      description =
          "Session affinity (docs/gateway.md, Sessions): off, soft (the session's engine is one"
              + " more term of the cost, the session scorer, weight --scorer session=W, default "
              + "32 blocks: it loses when it is busy or when another engine is cheaper by more),"
              + " hard (always the session's engine while it is healthy) (default: off).")
  String sessionMode = "off";

  @Option(
      names = "--session-key",
      paramLabel = "SOURCE",
      description =
          "Where a request's session key is read: header:NAME, user (the body's OpenAI user"
              + " field) or previous_response_id (the Responses API's; each answer's id is bound"
              + " too) (default: ${DEFAULT-VALUE}).")
  String sessionKey = "header:x-session-id";

  @Option(
      names = "--session-ttl-seconds",
      paramLabel = "S",
      description =
          "A session without a turn for S seconds is forgotten (default: ${DEFAULT-VALUE}).")
  long sessionTtlSeconds = SessionConfig.DEFAULT_TTL.toSeconds();

  @Option(
      names = "--session-max-keys",
      paramLabel = "N",
      description =
          "The most sessions this gateway holds; past it some are forgotten (counted in"
              + " kvrouter_session_evictions_total) (default: ${DEFAULT-VALUE}).")
  long sessionMaxKeys = SessionConfig.DEFAULT_MAX_KEYS;

  @Override
  public Integer call() throws Exception {
    return ConfigFileArgs.call(
        spec, this, config, "kvrouter gateway", MULTI, GatewayCommand::new, GatewayCommand::run);
  }

  private static String env(String given, String name) {
    return given != null ? given : System.getenv(name);
  }

  /** The configurations; IllegalArgumentException for a bad flag. */
  KvRouterServer.Config serverConfig() {
    KvRouterServer.Config.Builder b =
        edge.applyTo(KvRouterServer.Config.builder())
            .routing(routing.settings())
            .selector(routing.selector(scorers(sessionConfig())));
    return replica.applyTo(b).build();
  }

  /** The --session-* flags' settings. */
  SessionConfig sessionConfig() {
    SessionConfig.Mode mode =
        switch (sessionMode.trim().toLowerCase(Locale.ROOT)) {
          case "off" -> SessionConfig.Mode.OFF;
          case "soft" -> SessionConfig.Mode.SOFT;
          case "hard" -> SessionConfig.Mode.HARD;
          default ->
              throw new IllegalArgumentException(
                  "--session-mode '" + sessionMode + "': expected off, soft or hard");
        };
    if (sessionTtlSeconds < 1) {
      throw new IllegalArgumentException(
          "--session-ttl-seconds must be >= 1, got " + sessionTtlSeconds);
    }
    if (sessionMaxKeys < 1) {
      throw new IllegalArgumentException("--session-max-keys must be >= 1, got " + sessionMaxKeys);
    }
    try {
      return SessionConfig.withSource(
          mode, sessionKey, Duration.ofSeconds(sessionTtlSeconds), sessionMaxKeys);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--session-key: " + e.getMessage(), e);
    }
  }

  /**
   * The {@code lora} term's place in the cost before the gateway binds it to its adapter residency
   * (LoraPlacement.selector keeps the weight, replaces the scorer).
   */
  private static final Scorer UNBOUND_LORA = (c, i) -> 0.0;

  /** The lora term's weight with --lora-placement when no --scorer lora=W gives one. */
  static final double DEFAULT_LORA_WEIGHT = 1;

  /** The cost's terms; in soft session mode with the session term (32 unless --scorer says). */
  Scorers scorers(SessionConfig sessions) {
    for (String x : routing.scorers) {
      int eq = x.indexOf('=');
      if (!loraPlacement && eq > 0 && x.substring(0, eq).trim().equals(Scorers.LORA)) {
        throw new IllegalArgumentException("--scorer " + x + " needs --lora-placement");
      }
    }
    Scorers s = routing.scorers(loraPlacement ? Map.of(Scorers.LORA, UNBOUND_LORA) : Map.of());
    if (loraPlacement && !s.names().contains(Scorers.LORA)) {
      s = s.toBuilder().add(Scorers.LORA, DEFAULT_LORA_WEIGHT, UNBOUND_LORA).build();
    }
    if (sessions.mode() == SessionConfig.Mode.SOFT && s.weight(Scorers.SESSION) == 0) {
      s = s.toBuilder().add(Scorers.SESSION, DEFAULT_SESSION_WEIGHT).build();
    }
    return s;
  }

  GatewayConfig gatewayConfig() {
    GatewayConfig.Builder b =
        GatewayConfig.builder()
            .apiKey(env(apiKey, API_KEY_ENV))
            .engineApiKey(env(engineApiKey, ENGINE_KEY_ENV))
            .maxAttempts(maxAttempts)
            .connectTimeout(Duration.ofMillis(connectTimeoutMs))
            .engineTimeout(Duration.ofMillis(engineTimeoutMs))
            .healthInterval(Duration.ofMillis(healthIntervalMs))
            .healthTimeout(Duration.ofMillis(healthTimeoutMs))
            .unhealthyAfter(unhealthyAfter)
            .breakerFailures(breakerFailures)
            .breakerOpen(Duration.ofMillis(breakerOpenMs))
            .disaggregation(
                new PairRouter.Config(
                    pdMinUncachedTokens,
                    pdMaxPrefillQueueTokens == null ? Long.MAX_VALUE : pdMaxPrefillQueueTokens))
            .admission(admission.config())
            .holderWait(admission.holderWait)
            .busyEngineWaiting(admission.busyEngineWaiting)
            .engineMetricsInterval(Duration.ofMillis(admission.engineMetricsIntervalMs))
            .sessions(sessionConfig());
    if (maxRequestValues < 1) {
      throw new IllegalArgumentException(
          "--max-request-values must be >= 1, got " + maxRequestValues);
    }
    if (maxInflightValues < 1) {
      throw new IllegalArgumentException(
          "--max-inflight-values must be >= 1, got " + maxInflightValues);
    }
    if (maxInflightValues < maxRequestValues) {
      throw new IllegalArgumentException(
          "--max-inflight-values ("
              + maxInflightValues
              + ") must be >= --max-request-values ("
              + maxRequestValues
              + "): one request may hold that many");
    }
    b.maxRequestValues(maxRequestValues).maxInflightValues(maxInflightValues);
    if (models.isEmpty()) {
      throw new IllegalArgumentException(
          "give at least one --model NAME=DIR (a Hugging Face tokenizer directory)");
    }
    for (String m : models) {
      int eq = m.indexOf('=');
      String name = eq < 0 ? m : m.substring(0, eq);
      if (name.isBlank()) throw new IllegalArgumentException("--model '" + m + "': no name");
      Path dir = eq < 0 ? null : Path.of(m.substring(eq + 1));
      if (dir != null && !Files.isDirectory(dir)) {
        throw new IllegalArgumentException("--model " + m + ": " + dir + " is not a directory");
      }
      b.model(name, dir);
    }
    for (String l : loras) {
      int eq = l.indexOf('=');
      if (eq < 1 || eq == l.length() - 1) {
        throw new IllegalArgumentException("--lora '" + l + "': expected ADAPTER=BASE");
      }
      b.lora(l.substring(0, eq), l.substring(eq + 1));
    }
    Map<String, String> paths = new LinkedHashMap<>();
    for (String l : loraPaths) {
      int eq = l.indexOf('=');
      if (eq < 1 || eq == l.length() - 1) {
        throw new IllegalArgumentException("--lora-path '" + l + "': expected ADAPTER=PATH");
      }
      paths.put(l.substring(0, eq), l.substring(eq + 1));
    }
    b.loraPlacement(
        new LoraPlacementConfig(
            loraPlacement,
            maxLoras,
            new LoraCost(loraLoadCost, loraEvictionCost),
            loraLoadFirst,
            paths));
    if (blockSize < 1) throw new IllegalArgumentException("--block-size must be >= 1");
    Set<String> names = new LinkedHashSet<>();
    for (String m : models) names.add(m.indexOf('=') < 0 ? m : m.substring(0, m.indexOf('=')));
    b.chat(
        new GatewayConfig.Chat(
            chatTemplate.common(names), chatTemplate.perModel(names), trustRequestChatTemplate));
    return b.build();
  }

  private int run(PrintWriter out, PrintWriter err) throws InterruptedException {
    if (!verbose) HELIDON_LOG.setLevel(Level.WARNING);
    KvRouterServer.Config sc;
    GatewayConfig gc;
    DiscoveryConfig dc;
    List<EngineSpec> specs = new ArrayList<>();
    OpenTelemetrySdk otel;
    try {
      otel = tracing.start("kvrouter-gateway");
    } catch (IllegalArgumentException e) {
      err.println("kvrouter gateway: " + e.getMessage());
      err.flush();
      return 2;
    }
    try {
      sc = serverConfig();
      gc = gatewayConfig();
      for (String e : engines) specs.add(EngineSpec.parse(e));
      dc =
          discovery.config(
              gc.models().size() == 1 ? gc.models().keySet().iterator().next() : null, blockSize);
    } catch (IllegalArgumentException e) {
      err.println("kvrouter gateway: " + e.getMessage());
      err.flush();
      return 2;
    }
    Signals signals = Signals.install();
    DiscoveryEndpoint found = dc == null ? null : new DiscoveryEndpoint(dc);
    Gateway g;
    try {
      g = Gateway.start(sc, gc, found, otel);
    } catch (KvRouterServer.StartException | TokenizerException e) {
      err.println("kvrouter gateway: " + e.getMessage());
      err.flush();
      if (otel != null) otel.close();
      return 1;
    }
    if (otel != null) {
      out.println(
          "kvrouter gateway: tracing on (--otel), configured by OTEL_* (docs/observability.md)");
    }
    Gateway started = g;
    // the SDK after the gateway: the spans of the last requests are flushed
    Thread hook =
        new Thread(
            () -> {
              started.close();
              if (otel != null) otel.close();
            },
            "kvrouter-gateway-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    try {
      for (EngineSpec s : specs) {
        g.register(s, blockSize);
        out.println(
            "kvrouter gateway: engine "
                + s.baseUrl()
                + " registered"
                + (g.answersHealthChecks(s.baseUrl())
                    ? ""
                    : ", but it does not answer GET /health: out of routing until it does, and"
                        + " /ready answers 503 without another engine (the warning says why)"));
      }
    } catch (IllegalArgumentException e) {
      err.println("kvrouter gateway: " + e.getMessage());
      err.flush();
      g.close();
      return 1;
    }
    if (found != null) {
      try {
        found.attach(
            KubernetesDiscovery.start(
                dc, new GatewaySink(g, discovery.drainBound(), found.metrics())));
      } catch (RuntimeException e) {
        err.println("kvrouter gateway: --discovery kubernetes cannot start: " + e.getMessage());
        err.flush();
        g.close();
        return 1;
      }
      out.println(
          "kvrouter gateway: discovering engines: the Ready "
              + dc.describe()
              + " (GET "
              + g.url()
              + "/discovery shows what it sees)");
    }
    String url = g.url();
    out.println("kvrouter gateway: listening on " + url + " (OpenAI base URL " + url + "/v1)");
    out.println("  models: " + String.join(", ", gc.models().keySet()));
    out.println("  cost: " + scorers(gc.sessions()));
    if (gc.sessions().on()) {
      out.println(
          "  sessions: "
              + gc.sessions().mode().name().toLowerCase(Locale.ROOT)
              + ", key "
              + gc.sessions().describeSource()
              + ", ttl "
              + gc.sessions().ttl().toSeconds()
              + " s, at most "
              + gc.sessions().maxKeys()
              + " keys"
              + (sc.effectiveSync() == null ? "" : ", shared over " + sc.effectiveSync()));
    }
    if (gc.apiKey() != null && sc.edge().authToken() == null) {
      out.println(
          "  admin endpoints (POST /register, /unregister, /events, /route): no --auth-token, so"
              + " they need 'Authorization: Bearer' with the --api-key");
    }
    if (specs.isEmpty() && found == null) {
      out.println("No engine yet. Register one (its base_url, and its KV events' ZMQ endpoint):");
      out.println(
          "  curl -X POST "
              + url
              + "/register -H 'Content-Type: application/json' -d '{\"instance_id\": 1,"
              + " \"model_name\": \""
              + gc.models().keySet().iterator().next()
              + "\", \"block_size\": "
              + blockSize
              + ", \"base_url\": \"http://127.0.0.1:8000\", \"endpoint\":"
              + " \"tcp://127.0.0.1:5557\"}'");
    }
    out.println(
        "GET "
            + url
            + "/ready answers 200 once every model has an engine that answers (503 and the"
            + " reason until then).");
    out.println(
        String.format(
            Locale.ROOT,
            "Then: curl %s/v1/chat/completions -H 'Content-Type: application/json' -d"
                + " '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\":"
                + " \"Hello\"}]}'",
            url,
            gc.models().keySet().iterator().next()));
    out.println("Ctrl-C or SIGTERM stops it gracefully.");
    out.flush();
    String signal = signals.await();
    out.println(
        "kvrouter gateway: "
            + signal
            + ": stopping: /ready answers 503, streams in flight finish (at most "
            + edge.shutdownGraceSeconds
            + " s)...");
    out.flush();
    g.close();
    if (otel != null) otel.close();
    out.println("kvrouter gateway: stopped");
    out.flush();
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException exiting) {
      // the JVM is shutting down already (another signal): the hook finds the gateway stopped
    }
    return 0;
  }
}
