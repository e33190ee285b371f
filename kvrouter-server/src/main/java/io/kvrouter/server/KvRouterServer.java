package io.kvrouter.server;

import io.helidon.http.DirectHandler;
import io.helidon.http.HeaderNames;
import io.helidon.http.ServerResponseHeaders;
import io.helidon.http.Status;
import io.helidon.webserver.WebServer;
import io.helidon.webserver.http.DirectHandlers;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.route.KvRouter;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * kvrouter as an HTTP service: one KV-aware router and index per {@code (model_name,
 * routing_group)}, fed by {@code POST /events} and asked by {@code /query} and {@code /route}, on
 * the Helidon SE webserver. API: {@code docs/service.md}.
 *
 * <pre>{@code
 * try (KvRouterServer server = KvRouterServer.start(KvRouterServer.Config.builder().port(0).build())) {
 *   System.out.println(server.url());      // http://127.0.0.1:<port>
 * }
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * start() builds the Registry (the indexes), the metrics that read it, the endpoints (Api) and
 * the webserver, then starts the webserver: every request runs on its own virtual thread
 * (Helidon SE 4). Helidon's own shutdown hook is off; the owner (the serve command's hook, or a
 * test) calls stop(), which marks the server not ready, stops the webserver (it stops accepting,
 * lets requests in flight finish within the shutdown grace period, then closes connections) and
 * then stops the ingest threads (which apply /events batches) and closes every index. stop() is
 * idempotent and thread-safe (synchronized, called once or
 * twice in a process's life). Helidon answers protocol-level failures (a declared body over
 * the limit: 413; an unparsable request line: 400) itself, through the direct handlers installed
 * here, which give the same {"error": ...} JSON as the endpoints.
 * </pre>
 */
public final class KvRouterServer implements AutoCloseable {
  private final Config config;
  private final Registry registry;
  private final WebServer webServer;
  private final ExecutorService ingest;
  private volatile boolean ready;
  private boolean stopped;

