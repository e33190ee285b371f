package io.kvrouter.transport.nats;

import io.nats.client.Connection;
import io.nats.client.ConnectionListener;
import io.nats.client.Consumer;
import io.nats.client.ErrorListener;
import io.nats.client.JetStreamSubscription;
import io.nats.client.support.Status;
import java.io.IOException;
import java.util.concurrent.CancellationException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The error and connection listener of the connections {@link NatsConnections#connect} makes: what
 * jnats reports becomes at most one short log line per incident on the logger {@code
 * io.kvrouter.transport.nats.NatsConnections}, instead of jnats's default listener, which logs
 * every failed (re)connection attempt at SEVERE (four a second while NATS is down).
 *
 * <pre>
 * Implementation notes
 *
 * Until the first connection completes (connected, written by NatsConnections.connect once
 * Nats.connect returned, or by the CONNECTED event), nothing is logged: connect() fails with an
 * IllegalStateException that says why, and that is the one line the user sees.
 *
 * After it: the first DISCONNECTED logs one WARNING (jnats then reconnects by itself, and reports
 * DISCONNECTED again after each failed attempt: down keeps those quiet). IOExceptions (a closed
 * socket, a refused reconnection) are that disconnection and are not logged, nor are waits that a
 * close or a reconnection cancelled (a CancellationException, or jnats's TimeoutException naming
 * one), nor anything reported while the connection closes; of other exceptions
 * only the first is logged, until RECONNECTED (one INFO line) re-arms both. server is the
 * URL of the last completed connection (jnats has none while disconnected). Server errors (-ERR), slow consumers, missed JetStream heartbeats,
 * pull errors, unhandled statuses and write timeouts are one WARNING each, the first 10 and then
 * every 1,000th (they can repeat per message). Discarded messages, pull warnings and flow control
 * are normal operation: not logged. Every callback runs on a jnats thread; the state is atomics.
 * </pre>
 */
final class NatsLogListener implements ErrorListener, ConnectionListener {
  static final Logger LOG = Logger.getLogger(NatsConnections.class.getName());

  private final String name;
  private final AtomicBoolean connected = new AtomicBoolean();
  private final AtomicBoolean down = new AtomicBoolean();
  private final AtomicBoolean exceptionLogged = new AtomicBoolean();
  private volatile String server = "the server";
  private final AtomicLong problems = new AtomicLong();

  NatsLogListener(String name) {
    this.name = name;
  }

  /** The first connection completed: from now on, what happens is logged. */
  void connected(Connection conn) {
    remember(conn);
    connected.set(true);
  }

  @Override
  public void connectionEvent(Connection conn, Events type) {
    switch (type) {
      case CONNECTED -> connected(conn);
      case DISCONNECTED -> {
        // jnats reports a disconnection again for each failed attempt: one line per outage
        if (connected.get() && down.compareAndSet(false, true)) {
          LOG.warning(
              "NATS "
                  + name
                  + ": disconnected from "
                  + server
                  + "; reconnecting (events wait until it is back)");
        }
      }
      case RECONNECTED -> {
        remember(conn);
        down.set(false);
        exceptionLogged.set(false);
        LOG.info("NATS " + name + ": reconnected to " + server);
      }
      case LAME_DUCK ->
          LOG.warning("NATS " + name + ": " + server + " is shutting down (lame duck mode)");
      default -> {}
    }
  }

  private void remember(Connection conn) {
    String url = conn == null ? null : conn.getConnectedUrl();
    if (url != null) server = url;
  }

  @Override
  public void exceptionOccurred(Connection conn, Exception exp) {
    // socket errors are the disconnection itself, which DISCONNECTED reports
    if (exp instanceof IOException) return;
    // a wait cancelled by close() or by a reconnection (jnats reports a cancelled PING future as
    // "TimeoutException: ...CancellationException") is part of that close or that incident
    if (cancelled(exp) || closing(conn)) return;
    if (!connected.get() || !exceptionLogged.compareAndSet(false, true)) return;
    LOG.warning("NATS " + name + ": " + describe(exp));
  }

  private static boolean cancelled(Throwable e) {
    Throwable t = e;
    for (int depth = 0; t != null && depth < 16; depth++, t = t.getCause()) { // cycles end too
      if (t instanceof CancellationException) return true;
      String m = t.getMessage();
      if (t instanceof TimeoutException && m != null && m.contains("CancellationException")) {
        return true;
      }
    }
    return false;
  }

  private static boolean closing(Connection conn) {
    if (conn == null) return false;
    return conn.getStatus() == Connection.Status.CLOSED;
  }

  @Override
  public void errorOccurred(Connection conn, String error) {
    problem("server error: " + error);
  }

  @Override
  public void slowConsumerDetected(Connection conn, Consumer consumer) {
    problem("slow consumer: messages are dropped (" + consumer.getDroppedCount() + " so far)");
  }

  @Override
  public void heartbeatAlarm(
      Connection conn, JetStreamSubscription sub, long lastStreamSequence, long lastConsumerSeq) {
    problem(
        "JetStream heartbeats missed on "
            + sub.getSubject()
            + " (last stream sequence "
            + lastStreamSequence
            + ")");
  }

  @Override
  public void unhandledStatus(Connection conn, JetStreamSubscription sub, Status status) {
    problem("status " + status.getCode() + " " + status.getMessage() + " on " + sub.getSubject());
  }

  @Override
  public void pullStatusError(Connection conn, JetStreamSubscription sub, Status status) {
    problem(
        "pull error " + status.getCode() + " " + status.getMessage() + " on " + sub.getSubject());
  }

  @Override
  public void socketWriteTimeout(Connection conn) {
    problem("socket write timed out");
  }

  private void problem(String what) {
    long n = problems.incrementAndGet();
    if (n <= 10 || n % 1000 == 0) {
      LOG.log(Level.WARNING, "NATS {0}: {1} ({2} reported so far)", new Object[] {name, what, n});
    }
  }

  private static String describe(Throwable e) {
    String m = e.getMessage();
    return m == null ? e.getClass().getSimpleName() : e.getClass().getSimpleName() + ": " + m;
  }
}
