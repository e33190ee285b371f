package io.kvrouter.cli;

import io.kvrouter.server.KvRouterServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Option;

/**
 * The flags {@code serve} and {@code gateway} share about their engines' event connections and
 * their peers: how long registration and readiness wait for ZMQ, sequence sync among replicas, the
 * HTTP edge's read timeout, and the bounds of registrations. Declared once here as a picocli mixin;
 * {@link #applyTo} sets them on the server's configuration.
 */
final class ReplicaOptions {
  @Option(
      names = "--zmq-connect-timeout-ms",
      paramLabel = "MS",
      description =
          "Registering an engine with a ZMQ endpoint waits this long for its connection and"
              + " refuses with 400 without it; 0 registers at once (default: ${DEFAULT-VALUE}).")
  long zmqConnectTimeoutMs = 5000;

  @Option(
      names = "--ready-grace-seconds",
      paramLabel = "S",
      description =
          "/ready waits at most this long for a ZMQ listener's first connection"
              + " (default: ${DEFAULT-VALUE}).")
  long readyGraceSeconds = 30;

  @Option(
      names = "--sync",
      paramLabel = "URL|off",
      description =
          "nats://host:port: share every index's requests in flight with the other replicas on"
              + " that NATS (subject kvrouter.seq.<model>.<group>), so each one's loads count the"
              + " whole fleet's; off: do not (default: on with serve --events, on its server; off"
              + " otherwise).")
  String sync;

  @Option(
      names = "--replica-id",
      paramLabel = "ID",
      description =
          "This replica's name for its NATS consumers, snapshots and sync peers; keep it stable"
              + " across restarts (default: serve-<port>, or serve-<port>-<random> for sync alone).")
  String replicaId;

  @Option(
      names = "--sync-heartbeat-ms",
      paramLabel = "MS",
      description =
          "With sync: heartbeat interval; a peer silent for 3 is dropped with its requests"
              + " (default: 1000).")
  Long syncHeartbeatMs;

  @Option(
      names = "--read-timeout-ms",
      paramLabel = "MS",
      description =
          "A request must arrive whole within this long from its request line, and an idle"
              + " connection is closed after about as long (default: 30000).")
  Long readTimeoutMs;

  @Option(
      names = "--write-timeout-ms",
      paramLabel = "MS",
      description =
          "A connection whose answer's write makes no progress for this long (its client does"
              + " not read) is closed, counted in kvrouter_http_write_timeouts_total (default:"
              + " 30000).")
  Long writeTimeoutMs;

  @Option(
      names = "--max-registrations",
      paramLabel = "N",
      description =
          "Most engine ranks registered at once, over every model and group; POST /register"
              + " past it gets 429 (default: ${DEFAULT-VALUE}).")
  int maxRegistrations = KvRouterServer.Config.DEFAULT_MAX_REGISTRATIONS;

  @Option(
      names = "--max-routed-blocks",
      paramLabel = "N",
      description =
          "Most blocks the routed requests in flight may hold (each counted whole, until freed"
              + " or expired); POST /route past it gets 429 with Retry-After (default:"
              + " ${DEFAULT-VALUE}).")
  long maxRoutedBlocks = KvRouterServer.Config.DEFAULT_MAX_ROUTED_BLOCKS;

  @Option(
      names = "--allowed-engine-hosts",
      paramLabel = "HOST[,HOST...]",
      split = ",",
      description =
          "Only these hosts (names or addresses as written in the URL) may be registered as an"
              + " engine's base_url; another gets 403 (default: any host).")
  List<String> allowedEngineHosts = new ArrayList<>();

  /** Sets these flags' values on {@code b}. */
  KvRouterServer.Config.Builder applyTo(KvRouterServer.Config.Builder b) {
    if (maxRegistrations < 1) {
      throw new IllegalArgumentException(
          "--max-registrations must be >= 1, got " + maxRegistrations);
    }
    if (maxRoutedBlocks < 1) {
      throw new IllegalArgumentException(
          "--max-routed-blocks must be >= 1, got " + maxRoutedBlocks);
    }
    b.zmqConnectTimeout(Duration.ofMillis(zmqConnectTimeoutMs))
        .readyGrace(Duration.ofSeconds(readyGraceSeconds))
        .sync(sync)
        .replicaId(replicaId)
        .maxRegistrations(maxRegistrations)
        .maxRoutedBlocks(maxRoutedBlocks)
        .allowedEngineHosts(allowedEngineHosts);
    if (syncHeartbeatMs != null) {
      if (syncHeartbeatMs < 1) {
        throw new IllegalArgumentException(
            "--sync-heartbeat-ms must be >= 1, got " + syncHeartbeatMs);
      }
      b.syncHeartbeat(Duration.ofMillis(syncHeartbeatMs));
    }
    if (readTimeoutMs != null) {
      if (readTimeoutMs < 1) {
        throw new IllegalArgumentException("--read-timeout-ms must be >= 1, got " + readTimeoutMs);
      }
      b.readTimeout(Duration.ofMillis(readTimeoutMs));
    }
    if (writeTimeoutMs != null) {
      if (writeTimeoutMs < 1) {
        throw new IllegalArgumentException(
            "--write-timeout-ms must be >= 1, got " + writeTimeoutMs);
      }
      b.writeTimeout(Duration.ofMillis(writeTimeoutMs));
    }
    return b;
  }
}
