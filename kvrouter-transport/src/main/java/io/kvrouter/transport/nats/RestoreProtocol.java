package io.kvrouter.transport.nats;

import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.nats.ReplicaCounters.C;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.api.DeliverPolicy;
import java.io.IOException;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.logging.Logger;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * A replica's consumers and where they start: the restore protocol that pairs the newest snapshot
 * with a consumer right after it (at start and in a resync), and the consumer requests the replica
 * thread makes (create, delete, look up).
 */
final class RestoreProtocol {
  /*
   * Implementation notes
   *
   * Restore: read the newest snapshot S; create the consumer at S + 1; read the newest snapshot
   * again. A writer uploads its snapshot before it lists consumers to compute its purge floor
   * (SnapshotScheduler), so either it saw our consumer (and purges no further than S) or we see
   * its newer snapshot now and start over. At most RESTORE_ATTEMPTS attempts; an unreadable
   * snapshot (a read that overlapped its replacement) is retried after 50 ms * attempt.
   *
   * Consumers are named kvrouter-<subject slug>-<replicaId>-g<n>, n increasing with every
   * consumer created and starting at the wall clock's milliseconds, so that a run does not reuse
   * the names of the one before (whose consumers deleteLeftovers() removes at start).
   *
   * Threads: start() uses it on the caller's thread, then the replica thread alone (Thread.start()
   * hands generation over); close() calls deleteQuietly after joining the replica thread. The
   * rest is immutable, jnats' JetStreamManagement is thread-safe. Counter slots written here
   * (SNAPSHOT_LOAD_FAILURES, SNAPSHOTS_RESTORED, RESTORED_EVENTS) follow the same hand-over.
   */

  private static final Logger LOG = Logger.getLogger(NatsReplica.class.getName());
  private static final int RESTORE_ATTEMPTS = 5;

  /** A consumer created at a start sequence, with the snapshot loaded for it (null: none). */
  record Restored(
      Snapshots.@Nullable Loaded snapshot, long sequence, String consumer, long pending) {}

  private final JetStreamManagement jsm;
  private final NatsEventStream stream;
  private final Snapshots snapshots;
  private final String replicaId;
  private final String consumerPrefix;
  private final Pattern ownConsumers;
  private final ConsumerConfiguration consumerTemplate;
  private final SingleWriterCounters<C> counters;
  private long generation = System.currentTimeMillis(); // consumer names differ between runs

  RestoreProtocol(
      JetStreamManagement jsm,
      NatsEventStream stream,
      Snapshots snapshots,
      String replicaId,
      Duration ackWait,
      Duration inactiveThreshold,
      SingleWriterCounters<C> counters) {
    this.jsm = jsm;
    this.stream = stream;
    this.snapshots = snapshots;
    this.replicaId = replicaId;
    this.counters = counters;
    this.consumerPrefix =
        "kvrouter-" + NatsEventStream.slug(stream.subject()).replace('_', '-') + "-" + replicaId;
    this.ownConsumers = Pattern.compile(Pattern.quote(consumerPrefix) + "-g\\d+");
    this.consumerTemplate =
        ConsumerConfiguration.builder()
            .description("kvrouter replica " + replicaId + " of " + stream.subject())
            .filterSubject(stream.subject())
            .ackPolicy(AckPolicy.Explicit)
            .ackWait(ackWait)
            .inactiveThreshold(inactiveThreshold)
            .build();
  }

  /** Deletes consumers left by an earlier run of this replica id (caller's thread, at start). */
  void deleteLeftovers() throws IOException, JetStreamApiException {
    for (String name : jsm.getConsumerNames(stream.stream())) {
      if (ownConsumers.matcher(name).matches()) {
        LOG.info(
            "NATS replica " + replicaId + ": deleting consumer " + name + " of an earlier run");
        deleteQuietly(name);
      }
    }
  }