  private KvRouterServer(Config config) {
    this.config = config;
    this.registry = new Registry(config::newRouter);
    ServerMetrics metrics = new ServerMetrics(registry::indexes);
    registry.metrics(metrics);
    AtomicInteger ingestThreads = new AtomicInteger();
    this.ingest =
        Executors.newFixedThreadPool(
            config.ingestThreads(),
            r -> {
              Thread t = new Thread(r, "kvrouter-ingest-" + ingestThreads.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    Api api =
        new Api(
            registry,
            metrics,
            new BearerAuth(config.authToken()),
            config.acceptUnregistered(),
            config.maxBodyBytes(),
            () -> ready,
            ingest);
    DirectHandlers.Builder direct = DirectHandlers.builder();
    for (DirectHandler.EventType t : DirectHandler.EventType.values()) {
      direct.addHandler(t, new JsonDirectHandler(api));
    }
    this.webServer =
        WebServer.builder()
            .host(config.host())
            .port(config.port())
            .maxPayloadSize(config.maxBodyBytes())
            .shutdownGracePeriod(config.shutdownGrace())
            .shutdownHook(false)
            .featuresDiscoverServices(false)
            .directHandlers(direct.build())
            .routing(api::routing)
            .build();
  }

  /**
   * Starts a server.
   *
   * @throws java.io.UncheckedIOException when the address cannot be bound
   */
  public static KvRouterServer start(Config config) {
    Objects.requireNonNull(config, "config");
    KvRouterServer s = new KvRouterServer(config);
    s.webServer.start();
    s.ready = true;
    return s;
  }

  /** The port the server listens on (the chosen one when the configuration asked for 0). */
  public int port() {
    return webServer.port();
  }

  /** The address the server listens on. */
  public String host() {
    return config.host();
  }

  /** {@code http://host:port}. */
  public String url() {
    String h = config.host();
    return "http://" + (h.indexOf(':') >= 0 ? "[" + h + "]" : h) + ":" + port();
  }

  /** The configuration it runs with. */
  public Config config() {
    return config;
  }

  /** Whether it is started and not stopping. */
  public boolean isReady() {
    return ready;
  }

  /**
   * Stops gracefully: {@code /ready} turns 503, the listener stops accepting, requests in flight
   * finish (within the shutdown grace period), then every index is closed. Idempotent.
   */
  public synchronized void stop() {
    if (stopped) return;
    stopped = true;
    ready = false;
    webServer.stop();
    ingest.shutdown();
    try {
      if (!ingest.awaitTermination(
          config.shutdownGrace().toMillis() + 1000, TimeUnit.MILLISECONDS)) {
        ingest.shutdownNow();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    registry.close();
  }

  /** {@link #stop()}. */
  @Override
  public void close() {
    stop();
  }

  /** Answers requests Helidon refuses before routing with {@code {"error": ...}}. */
  private static final class JsonDirectHandler implements DirectHandler {
    private final Api api;

    JsonDirectHandler(Api api) {
      this.api = api;
    }

    @Override
    public TransportResponse handle(
        TransportRequest request,
        EventType eventType,
        Status defaultStatus,
        ServerResponseHeaders responseHeaders,
        String message) {
      String text =
          defaultStatus.code() == 413
              ? api.tooLarge()
              : (message == null || message.isEmpty() ? defaultStatus.reasonPhrase() : message);
      return TransportResponse.builder()
          .status(defaultStatus)
          .headers(responseHeaders)
          .header(HeaderNames.CONTENT_TYPE, "application/json")
          .entity(JsonOut.error(text))
          .build();
    }
  }

  /**
   * The service's settings; {@link #builder()} starts from the defaults.
   *
   * @param host address to bind; default {@code 127.0.0.1} (loopback only)
   * @param port TCP port; 0 picks a free one; default 8090
   * @param maxBodyBytes request bodies over this many bytes get 413; default 8 MiB
   * @param authToken bearer token every mutating endpoint requires; null or empty: none
   * @param acceptUnregistered apply {@code /events} of worker ranks that are not registered instead
   *     of refusing the batch with 404; default false
   * @param shutdownGrace how long requests in flight may take to finish at shutdown; default 10 s
   * @param overlapWeight routing cost weight of prefill work (docs/routing.md); default 1
   * @param temperature routing softmax temperature; default 0 (take the cheapest)
   * @param seed seed of routing tie-breaks and sampling; default 0
   * @param busyPrefillTokens a rank with more prefill tokens in flight is busy; -1: never
   * @param busyBlockFraction a rank with more active blocks than this fraction of its {@code
   *     kv_blocks} is busy; 0: never
   * @param requestExpiry routed requests never freed are dropped after this; default 300 s
   * @param ingestThreads platform threads that decode and apply {@code /events} batches; default 1
   * @param maxBlocks each model's index holds at most this many (worker rank, block) pairs,
   *     dropping the least recently used past it ({@code KvIndexes.concurrentRadixTree(long)}); 0:
   *     no bound (the default)
   */
  public record Config(
      String host,
      int port,
      long maxBodyBytes,
      String authToken,
      boolean acceptUnregistered,
      Duration shutdownGrace,
      double overlapWeight,
      double temperature,
      long seed,
      long busyPrefillTokens,
      double busyBlockFraction,
      Duration requestExpiry,
      int ingestThreads,
      long maxBlocks) {

    /** The default port, as Dynamo's standalone indexer uses. */
    public static final int DEFAULT_PORT = 8090;

    /** The default body limit, 8 MiB. */
    public static final long DEFAULT_MAX_BODY_BYTES = 8L << 20;

    public Config {
      Objects.requireNonNull(host, "host");
      if (host.isBlank()) throw new IllegalArgumentException("host must not be blank");
      if (port < 0 || port > 65535) {
        throw new IllegalArgumentException("port must be in 0..65535, got " + port);
      }
      if (maxBodyBytes < 1) {
        throw new IllegalArgumentException("maxBodyBytes must be >= 1, got " + maxBodyBytes);
      }
      authToken = authToken == null || authToken.isEmpty() ? null : authToken;
      Objects.requireNonNull(shutdownGrace, "shutdownGrace");
      if (shutdownGrace.isNegative()) {
        throw new IllegalArgumentException("shutdownGrace must be >= 0, got " + shutdownGrace);
      }
      if (!(overlapWeight >= 0) || Double.isInfinite(overlapWeight)) {
        throw new IllegalArgumentException(
            "overlapWeight must be finite and >= 0, got " + overlapWeight);
      }
      if (!(temperature >= 0) || Double.isInfinite(temperature)) {
        throw new IllegalArgumentException(
            "temperature must be finite and >= 0, got " + temperature);
      }
      if (busyPrefillTokens < -1) {
        throw new IllegalArgumentException(
            "busyPrefillTokens must be >= 0 (or -1 for never), got " + busyPrefillTokens);
      }
      if (!(busyBlockFraction >= 0) || Double.isInfinite(busyBlockFraction)) {
        throw new IllegalArgumentException(
            "busyBlockFraction must be > 0 (or 0 for never), got " + busyBlockFraction);
      }
      Objects.requireNonNull(requestExpiry, "requestExpiry");
      if (requestExpiry.isNegative() || requestExpiry.isZero()) {
        throw new IllegalArgumentException("requestExpiry must be positive, got " + requestExpiry);
      }
      if (ingestThreads < 1) {
        throw new IllegalArgumentException("ingestThreads must be >= 1, got " + ingestThreads);
      }
      if (maxBlocks < 0) {
        throw new IllegalArgumentException(
            "maxBlocks must be >= 1 (or 0 for no bound), got " + maxBlocks);
      }
    }

    /** A builder holding the defaults. */
    public static Builder builder() {
      return new Builder();
    }

    /** The effective settings by flag name, the token masked; for the start-up banner. */
    public Map<String, String> describe() {
      Map<String, String> m = new LinkedHashMap<>();
      m.put("host", host);
      m.put("port", Integer.toString(port));
      m.put("max-body-size", Long.toString(maxBodyBytes));
      m.put("auth-token", authToken == null ? "(none)" : "****** (set)");
      m.put("accept-unregistered", Boolean.toString(acceptUnregistered));
      m.put("shutdown-grace-seconds", Long.toString(shutdownGrace.toSeconds()));
      m.put("overlap-weight", Double.toString(overlapWeight));
      m.put("temperature", Double.toString(temperature));
      m.put("seed", Long.toString(seed));
      m.put(
          "busy-prefill-tokens",
          busyPrefillTokens < 0 ? "(never)" : Long.toString(busyPrefillTokens));
      m.put(
          "busy-block-fraction",
          busyBlockFraction == 0 ? "(never)" : Double.toString(busyBlockFraction));
      m.put("request-expiry-seconds", Long.toString(requestExpiry.toSeconds()));
      m.put("ingest-threads", Integer.toString(ingestThreads));
      m.put("max-blocks", maxBlocks == 0 ? "(no bound)" : Long.toString(maxBlocks));
      return m;
    }

    /** Like {@link #describe()}: never shows the token. */
    @Override
    public String toString() {
      return "Config" + describe();
    }

    KvRouter newRouter(int blockSize) {
      KvRouter.Builder b =
          KvRouter.builder(blockSize)
              .overlapWeight(overlapWeight)
              .temperature(temperature)
              .seed(seed)
              .requestExpiry(requestExpiry);
      if (busyPrefillTokens >= 0) b.busyPrefillTokens(busyPrefillTokens);
      if (busyBlockFraction > 0) b.busyBlockFraction(busyBlockFraction);
      // the router does not close an index it is given; a block index holds nothing to close
      if (maxBlocks > 0) b.index(KvIndexes.concurrentRadixTree(maxBlocks));
      return b.build();
    }

    /** Sets {@link Config} fields one by one; {@link #build()} validates them. */
    public static final class Builder {
      private String host = "127.0.0.1";
      private int port = DEFAULT_PORT;
      private long maxBodyBytes = DEFAULT_MAX_BODY_BYTES;
      private String authToken;
      private boolean acceptUnregistered;
      private Duration shutdownGrace = Duration.ofSeconds(10);
      private double overlapWeight = 1.0;
      private double temperature;
      private long seed;
      private long busyPrefillTokens = -1;
      private double busyBlockFraction;
      private Duration requestExpiry = Duration.ofSeconds(300);
      private int ingestThreads = 1;
      private long maxBlocks;

      private Builder() {}

      public Builder host(String host) {
        this.host = host;
        return this;
      }

      public Builder port(int port) {
        this.port = port;
        return this;
      }

      public Builder maxBodyBytes(long maxBodyBytes) {
        this.maxBodyBytes = maxBodyBytes;
        return this;
      }

      public Builder authToken(String authToken) {
        this.authToken = authToken;
        return this;
      }

      public Builder acceptUnregistered(boolean acceptUnregistered) {
        this.acceptUnregistered = acceptUnregistered;
        return this;
      }

      public Builder shutdownGrace(Duration shutdownGrace) {
        this.shutdownGrace = shutdownGrace;
        return this;
      }

      public Builder overlapWeight(double overlapWeight) {
        this.overlapWeight = overlapWeight;
        return this;
      }

      public Builder temperature(double temperature) {
        this.temperature = temperature;
        return this;
      }

      public Builder seed(long seed) {
        this.seed = seed;
        return this;
      }

      public Builder busyPrefillTokens(long busyPrefillTokens) {
        this.busyPrefillTokens = busyPrefillTokens;
        return this;
      }

      public Builder busyBlockFraction(double busyBlockFraction) {
        this.busyBlockFraction = busyBlockFraction;
        return this;
      }

      public Builder requestExpiry(Duration requestExpiry) {
        this.requestExpiry = requestExpiry;
        return this;
      }

      public Builder ingestThreads(int ingestThreads) {
        this.ingestThreads = ingestThreads;
        return this;
      }

      public Builder maxBlocks(long maxBlocks) {
        this.maxBlocks = maxBlocks;
        return this;
      }

      public Config build() {
        return new Config(
            host,
            port,
            maxBodyBytes,
            authToken,
            acceptUnregistered,
            shutdownGrace,
            overlapWeight,
            temperature,
            seed,
            busyPrefillTokens,
            busyBlockFraction,
            requestExpiry,
            ingestThreads,
            maxBlocks);
      }
    }
  }
}
