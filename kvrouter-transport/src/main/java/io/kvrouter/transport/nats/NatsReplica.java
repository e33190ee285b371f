package io.kvrouter.transport.nats;

import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.nats.ReplicaCounters.C;
import io.kvrouter.transport.nats.RestoreProtocol.Restored;
import io.nats.client.Connection;
import io.nats.client.ConnectionListener;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.NUID;
import io.nats.client.api.StreamInfo;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;
import java.util.regex.Pattern;

/**
 * One router replica's share of the NATS JetStream event bus: a durable consumer of the event
 * subject that applies every event to the replica's index, and the snapshots that let replicas
 * start without the whole history.
 *
 * <pre>{@code
 * KvIndex index = KvIndexes.concurrentRadixTree();
 * NatsReplica replica =
 *     NatsReplica.builder(nc, NatsEventStream.forModel("llama"), index)
 *         .replicaId("router-1")
 *         .start();                         // snapshot loaded, consumer created
 * replica.awaitReady(Duration.ofSeconds(30)); // backlog applied: serve now
 * ...
 * replica.close();
 * }</pre>
 *
 * <p><b>Start.</b> {@link Builder#start()} runs on the caller's thread: it creates the stream and
 * the bucket when they are missing, deletes consumers a previous run of this replica id left
 * behind, loads the newest snapshot of the subject (written by any replica), creates the durable
 * consumer at the sequence after it, checks that no newer snapshot appeared meanwhile (else starts
 * over), applies the snapshot to the index and starts the replica's thread. {@link #ready()} turns
 * true once the backlog that existed when the consumer was created has been applied.
 *
 * <p><b>Consuming.</b> The replica's thread pulls messages in stream order, decodes each as one
 * Dynamo JSON router event, applies it to the index and then acknowledges it. Delivery is at least
 * once; a redelivered message whose stream sequence was already applied is skipped (acknowledged),
 * a malformed one is counted and terminated. A jump in the consumer sequence (deliveries lost on
 * the way) or a consumer that disappeared makes the replica create a new consumer at the sequence
 * after the last one it applied; if the stream may have been purged past that point meanwhile, it
 * rebuilds the index from the newest snapshot.
 *
 * <p><b>Snapshots.</b> Every {@code snapshotInterval} (when something was applied since the last
 * one), after {@code snapshotThreshold} messages, and on {@link #snapshot()}, the replica's thread
 * takes the index's {@code dump()} between two messages, and a second thread writes it to the
 * object store as {@code <subject>/<replicaId>} with the stream sequence it covers, then purges the
 * subject's messages up to the lowest sequence that the snapshot covers and every other consumer of
 * the subject has processed ({@code docs/ingestion.md}, "Purging").
 *
 * <p>The connection and the index belong to the caller; the index should be fed by this replica
 * alone, be empty at start, and accept a writer thread next to readers ({@code
 * concurrentRadixTree()}, {@code positional(j)} or {@code threadPool(...)}). See {@code
 * docs/concurrency.md} for the threads.
 */
public final class NatsReplica implements AutoCloseable {
  /*
   * Implementation notes
   *
   * The public face of three package-private parts, each with its own notes:
   *   RestoreProtocol    the consumers and where they start: newest snapshot, consumer after it,
   *                      check again (start and resync); consumer create / delete / look-up.
   *   ConsumeLoop        the replica thread ("kvrouter-nats-<replicaId>"): pull, classify,
   *                      apply, ack; gaps, lost consumers, reconnections, resyncs.
   *   SnapshotScheduler  when to cut (requests, threshold, interval), the cut on the replica
   *                      thread, the write and purge on the snapshot thread
   *                      ("kvrouter-nats-snapshot-<replicaId>").
   * and Progress, where the loop publishes lastApplied and ready and where awaitApplied /
   * awaitReady wait on futures the loop completes (no polling).
   *
   * start() runs on the caller's thread: stream and bucket, leftovers deleted, restore, the
   * snapshot installed into the index, then the loop's thread started (Thread.start() publishes
   * everything set up before). jnats' connection thread runs connectionListener, which only
   * tells the loop about a reconnection. close() stops the loop, joins its thread, stops the
   * snapshot thread and deletes the consumer. Counter slots have one writer each (ReplicaCounters).
   */

  /** The object store bucket for snapshots when none is named. */
  public static final String DEFAULT_BUCKET = "kvrouter-snapshots";

  private static final Pattern ID = Pattern.compile("[A-Za-z0-9_-]+");

  /** Configures and starts a {@link NatsReplica}. */
  public static final class Builder {
    private final Connection nc;
    private final NatsEventStream stream;
    private final KvIndex index;
    private String replicaId = NUID.nextGlobal();
    private String bucket = DEFAULT_BUCKET;
    private boolean writeSnapshots = true;
    private Duration snapshotInterval = Duration.ofMinutes(1);
    private long snapshotThreshold = 100_000;
    private Duration ackWait = Duration.ofSeconds(30);
    private Duration inactiveThreshold = Duration.ofMinutes(5);
    private int batchSize = 256;
    private LongSupplier clock = System::nanoTime;

