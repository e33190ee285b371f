package io.kvrouter.cli;

import io.kvrouter.discovery.DiscoveryConfig;
import io.kvrouter.discovery.KubernetesDiscovery;
import io.kvrouter.server.EdgeSettings;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.OutOfMemoryExit;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.logging.Level;
import java.util.logging.Logger;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvrouter serve}: runs the router as an HTTP service until SIGTERM or Ctrl-C.
 *
 * <pre>
 * Implementation notes
 *
 * Flags are picocli options. --config names a properties file whose keys are the long flag
 * names without dashes (port=8091, auth-token=...); its values are turned into --key=value
 * arguments placed before the command line's own and the whole is parsed again into a fresh
 * instance, so a flag on the command line overrides the file and both go through the same
 * validation. The effective configuration is printed at start-up with the token masked.
 *
 * Output goes to the command line's out and err writers (Main.run(out, err, ...) in tests). A
 * start that fails (KvRouterServer.StartException: the address cannot be bound, the warm start or
 * the NATS connection failed) is one line on err and exit code 1; bad flags are exit code 2.
 *
 * With --discovery kubernetes (DiscoveryOptions) the server starts with a DiscoveryEndpoint (GET
 * /discovery, metrics, its part of /ready), then the discovery with a ServeSink that registers
 * and unregisters the discovered ranks through the server's ServerHost.
 *
 * The command blocks its thread until SIGTERM or SIGINT (Signals), then stops the server
 * gracefully (KvRouterServer.stop: /ready 503, finish requests in flight, stop accepting, close
 * the indexes), prints that it did and returns 0; a shutdown hook stops it too when the JVM
 * exits otherwise. Helidon's own INFO logging is turned down to WARNING so the banner stays
 * readable; --verbose keeps it.
 * </pre>
 */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Run the router as an HTTP service (Dynamo-style API: /register, /events, /query, /route,"
          + " /dump, /metrics ...).",
      "With no arguments: an empty router on 127.0.0.1:8090."
    },
    exitCodeListHeading = "Exit codes:%n",
    exitCodeList = {
      "0:stopped by SIGTERM or Ctrl-C (SIGINT): /ready answered 503 at once, the requests in"
          + " flight finished (or --shutdown-grace-seconds ran out)",
      "1:could not start: the address cannot be bound (e.g. the port is in use), or the --peer"
          + " warm start or the --events NATS connection failed; one line on stderr says which",
      "2:bad flags or --config file",
      "143:a second SIGTERM while stopping (130: a second Ctrl-C): stopped at once"
    })
public final class ServeCommand implements Callable<Integer> {
  /** Held strongly: java.util.logging keeps loggers weakly, and a collected one loses its level. */
  private static final Logger HELIDON_LOG = Logger.getLogger("io.helidon");

  @Spec CommandSpec spec;

  @Mixin RoutingOptions routing = new RoutingOptions();

  @Mixin ReplicaOptions replica = new ReplicaOptions();

  @Mixin DiscoveryOptions discovery = new DiscoveryOptions();

  @Mixin TracingOptions tracing = new TracingOptions();

  @Mixin
  EdgeOptions edge =
      new EdgeOptions(EdgeSettings.DEFAULT_PORT, EdgeSettings.DEFAULT_SHUTDOWN_GRACE.toSeconds());

  @Option(
      names = "--max-inflight-body-size",
      paramLabel = "SIZE",
      converter = SizeConverter.class,
      description =
          "Most memory all request bodies being received may hold together; a body that would"
              + " grow past it gets 503. Bytes, or with KiB/MiB/GiB (default: a quarter of the"
              + " maximum heap, at least --max-body-size).")
  long maxInflightBodyBytes;

  @Option(
      names = "--accept-unregistered",
      arity = "0..1",
      paramLabel = "BOOL",
      description =
          "Apply /events of worker ranks that are not registered instead of refusing the batch"
              + " with 404.")
  boolean acceptUnregistered;

