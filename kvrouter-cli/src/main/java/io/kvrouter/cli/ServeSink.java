package io.kvrouter.cli;

import io.kvrouter.discovery.DiscoveredEngine;
import io.kvrouter.discovery.EngineSink;
import io.kvrouter.discovery.RemovalReason;
import io.kvrouter.server.ServerHost;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.logging.Logger;

/**
 * Where {@code serve --discovery kubernetes} puts the engines it finds: each rank is registered as
 * {@code POST /register} would (its ZMQ endpoints, base URL, role), and unregistered when it goes.
 * {@code serve} routes nothing itself (its clients call {@code /route} and free their requests), so
 * there is nothing to drain: a rank that goes is unregistered at once.
 *
 * <pre>
 * Implementation notes
 *
 * Called on the discovery's thread, one call at a time (EngineSink); add() blocks while the
 * server waits for the rank's ZMQ connection (--zmq-connect-timeout-ms) and throws the server's
 * refusal (ServerHost.HttpError, with POST /register's message), which the discovery retries.
 * </pre>
 */
final class ServeSink implements EngineSink {
  private static final Logger LOG = Logger.getLogger(ServeSink.class.getName());

  private final ServerHost host;
  private final DiscoveryMetrics metrics;

  ServeSink(ServerHost host, DiscoveryMetrics metrics) {
    this.host = host;
    this.metrics = metrics;
  }

  /** The registration a discovered engine is. */
  static ServerHost.Registration registration(DiscoveredEngine e) {
    return new ServerHost.Registration(
        e.model(),
        null,
        e.blockSize(),
        e.instanceId(),
        e.dpRank(),
        e.baseUrl(),
        e.eventsEndpoint(),
        e.replayEndpoint(),
        e.topic(),
        e.role(),
        e.clearScope());
  }

  @Override
  public void add(DiscoveredEngine e) {
    host.register(registration(e));
    LOG.info(() -> "discovered engine " + e.id() + " registered (model " + e.model() + ")");
  }

  @Override
  public CompletionStage<Void> remove(DiscoveredEngine e, RemovalReason reason) {
    metrics.removed(reason);
    try {
      host.unregister(e.model(), null, e.instanceId(), e.dpRank());
    } catch (ServerHost.HttpError x) {
      // 404: unregistered meanwhile (POST /unregister); anything else: the removal failed
      if (x.status() != 404) return CompletableFuture.failedFuture(x);
    }
    LOG.info(() -> "discovered engine " + e.id() + " unregistered (" + reason.wireName() + ")");
    return CompletableFuture.completedFuture(null);
  }
}
