package io.kvrouter.transport.zmq;

import io.kvrouter.transport.SingleWriterCounters;

/**
 * The slots behind {@link IngestStats}: one {@link SingleWriterCounters} slot per {@link C},
 * written by the subscriber's thread only and read by any thread.
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
    SINK_ERRORS,
    TAIL_PROBES,
    TAIL_RECOVERED,
    LAG_MICROS,
    LAG_BATCHES,
    PLACEHOLDER
  }

  private Counters() {}

  /** Zeroed counters. */
  static SingleWriterCounters<C> create() {
    return new SingleWriterCounters<>(C.class);
  }

  /** The counters' current values as the public record. */
  static IngestStats snapshot(SingleWriterCounters<C> counters) {
    long[] v = counters.values();
    return new IngestStats(
        v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
        v[14], v[15], v[16], v[17], v[18], v[19], v[20], v[21], v[22], v[23], v[24], v[25], v[26],
        v[27]);
  }
}
