package io.kvrouter.server;

import io.kvrouter.route.KvRouter;
import io.kvrouter.transport.nats.NatsConnections;
import io.kvrouter.transport.nats.NatsSequenceSync;
import io.nats.client.Connection;
import java.time.Duration;

/**
 * The server's side of sequence sync (docs/service.md, "Several replicas share their in-flight
 * load"): one NATS connection, and a {@link NatsSequenceSync} per index, started when the Registry
 * creates the index and closed before its router.
 *
 * <pre>
 * Implementation notes
 *
 * The connection is the events' one when sync goes to the same NATS URL as --events (owned by
 * NatsEvents then, not closed here), else one of its own, made in connect() before the server
 * serves. follow() runs under the Registry's membership lock (it subscribes: a round trip); the
 * NatsSequenceSync is stored in ModelIndex.sync before the index is visible. Readiness and metrics
 * read ModelIndex.sync of the live indexes.
 * </pre>
 */
final class SequenceSyncs implements AutoCloseable {
  private final String url;
  private final String replicaId;
  private final Duration heartbeat;
  private final Connection nc;
  private final boolean ownsConnection;

  private SequenceSyncs(
      String url, String replicaId, Duration heartbeat, Connection nc, boolean owns) {
    this.url = url;
    this.replicaId = replicaId;
    this.heartbeat = heartbeat;
    this.nc = nc;
    this.ownsConnection = owns;
  }

  /**
   * Connects to {@code url}, or uses {@code shared} (the events' connection to the same URL).
   *
   * @throws IllegalStateException naming the URL when no server answers
   */
  static SequenceSyncs connect(
      String url, String replicaId, Duration heartbeat, Connection shared) {
    if (shared != null) return new SequenceSyncs(url, replicaId, heartbeat, shared, false);
    Connection nc = NatsConnections.connect("sync", url, "kvrouter-sync-" + replicaId);
    return new SequenceSyncs(url, replicaId, heartbeat, nc, true);
  }

  /** This server's replica id among its peers. */
  String replicaId() {
    return replicaId;
  }

  /** The NATS URL. */
  String url() {
    return url;
  }

  /** Starts sharing {@code router}'s in-flight bookkeeping on {@code key}'s subject. */
  NatsSequenceSync follow(ModelKey key, KvRouter router) {
    return NatsSequenceSync.builder(
            nc,
            NatsSequenceSync.subject(key.modelName(), key.routingGroup()),
            router.sequenceSync(replicaId))
        .heartbeat(heartbeat)
        .start();
  }

  /** Closes the connection when it is this object's own (the syncs are closed by the Registry). */
  @Override
  public void close() {
    if (!ownsConnection) return;
    try {
      nc.close();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
