package io.kvrouter.server;

import io.helidon.webserver.WebServer;
import io.helidon.webserver.WebServerConfig;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.server.http.HttpPlumbing;
import io.kvrouter.transport.nats.NatsConnections;
import io.opentelemetry.api.OpenTelemetry;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

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
 * start() first binds the configured address once itself and releases it (checkBindable): a port
 * in use, an address not of this machine or an unknown host is then a ListenException naming
 * host and port, before anything is built. Helidon 4.3 does not throw when its listener cannot
 * bind (it logs a stack trace and returns a server that is not running, port -1), so start()
 * also checks isRunning() after starting it, for the rare race where another process takes the
 * port in between. The only socket the server binds is this HTTP one: /metrics is served on it,
 * and ZMQ listeners connect to the engines, they bind nothing.
 *
 * Then start() builds the Registry (the indexes), the metrics that read it, the HTTP edge
 * (io.kvrouter.server.http.HttpPlumbing: routing, auth, bodies, the read deadline and framing
 * checks, whose limits and listeners it gives Helidon itself), the endpoints (Api) and the
 * webserver, then starts the webserver: every request runs on its own virtual thread (Helidon SE
 * 4), and the Dashboard's sampler thread (GET /dashboard; stop() ends it after the webserver).
 * Helidon's own shutdown hook is off; the owner (the serve and gateway commands on SIGTERM or
 * SIGINT, or a test) calls stop(), in two steps. First it marks the server not ready and waits,
 * with the listener still open, until no request is in flight (InFlight, a filter around every
 * route but the probes) or the shutdown grace period is over: meanwhile /ready answers 503
 * ("shutting down"), /health 200, and the other endpoints (the gateway's too) 503, so a load
 * balancer sees the server leave while its streams finish. Then it stops the webserver (it stops
 * accepting and closes the connections; a request still running gets at most STOP_TAIL more),
 * closes the extension, stops the ingest threads (which apply /events batches), the registration
 * log, every index, sequence sync and NATS (ReplicaLinks), and last the HTTP edge's read-deadline
 * sweeper. stop() is idempotent and thread-safe (synchronized, called once or twice in a
 * process's life). /ready's answer is worked out by Readiness from this object's volatile ready,
 * serving and warmStartState, the registry and the extension's notReadyReason().
 *
 * Between the webserver's start and the end of start(), serving is false: start() connects to
 * NATS (--events, through ReplicaLinks, which also replays the registration log) or loads the
 * peer's dump (--peer) on the caller's thread, and Api answers 503 on everything but /health,
 * /ready and /metrics. A failure there stops the server and throws StartException. What
 * ReplicaLinks and the warm start make is written by start() before serving turns true (a
 * volatile write that publishes it) and read by stop(); /ready then waits for the NATS-fed
 * indexes to catch up with their subjects.
 * </pre>
 */
public final class KvRouterServer implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(KvRouterServer.class.getName());

  /**
   * How long the webserver's stop lets a request still running finish, after stop() waited the
   * grace period for the requests in flight (the webserver's own grace period).
   */
  static final Duration STOP_TAIL = Duration.ofSeconds(1);

  private final Config config;
  private final Registry registry;
  private final WebServer webServer;
  private final ExecutorService ingest;
  private final HttpPlumbing http;
  private final Api api;
  private final ServerExtension extension;
  private final Dashboard dashboard;
  private final ReplicaLinks links;
  private final InFlight inFlight = new InFlight();
  private volatile boolean ready;
  private volatile boolean serving;
  private volatile String warmStartState = "starting";
  private WarmStart warmStart;
  private boolean stopped;

  private KvRouterServer(Config config, ServerExtension extension, OpenTelemetry openTelemetry) {
    this.config = config;
    this.extension = extension;
    this.registry = new Registry(config::newRouter, config.approximate());
    registry.maxRegistrations(config.maxRegistrations());
    registry.extension(extension);
    ServerMetrics metrics = new ServerMetrics(registry::indexes);
    registry.metrics(metrics);
    this.links = new ReplicaLinks(registry, metrics);
    AtomicInteger ingestThreads = new AtomicInteger();
    this.ingest =
        Executors.newFixedThreadPool(
            config.ingestThreads(),
            r -> {
              Thread t = new Thread(r, "kvrouter-ingest-" + ingestThreads.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    HttpPlumbing http =
        new HttpPlumbing(
            metrics,
            config.edge().authToken(),
            config.edge().maxBodyBytes(),
            config.edge().readTimeout(),
            config.edge().effectiveMaxInflightBodyBytes(),
            () -> readiness().reason(),
            () -> serving && ready,
            OutOfMemoryExit::exitIfInstalled,
            config.writeTimeout());
    this.http = http;
    metrics.bodies(http);
    EventIngest events =
        new EventIngest(
            registry, metrics, ingest, config.acceptUnregistered(), config.natsApplyWait());
    this.dashboard = new Dashboard(registry, extension);
    this.api =
        new Api(
            http,
            registry,
            metrics,
            events,
            config.zmqConnectTimeout(),
            this::readiness,
            config.allowedEngineHosts(),
            dashboard);
    HttpTracing tracing = HttpTracing.of(openTelemetry);
    if (tracing != null) api.tracing(tracing.tracer());
    api.routeBudget(new RouteBudget(registry, metrics, config.maxRoutedBlocks()));
    WebServerConfig.Builder server =
        WebServer.builder()
            .host(config.edge().host())
            .port(config.edge().port())
            .shutdownGracePeriod(
                config.edge().shutdownGrace().compareTo(STOP_TAIL) < 0
                    ? config.edge().shutdownGrace()
                    : STOP_TAIL)
            .shutdownHook(false)
            .featuresDiscoverServices(false)
            .routing(
                r ->
                    api.routing(
                        tracing == null
                            ? r.addFilter(inFlight::filter)
                            : r.addFilter(inFlight::filter).addFilter(tracing::filter),
                        extension == null
                            ? null
                            : rr ->
                                extension.routing(
                                    rr,
                                    new Host(
                                        registry, api, metrics, config, () -> serving && ready))));
    http.configure(server);
    this.webServer = server.build();
  }

  /**
   * The server did not start, and whatever it had started was stopped; the message says why in one
   * line. A {@link ListenException} when the address cannot be bound; otherwise the start failed
   * after the port was bound: the warm start from {@link Config#peer()}, or the connection to
   * {@link Config#events()}.
   */
  public static sealed class StartException extends RuntimeException permits ListenException {
    StartException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /**
   * The server cannot listen on {@link Config#host()}:{@link Config#port()}: the port is in use,
   * the host is not an address of this machine or does not resolve, or the port needs privileges.
   * The message is {@code cannot listen on HOST:PORT: REASON}; nothing was started.
   */
  public static final class ListenException extends StartException {
    private final String host;
    private final int port;

    ListenException(String host, int port, String reason, Throwable cause) {
      super("cannot listen on " + hostPort(host, port) + ": " + reason, cause);
      this.host = host;
      this.port = port;
    }

    /** The address that could not be bound. */
    public String host() {
      return host;
    }

    /** The port that could not be bound (0: any free one). */
    public int port() {
      return port;
    }

    /** Whether another socket holds the port (the common case: pick another port). */
    public boolean inUse() {
      return getCause() instanceof BindException b
          && b.getMessage() != null
          && b.getMessage().toLowerCase(Locale.ROOT).contains("in use");
    }
  }

  /**
   * Starts a server; with {@link Config#peer()}, loads the peer's dump before it serves.
   *
   * @throws ListenException when the address cannot be bound (nothing was started)
   * @throws StartException when the peer cannot be reached or its answer is not a dump, or the NATS
   *     server of {@link Config#events()} cannot be reached (the server was stopped)
   */
  public static KvRouterServer start(Config config) {
    return start(config, null);
  }

  /**
   * Starts a server as {@link #start(Config)} does, with an extension's endpoints beside its own
   * ({@link ServerExtension}; null: none).
   */
  public static KvRouterServer start(Config config, ServerExtension extension) {
    return start(config, extension, null);
  }

  /**
   * Starts a server as {@link #start(Config, ServerExtension)} does, traced with {@code
   * openTelemetry} (docs/observability.md, "Traces"): a server span per request (the probes and
   * {@code /metrics} aside) continuing the client's {@code traceparent}, and a {@code
   * kvrouter.route} child span of {@code POST /route}. Null or {@link OpenTelemetry#noop()}: no
   * tracing, at no cost.
   */
  public static KvRouterServer start(
      Config config, ServerExtension extension, OpenTelemetry openTelemetry) {
    Objects.requireNonNull(config, "config");
    checkBindable(config.edge().host(), config.edge().port());
    KvRouterServer s = new KvRouterServer(config, extension, openTelemetry);
    // before the listener opens, so that a /ready answered from then on says what start() does
    s.ready = true;
    s.warmStartState =
        config.events() != null
            ? "connecting to NATS at " + config.events()
            : config.peer() != null
                ? "warm start from " + config.peer() + " in progress"
                : "starting";
    s.webServer.start();
    s.dashboard.start();
    if (!s.webServer.isRunning()) {
      // lost a race for the port after checkBindable, or another listener failure: Helidon 4.3
      // logs it and returns instead of throwing
      s.stop();
      throw new ListenException(
          config.edge().host(),
          config.edge().port(),
          "the web server did not start (its log says why)",
          null);
    }
    try {
      s.links.start(config, s.port(), state -> s.warmStartState = state);
    } catch (StartException e) {
      s.stop();
      throw e;
    }
    if (config.peer() != null) {
      try {
        s.warmStart = PeerWarmStart.load(config.peer(), s.api, s.registry);
      } catch (RuntimeException e) {
        s.stop();
        throw new StartException(e.getMessage(), e);
      }
    }
    s.serving = true;
    return s;
  }

  /** The replica id of sequence sync, or null when it is off. */
  public String syncReplicaId() {
    return links.syncReplicaId();
  }

  /**
   * Binds {@code host:port} once and releases it, so that an address the webserver could not bind
   * is one clear exception rather than Helidon's logged stack trace and a server that never
   * listens. The socket has SO_REUSEADDR, as Helidon's has.
   */
  private static void checkBindable(String host, int port) {
    InetSocketAddress address = new InetSocketAddress(host, port);
    if (address.isUnresolved()) {
      throw new ListenException(host, port, "unknown host '" + host + "'", null);
    }
    try (ServerSocket probe = new ServerSocket()) {
      probe.setReuseAddress(true);
      probe.bind(address);
    } catch (IOException e) {
      String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      throw new ListenException(host, port, why, e);
    }
  }

  private static String hostPort(String host, int port) {
    return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
  }

  /** The indexes (for tests). */
  Registry registry() {
    return registry;
  }

  /** The dashboard (for tests). */
  Dashboard dashboard() {
    return dashboard;
  }

  /** Connections this server's read deadline cut off (for tests). */
  long readDeadlineClosed() {
    return http.readDeadlineClosed();
  }

  /** Answers being written now whose writes are timed by the write deadline (tests). */
  int writesTimed() {
    return http.writesTimed();
  }

  /** Request bodies being read now, also those still waiting for their first byte (tests). */
  long bodiesBeingRead() {
    return http.bodiesBeingRead();
  }

  /** Bytes of request bodies held now, under {@link Config#maxInflightBodyBytes()} (tests). */
  long bodyBytesHeld() {
    return http.bodyBytesHeld();
  }

  /** Whether to take traffic, and why not; see {@link Readiness}. */
  Readiness readiness() {
    return Readiness.of(
        registry,
        config.readyGrace(),
        () -> ready,
        () -> serving,
        () -> warmStartState,
        inFlight::count,
        extension == null ? () -> null : extension::notReadyReason);
  }

  /** The port the server listens on (the chosen one when the configuration asked for 0). */
  public int port() {
    return webServer.port();
  }

  /** The address the server listens on. */
  public String host() {
    return config.edge().host();
  }

  /** {@code http://host:port}. */
  public String url() {
    return "http://" + hostPort(config.edge().host(), port());
  }

  /** The configuration it runs with. */
  public Config config() {
    return config;
  }

  /**
   * What the warm start from {@link Config#peer()} loaded; null without a peer. Written by start()
   * before it returns, so any thread that has the server sees it.
   */
  public WarmStart warmStart() {
    return warmStart;
  }

  /** Whether it is started and not stopping. */
  public boolean isReady() {
    return ready;
  }

  /**
   * Stops gracefully: {@code /ready} turns 503 at once and new requests get 503 while the requests
   * in flight finish (within the shutdown grace period; the listener stays open meanwhile), then
   * the listener stops accepting and every index is closed. Idempotent; returns when stopped.
   */
  public synchronized void stop() {
    if (stopped) return;
    stopped = true;
    ready = false;
    long left = inFlight.awaitIdle(config.edge().shutdownGrace().toNanos());
    if (left > 0) {
      LOG.warning(
          left
              + " request(s) still in flight after the shutdown grace period of "
              + config.edge().shutdownGrace().toSeconds()
              + " s (--shutdown-grace-seconds): they are cut off");
    }
    webServer.stop();
    dashboard.close();
    if (extension != null) {
      try {
        extension.close();
      } catch (RuntimeException e) {
        LOG.log(Level.WARNING, "extension close failed", e);
      }
    }
    ingest.shutdown();
    try {
      if (!ingest.awaitTermination(
          config.edge().shutdownGrace().toMillis() + 1000, TimeUnit.MILLISECONDS)) {
        ingest.shutdownNow();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    // the log's thread applies registrations to the registry: stopped first
    links.closeLog();
    registry.close();
    links.close();
    http.close();
  }

  /**
   * What a warm start from a peer's {@code GET /dump} loaded.
   *
   * @param models distinct model names
   * @param indexes indexes, one per (model, routing group)
   * @param workers worker ranks registered
   * @param events events in the dump, applied (the dump lists one per stored block, and with tiers
   *     one per stored block and tier holding it)
   * @param blocks (worker rank, block) pairs the indexes hold after them
   */
  public record WarmStart(int models, int indexes, int workers, long events, long blocks) {}

  /** {@link #stop()}. */
  @Override
  public void close() {
    stop();
  }

  /**
   * The service's settings: the HTTP edge's ({@link EdgeSettings}), the routing's ({@link
   * RoutingSettings}) and the server's own; {@link #builder()} starts from the defaults.
   *
   * @param edge where the service listens, its body limits, read deadline, admin token and shutdown
   *     grace ({@link EdgeSettings}); shared with {@code gateway}
   * @param acceptUnregistered apply {@code /events} of worker ranks that are not registered instead
   *     of refusing the batch with 404; default false
   * @param routing the routing settings ({@link RoutingSettings}: the cost's weights, busy limits,
   *     request expiry, approximate mode, the index's bounds, tier weights); shared with {@code
   *     gateway} and {@code simulate}
   * @param ingestThreads platform threads that decode and apply {@code /events} batches; default 1
   * @param zmqConnectTimeout how long {@code POST /register} with an {@code endpoint} waits for the
   *     first connection to the engine before refusing with 400; zero: it does not wait (the rank
   *     is registered at once and {@code /ready} waits for it); default 5 s
   * @param readyGrace how long {@code /ready} waits for a ZMQ listener's first connection before it
   *     stops holding readiness back (it is then reported as given up); default 30 s
   * @param peer base URL of a running kvrouter whose {@code GET /dump} is loaded before serving
   *     (warm start), or null
   * @param events {@code nats://host:port}: every index follows its NATS JetStream subject and
   *     {@code POST /events} publishes there (several servers then hold the same indexes); null:
   *     events are applied in-process
   * @param replicaId with {@code events}: the name of this server's snapshots and consumers; null:
   *     {@code serve-<port>}. With sync, also this server's name among its peers (null: {@code
   *     serve-<port>-<random>}, a new one at each start)
   * @param natsApplyWait with {@code events}: how long {@code POST /events} waits, after NATS
   *     stored the batch, for this server's replica to apply it (so that a {@code /query} sent
   *     after the answer sees it) before answering 503, and how long {@code POST /register} and
   *     {@code POST /unregister} wait for this server to apply what they published; default 10 s
   * @param selector makes the {@link WorkerSelector} of each new index's router (one per index: a
   *     selector need not be thread-safe), replacing the cost built from the weights above; null
   *     (the default): that cost. For benchmarks that compare policies ({@code kvrouter bench
   *     fleet}); no flag of {@code serve} sets it
   * @param sync sequence sync (docs/service.md, "Several replicas share their in-flight load"):
   *     {@code nats://host:port} shares every index's requests in flight with the other replicas on
   *     that NATS server, so that each one's loads count the whole fleet's; {@code "off"}: not
   *     shared; null (the default): shared on the {@code events} server when there is one, off
   *     otherwise
   * @param syncHeartbeat with sync: how often an idle replica says it is alive; a peer silent for 3
   *     heartbeats is dropped with its requests, and a starting replica waits 2 before /ready is
   *     200; default 1 s
   * @param maxRegistrations the most ranks registered at once, over every model and routing group;
   *     a {@code POST /register} past it gets 429 (counted in {@code
   *     kvrouter_registrations_refused_total}); default {@value #DEFAULT_MAX_REGISTRATIONS}
   * @param allowedEngineHosts when not empty, the only hosts (names or addresses, as written in the
   *     URL, any case) a registered {@code base_url} may name; another is refused with 403; empty
   *     (the default): any host
   * @param maxRoutedBlocks the most blocks the routed requests in flight may hold, each request's
   *     counted whole (until freed or expired); a {@code POST /route} past it gets 429 with
   *     Retry-After; default {@value #DEFAULT_MAX_ROUTED_BLOCKS}
   * @param writeTimeout a connection whose answer's write makes no progress for this long (its
   *     client does not read, as a client that pipelines requests and never reads) is closed and
   *     counted in {@code kvrouter_http_write_timeouts_total}; null: the default, 30 s
   */
  public record Config(
      EdgeSettings edge,
      boolean acceptUnregistered,
      RoutingSettings routing,
      int ingestThreads,
      Duration zmqConnectTimeout,
      Duration readyGrace,
      String peer,
      String events,
      String replicaId,
      Duration natsApplyWait,
      Supplier<WorkerSelector> selector,
      String sync,
      Duration syncHeartbeat,
      int maxRegistrations,
      Set<String> allowedEngineHosts,
      long maxRoutedBlocks,
      Duration writeTimeout) {

    /**
     * The default of {@link #writeTimeout()}: a connection whose answer's write makes no progress
     * for 30 s (its client does not read) is closed.
     */
    public static final Duration DEFAULT_WRITE_TIMEOUT = Duration.ofSeconds(30);

    /**
     * The default of {@link #maxRoutedBlocks()}: 8 Mi blocks. A held block (a routed request not
     * yet freed, every hash distinct) was measured at 41 B of retained heap after GC, at {@code
     * block_size} 1 and 16 alike (only the hashes are kept, not the tokens; HeldBlocksMemoryTest,
     * which also holds the full default budget under 384 MiB): about 328 MiB when full. It was 16
     * Mi blocks, about 656 MiB at that cost: with the in-flight body budget's default (a quarter of
     * the heap), over half of a 2 GiB heap before the index or any parsing. 8 Mi blocks is still
     * 128 Mi tokens in flight at {@code block_size} 16.
     */
    public static final long DEFAULT_MAX_ROUTED_BLOCKS = 8L << 20;

    /** The default of {@link #maxRegistrations()}: ranks registered at once. */
    public static final int DEFAULT_MAX_REGISTRATIONS = 4096;

    /** The default of {@link #natsApplyWait()}, 10 s. */
    public static final Duration DEFAULT_NATS_APPLY_WAIT = Duration.ofSeconds(10);

    public Config {
      Objects.requireNonNull(edge, "edge");
      Objects.requireNonNull(routing, "routing");
      if (ingestThreads < 1) {
        throw new IllegalArgumentException("ingestThreads must be >= 1, got " + ingestThreads);
      }
      Objects.requireNonNull(zmqConnectTimeout, "zmqConnectTimeout");
      if (zmqConnectTimeout.isNegative()) {
        throw new IllegalArgumentException(
            "zmqConnectTimeout must be >= 0, got " + zmqConnectTimeout);
      }
      Objects.requireNonNull(readyGrace, "readyGrace");
      if (readyGrace.isNegative()) {
        throw new IllegalArgumentException("readyGrace must be >= 0, got " + readyGrace);
      }
      peer = peer == null || peer.isBlank() ? null : PeerWarmStart.checkUrl(peer);
      events = events == null || events.isBlank() ? null : NatsEvents.checkUrl(events);
      replicaId =
          replicaId == null || replicaId.isBlank() ? null : NatsEvents.checkReplicaId(replicaId);
      if (peer != null && events != null) {
        throw new IllegalArgumentException(
            "peer and events: choose one; with --events nats://... a starting replica loads the"
                + " newest NATS snapshot and the stream, which is its warm start");
      }
      Objects.requireNonNull(natsApplyWait, "natsApplyWait");
      if (natsApplyWait.isNegative() || natsApplyWait.isZero()) {
        throw new IllegalArgumentException("natsApplyWait must be > 0, got " + natsApplyWait);
      }
      if (sync == null || sync.isBlank()) {
        sync = null;
      } else if (sync.trim().equalsIgnoreCase(SYNC_OFF)) {
        sync = SYNC_OFF;
      } else {
        sync = NatsConnections.checkUrl("sync", sync);
      }
      Objects.requireNonNull(syncHeartbeat, "syncHeartbeat");
      if (syncHeartbeat.isNegative() || syncHeartbeat.isZero()) {
        throw new IllegalArgumentException("syncHeartbeat must be > 0, got " + syncHeartbeat);
      }
      if (maxRegistrations < 1) {
        throw new IllegalArgumentException(
            "maxRegistrations must be >= 1, got " + maxRegistrations);
      }
      if (maxRoutedBlocks < 1) {
        throw new IllegalArgumentException("maxRoutedBlocks must be >= 1, got " + maxRoutedBlocks);
      }
      if (writeTimeout == null) writeTimeout = DEFAULT_WRITE_TIMEOUT;
      if (writeTimeout.isNegative() || writeTimeout.isZero()) {
        throw new IllegalArgumentException("writeTimeout must be > 0, got " + writeTimeout);
      }
      Set<String> hosts = new TreeSet<>();
      if (allowedEngineHosts != null) {
        for (String h : allowedEngineHosts) {
          if (h != null && !h.isBlank()) hosts.add(h.trim().toLowerCase(Locale.ROOT));
        }
      }
      allowedEngineHosts = Collections.unmodifiableSet(hosts);
    }

    /** This configuration with {@code v} as its {@link #edge()}. */
    public Config withEdge(EdgeSettings v) {
      return new Config(
          v,
          acceptUnregistered,
          routing,
          ingestThreads,
          zmqConnectTimeout,
          readyGrace,
          peer,
          events,
          replicaId,
          natsApplyWait,
          selector,
          sync,
          syncHeartbeat,
          maxRegistrations,
          allowedEngineHosts,
          maxRoutedBlocks,
          writeTimeout);
    }

    /** This configuration with {@code token} as its edge's {@link EdgeSettings#authToken()}. */
    public Config withAuthToken(String token) {
      return withEdge(edge.withAuthToken(token));
    }

    /** This configuration with {@code v} as its {@link #selector()}. */
    public Config withSelector(Supplier<WorkerSelector> v) {
      return new Config(
          edge,
          acceptUnregistered,
          routing,
          ingestThreads,
          zmqConnectTimeout,
          readyGrace,
          peer,
          events,
          replicaId,
          natsApplyWait,
          v,
          sync,
          syncHeartbeat,
          maxRegistrations,
          allowedEngineHosts,
          maxRoutedBlocks,
          writeTimeout);
    }

    /** {@link RoutingSettings#approximate()} of {@link #routing()}. */
    public boolean approximate() {
      return routing.approximate();
    }

    /** {@link RoutingSettings#maxTierBlocks()} of {@link #routing()}. */
    public int maxTierBlocks() {
      return routing.maxTierBlocks();
    }

    /** The value of {@link #sync()} that turns sequence sync off. */
    public static final String SYNC_OFF = "off";

    /**
     * The NATS URL sequence sync uses, or null when it is off: {@link #sync()} when it is a URL,
     * else {@link #events()} (sync is on by default with NATS), null with {@code "off"}.
     */
    public String effectiveSync() {
      if (SYNC_OFF.equals(sync)) return null;
      return sync != null ? sync : events;
    }

    /** A builder holding the defaults. */
    public static Builder builder() {
      return new Builder();
    }

    /** The effective settings by flag name, the token masked; for the start-up banner. */
    public Map<String, String> describe() {
      Map<String, String> m = new LinkedHashMap<>();
      m.put("host", edge.host());
      m.put("port", Integer.toString(edge.port()));
      m.put("max-body-size", Long.toString(edge.maxBodyBytes()));
      m.put("auth-token", edge.authToken() == null ? "(none)" : "****** (set)");
      m.put("accept-unregistered", Boolean.toString(acceptUnregistered));
      m.put("shutdown-grace-seconds", Long.toString(edge.shutdownGrace().toSeconds()));
      m.putAll(routing.describe());
      m.put("ingest-threads", Integer.toString(ingestThreads));
      m.put("zmq-connect-timeout-ms", Long.toString(zmqConnectTimeout.toMillis()));
      m.put("ready-grace-seconds", Long.toString(readyGrace.toSeconds()));
      m.put("peer", peer == null ? "(none)" : peer);
      m.put("events", events == null ? "(in-process: POST /events, ZMQ endpoints)" : events);
      if (events != null) {
        m.put("replica-id", replicaId == null ? "(serve-<port>)" : replicaId);
        m.put("nats-apply-wait-ms", Long.toString(natsApplyWait.toMillis()));
      }
      String effSync = effectiveSync();
      m.put(
          "sync",
          effSync == null ? "(off)" : effSync + (sync == null ? " (the --events server)" : ""));
      if (effSync != null) m.put("sync-heartbeat-ms", Long.toString(syncHeartbeat.toMillis()));
      m.put(
          "max-blocks",
          routing.maxBlocks() == 0 ? "(no bound)" : Long.toString(routing.maxBlocks()));
      m.put(
          "max-tier-blocks",
          routing.maxTierBlocks() == 0
              ? "(no bound)"
              : routing.maxTierBlocks() + " per rank and tier");
      m.put(
          "tier-weights",
          "host "
              + routing.tierWeights().host()
              + ", disk "
              + routing.tierWeights().disk()
              + ", external "
              + routing.tierWeights().external());
      m.put("read-timeout-ms", Long.toString(edge.readTimeout().toMillis()));
      m.put("max-registrations", Integer.toString(maxRegistrations));
      m.put("max-routed-blocks", Long.toString(maxRoutedBlocks));
      m.put("write-timeout-ms", Long.toString(writeTimeout.toMillis()));
      m.put(
          "allowed-engine-hosts",
          allowedEngineHosts.isEmpty() ? "(any)" : String.join(",", allowedEngineHosts));
      m.put(
          "max-inflight-body-size",
          edge.effectiveMaxInflightBodyBytes()
              + (edge.maxInflightBodyBytes() == 0 ? " (heap / 4)" : ""));
      return m;
    }

    /** Like {@link #describe()}: never shows the token. */
    @Override
    public String toString() {
      return "Config" + describe();
    }

    KvRouter newRouter(int blockSize) {
      // the device index is the router's default kind, the compressed tree (bounded with
      // --max-blocks); copies on other tiers get cumulative indexes of the same kind when their
      // first event arrives (docs/routing.md, "Blocks beyond the GPU")
      return routing.newRouter(blockSize, selector);
    }

    /**
     * Starts from the defaults ({@link EdgeSettings#defaults()}, {@link RoutingSettings#DEFAULTS}
     * and the server's own); {@link #build()} validates. The edge's settings also have one setter
     * each (most callers set only a port); the routing's are set as one value, {@link
     * #routing(RoutingSettings)}.
     */
    public static final class Builder {
      private EdgeSettings edge = EdgeSettings.defaults();
      private RoutingSettings routing = RoutingSettings.DEFAULTS;
      private int maxRegistrations = DEFAULT_MAX_REGISTRATIONS;
      private Set<String> allowedEngineHosts = Set.of();
      private long maxRoutedBlocks = DEFAULT_MAX_ROUTED_BLOCKS;
      private Duration writeTimeout = DEFAULT_WRITE_TIMEOUT;
      private boolean acceptUnregistered;
      private Supplier<WorkerSelector> selector;
      private int ingestThreads = 1;
      private Duration zmqConnectTimeout = Duration.ofSeconds(5);
      private Duration readyGrace = Duration.ofSeconds(30);
      private String peer;
      private String events;
      private String replicaId;
      private Duration natsApplyWait = DEFAULT_NATS_APPLY_WAIT;
      private String sync;
      private Duration syncHeartbeat = Duration.ofSeconds(1);

      private Builder() {}

      /** See {@link Config#edge()}: every edge setting at once. */
      public Builder edge(EdgeSettings v) {
        this.edge = Objects.requireNonNull(v, "edge");
        return this;
      }

      /** See {@link EdgeSettings#host()}. */
      public Builder host(String v) {
        edge = edge.withHost(v);
        return this;
      }

      /** See {@link EdgeSettings#port()}. */
      public Builder port(int v) {
        edge = edge.withPort(v);
        return this;
      }

      /** See {@link EdgeSettings#maxBodyBytes()}. */
      public Builder maxBodyBytes(long v) {
        edge = edge.withMaxBodyBytes(v);
        return this;
      }

      /** See {@link EdgeSettings#maxInflightBodyBytes()}; 0: the default. */
      public Builder maxInflightBodyBytes(long v) {
        edge = edge.withMaxInflightBodyBytes(v);
        return this;
      }

      /** See {@link EdgeSettings#authToken()}. */
      public Builder authToken(String v) {
        edge = edge.withAuthToken(v);
        return this;
      }

      /** See {@link EdgeSettings#readTimeout()}. */
      public Builder readTimeout(Duration v) {
        edge = edge.withReadTimeout(v);
        return this;
      }

      /** See {@link EdgeSettings#shutdownGrace()}. */
      public Builder shutdownGrace(Duration v) {
        edge = edge.withShutdownGrace(v);
        return this;
      }

      /** See {@link Config#routing()}: every routing setting at once. */
      public Builder routing(RoutingSettings v) {
        this.routing = Objects.requireNonNull(v, "routing");
        return this;
      }

      /** See {@link Config#sync()}: a NATS URL, {@code "off"}, or null (follow the events'). */
      public Builder sync(String sync) {
        this.sync = sync;
        return this;
      }

      /** See {@link Config#syncHeartbeat()}. */
      public Builder syncHeartbeat(Duration syncHeartbeat) {
        this.syncHeartbeat = syncHeartbeat;
        return this;
      }

      public Builder events(String events) {
        this.events = events;
        return this;
      }

      public Builder replicaId(String replicaId) {
        this.replicaId = replicaId;
        return this;
      }

      public Builder zmqConnectTimeout(Duration zmqConnectTimeout) {
        this.zmqConnectTimeout = zmqConnectTimeout;
        return this;
      }

      public Builder readyGrace(Duration readyGrace) {
        this.readyGrace = readyGrace;
        return this;
      }

      public Builder peer(String peer) {
        this.peer = peer;
        return this;
      }

      public Builder acceptUnregistered(boolean acceptUnregistered) {
        this.acceptUnregistered = acceptUnregistered;
        return this;
      }

      public Builder ingestThreads(int ingestThreads) {
        this.ingestThreads = ingestThreads;
        return this;
      }

      /** See {@link Config#natsApplyWait()}; only used with {@link #events(String)}. */
      public Builder natsApplyWait(Duration natsApplyWait) {
        this.natsApplyWait = natsApplyWait;
        return this;
      }

      /** See {@link Config#maxRegistrations()}. */
      public Builder maxRegistrations(int v) {
        this.maxRegistrations = v;
        return this;
      }

      /** See {@link Config#maxRoutedBlocks()}. */
      public Builder maxRoutedBlocks(long v) {
        this.maxRoutedBlocks = v;
        return this;
      }

      /** See {@link Config#writeTimeout()}. */
      public Builder writeTimeout(Duration v) {
        this.writeTimeout = v;
        return this;
      }

      /** See {@link Config#allowedEngineHosts()}. */
      public Builder allowedEngineHosts(Collection<String> v) {
        this.allowedEngineHosts = v == null ? Set.of() : Set.copyOf(v);
        return this;
      }

      /** See {@link Config#selector()}. */
      public Builder selector(Supplier<WorkerSelector> v) {
        this.selector = v;
        return this;
      }

      public Config build() {
        return new Config(
            edge,
            acceptUnregistered,
            routing,
            ingestThreads,
            zmqConnectTimeout,
            readyGrace,
            peer,
            events,
            replicaId,
            natsApplyWait,
            selector,
            sync,
            syncHeartbeat,
            maxRegistrations,
            allowedEngineHosts,
            maxRoutedBlocks,
            writeTimeout);
      }
    }
  }
}
