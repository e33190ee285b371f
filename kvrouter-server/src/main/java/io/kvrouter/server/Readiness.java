package io.kvrouter.server;

import io.kvrouter.transport.nats.NatsSequenceSync;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * What {@code GET /ready} reports, and how it is worked out from the server's state.
 *
 * <pre>
 * Implementation notes
 *
 * An immutable answer, made per /ready request (and per 503 of a server not serving) by of(),
 * on the request's thread, from what other threads write: the server's volatile ready, serving
 * and warm-start state (read after the indexes, through suppliers), the registrations' ZMQ
 * listeners (connectedOnce, age), the NATS replicas' and sequence syncs' readiness, the requests
 * in flight and the extension's own reason. The first reason that applies wins, in this order:
 * stopping (with the requests still in flight), starting (the warm-start state), listeners within
 * their grace period, NATS replicas catching up, sequence syncs not ready, the extension's (the
 * gateway: a configured model without a healthy engine). Reading is
 * lock-free; a state that changes while of() runs gives either the old or the new answer for that
 * part.
 * </pre>
 *
 * @param ready whether to take traffic
 * @param reason why not, or null when ready
 * @param listeners registered ranks with a ZMQ endpoint
 * @param connecting of those, listeners that never connected and are still within the grace period
 *     ({@link KvRouterServer.Config#readyGrace()}): they hold readiness back
 * @param givenUp listeners that never connected within the grace period: no longer waited for
 */
record Readiness(boolean ready, String reason, int listeners, int connecting, int givenUp) {

  /** The reason of a server that is stopping; the 503s of its endpoints start with it too. */
  static final String SHUTTING_DOWN = "shutting down";

  /** How many waiting listeners the reason names at most. */
  private static final int NAMED = 3;

  /**
   * Whether the server takes traffic, and why not.
   *
   * @param registry the indexes, their registrations, NATS replicas and syncs
   * @param readyGrace how long a listener's first connection is waited for
   * @param ready false once the server is stopping
   * @param serving false until start() finished (warm start, NATS replay)
   * @param warmStartState what start() is doing, while not serving
   * @param inFlight the requests being handled (named while stopping)
   * @param extension the extension's reason, or null
   */
  static Readiness of(
      Registry registry,
      Duration readyGrace,
      BooleanSupplier ready,
      BooleanSupplier serving,
      Supplier<String> warmStartState,
      LongSupplier inFlight,
      Supplier<String> extension) {
    Listeners zmq = listeners(registry, readyGrace.toNanos());
    int catchingUp = 0;
    String firstSubject = null;
    for (ModelIndex m : registry.indexes()) {
      NatsEvents.Feed f = m.nats;
      if (f != null && !f.replica().ready()) {
        if (catchingUp++ == 0) firstSubject = f.stream().subject();
      }
    }
    int syncing = 0;
    String syncWhy = null;
    for (ModelIndex m : registry.indexes()) {
      NatsSequenceSync y = m.sync;
      if (y != null && !y.ready()) {
        if (syncing++ == 0) syncWhy = y.notReadyReason() + " (subject " + y.subject() + ")";
      }
    }
    String reason = null;
    if (!ready.getAsBoolean()) {
      long n = inFlight.getAsLong();
      reason = SHUTTING_DOWN + (n > 0 ? ": " + n + " request(s) in flight finishing" : "");
    } else if (!serving.getAsBoolean()) {
      reason = warmStartState.get();
    } else if (zmq.connecting > 0) {
      reason = zmq.reason(readyGrace);
    } else if (catchingUp > 0) {
      reason =
          "catching up with NATS: "
              + catchingUp
              + " index(es) still applying their snapshot and stream backlog (subject "
              + firstSubject
              + (catchingUp > 1 ? ", ..." : "")
              + ")";
    } else if (syncing > 0) {
      reason =
          "sharing in-flight requests with peer replicas: "
              + syncWhy
              + (syncing > 1 ? " and " + (syncing - 1) + " more index(es)" : "");
    } else {
      reason = extension.get();
    }
    return new Readiness(reason == null, reason, zmq.listeners, zmq.connecting, zmq.givenUp);
  }

  /** The ZMQ listeners' counts, and the endpoints of the first few still connecting. */
  private static final class Listeners {
    int listeners;
    int connecting;
    int givenUp;
    final StringBuilder waiting = new StringBuilder();

    String reason(Duration readyGrace) {
      return "waiting for the first connection of "
          + connecting
          + " ZMQ listener(s): "
          + waiting
          + (connecting > NAMED ? ", ..." : "")
          + " (each is waited for at most "
          + readyGrace.toSeconds()
          + " s, --ready-grace-seconds)";
    }
  }

  private static Listeners listeners(Registry registry, long grace) {
    Listeners c = new Listeners();
    for (ModelIndex m : registry.indexes()) {
      for (Registration r : m.registrations.values()) {
        ZmqListener l = r.listener();
        if (l == null) continue;
        c.listeners++;
        if (l.connectedOnce()) continue;
        if (l.ageNanos() >= grace) {
          c.givenUp++;
        } else {
          if (c.connecting++ < NAMED) {
            c.waiting.append(c.waiting.isEmpty() ? "" : ", ").append(l.endpoint());
          }
        }
      }
    }
    return c;
  }
}