    private Builder(Connection nc, NatsEventStream stream, KvIndex index) {
      this.nc = Objects.requireNonNull(nc, "connection");
      this.stream = Objects.requireNonNull(stream, "stream");
      this.index = Objects.requireNonNull(index, "index");
    }

    /**
     * This replica's name, stable across restarts ({@code [A-Za-z0-9_-]+}; default: random). It
     * names the durable consumer and the snapshot object; a restarted replica with the same id
     * deletes the consumer its previous run left behind.
     */
    public Builder replicaId(String id) {
      if (id == null || !ID.matcher(id).matches()) {
        throw new IllegalArgumentException("replica id must match [A-Za-z0-9_-]+, got " + id);
      }
      this.replicaId = id;
      return this;
    }

    /** The object store bucket holding snapshots. Default {@value #DEFAULT_BUCKET}. */
    public Builder bucket(String bucket) {
      if (bucket == null || !ID.matcher(bucket).matches()) {
        throw new IllegalArgumentException("bucket must match [A-Za-z0-9_-]+, got " + bucket);
      }
      this.bucket = bucket;
      return this;
    }

    /**
     * Whether this replica writes snapshots on its own schedule (default true). A replica that does
     * not still loads snapshots at start and writes one on {@link NatsReplica#snapshot()}.
     */
    public Builder writeSnapshots(boolean write) {
      this.writeSnapshots = write;
      return this;
    }

    /** Write a snapshot this often when events were applied since the last one. Default 1 min. */
    public Builder snapshotInterval(Duration interval) {
      this.snapshotInterval = positive("snapshot interval", interval);
      return this;
    }

    /** Write a snapshot after this many messages since the last one. Default 100,000. */
    public Builder snapshotThreshold(long messages) {
      if (messages < 1) throw new IllegalArgumentException("threshold must be >= 1: " + messages);
      this.snapshotThreshold = messages;
      return this;
    }

    /** How long the server waits for an acknowledgement before redelivering. Default 30 s. */
    public Builder ackWait(Duration wait) {
      this.ackWait = positive("ack wait", wait);
      return this;
    }

    /**
     * How long the server keeps this replica's consumer after the replica stops pulling (a crashed
     * replica's consumer holds purges back until then). Default 5 min.
     */
    public Builder inactiveThreshold(Duration threshold) {
      this.inactiveThreshold = positive("inactive threshold", threshold);
      return this;
    }

    /** Messages requested per pull. Default 256. */
    public Builder batchSize(int messages) {
      if (messages < 1) throw new IllegalArgumentException("batch size must be >= 1: " + messages);
      this.batchSize = messages;
      return this;
    }

    /** The clock of the snapshot schedule (tests); default {@link System#nanoTime()}. */
    Builder clock(LongSupplier nanoTime) {
      this.clock = Objects.requireNonNull(nanoTime, "clock");
      return this;
    }

    /**
     * Loads the newest snapshot, creates the consumer, applies the snapshot and starts consuming.
     *
     * @throws UncheckedIOException when NATS cannot be reached
     * @throws IllegalStateException when JetStream refuses a request, the stream does not capture
     *     the subject, or no consistent snapshot could be read in a few attempts
     */
    public NatsReplica start() {
      try {
        return new NatsReplica(this);
      } catch (IOException e) {
        throw new UncheckedIOException("NATS replica " + replicaId + " could not start", e);
      } catch (JetStreamApiException e) {
        throw new IllegalStateException(
            "NATS replica " + replicaId + " could not start: " + e.getMessage(), e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("NATS replica " + replicaId + " start interrupted", e);
      }
    }

    private static Duration positive(String what, Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(what + " must be > 0, got " + d);
      }
      return d;
    }
  }

  /** A replica of {@code index} fed from {@code stream}'s subject through {@code nc}. */
  public static Builder builder(Connection nc, NatsEventStream stream, KvIndex index) {
    return new Builder(nc, stream, index);
  }

  private final Connection nc;
  private final NatsEventStream stream;
  private final String replicaId;
  private final Snapshots snapshots;
  private final RestoreProtocol restore;
  private final SnapshotScheduler scheduler;
  private final ConsumeLoop loop;
  private final Progress progress = new Progress();
  private final SingleWriterCounters<C> counters = ReplicaCounters.create();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final ConnectionListener connectionListener;
  private final Thread thread;

