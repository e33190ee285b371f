package io.kvrouter.server.http;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The bytes of request bodies the server holds at once, across all connections, bounded by a budget
 * (the server's --max-inflight-body-size, KvRouterServer.Config.maxInflightBodyBytes()): a body
 * read takes from it each time its buffer grows and gives everything back when its request is
 * answered. A growth past the budget is refused (the request gets 503), so the memory held for
 * bodies never exceeds it, however many clients send at once.
 *
 * <pre>
 * Implementation notes
 *
 * held is the sum of the capacities of the body buffers alive (a growing buffer counts its old and
 * new array while it copies, as both are on the heap then). take() is a CAS loop that never lets
 * held pass capacity; give() subtracts. A Lease is one request's share, used by its connection
 * thread only (not thread-safe itself): HttpPlumbing creates one per request and closes it when
 * the endpoint returns, whatever happened. reading counts body reads in progress (also those
 * waiting for their first byte, which hold nothing): a gauge, and what tests wait for.
 * </pre>
 */
final class BodyBudget {
  private final long capacity;
  private final AtomicLong held = new AtomicLong();
  private final AtomicInteger reading = new AtomicInteger();

  BodyBudget(long capacity) {
    if (capacity < 1) throw new IllegalArgumentException("capacity must be >= 1, got " + capacity);
    this.capacity = capacity;
  }

  /** The budget, in bytes. */
  long capacity() {
    return capacity;
  }

  /** Bytes held by body buffers now. */
  long held() {
    return held.get();
  }

  /** Body reads in progress now. */
  int reading() {
    return reading.get();
  }

  void startReading() {
    reading.incrementAndGet();
  }

  void stopReading() {
    reading.decrementAndGet();
  }

  /** A new, empty share for one request. */
  Lease lease() {
    return new Lease();
  }

  private boolean take(long n) {
    while (true) {
      long h = held.get();
      if (n > capacity - h) return false;
      if (held.compareAndSet(h, h + n)) return true;
    }
  }

  /** One request's share of the budget; {@link #close()} gives it back. */
  final class Lease implements AutoCloseable {
    private long bytes;

    /** Takes {@code n} more bytes; false (and nothing taken) when the budget has not got them. */
    boolean take(long n) {
      if (!BodyBudget.this.take(n)) return false;
      bytes += n;
      return true;
    }

    /** Gives {@code n} of this share's bytes back. */
    void give(long n) {
      n = Math.min(n, bytes);
      bytes -= n;
      held.addAndGet(-n);
    }

    /** Bytes of this share. */
    long bytes() {
      return bytes;
    }

    @Override
    public void close() {
      give(bytes);
    }
  }
}
