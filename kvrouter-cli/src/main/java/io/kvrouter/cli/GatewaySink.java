package io.kvrouter.cli;

import io.kvrouter.discovery.DiscoveredEngine;
import io.kvrouter.discovery.EngineSink;
import io.kvrouter.discovery.RemovalReason;
import io.kvrouter.gateway.EngineSpec;
import io.kvrouter.gateway.Gateway;
import java.time.Duration;
import java.util.concurrent.CompletionStage;
import java.util.logging.Logger;

/**
 * Where {@code gateway --discovery kubernetes} puts the engines it finds: each one is registered as
 * a static {@code --engine} would be (and checked at once), and one that goes is drained (no new
 * requests, those in flight finish within {@code --discovery-drain-seconds}) and then unregistered.
 *
 * <pre>
 * Implementation notes
 *
 * Called on the discovery's thread, one call at a time (EngineSink). add() blocks while the
 * gateway registers (up to --zmq-connect-timeout-ms for the events socket) and checks the engine;
 * a refusal (IllegalArgumentException with the server's message) goes back to the discovery,
 * which retries. remove() returns the gateway's drain at once; its completion (on the gateway's
 * drain thread) counts a timeout and logs.
 * </pre>
 */
final class GatewaySink implements EngineSink {
  private static final Logger LOG = Logger.getLogger(GatewaySink.class.getName());

  private final Gateway gateway;
  private final Duration drainBound;
  private final DiscoveryMetrics metrics;

  GatewaySink(Gateway gateway, Duration drainBound, DiscoveryMetrics metrics) {
    this.gateway = gateway;
    this.drainBound = drainBound;
    this.metrics = metrics;
  }

  /** The static engine a discovered one is. */
  static EngineSpec spec(DiscoveredEngine e) {
    return new EngineSpec(
        e.baseUrl(),
        e.model(),
        e.blockSize(),
        e.instanceId(),
        e.dpRank(),
        e.eventsEndpoint(),
        e.replayEndpoint(),
        e.topic(),
        e.role(),
        e.clearScope());
  }

  @Override
  public void add(DiscoveredEngine e) {
    try {
      gateway.register(spec(e), e.blockSize());
    } catch (IllegalArgumentException x) {
      // the server's refusal, without the --engine wording of static engines
      Throwable why = x.getCause() != null ? x.getCause() : x;
      throw new IllegalStateException(
          "registering " + e.id() + " (" + e.baseUrl() + "): " + why.getMessage(), x);
    }
    LOG.info(
        () ->
            "discovered engine "
                + e.id()
                + " registered: "
                + e.baseUrl()
                + ", model "
                + e.model()
                + (e.eventsEndpoint() == null ? ", no KV events" : ", events " + e.eventsEndpoint())
                + (gateway.answersHealthChecks(e.baseUrl()) ? "" : " (not answering yet)"));
  }

  @Override
  public CompletionStage<Void> remove(DiscoveredEngine e, RemovalReason reason) {
    metrics.removed(reason);
    LOG.info(() -> "discovered engine " + e.id() + " leaves (" + reason.wireName() + "): draining");
    return gateway
        .drain(e.model(), e.instanceId(), e.dpRank(), drainBound)
        .thenAccept(
            left -> {
              if (left > 0) metrics.drainTimedOut();
              LOG.info(
                  () ->
                      "discovered engine "
                          + e.id()
                          + " unregistered"
                          + (left > 0 ? " with " + left + " request(s) still in flight" : ""));
            });
  }
}
