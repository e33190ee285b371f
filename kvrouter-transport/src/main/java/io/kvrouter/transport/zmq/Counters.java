package io.kvrouter.transport.zmq;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The counters behind {@link IngestStats}: one slot per {@link C}, written by the subscriber's
 * thread only (plain read, release store: no read-modify-write is needed with one writer) and read
 * by any thread with acquire loads.
 */
final class Counters {
  /** One counter per {@link IngestStats} component, in the same order. */
  enum C {
    MESSAGES,
    BAD_FRAMES,
    BATCHES,
    DECODE_ERRORS,
    STORED,
    REMOVED,
    CLEARED,
    OFF_DEVICE,
    SKIPPED,
    REFUSED,
    PARTIAL_BLOCKS,
    SELF_REFERENCING,
    DUPLICATES,
    GAPS,
    LOST,
    REPLAYS,
    REPLAYED,
    REPLAY_FAILURES,
    RESTARTS,
    CONNECTIONS,
    RECONNECTS,
    DISCONNECTS,
    SINK_ERRORS
  }

  private final AtomicLongArray slots = new AtomicLongArray(C.values().length);

  /** Adds one; returns the new value. Subscriber thread only. */
  long inc(C c) {
    return add(c, 1);
  }

  /** Adds {@code n}; returns the new value. Subscriber thread only. */
  long add(C c, long n) {
    int i = c.ordinal();
    long v = slots.getPlain(i) + n;
    slots.setRelease(i, v);
    return v;
  }

  long get(C c) {
    return slots.getAcquire(c.ordinal());
  }

  IngestStats snapshot() {
    long[] v = new long[slots.length()];
    for (int i = 0; i < v.length; i++) v[i] = slots.getAcquire(i);
    return new IngestStats(
        v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
        v[14], v[15], v[16], v[17], v[18], v[19], v[20], v[21], v[22]);
  }
}
