package io.kvrouter.transport.nats;

import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.api.DeliverPolicy;
import java.util.List;

/**
 * How far a replica may purge the stream after writing a snapshot: never past the snapshot's own
 * sequence, and never past what any other consumer of the subject has processed.
 */
final class PurgeRule {
  /*
   * Implementation notes
   *
   * A message may be removed only when (a) a snapshot that a starting replica would load covers
   * it, and (b) no running consumer still needs it. (a) holds for every sequence up to the
   * snapshot just written, because "latest" only grows. (b) is the minimum over every consumer
   * whose filter overlaps the subject, the writer's own current consumer excepted (its replica
   * has applied everything up to the snapshot's sequence, which is exactly (a)), of the stream
   * sequence up to which that consumer has processed everything:
   *
   *   nothing awaiting an ack  -> delivered.stream_seq (for a fresh consumer created at start
   *                               sequence s this is s - 1: its replica restored everything
   *                               before s from a snapshot)
   *   otherwise                -> ack_floor.stream_seq, but at least start_seq - 1 for a consumer
   *                               created at a start sequence (the server reports an ack floor of
   *                               0 until the first ack)
   *
   * Consumers that are not kvrouter replicas count too (a conservative choice: a monitoring
   * consumer that lags holds purges back). A consumer whose replica died holds purges back until
   * the server deletes it after its inactive threshold.
   */

  private PurgeRule() {}

  /** The stream sequence up to which {@code ci} has processed every message it was to get. */
  static long processedThrough(ConsumerInfo ci) {
    if (ci.getNumAckPending() == 0) {
      return ci.getDelivered().getStreamSequence();
    }
    long floor = ci.getAckFloor().getStreamSequence();
    ConsumerConfiguration cc = ci.getConsumerConfiguration();
    if (cc.getDeliverPolicy() == DeliverPolicy.ByStartSequence && cc.getStartSequence() > 0) {
      floor = Math.max(floor, cc.getStartSequence() - 1);
    }
    return floor;
  }

  /**
   * The highest sequence that may be purged after a snapshot through {@code snapshotSequence}:
   * messages of {@code subject} up to and including it are covered by the snapshot and processed by
   * every consumer in {@code consumers} (except {@code ownConsumer}) that could receive them.
   */
  static long purgeThrough(
      long snapshotSequence, List<ConsumerInfo> consumers, String ownConsumer, String subject) {
    long through = snapshotSequence;
    for (ConsumerInfo ci : consumers) {
      if (ci.getName().equals(ownConsumer) || !receives(ci.getConsumerConfiguration(), subject)) {
        continue;
      }
      through = Math.min(through, processedThrough(ci));
    }
    return Math.max(0, through);
  }

  /** Whether a consumer with this configuration can be delivered messages of {@code subject}. */
  static boolean receives(ConsumerConfiguration cc, String subject) {
    List<String> filters = cc.getFilterSubjects();
    if (filters == null || filters.isEmpty()) {
      return true; // no filter: the whole stream
    }
    for (String f : filters) {
      if (Subjects.overlap(f, subject)) return true;
    }
    return false;
  }
}
