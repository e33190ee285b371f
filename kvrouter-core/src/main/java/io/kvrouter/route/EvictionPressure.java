package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How fast each worker rank's cache is evicting: an exponentially decaying count of the blocks its
 * Removed events named, with a time constant of one window.
 *
 * <pre>
 * Implementation notes
 *
 * One Meter per rank that ever evicted, in a ConcurrentHashMap (made on the rank's first eviction;
 * the only allocation). Writers: KvRouter.applyEvent, from any ingestion thread, without the
 * router's lock. Readers: KvRouter.route, under the router's lock. A Meter's value and time change
 * together under the Meter's own monitor, held for a multiply and an exp; nothing else waits on
 * it, and index readers never touch it.
 *
 * value(t) = value(t0) · exp(−(t − t0) / window) + blocks evicted since: the decayed sum, about
 * the blocks evicted over the last window at a steady rate. An event stamped earlier than the
 * last one (clocks of several threads) is added without decay.
 * </pre>
 */
final class EvictionPressure {
  private final ConcurrentHashMap<Worker, Meter> meters = new ConcurrentHashMap<>();
  private final double windowNanos;

  EvictionPressure(long windowNanos) {
    if (windowNanos <= 0) {
      throw new IllegalArgumentException("the pressure window must be > 0 ns, got " + windowNanos);
    }
    this.windowNanos = windowNanos;
  }

  /** Records that {@code worker} evicted {@code blocks} blocks at {@code now}. */
  void evicted(Worker worker, int blocks, long now) {
    Meter m = meters.get(worker);
    if (m == null) m = meters.computeIfAbsent(worker, w -> new Meter(now));
    m.add(blocks, now, windowNanos);
  }

  /** The decayed count of blocks {@code worker} evicted, at {@code now}; 0 if it never did. */
  double of(Worker worker, long now) {
    Meter m = meters.get(worker);
    return m == null ? 0 : m.at(now, windowNanos);
  }

  /** Forgets {@code worker} (removed from the fleet). */
  void forget(Worker worker) {
    meters.remove(worker);
  }

  /** Times are nanoTime-style: compared by their difference, never by sign. */
  private static final class Meter {
    private double value;
    private long at;

    Meter(long now) {
      this.at = now;
    }

    synchronized void add(int blocks, long now, double window) {
      final long dt = now - at;
      if (dt > 0) {
        value *= Math.exp(-dt / window);
        at = now;
      }
      value += blocks;
    }

    synchronized double at(long now, double window) {
      final long dt = now - at;
      return dt > 0 ? value * Math.exp(-dt / window) : value;
    }
  }
}