  @Option(
      names = "--ingest-threads",
      paramLabel = "N",
      description =
          "Platform threads that decode and apply /events batches (default: ${DEFAULT-VALUE}).")
  int ingestThreads = 1;

  @Option(
      names = "--peer",
      paramLabel = "URL",
      description =
          "Warm start: load GET /dump (registrations and indexes) of the kvrouter serve at URL"
              + " (http://host:port) before serving; exit 1 if it fails.")
  String peer;

  @Option(
      names = "--events",
      paramLabel = "URL",
      description =
          "nats://host:port: every index follows its subject kvrouter.events.<model>.<group> on"
              + " the JetStream stream KVROUTER_EVENTS (snapshot, then stream) and POST /events"
              + " publishes there, so servers on one NATS hold the same indexes; default:"
              + " in-process.")
  String events;

  @Option(
      names = "--nats-apply-wait-ms",
      paramLabel = "MS",
      description =
          "With --events: how long POST /events, /register and /unregister wait for this server's"
              + " replica to apply what they published before answering 503 (default: 10000).")
  Long natsApplyWaitMs;

  @Option(
      names = "--config",
      paramLabel = "FILE",
      description =
          "Properties file whose keys are these flags' long names without dashes (port=8091);"
              + " scorer takes several values separated by whitespace; flags on the command line"
              + " win.")
  Path config;

  @Option(names = "--verbose", description = "Keep Helidon's INFO log lines.")
  boolean verbose;

  @Override
  public Integer call() throws Exception {
    return ConfigFileArgs.call(
        spec,
        this,
        config,
        "kvrouter serve",
        List.of("scorer"),
        ServeCommand::new,
        ServeCommand::run);
  }

