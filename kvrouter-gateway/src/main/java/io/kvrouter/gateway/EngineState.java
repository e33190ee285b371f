package io.kvrouter.gateway;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import java.util.concurrent.atomic.AtomicBoolean;

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
 * answer; routing skips it meanwhile, but its index and registration stay.
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
  private int failedChecks; // health checker thread only

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

  /** The breaker's state now (an OPEN breaker whose time is up reads HALF_OPEN). */
  synchronized Breaker breaker(long now) {
    if (breaker == Breaker.OPEN && now - openUntil >= 0) breaker = Breaker.HALF_OPEN;
    return breaker;
  }

  /** Whether routing may choose this engine now. */
  boolean usable(long now) {
    if (!healthy) return false;
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

  /** A health check result; returns whether healthy changed. Health checker thread only. */
  boolean checked(boolean ok, int unhealthyAfter) {
    if (ok) {
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
}