  private NatsReplica(Builder b) throws IOException, JetStreamApiException, InterruptedException {
    this.nc = b.nc;
    this.stream = b.stream;
    this.replicaId = b.replicaId;
    JetStreamManagement jsm = nc.jetStreamManagement();
    StreamInfo info = stream.ensure(jsm);
    this.snapshots =
        new Snapshots(
            Snapshots.openBucket(nc, b.bucket),
            stream,
            info.getCreateTime().toInstant().toString());
    this.restore =
        new RestoreProtocol(
            jsm, stream, snapshots, replicaId, b.ackWait, b.inactiveThreshold, counters);
    restore.deleteLeftovers();
    Restored r = restore.restore(null);
    try {
      restore.install(r, b.index);
    } catch (RuntimeException e) {
      restore.deleteQuietly(r.consumer());
      throw e;
    }
    this.scheduler =
        new SnapshotScheduler(
            b.index,
            snapshots,
            jsm,
            stream,
            replicaId,
            b.writeSnapshots,
            b.snapshotInterval,
            b.snapshotThreshold,
            b.clock,
            counters);
    this.loop =
        new ConsumeLoop(
            nc, stream, b.index, replicaId, restore, scheduler, progress, counters, b.batchSize, r);
    this.connectionListener =
        (conn, event) -> {
          if (event == ConnectionListener.Events.RECONNECTED) loop.reconnected();
        };
    this.thread = new Thread(loop, "kvrouter-nats-" + replicaId);
    thread.setDaemon(true);
    nc.addConnectionListener(connectionListener);
    thread.start();
  }

  // ------------------------------------------------------------------ public API

  /** This replica's id. */
  public String replicaId() {
    return replicaId;
  }

  /** The stream and subject this replica consumes. */
  public NatsEventStream stream() {
    return stream;
  }

  /**
   * Whether the replica has applied the snapshot it started from and the backlog the stream held
   * when its consumer was created: the index is as fresh as the stream was then. False again while
   * a resync rebuilds the index.
   */
  public boolean ready() {
    return progress.ready();
  }

  /** Waits until {@link #ready()}; returns false on timeout or when the replica stopped. */
  public boolean awaitReady(Duration timeout) {
    return progress.awaitReady(timeout);
  }

  /**
   * Waits until the replica has applied (or skipped as malformed) every message up to stream
   * sequence {@code sequence}; returns false on timeout or when the replica stopped. With a thread
   * pool index, call the index's {@code flush()} afterwards to see the events in reads.
   */
  public boolean awaitApplied(long sequence, Duration timeout) {
    return progress.awaitApplied(sequence, timeout);
  }

  /** The stream sequence of the last message applied (or skipped as malformed). */
  public long lastAppliedSequence() {
    return progress.lastApplied();
  }

  /** The sequence of the snapshot loaded at start or in the last resync; 0 when there was none. */
  public long restoredSequence() {
    return loop.restoredSequence();
  }

  /** The sequence of the last snapshot this replica wrote; -1 before the first. */
  public long lastSnapshotSequence() {
    return scheduler.lastSnapshotSequence();
  }

  /** The name of the durable consumer this replica currently reads from. */
  public String consumerName() {
    return loop.consumerName();
  }

  /** The object name of this replica's snapshot in the bucket. */
  public String snapshotObjectName() {
    return snapshots.objectName(replicaId);
  }

  /** Whether the replica's thread is running (false after {@link #close()} or a fatal error). */
  public boolean running() {
    return loop.running() && thread.isAlive();
  }

  /** Counters since start. */
  public NatsReplicaStats stats() {
    return ReplicaCounters.snapshot(counters);
  }

  /**
   * Asks for a snapshot now: the replica's thread takes the index's dump after the message it is
   * applying, and the future completes once the object is written and the stream purged as far as
   * the purge rule allows (or completes exceptionally when that failed or the replica closed).
   */
  public CompletableFuture<SnapshotInfo> snapshot() {
    CompletableFuture<SnapshotInfo> f = scheduler.request();
    if (!loop.running()) {
      scheduler.failRequests(new IllegalStateException("replica " + replicaId + " is closed"));
    }
    return f;
  }

  /**
   * Completes after the replica thread's next look at the snapshot schedule, whether or not it took
   * a snapshot (for tests).
   */
  CompletableFuture<Void> nextScheduleCheck() {
    return scheduler.nextCheck();
  }

  /**
   * Stops the replica's thread (within about 50 ms), lets a snapshot in flight finish (up to 10 s),
   * and deletes the replica's consumer so that it no longer holds purges back. Leaves the
   * connection and the index open. Idempotent.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) return;
    loop.stop();
    progress.stop();
    if (Thread.currentThread() != thread) {
      try {
        thread.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    scheduler.shutdown();
    scheduler.failRequests(new IllegalStateException("replica " + replicaId + " is closed"));
    nc.removeConnectionListener(connectionListener);
    String name = loop.consumerName();
    if (name != null && nc.getStatus() == Connection.Status.CONNECTED) {
      restore.deleteQuietly(name);
    }
  }

  @Override
  public String toString() {
    return "NatsReplica[" + replicaId + " on " + stream.stream() + "/" + stream.subject() + "]";
  }
}