  private int run(PrintWriter out, PrintWriter err) throws InterruptedException {
    if (!verbose) HELIDON_LOG.setLevel(Level.WARNING);
    KvRouterServer.Config cfg;
    DiscoveryConfig dc;
    try {
      dc = discovery.config(null, DiscoveryConfig.DEFAULT_BLOCK_SIZE);
      KvRouterServer.Config.Builder b =
          edge.applyTo(KvRouterServer.Config.builder())
              .maxInflightBodyBytes(maxInflightBodyBytes)
              .acceptUnregistered(acceptUnregistered)
              .routing(routing.settings())
              .selector(routing.selector(routing.scorers()))
              .ingestThreads(ingestThreads)
              .peer(peer)
              .events(events);
      replica.applyTo(b);
      if (natsApplyWaitMs != null) {
        if (natsApplyWaitMs < 1) {
          throw new IllegalArgumentException(
              "--nats-apply-wait-ms must be >= 1, got " + natsApplyWaitMs);
        }
        b.natsApplyWait(Duration.ofMillis(natsApplyWaitMs));
      }
      cfg = b.build();
    } catch (IllegalArgumentException e) {
      err.println("kvrouter serve: " + e.getMessage());
      return 2;
    }
    out.println("kvrouter serve: configuration");
    for (Map.Entry<String, String> e : cfg.describe().entrySet()) {
      out.printf(Locale.ROOT, "  %-24s %s%n", e.getKey(), e.getValue());
    }
    out.flush();
    // an OutOfMemoryError ends the process (a supervisor restarts it) rather than leaving a
    // server whose threads died of it; the launcher also passes -XX:+ExitOnOutOfMemoryError
    OutOfMemoryExit.install();
    Signals signals = Signals.install();
    DiscoveryEndpoint found = dc == null ? null : new DiscoveryEndpoint(dc);
    OpenTelemetrySdk otel;
    try {
      otel = tracing.start("kvrouter");
    } catch (IllegalArgumentException e) {
      err.println("kvrouter serve: " + e.getMessage());
      return 2;
    }
    KvRouterServer server;
    try {
      server = KvRouterServer.start(cfg, found, otel);
    } catch (KvRouterServer.ListenException e) {
      err.println(
          "kvrouter serve: "
              + e.getMessage()
              + (e.inUse()
                  ? " (another process listens there: stop it, or choose another --port)"
                  : ""));
      if (otel != null) otel.close();
      return 1;
    } catch (KvRouterServer.StartException e) {
      err.println("kvrouter serve: " + e.getMessage());
      if (otel != null) otel.close();
      return 1;
    } catch (RuntimeException e) {
      err.println(
          "kvrouter serve: cannot start on " + edge.host + ":" + edge.port + ": " + rootMessage(e));
      if (otel != null) otel.close();
      return 1;
    }
    KvRouterServer.WarmStart loaded = server.warmStart();
    if (loaded != null) {
      out.println(
          "kvrouter serve: warm start from "
              + cfg.peer()
              + " loaded "
              + count(loaded.models(), "model")
              + " ("
              + count(loaded.indexes(), "index", "indexes")
              + "), "
              + count(loaded.workers(), "worker rank")
              + ", "
              + count(loaded.blocks(), "block"));
    }
    if (cfg.events() != null) {
      out.println(
          "kvrouter serve: connected to NATS at "
              + cfg.events()
              + "; each index follows kvrouter.events.<model>.<routing group> on stream"
              + " KVROUTER_EVENTS once a worker is registered");
    }
    if (otel != null) {
      out.println(
          "kvrouter serve: tracing on (--otel), configured by OTEL_* (docs/observability.md)");
    }
    KvRouterServer started = server;
    // the SDK after the server: the spans of the last requests are flushed
    Thread hook =
        new Thread(
            () -> {
              started.stop();
              if (otel != null) otel.close();
            },
            "kvrouter-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    if (found != null) {
      try {
        found.attach(KubernetesDiscovery.start(dc, new ServeSink(found.host(), found.metrics())));
      } catch (RuntimeException e) {
        err.println("kvrouter serve: --discovery kubernetes cannot start: " + e.getMessage());
        server.stop();
        return 1;
      }
      out.println(
          "kvrouter serve: discovering engines: the Ready "
              + dc.describe()
              + " (GET "
              + server.url()
              + "/discovery shows what it sees; /ready answers 503 until it found one)");
    }
    String url = server.url();
    String auth = cfg.edge().authToken() == null ? "" : " -H \"Authorization: Bearer $TOKEN\"";
    out.println("kvrouter serve: listening on " + url);
    if (loaded != null && loaded.workers() > 0) {
      out.println(
          count(loaded.workers(), "worker rank")
              + " registered by the warm start (curl "
              + url
              + "/workers lists them). Register more the same way:");
    } else {
      out.println("No worker is registered yet. Register one (block size = the engine's):");
    }
    out.println(
        "  curl -X POST "
            + url
            + "/register"
            + auth
            + " -H 'Content-Type: application/json' -d '{\"instance_id\": 1, \"model_name\":"
            + " \"my-model\", \"block_size\": 16}'");
    out.println(
        "then post its KV events (a JSON array of Dynamo RouterEvents) to "
            + url
            + "/events?model_name=my-model and ask POST /query or /route.");
    out.println("Ctrl-C or SIGTERM stops it gracefully.");
    out.flush();
    String signal = signals.await();
    out.println(
        "kvrouter serve: "
            + signal
            + ": stopping (/ready answers 503, requests in flight finish)...");
    out.flush();
    server.stop();
    if (otel != null) otel.close();
    out.println("kvrouter serve: stopped");
    out.flush();
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException exiting) {
      // the JVM is shutting down already (another signal): the hook finds the server stopped
    }
    return 0;
  }

  private static String count(long n, String one) {
    return count(n, one, one + "s");
  }

  private static String count(long n, String one, String many) {
    return n + " " + (n == 1 ? one : many);
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null) t = t.getCause();
    return t.getMessage() == null ? t.toString() : t.getMessage();
  }
}
