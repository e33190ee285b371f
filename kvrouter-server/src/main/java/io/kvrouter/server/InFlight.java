package io.kvrouter.server;

import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * The HTTP requests a server is handling, counted so that a stop can wait for them to finish while
 * the listener still answers ({@code GET /ready} 503 during the wait).
 *
 * <pre>
 * Implementation notes
 *
 * A Helidon filter around every route: count is incremented before the handler runs and
 * decremented after it returns (Helidon SE 4 runs a handler to its end on the request's virtual
 * thread, so a stream is counted until its last byte is written). The probes and the metrics
 * (GET /health, /ready, /metrics) are not counted: a kubelet polling /ready while the server
 * waits would otherwise hold the wait up. Request threads only touch the AtomicLong; waiter is
 * written by the one thread in awaitIdle (KvRouterServer.stop, synchronized) and read by request
 * threads, which unpark it when the count reaches zero; awaitIdle re-reads the count after every
 * wake-up, so a spurious or early unpark only costs a loop.
 * </pre>
 */
final class InFlight {
  private final AtomicLong count = new AtomicLong();
  private volatile @Nullable Thread waiter; // null: no stop() waiting

  /** The filter to add to the routing. */
  void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
    if (!counted(req.path().path())) {
      chain.proceed();
      return;
    }
    count.incrementAndGet();
    try {
      chain.proceed();
    } finally {
      if (count.decrementAndGet() == 0) {
        Thread w = waiter;
        if (w != null) LockSupport.unpark(w);
      }
    }
  }

  private static boolean counted(String path) {
    return !(path.equals("/health") || path.equals("/ready") || path.equals("/metrics"));
  }

  /** Requests being handled now. */
  long count() {
    return count.get();
  }

  /**
   * Waits until no request is being handled, at most {@code timeoutNanos}.
   *
   * @return the requests still in flight (0 when idle)
   */
  long awaitIdle(long timeoutNanos) {
    long deadline = System.nanoTime() + timeoutNanos;
    waiter = Thread.currentThread();
    try {
      long n;
      while ((n = count.get()) > 0) {
        long left = deadline - System.nanoTime();
        if (left <= 0) return n;
        // a request that ends between the read above and the park unparks before the park, which
        // then returns at once (LockSupport's permit)
        LockSupport.parkNanos(this, left);
        if (Thread.interrupted()) {
          Thread.currentThread().interrupt();
          return count.get();
        }
      }
      return 0;
    } finally {
      waiter = null;
    }
  }
}
