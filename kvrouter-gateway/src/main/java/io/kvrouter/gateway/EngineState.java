package io.kvrouter.gateway;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the gateway knows of one engine (one base URL): whether its health check answers, and its
 * circuit breaker.
 *
 * <pre>
 * Implementation notes
 *
 * Written by request threads (attempt outcomes) and the health checker, read by every request
 * that computes where it may go. The breaker is a small state machine under this object's
 * monitor (held for a few field updates, never across I/O): CLOSED counts consecutive failures;
 * at breakerFailures it turns OPEN until openUntil; after that the engine is HALF_OPEN: usable
 * again, but only by one request at a time (probe, a CAS), whose success closes the breaker and
 * whose failure opens it again for another period. healthy is volatile: the checker takes an
 * engine out after unhealthyAfter consecutive failed checks and puts it back at the first
 * answer; routing skips it meanwhile, but its index and registration stay. The check made when
 * the gateway registers an engine itself (registered()) takes it out at its first failure.
 * answered (volatile) turns true at the first check that succeeded: /ready counts only engines
 * that answered. Health results are applied under this object's monitor (the checker's thread
 * and a registering thread may both report). draining counts the ranks of this base URL being
 * drained (Drains): routing skips the engine while it is above 0.
 * </pre>
 */
final class EngineState {
  enum Breaker {
    CLOSED,
    HALF_OPEN,
    OPEN
  }

  final String baseUrl;
  private final int breakerFailures;
  private final long openNanos;

  private volatile boolean healthy = true;
  private volatile boolean answered;
  private volatile long engineWaiting = -1; // EngineQueueWatch's last reading; -1: none
  private final AtomicInteger draining = new AtomicInteger();

  @GuardedBy("this")
  private int failedChecks; // guarded by this

  @GuardedBy("this")
  private Breaker breaker = Breaker.CLOSED; // guarded by this

  @GuardedBy("this")
  private int consecutiveFailures; // guarded by this

  @GuardedBy("this")
  private long openUntil; // guarded by this

  private final AtomicBoolean probe = new AtomicBoolean();

  EngineState(String baseUrl, int breakerFailures, long openNanos) {
    this.baseUrl = baseUrl;
    this.breakerFailures = breakerFailures;
    this.openNanos = openNanos;
  }

  boolean healthy() {
    return healthy;
  }

  /** Whether a health check of this engine ever succeeded. */
  boolean answered() {
    return answered;
  }

  /**
   * The requests the engine last said wait in its own queue (EngineQueueWatch, from its {@code
   * /metrics}), or -1 when it was not read or has no such gauge.
   */
  long engineWaiting() {
    return engineWaiting;
  }

  /** The watch's reading (or -1): see {@link #engineWaiting()}. */
  void engineWaiting(long v) {
    engineWaiting = v;
  }

  /** Whether a rank of this engine is being drained (routing skips it). */
  boolean draining() {
    return draining.get() > 0;
  }

  /** A rank of this engine starts draining. */
  void drainStarted() {
    draining.incrementAndGet();
  }

  /** A rank of this engine was drained (and unregistered). */
  void drainEnded() {
    draining.decrementAndGet();
  }

  /** The breaker's state now (an OPEN breaker whose time is up reads HALF_OPEN). */
  synchronized Breaker breaker(long now) {
    if (breaker == Breaker.OPEN && now - openUntil >= 0) breaker = Breaker.HALF_OPEN;
    return breaker;
  }

  /** Whether routing may choose this engine now. */
  boolean usable(long now) {
    if (!healthy || draining.get() > 0) return false;
    Breaker b = breaker(now);
    return b == Breaker.CLOSED || (b == Breaker.HALF_OPEN && !probe.get());
  }

  /**
   * Takes the right to send a request: always when closed; in half-open only for the one probe.
   * Returns false when another request is the probe (or the breaker is open).
   */
  boolean acquire(long now) {
    Breaker b = breaker(now);
    if (b == Breaker.CLOSED) return true;
    return b == Breaker.HALF_OPEN && probe.compareAndSet(false, true);
  }

  /** The engine answered (any status but 5xx/429): closes the breaker. */
  synchronized void succeeded() {
    consecutiveFailures = 0;
    breaker = Breaker.CLOSED;
    probe.set(false);
  }

  /** The engine failed an attempt (refused, timed out, 5xx or 429). */
  synchronized void failed(long now) {
    consecutiveFailures++;
    if (breaker == Breaker.HALF_OPEN || probe.get() || consecutiveFailures >= breakerFailures) {
      breaker = Breaker.OPEN;
      openUntil = now + openNanos;
    }
    probe.set(false);
  }

  /** The probe's request ended without telling anything (the client went away). */
  void releaseProbe() {
    probe.set(false);
  }

  /** A health check result; returns whether healthy changed. */
  synchronized boolean checked(boolean ok, int unhealthyAfter) {
    if (ok) {
      answered = true;
      failedChecks = 0;
      if (!healthy) {
        healthy = true;
        return true;
      }
      return false;
    }
    failedChecks++;
    if (healthy && failedChecks >= unhealthyAfter) {
      healthy = false;
      return true;
    }
    return false;
  }

  /**
   * The result of the check made when the gateway registered the engine: a failure takes it out of
   * routing at once (a periodic check needs unhealthyAfter in a row). Returns whether healthy
   * changed.
   */
  boolean registered(boolean ok, int unhealthyAfter) {
    return checked(ok, ok ? unhealthyAfter : 1);
  }
}
