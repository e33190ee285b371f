package io.kvrouter.server;

import io.kvrouter.server.KvRouterServer.StartException;
import io.nats.client.Connection;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Consumer;

/**
 * A server's links to the other replicas of its fleet over NATS: the events stream ({@code
 * --events}: NatsEvents), the registration log every replica writes (NatsRegistrations) and
 * sequence sync ({@code --sync}: SequenceSyncs). Made empty with the server; start() connects what
 * the configuration asks for, and hands each link to the Registry as it is made.
 *
 * <pre>
 * Implementation notes
 *
 * nats, registrations and syncs are null until start() makes them; start() runs on the thread
 * that starts the server, before the server serves (KvRouterServer's volatile serving write
 * publishes them), and a failure leaves whatever it made in place for the server's stop() to
 * close. stop() (synchronized in KvRouterServer) calls closeLog() before the Registry closes,
 * since the log's thread applies registrations to it, and close() after. With --events, start()
 * waits (up to REGISTRATION_REPLAY_WAIT) until the log applied every registration and
 * unregistration the stream held, so a restarted replica serves with the registrations of the
 * fleet. Sync shares the events' connection when both name the same URL.
 * </pre>
 */
final class ReplicaLinks {
  /** How long start() waits for the registrations on NATS to be applied. */
  private static final Duration REGISTRATION_REPLAY_WAIT = Duration.ofSeconds(60);

  private final Registry registry;
  private final ServerMetrics metrics;
  private NatsEvents nats;
  private NatsRegistrations registrations;
  private SequenceSyncs syncs;

  ReplicaLinks(Registry registry, ServerMetrics metrics) {
    this.registry = registry;
    this.metrics = metrics;
  }

  /**
   * Connects to NATS for the events and replays the registration log (with {@link
   * KvRouterServer.Config#events()}), and starts sequence sync (with {@link
   * KvRouterServer.Config#effectiveSync()}).
   *
   * @param port the server's port, in the default replica ids
   * @param state told what start() is doing, for {@code /ready}
   * @throws StartException when NATS cannot be reached or refuses, or the log is not replayed in
   *     time (the caller stops the server)
   */
  void start(KvRouterServer.Config config, int port, Consumer<String> state) {
    if (config.events() == null) {
      startSync(config, port);
      return;
    }
    String id = config.replicaId() != null ? config.replicaId() : "serve-" + port;
    try {
      nats = NatsEvents.connect(config.events(), id, config.natsApplyWait());
    } catch (RuntimeException e) {
      throw new StartException(e.getMessage(), e);
    }
    registry.nats(nats);
    startSync(config, port);
    // the registrations every replica made: applied before this one serves
    state.accept("replaying the registrations on NATS (" + config.events() + ")");
    try {
      registrations =
          NatsRegistrations.start(nats.connection(), registry, metrics, config.natsApplyWait(), id);
    } catch (RuntimeException e) {
      throw new StartException("events: " + e.getMessage(), e);
    }
    registry.log(registrations);
    if (!registrations.awaitReady(REGISTRATION_REPLAY_WAIT)) {
      throw new StartException(
          "events: the registrations on NATS were not replayed within "
              + REGISTRATION_REPLAY_WAIT.toSeconds()
              + " s ("
              + registrations.handled()
              + " operations read; the log ends at stream sequence "
              + registrations.startSequence()
              + ")",
          null);
    }
  }

  /**
   * With sequence sync on ({@link KvRouterServer.Config#effectiveSync()}): connects (or shares the
   * events' connection to the same URL) so that every index made from now on syncs with its peers.
   */
  private void startSync(KvRouterServer.Config config, int port) {
    String url = config.effectiveSync();
    if (url == null) return;
    String id =
        config.replicaId() != null
            ? config.replicaId()
            : "serve-"
                + port
                + "-"
                + Integer.toHexString(ThreadLocalRandom.current().nextInt() | 0x10000000);
    try {
      Connection shared = nats != null && url.equals(config.events()) ? nats.connection() : null;
      syncs = SequenceSyncs.connect(url, id, config.syncHeartbeat(), shared);
    } catch (RuntimeException e) {
      throw new StartException("sync: " + e.getMessage(), e);
    }
    registry.syncs(syncs);
  }

  /** The replica id of sequence sync, or null when it is off. */
  String syncReplicaId() {
    SequenceSyncs y = syncs;
    return y == null ? null : y.replicaId();
  }

  /** Stops the registration log (its thread applies registrations): before the Registry closes. */
  void closeLog() {
    if (registrations != null) registrations.close();
  }

  /** Closes sequence sync and the events' connection: after the Registry closed. */
  void close() {
    if (syncs != null) syncs.close();
    if (nats != null) nats.close();
  }
}
