package io.kvrouter.transport.nats;

/**
 * A snapshot of a replica's index in the object store.
 *
 * @param objectName the object's name in the bucket, {@code <subject>/<replicaId>}
 * @param sequence the stream sequence the snapshot covers: it holds the effect of every event on
 *     the subject up to and including this sequence, and of none after it
 * @param events how many router events the snapshot holds (the index's {@code dump()})
 * @param bytes the size of the object
 * @param purgedThrough after writing it, the stream was purged of the subject's messages up to and
 *     including this sequence (0: nothing purged; see {@code docs/ingestion.md} for the rule)
 */
public record SnapshotInfo(
    String objectName, long sequence, int events, long bytes, long purgedThrough) {}
