package io.kvrouter.transport.nats;

import io.kvrouter.transport.SingleWriterCounters;

/**
 * The slots behind {@link NatsReplicaStats}: one {@link SingleWriterCounters} slot per {@link C}.
 * Every slot has one writing thread at a time (the replica's thread, or the snapshot thread for the
 * snapshot-writing slots; the caller's thread during {@code start()}, before either exists).
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

  private ReplicaCounters() {}

  /** Zeroed counters. */
  static SingleWriterCounters<C> create() {
    return new SingleWriterCounters<>(C.class);
  }

  /** The counters' current values as the public record. */
  static NatsReplicaStats snapshot(SingleWriterCounters<C> counters) {
    long[] v = counters.values();
    return new NatsReplicaStats(
        v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
        v[14], v[15]);
  }
}
