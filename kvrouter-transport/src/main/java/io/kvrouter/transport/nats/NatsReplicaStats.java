package io.kvrouter.transport.nats;

/**
 * Counters of a {@link NatsReplica} since it started.
 *
 * @param messages stream messages delivered to the replica (including duplicates and malformed
 *     ones)
 * @param applied events from the stream applied to the index
 * @param duplicates deliveries skipped because their stream sequence was already applied (the
 *     server redelivered a message whose acknowledgement it had not seen in time)
 * @param malformed messages that are not a router event in Dynamo's JSON form; each is terminated
 *     (never redelivered) and skipped
 * @param applyErrors events the index threw on (acknowledged and skipped)
 * @param gaps deliveries lost between the server and the replica (a jump in the consumer sequence);
 *     each makes the replica resubscribe from its last applied sequence
 * @param resubscribes consumers created again from the last applied sequence (after a gap, or when
 *     the consumer disappeared)
 * @param resyncs index rebuilds from a newer snapshot: the consumer had disappeared and the stream
 *     may have been purged past the last applied sequence meanwhile
 * @param consumerErrors failed pulls, failed consumer look-ups and failed attempts to create a
 *     consumer (each retried with backoff)
 * @param snapshotsRestored snapshots loaded into the index (at start and in resyncs)
 * @param restoredEvents events applied from those snapshots
 * @param snapshotLoadFailures snapshot reads that failed and were retried
 * @param snapshotsWritten snapshots this replica wrote
 * @param snapshotFailures snapshot writes (or the purges after them) that failed
 * @param purges purge requests sent after a snapshot
 * @param purgedMessages messages those purges removed from the stream
 */
public record NatsReplicaStats(
    long messages,
    long applied,
    long duplicates,
    long malformed,
    long applyErrors,
    long gaps,
    long resubscribes,
    long resyncs,
    long consumerErrors,
    long snapshotsRestored,
    long restoredEvents,
    long snapshotLoadFailures,
    long snapshotsWritten,
    long snapshotFailures,
    long purges,
    long purgedMessages) {}
