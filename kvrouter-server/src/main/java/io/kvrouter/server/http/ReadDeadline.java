package io.kvrouter.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.http.Headers;
import io.helidon.http.HttpPrologue;
import io.helidon.webserver.ConnectionContext;
import io.helidon.webserver.http1.Http1ConnectionListener;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Closes the connection of a client that does not send its whole request (headers and body) within
 * the read timeout of its request line. Together with Helidon's idle-connection timeout (set to the
 * same value by the server, KvRouterServer), which closes connections that send no request line, a
 * slow or stalled client holds a connection for about the read timeout at most. One per server:
 * HttpPlumbing creates it and closes it when its server stops.
 *
 * <pre>
 * Implementation notes
 *
 * Why: Helidon 4.3 applies no socket read timeout to accepted connections (the listener's
 * connection options' readTimeout is never set on the socket), and its idle timer only interrupts
 * a connection that is waiting for a request line. A client that sends a request line and then
 * stalls in its headers or body would hold its connection, socket and virtual thread forever.
 *
 * How: Helidon runs each HTTP/1 connection on one virtual thread, which also runs the handlers.
 * As a receive listener this object sees the request line (prologue) and the headers on that
 * thread. A per-thread Watch (in this object's ThreadLocal) is armed at the request line and
 * disarmed once the request is in: at the headers when there is no entity (no Transfer-Encoding,
 * no Content-Length other than 0: nothing is parsed here, so no header value can make a request
 * escape its deadline), else by HttpPlumbing.body() once the body is read, or by the direct
 * handler that refuses the request. This object's sweeper thread (a daemon, started by
 * the first request line, stopped by close()) interrupts every thread whose deadline passed while
 * armed. Interrupting a virtual thread blocked in a socket read closes the socket (java.net.Socket
 * is interruptible on virtual threads), so the blocked read fails and the connection ends; the
 * client sees it closed. The sweeper starts lazily so that a server whose port cannot be bound
 * leaves no thread behind.
 *
 * Invariants: a Watch is in ARMED only while it is in the armed set; arm, disarm and fire are
 * synchronized on the Watch, so a thread is only interrupted while armed (never after it went on
 * to handle its request), and disarm() clears an interrupt that came too late to matter. Handlers
 * that never read an entity (refusals, GETs) leave the Watch armed while Helidon drains the body
 * after them, so a client that stalls there is closed too; the next request line re-arms. The
 * sweeper thread's lifecycle is DeadlineSweeper's (shared with WriteDeadline); once closed, no
 * sweeper starts again. No state is static: each server owns its instance.
 * </pre>
 */
public final class ReadDeadline implements Http1ConnectionListener, AutoCloseable {
  /** The default read timeout: a request must be in within 30 s of its request line. */
  static final Duration DEFAULT = Duration.ofSeconds(30);

  /** The JVM system property that overrides {@link #DEFAULT}, in milliseconds. */
  static final String PROPERTY = "kvrouter.http.readTimeoutMillis";

  private static final long SWEEP_MILLIS = 100;

  private final long timeoutNanos;
  private final ThreadLocal<Watch> current = new ThreadLocal<>();
  private final Set<Watch> armed = ConcurrentHashMap.newKeySet();
  private final AtomicLong closed = new AtomicLong();

  private final DeadlineSweeper sweeper;

  ReadDeadline(Duration timeout) {
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("read timeout must be > 0, got " + timeout);
    }
    this.timeoutNanos = timeout.toNanos();
    this.sweeper = new DeadlineSweeper("kvrouter-read-deadline", SWEEP_MILLIS, this::sweep);
  }

  /** The read timeout: {@link #PROPERTY} when set, else {@link #DEFAULT}. */
  public static Duration configured() {
    Long ms = Long.getLong(PROPERTY);
    return ms == null ? DEFAULT : Duration.ofMillis(ms);
  }

  /** How often Helidon should look for idle connections to close with this timeout. */
  static Duration idleCheckPeriod(Duration timeout) {
    long ms = Math.max(250, Math.min(timeout.toMillis() / 4, 30_000));
    return Duration.ofMillis(ms);
  }

  /**
   * Deadlines that fired in this server: connections cut off, plus those whose client had already
   * gone mid-request (their Watch stays armed until its deadline).
   */
  long closed() {
    return closed.get();
  }

  @Override
  public void prologue(ConnectionContext ctx, HttpPrologue prologue) {
    Watch w = current.get();
    if (w == null) {
      sweeper.start();
      w = new Watch(Thread.currentThread());
      current.set(w);
    }
    w.arm(System.nanoTime() + timeoutNanos);
  }

  @Override
  public void headers(ConnectionContext ctx, Headers headers) {
    // never parses: a request with any length but a plain 0 (or with Transfer-Encoding) keeps its
    // deadline until its body is read; HttpFraming refuses the malformed ones before this runs
    boolean entity =
        headers.contains(HeaderNames.TRANSFER_ENCODING)
            || headers.all(HeaderNames.CONTENT_LENGTH, List::of).stream()
                .anyMatch(v -> !v.trim().equals("0"));
    if (!entity) received();
  }

  /**
   * The request of the current thread is in: stop its deadline. Returns whether the deadline had
   * already passed (the connection is then closed or about to be; the interrupt is cleared).
   */
  boolean received() {
    Watch w = current.get();
    return w != null && w.disarm();
  }

  /** Whether the current thread's request was cut off by its deadline (and not re-armed since). */
  boolean timedOut() {
    Watch w = current.get();
    return w != null && w.fired();
  }

  /** Stops the sweeper (waits for it); deadlines no longer fire. Idempotent. */
  @Override
  public void close() {
    sweeper.close();
  }

  /** Whether the sweeper thread runs (tests). */
  boolean sweeping() {
    return sweeper.running();
  }

  private void sweep() {
    if (armed.isEmpty()) return;
    long now = System.nanoTime();
    for (Watch w : armed) w.fireIfDue(now);
  }

  /** The deadline of one connection thread. */
  private final class Watch {
    private static final int IDLE = 0;
    private static final int ARMED = 1;
    private static final int FIRED = 2;

    private final Thread thread;
    private int state;
    private long deadline;

    Watch(Thread thread) {
      this.thread = thread;
    }

    synchronized void arm(long deadline) {
      if (state == FIRED) Thread.interrupted(); // a late interrupt of the previous request
      this.deadline = deadline;
      state = ARMED;
      armed.add(this);
    }

    synchronized boolean disarm() {
      boolean fired = state == FIRED;
      if (state == ARMED) armed.remove(this);
      if (fired) Thread.interrupted();
      state = IDLE;
      return fired;
    }

    synchronized boolean fired() {
      return state == FIRED;
    }

    synchronized void fireIfDue(long now) {
      if (state == ARMED && now - deadline >= 0) {
        state = FIRED;
        armed.remove(this);
        closed.incrementAndGet();
        thread.interrupt();
      }
    }
  }
}
