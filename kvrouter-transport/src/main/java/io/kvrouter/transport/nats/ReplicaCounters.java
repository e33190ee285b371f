package io.kvrouter.transport.nats;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The counters behind {@link NatsReplicaStats}: one slot per {@link C}. Every slot has one writing
 * thread at a time (the replica's thread, or the snapshot thread for the snapshot-writing slots;
 * the caller's thread during {@code start()}, before either exists), so writes are a plain read and
 * a release store; readers use acquire loads.
 */
final class ReplicaCounters {
  /** One counter per {@link NatsReplicaStats} component, in the same order. */
  enum C {
    MESSAGES,
    APPLIED,
    DUPLICATES,
    MALFORMED,
    APPLY_ERRORS,
    GAPS,
    RESUBSCRIBES,
    RESYNCS,
    CONSUMER_ERRORS,
    SNAPSHOTS_RESTORED,
    RESTORED_EVENTS,
    SNAPSHOT_LOAD_FAILURES,
    SNAPSHOTS_WRITTEN, // snapshot thread
    SNAPSHOT_FAILURES, // snapshot thread
    PURGES, // snapshot thread
    PURGED_MESSAGES // snapshot thread
  }

  private final AtomicLongArray slots = new AtomicLongArray(C.values().length);

  /** Adds one; returns the new value. Only the slot's writing thread. */
  long inc(C c) {
    return add(c, 1);
  }

  /** Adds {@code n}; returns the new value. Only the slot's writing thread. */
  long add(C c, long n) {
    int i = c.ordinal();
    long v = slots.getPlain(i) + n;
    slots.setRelease(i, v);
    return v;
  }

  long get(C c) {
    return slots.getAcquire(c.ordinal());
  }

  NatsReplicaStats snapshot() {
    long[] v = new long[slots.length()];
    for (int i = 0; i < v.length; i++) v[i] = slots.getAcquire(i);
    return new NatsReplicaStats(
        v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
        v[14], v[15]);
  }

  /** Log the first ten occurrences of a kind, then every thousandth. */
  static boolean shouldLog(long n) {
    return n <= 10 || n % 1000 == 0;
  }
}
