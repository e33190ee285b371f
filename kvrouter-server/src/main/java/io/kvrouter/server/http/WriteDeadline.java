package io.kvrouter.server.http;

import io.helidon.common.buffers.BufferData;
import io.helidon.http.Headers;
import io.helidon.http.Status;
import io.helidon.webserver.ConnectionContext;
import io.helidon.webserver.http1.Http1ConnectionListener;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Closes the connection of a client that does not take its answer: when an answer of an endpoint
 * (added through HttpPlumbing) makes no progress for the write timeout, because the client does not
 * read and the socket's buffers are full, the connection is closed (issue 31, #7). One per server,
 * made and closed by HttpPlumbing.
 *
 * <pre>
 * Implementation notes
 *
 * Why: a write to a client that does not read blocks when the kernel's buffers are full, and
 * Java sockets have no write timeout; Helidon 4.3 has none either. A client that pipelines
 * requests and never reads would hold its connection, its virtual thread and the answer's memory
 * forever.
 *
 * How: Helidon runs each HTTP/1 connection, and its handlers, on one virtual thread. HttpPlumbing's
 * handler() calls enter() before the endpoint runs and exit() after its answer is committed
 * (before any drain of the request body). In between, every send event Helidon reports on that
 * thread (as this object's send listener: the status line, the headers, each block of data, all
 * reported just before they are written) arms the thread's Watch with a deadline of now plus the
 * timeout; so the deadline bounds how long one write may block, and a client that reads slowly
 * but steadily is never cut. This object's sweeper thread (a daemon, started lazily by the first
 * enter(), stopped by close()) interrupts the thread of every Watch whose deadline passed while
 * armed. Interrupting a virtual thread blocked in a socket write closes the socket (as
 * ReadDeadline relies on for reads), so the write fails and handler() closes the connection,
 * counts it (Metrics.writeTimeout) and logs it rate-limited. Send events outside enter()..exit()
 * (the direct handler's refusals, an extension's own routes) arm nothing, so an idle keep-alive
 * connection is never cut by this. The endpoints added through HttpPlumbing write their answers
 * without waiting between writes (a byte array, or /dump's stream), so an armed deadline always
 * means a write is in progress or about to be. An answer that waits between its writes (an
 * extension's relayed stream, HttpPlumbing.timedWrites) calls idle() once a write returned and
 * before it waits for something else (an engine's next bytes): that disarms its Watch until the
 * next send event, so only the writes themselves are timed. A deadline that fired after the write
 * had returned (the sweeper raced the write's return) did not stop a write: idle() takes it back
 * (clears the interrupt, uncounts it) and the answer goes on.
 *
 * Invariants: a Watch is ARMED only while it is in the armed set; enter, arm, exit and fire are
 * synchronized on the Watch, so a thread is only interrupted while its handler runs, and exit()
 * clears an interrupt that came too late to matter. No state is static.
 * </pre>
 */
final class WriteDeadline implements AutoCloseable {
  /** The default write timeout: an answer's write may block for 30 s at most. */
  static final Duration DEFAULT = Duration.ofSeconds(30);

  private final long timeoutNanos;
  private final long sweepMillis;
  private final ThreadLocal<Watch> current = new ThreadLocal<>();
  private final Set<Watch> armed = ConcurrentHashMap.newKeySet();
  private final AtomicLong closed = new AtomicLong();

  private final DeadlineSweeper sweeper;

  WriteDeadline(Duration timeout) {
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("write timeout must be > 0, got " + timeout);
    }
    this.timeoutNanos = timeout.toNanos();
    this.sweepMillis = Math.max(10, Math.min(100, timeout.toMillis() / 4));
    this.sweeper = new DeadlineSweeper("kvrouter-write-deadline", sweepMillis, this::sweep);
  }

  /** The current thread starts an endpoint's answer: its writes are timed until exit(). */
  void enter() {
    Watch w = current.get();
    if (w == null) {
      sweeper.start();
      w = new Watch(Thread.currentThread());
      current.set(w);
    }
    w.enter();
  }

  /**
   * The current thread's answer is done: its writes are no longer timed. Returns whether the
   * deadline fired (the connection is closed or about to be; the interrupt is cleared). Idempotent.
   */
  boolean exit() {
    Watch w = current.get();
    return w != null && w.exit();
  }

  /**
   * The current thread's last write returned and its answer now waits for something other than its
   * client: its deadline is disarmed until the next send event; a deadline that fired since that
   * write returned is taken back. No effect outside enter()..exit().
   */
  void idle() {
    Watch w = current.get();
    if (w != null) w.idle();
  }

  /** Whether the current thread's answer was cut off by the write deadline. */
  boolean timedOut() {
    Watch w = current.get();
    return w != null && w.fired();
  }

  /** Connections whose write deadline fired. */
  long closed() {
    return closed.get();
  }

  /** Answers whose writes are timed now, armed by a send event (tests). */
  int armed() {
    return armed.size();
  }

  /** {@code first}, then this deadline's arming, as one send listener. */
  Http1ConnectionListener after(Http1ConnectionListener first) {
    return new Http1ConnectionListener() {
      @Override
      public void status(ConnectionContext ctx, Status status) {
        first.status(ctx, status);
        wrote();
      }

      @Override
      public void headers(ConnectionContext ctx, Headers headers) {
        first.headers(ctx, headers);
        wrote();
      }

      @Override
      public void data(ConnectionContext ctx, BufferData data) {
        first.data(ctx, data);
        wrote();
      }

      @Override
      public void data(ConnectionContext ctx, byte[] bytes, int offset, int length) {
        first.data(ctx, bytes, offset, length);
        wrote();
      }
    };
  }

  /** A write is about to happen on the current thread: (re)arms its deadline inside enter/exit. */
  private void wrote() {
    Watch w = current.get();
    if (w != null) w.arm(System.nanoTime() + timeoutNanos);
  }

  /** Stops the sweeper (waits for it); deadlines no longer fire. Idempotent. */
  @Override
  public void close() {
    sweeper.close();
  }

  private void sweep() {
    if (armed.isEmpty()) return;
    long now = System.nanoTime();
    for (Watch w : armed) w.fireIfDue(now);
  }

  /** The write deadline of one connection thread. */
  private final class Watch {
    private static final int OUTSIDE = 0;
    private static final int INSIDE = 1;
    private static final int ARMED = 2;
    private static final int FIRED = 3;

    private final Thread thread;
    private int state;
    private long deadline;

    Watch(Thread thread) {
      this.thread = thread;
    }

    synchronized void enter() {
      if (state == FIRED) Thread.interrupted(); // a late interrupt of the previous answer
      if (state == ARMED) armed.remove(this);
      state = INSIDE;
    }

    synchronized void arm(long deadline) {
      if (state != INSIDE && state != ARMED) return; // outside an endpoint, or already cut off
      this.deadline = deadline;
      if (state == INSIDE) {
        state = ARMED;
        armed.add(this);
      }
    }

    synchronized void idle() {
      if (state == ARMED) {
        armed.remove(this);
        state = INSIDE;
      } else if (state == FIRED) {
        // fired after the write returned: no write was stopped, the connection is intact
        Thread.interrupted();
        closed.decrementAndGet();
        state = INSIDE;
      }
    }

    synchronized boolean exit() {
      boolean fired = state == FIRED;
      if (state == ARMED) armed.remove(this);
      if (fired) Thread.interrupted();
      state = OUTSIDE;
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