  /**
   * Loads the newest snapshot and creates a consumer right after it, starting over when a newer
   * snapshot appeared meanwhile; deletes {@code previous} (when not null) once the new consumer
   * exists.
   */
  Restored restore(@Nullable String previous)
      throws IOException, JetStreamApiException, InterruptedException {
    for (int attempt = 1; ; attempt++) {
      Snapshots.Candidate c = snapshots.latest();
      Snapshots.Loaded loaded = null;
      if (c != null) {
        try {
          loaded = snapshots.load(c.name());
        } catch (RuntimeException | NoSuchAlgorithmException e) {
          counters.inc(C.SNAPSHOT_LOAD_FAILURES);
          if (attempt >= RESTORE_ATTEMPTS) {
            throw new IllegalStateException(
                "snapshot "
                    + c.name()
                    + " in bucket "
                    + snapshots.bucket()
                    + " could not be read in "
                    + attempt
                    + " attempts: "
                    + e.getMessage(),
                e);
          }
          LOG.warning(
              "NATS replica "
                  + replicaId
                  + ": snapshot "
                  + c.name()
                  + " unreadable, retrying: "
                  + e);
          Thread.sleep(50L * attempt); // a retry's backoff, not a wait for a condition
          continue;
        }
      }
      long seq = loaded == null ? 0 : loaded.sequence();
      ConsumerInfo ci = createConsumer(seq + 1);
      long newest = latestSnapshotSequence();
      if (newest > seq) {
        deleteQuietly(ci.getName());
        if (attempt >= RESTORE_ATTEMPTS) {
          throw new IllegalStateException(
              "snapshots of "
                  + stream.subject()
                  + " kept moving ("
                  + seq
                  + " then "
                  + newest
                  + ") over "
                  + attempt
                  + " attempts");
        }
        continue;
      }
      if (previous != null) deleteQuietly(previous);
      return new Restored(loaded, seq, ci.getName(), ci.getNumPending());
    }
  }

  /**
   * Applies a restored snapshot (if any) to the empty or cleared {@code index}, on every tier the
   * index keeps (TierEvents.restore).
   */
  void install(Restored r, KvIndex index) {
    Snapshots.Loaded snapshot = r.snapshot();
    if (snapshot == null) return;
    TierEvents.restore(index, snapshot.events(), snapshot.slowest());
    index.flush();
    counters.inc(C.SNAPSHOTS_RESTORED);
    counters.add(C.RESTORED_EVENTS, snapshot.events().size());
    LOG.info(
        "NATS replica "
            + replicaId
            + ": restored "
            + snapshot.events().size()
            + " events from snapshot "
            + snapshot.name()
            + " through sequence "
            + r.sequence());
  }

  /** The sequence of the newest snapshot of the subject, 0 when there is none. */
  long latestSnapshotSequence() throws IOException, JetStreamApiException, InterruptedException {
    return snapshots.latestSequence();
  }

  /** A new durable consumer (the next generation's name) delivering from {@code startSequence}. */
  ConsumerInfo createConsumer(long startSequence) throws IOException, JetStreamApiException {
    String name = consumerPrefix + "-g" + (++generation);
    ConsumerConfiguration cc =
        ConsumerConfiguration.builder(consumerTemplate)
            .durable(name)
            .deliverPolicy(startSequence <= 1 ? DeliverPolicy.All : DeliverPolicy.ByStartSequence)
            .startSequence(startSequence <= 1 ? 0 : startSequence)
            .build();
    return jsm.createConsumer(stream.stream(), cc);
  }

  /** The consumer's info from the server. */
  ConsumerInfo consumerInfo(String name) throws IOException, JetStreamApiException {
    return jsm.getConsumerInfo(stream.stream(), name);
  }

  /** Whether the consumer exists on the server. */
  boolean consumerExists(String name) throws IOException, JetStreamApiException {
    try {
      consumerInfo(name);
      return true;
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() == Subjects.CONSUMER_NOT_FOUND) return false;
      throw e;
    }
  }

  /** Deletes a consumer; one that is already gone is fine, other failures are logged. */
  void deleteQuietly(String name) {
    try {
      jsm.deleteConsumer(stream.stream(), name);
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() != Subjects.CONSUMER_NOT_FOUND) {
        LOG.warning("NATS replica " + replicaId + ": could not delete consumer " + name + ": " + e);
      }
    } catch (IOException | RuntimeException e) {
      LOG.warning("NATS replica " + replicaId + ": could not delete consumer " + name + ": " + e);
    }
  }
}
