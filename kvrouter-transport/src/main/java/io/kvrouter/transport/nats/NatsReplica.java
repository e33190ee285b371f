package io.kvrouter.transport.nats;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.nats.ReplicaCounters.C;
import io.nats.client.Connection;
import io.nats.client.ConnectionListener;
import io.nats.client.ConsumeOptions;
import io.nats.client.IterableConsumer;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.JetStreamStatusCheckedException;
import io.nats.client.Message;
import io.nats.client.NUID;
import io.nats.client.PurgeOptions;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.api.DeliverPolicy;
import io.nats.client.api.ObjectInfo;
import io.nats.client.api.PurgeResponse;
import io.nats.client.api.StreamInfo;
import io.nats.client.impl.NatsJetStreamMetaData;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;
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
   * Threads. start() runs the restore procedure on the caller's thread and then starts the
   * replica thread ("kvrouter-nats-<replicaId>"), which from then on alone touches the iterator,
   * the consumer name, the index's writes, expectedConsumerSeq, the snapshot schedule and every
   * counter except the four written by the snapshot thread ("kvrouter-nats-snapshot-<id>", a
   * single-thread executor), which serialises dumps, writes the object and purges the stream.
   * Thread.start() publishes what start() set up. Other threads read lastApplied, ready,
   * restoredSequence and consumerName (volatile) and the counters.
   *
   * jnats' connection thread runs connectionListener, which only sets the reconnected flag: after
   * a reconnection the iterator's pull request is gone with the old connection (jnats would only
   * notice at the next missed heartbeat, up to tens of seconds later), so the replica thread
   * drops the iterator and pulls again on its next turn.
   *
   * The loop (one turn at most POLL_MS of waiting, so close() is seen quickly):
   *   prepare()      if no iterator is open: check whether the consumer still exists, create a
   *                  new one when needed (gap or consumer lost), rebuild from a snapshot when
   *                  the stream may have been purged past lastApplied, open the iterator.
   *                  Failures are counted and retried with capped exponential backoff.
   *   nextMessage    -> onMessage, or onIdle when nothing came.
   *   maybeSnapshot  take a dump when one is due and none is in flight.
   *
   * onMessage, per delivery:
   *   consumer sequence > expected   deliveries were lost: drop the iterator, resubscribe at
   *                                  lastApplied + 1 (this message comes again from there)
   *   stream sequence <= lastApplied a redelivery: ack, count duplicate
   *   not decodable                  term (never redeliver), count malformed; it is dealt with
   *   otherwise                      index.apply, lastApplied = sequence, ack
   * The consumer sequence counts every delivery, redeliveries included, so it has no holes unless
   * messages were lost. Events are applied in stream order; the duplicate rule is safe because a
   * message is only skipped when a message at or after its sequence was applied, and everything
   * before that was applied or skipped in order.
   *
   * Consumers are named kvrouter-<subject slug>-<replicaId>-g<n>, n increasing with every
   * (re)subscription and starting at the wall clock's milliseconds, so that a run does not reuse
   * the names of the one before (whose consumers start() deletes). A resubscription creates the new consumer first and
   * deletes the old one after, so the replica's position always pins the purge floor
   * (PurgeRule). A consumer that vanished (deleted by an operator, or by the server after its
   * inactive threshold) pinned nothing for a while: after creating the new one, if the newest
   * snapshot is past lastApplied, events between may have been purged, and the replica
   * rebuilds (resync): clear every worker the index knows, load that snapshot, consume after it.
   *
   * Restore (start and resync): read the newest snapshot S; create the consumer at S + 1; read
   * the newest snapshot again. A writer uploads its snapshot before it lists consumers to compute
   * its purge floor, so either it saw our consumer (and purges no further than S) or we see its
   * newer snapshot now and start over. Bounded attempts.
   *
   * Snapshot cut: on the replica thread between two messages, index.flush() then index.dump(),
   * with seq = lastApplied: the dump holds exactly the events up to seq. The dump (an immutable
   * list) goes to the snapshot thread; at most one snapshot is in flight (snapshotInFlight),
   * requests made meanwhile are served by the next cut.
   */

  private static final Logger LOG = Logger.getLogger(NatsReplica.class.getName());

  /** The object store bucket for snapshots when none is named. */
  public static final String DEFAULT_BUCKET = "kvrouter-snapshots";

  private static final long POLL_MS = 50;
  private static final long READY_CHECK_NANOS = 100_000_000L;
  private static final long BACKOFF_INITIAL_MS = 50;
  private static final long BACKOFF_MAX_MS = 5_000;
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
    private int restoreAttempts = 5;

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

  /** A consumer created at a start sequence, with the snapshot loaded for it (null: none). */
  private record Restored(
      Snapshots.Loaded snapshot, long sequence, String consumer, long pending) {}

  private final Connection nc;
  private final JetStreamManagement jsm;
  private final NatsEventStream stream;
  private final KvIndex index;
  private final String replicaId;
  private final String consumerPrefix;
  private final Pattern ownConsumers;
  private final Snapshots snapshots;
  private final ConsumerConfiguration.Builder consumerTemplate;
  private final ConsumeOptions consumeOptions;
  private final boolean writeSnapshots;
  private final long snapshotIntervalNanos;
  private final long snapshotThreshold;
  private final int restoreAttempts;
  private final SingleWriterCounters<C> counters = ReplicaCounters.create();
  private final Queue<CompletableFuture<SnapshotInfo>> snapshotRequests =
      new ConcurrentLinkedQueue<>();
  private final AtomicBoolean snapshotInFlight = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final AtomicBoolean reconnected = new AtomicBoolean();
  private final ConnectionListener connectionListener =
      (conn, event) -> {
        if (event == ConnectionListener.Events.RECONNECTED) reconnected.set(true);
      };
  private final ExecutorService snapshotter;
  private final Thread thread;

  private volatile boolean running = true;
  private volatile boolean ready;
  private volatile long lastApplied;
  private volatile long restoredSequence;
  private volatile String consumerName;
  private volatile long lastSnapshotSequence = -1;

  // replica thread only
  private IterableConsumer it;
  private long generation = System.currentTimeMillis(); // consumer names differ between runs
  private long expectedConsumerSeq = 1;
  private boolean needCheck;
  private boolean needResubscribe;
  private boolean consumerLost;
  private boolean needLossCheck;
  private long retryAtNanos;
  private long backoffMs = BACKOFF_INITIAL_MS;
  private long nextReadyCheckNanos;
  private long sinceSnapshot;
  private long lastSnapshotNanos;

  // snapshot thread only
  private long purgedThrough;

  private NatsReplica(Builder b) throws IOException, JetStreamApiException, InterruptedException {
    this.nc = b.nc;
    this.jsm = b.nc.jetStreamManagement();
    this.stream = b.stream;
    this.index = b.index;
    this.replicaId = b.replicaId;
    this.consumerPrefix =
        "kvrouter-" + NatsEventStream.slug(stream.subject()).replace('_', '-') + "-" + replicaId;
    this.ownConsumers = Pattern.compile(Pattern.quote(consumerPrefix) + "-g\\d+");
    this.writeSnapshots = b.writeSnapshots;
    this.snapshotIntervalNanos = b.snapshotInterval.toNanos();
    this.snapshotThreshold = b.snapshotThreshold;
    this.restoreAttempts = b.restoreAttempts;
    this.consumerTemplate =
        ConsumerConfiguration.builder()
            .description("kvrouter replica " + replicaId + " of " + stream.subject())
            .filterSubject(stream.subject())
            .ackPolicy(AckPolicy.Explicit)
            .ackWait(b.ackWait)
            .inactiveThreshold(b.inactiveThreshold);
    this.consumeOptions = ConsumeOptions.builder().batchSize(b.batchSize).build();

    StreamInfo info = stream.ensure(jsm);
    this.snapshots =
        new Snapshots(
            Snapshots.openBucket(nc, b.bucket),
            stream,
            info.getCreateTime().toInstant().toString());
    deleteLeftovers();
    Restored r = restore(null);
    try {
      install(r);
    } catch (RuntimeException e) {
      deleteQuietly(r.consumer());
      throw e;
    }
    ready = r.pending() == 0;
    lastSnapshotNanos = System.nanoTime();

    this.snapshotter =
        Executors.newSingleThreadExecutor(
            task -> {
              Thread t = new Thread(task, "kvrouter-nats-snapshot-" + replicaId);
              t.setDaemon(true);
              return t;
            });
    this.thread = new Thread(this::run, "kvrouter-nats-" + replicaId);
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
    return ready;
  }

  /** Waits until {@link #ready()}; returns false on timeout or when the replica stopped. */
  public boolean awaitReady(Duration timeout) {
    return await(timeout, () -> ready);
  }

  /**
   * Waits until the replica has applied (or skipped as malformed) every message up to stream
   * sequence {@code sequence}; returns false on timeout or when the replica stopped. With a thread
   * pool index, call the index's {@code flush()} afterwards to see the events in reads.
   */
  public boolean awaitApplied(long sequence, Duration timeout) {
    return await(timeout, () -> lastApplied >= sequence);
  }

  /** The stream sequence of the last message applied (or skipped as malformed). */
  public long lastAppliedSequence() {
    return lastApplied;
  }

  /** The sequence of the snapshot loaded at start or in the last resync; 0 when there was none. */
  public long restoredSequence() {
    return restoredSequence;
  }

  /** The sequence of the last snapshot this replica wrote; -1 before the first. */
  public long lastSnapshotSequence() {
    return lastSnapshotSequence;
  }

  /** The name of the durable consumer this replica currently reads from. */
  public String consumerName() {
    return consumerName;
  }

  /** The object name of this replica's snapshot in the bucket. */
  public String snapshotObjectName() {
    return snapshots.objectName(replicaId);
  }

  /** Whether the replica's thread is running (false after {@link #close()} or a fatal error). */
  public boolean running() {
    return running && thread.isAlive();
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
    CompletableFuture<SnapshotInfo> f = new CompletableFuture<>();
    snapshotRequests.add(f);
    if (!running) failRequests(new IllegalStateException("replica " + replicaId + " is closed"));
    return f;
  }

  /**
   * Stops the replica's thread (within about 50 ms), lets a snapshot in flight finish (up to 10 s),
   * and deletes the replica's consumer so that it no longer holds purges back. Leaves the
   * connection and the index open. Idempotent.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) return;
    running = false;
    if (Thread.currentThread() != thread) {
      try {
        thread.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    snapshotter.shutdown();
    try {
      if (!snapshotter.awaitTermination(10, TimeUnit.SECONDS)) snapshotter.shutdownNow();
    } catch (InterruptedException e) {
      snapshotter.shutdownNow();
      Thread.currentThread().interrupt();
    }
    failRequests(new IllegalStateException("replica " + replicaId + " is closed"));
    nc.removeConnectionListener(connectionListener);
    String name = consumerName;
    if (name != null && nc.getStatus() == Connection.Status.CONNECTED) {
      deleteQuietly(name);
    }
  }

  @Override
  public String toString() {
    return "NatsReplica[" + replicaId + " on " + stream.stream() + "/" + stream.subject() + "]";
  }

  // ------------------------------------------------------------------ restore

  /** Deletes consumers left by an earlier run of this replica id (caller's thread, at start). */
  private void deleteLeftovers() throws IOException, JetStreamApiException {
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
  private Restored restore(String previous)
      throws IOException, JetStreamApiException, InterruptedException {
    for (int attempt = 1; ; attempt++) {
      Snapshots.Candidate c = snapshots.latest();
      Snapshots.Loaded loaded = null;
      if (c != null) {
        try {
          loaded = snapshots.load(c.name());
        } catch (RuntimeException | NoSuchAlgorithmException e) {
          counters.inc(C.SNAPSHOT_LOAD_FAILURES);
          if (attempt >= restoreAttempts) {
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
          Thread.sleep(50L * attempt);
          continue;
        }
      }
      long seq = loaded == null ? 0 : loaded.sequence();
      ConsumerInfo ci = createConsumer(seq + 1);
      long newest = snapshots.latestSequence();
      if (newest > seq) {
        deleteQuietly(ci.getName());
        if (attempt >= restoreAttempts) {
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

  /** Applies a restored snapshot to the (empty or cleared) index and adopts its consumer. */
  private void install(Restored r) {
    if (r.snapshot() != null) {
      for (RouterEvent e : r.snapshot().events()) {
        index.apply(e);
      }
      index.flush();
      counters.inc(C.SNAPSHOTS_RESTORED);
      counters.add(C.RESTORED_EVENTS, r.snapshot().events().size());
      LOG.info(
          "NATS replica "
              + replicaId
              + ": restored "
              + r.snapshot().events().size()
              + " events from snapshot "
              + r.snapshot().name()
              + " through sequence "
              + r.sequence());
    }
    consumerName = r.consumer();
    restoredSequence = r.sequence();
    lastApplied = r.sequence();
    expectedConsumerSeq = 1;
  }

  private ConsumerInfo createConsumer(long startSequence)
      throws IOException, JetStreamApiException {
    String name = consumerPrefix + "-g" + (++generation);
    ConsumerConfiguration cc =
        ConsumerConfiguration.builder(consumerTemplate.build())
            .durable(name)
            .deliverPolicy(startSequence <= 1 ? DeliverPolicy.All : DeliverPolicy.ByStartSequence)
            .startSequence(startSequence <= 1 ? 0 : startSequence)
            .build();
    return jsm.createConsumer(stream.stream(), cc);
  }

  private void deleteQuietly(String name) {
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

  // ------------------------------------------------------------------ the replica's thread

  private void run() {
    try {
      while (running) {
        if (reconnected.getAndSet(false) && it != null) {
          // the pull request died with the old connection: pull again on the new one
          closeIterator();
          needCheck = true;
        }
        if (!prepare()) {
          Thread.sleep(POLL_MS);
          continue;
        }
        Message m;
        try {
          m = it.nextMessage(POLL_MS);
        } catch (JetStreamStatusCheckedException | IllegalStateException e) {
          trouble("pull failed", e);
          continue;
        }
        if (m != null) {
          onMessage(m);
        } else {
          onIdle();
        }
        maybeSnapshot();
      }
    } catch (InterruptedException e) {
      if (running) LOG.warning("NATS replica " + replicaId + " interrupted; stopping");
    } catch (RuntimeException | Error e) {
      LOG.log(Level.SEVERE, "NATS replica " + replicaId + " stopped on an error", e);
    } finally {
      running = false;
      ready = false;
      closeIterator();
      failRequests(new IllegalStateException("replica " + replicaId + " stopped"));
    }
  }

  /** Makes sure an iterator is open, handling consumer trouble first; false to wait and retry. */
  private boolean prepare() throws InterruptedException {
    if (it != null) return true;
    if (System.nanoTime() - retryAtNanos < 0) return false;
    try {
      if (needCheck) {
        if (!consumerExists(consumerName)) {
          LOG.warning(
              "NATS replica "
                  + replicaId
                  + ": consumer "
                  + consumerName
                  + " is gone; resubscribing");
          needResubscribe = true;
          consumerLost = true;
        }
        needCheck = false;
      }
      if (needResubscribe) {
        resubscribe();
        needResubscribe = false;
      }
      if (needLossCheck) {
        long newest = snapshots.latestSequence();
        if (newest > lastApplied) {
          resync();
        }
        needLossCheck = false;
      }
      it =
          nc.getStreamContext(stream.stream())
              .getConsumerContext(consumerName)
              .iterate(consumeOptions);
      backoffMs = BACKOFF_INITIAL_MS;
      return true;
    } catch (IOException | JetStreamApiException | RuntimeException e) {
      long n = counters.inc(C.CONSUMER_ERRORS);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(
            "NATS replica "
                + replicaId
                + ": cannot read consumer "
                + consumerName
                + " (retrying in "
                + backoffMs
                + " ms): "
                + e);
      }
      if (e instanceof JetStreamApiException api
          && api.getApiErrorCode() == Subjects.CONSUMER_NOT_FOUND) {
        needCheck = true;
      }
      retryAtNanos = System.nanoTime() + backoffMs * 1_000_000L;
      backoffMs = Math.min(BACKOFF_MAX_MS, backoffMs * 2);
      return false;
    }
  }

  private boolean consumerExists(String name) throws IOException, JetStreamApiException {
    try {
      jsm.getConsumerInfo(stream.stream(), name);
      return true;
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() == Subjects.CONSUMER_NOT_FOUND) return false;
      throw e;
    }
  }

  /** A new consumer at lastApplied + 1, then the old one deleted. */
  private void resubscribe() throws IOException, JetStreamApiException {
    String old = consumerName;
    ConsumerInfo ci = createConsumer(lastApplied + 1);
    consumerName = ci.getName();
    expectedConsumerSeq = 1;
    if (old != null) deleteQuietly(old);
    counters.inc(C.RESUBSCRIBES);
    if (consumerLost) {
      needLossCheck = true; // ready waits for the loss check (and a resync, if one is needed)
      consumerLost = false;
    } else if (ci.getNumPending() == 0) {
      ready = true;
    }
  }

  /** Rebuilds the index from the newest snapshot and consumes after it. */
  private void resync() throws IOException, JetStreamApiException, InterruptedException {
    ready = false;
    counters.inc(C.RESYNCS);
    LOG.warning(
        "NATS replica "
            + replicaId
            + ": the stream may have been purged past sequence "
            + lastApplied
            + " while the consumer was gone; rebuilding the index from the newest snapshot");
    Restored r = restore(consumerName);
    index.flush();
    for (long w : index.workerIds()) {
      index.clearWorker(w);
    }
    install(r);
    if (r.pending() == 0) ready = true;
  }

  private void trouble(String what, Exception e) {
    long n = counters.inc(C.CONSUMER_ERRORS);
    if (SingleWriterCounters.shouldLog(n)) {
      LOG.warning("NATS replica " + replicaId + ": " + what + " on " + consumerName + ": " + e);
    }
    closeIterator();
    needCheck = true;
  }

  /** What a delivery is, by its consumer and stream sequences. */
  enum Delivery {
    /** Deliveries before it never arrived: resubscribe after the last applied sequence. */
    GAP,
    /** A redelivery of a message at or before the last applied sequence: ack and skip. */
    DUPLICATE,
    /** The next message to apply. */
    NEW
  }

  /**
   * Classifies a delivery: the consumer sequence counts every delivery (redeliveries included), so
   * one beyond the expected next means lost deliveries; a stream sequence not beyond the last
   * applied one means the message (or a later one) was applied already.
   */
  static Delivery classify(
      long expectedConsumerSeq, long lastApplied, long consumerSeq, long streamSeq) {
    if (consumerSeq > expectedConsumerSeq) return Delivery.GAP;
    if (streamSeq <= lastApplied) return Delivery.DUPLICATE;
    return Delivery.NEW;
  }

  private void onMessage(Message m) {
    counters.inc(C.MESSAGES);
    NatsJetStreamMetaData md = m.metaData();
    long cseq = md.consumerSequence();
    long sseq = md.streamSequence();
    switch (classify(expectedConsumerSeq, lastApplied, cseq, sseq)) {
      case GAP -> {
        long n = counters.inc(C.GAPS);
        if (SingleWriterCounters.shouldLog(n)) {
          LOG.warning(
              "NATS replica "
                  + replicaId
                  + ": deliveries "
                  + expectedConsumerSeq
                  + ".."
                  + (cseq - 1)
                  + " of "
                  + consumerName
                  + " never arrived; resubscribing after stream sequence "
                  + lastApplied);
        }
        closeIterator();
        needResubscribe = true;
        return;
      }
      case DUPLICATE -> {
        expectedConsumerSeq = Math.max(expectedConsumerSeq, cseq + 1);
        counters.inc(C.DUPLICATES);
        ack(m);
        return;
      }
      case NEW -> expectedConsumerSeq = Math.max(expectedConsumerSeq, cseq + 1);
    }
    RouterEvent event;
    try {
      byte[] data = m.getData();
      event = RouterEventJson.readEvent(data == null ? new byte[0] : data);
    } catch (RuntimeException e) {
      long n = counters.inc(C.MALFORMED);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(
            "NATS replica "
                + replicaId
                + ": message "
                + sseq
                + " on "
                + m.getSubject()
                + " is not a router event, skipped: "
                + e.getMessage());
      }
      lastApplied = sseq;
      try {
        m.term();
      } catch (RuntimeException ignored) {
        // connection trouble: the message comes again and is skipped as a duplicate
      }
      afterApplied(md);
      return;
    }
    try {
      index.apply(event);
      counters.inc(C.APPLIED);
    } catch (RuntimeException e) {
      long n = counters.inc(C.APPLY_ERRORS);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.log(Level.WARNING, "NATS replica " + replicaId + ": the index refused " + event, e);
      }
    }
    lastApplied = sseq;
    ack(m);
    afterApplied(md);
  }

  private void afterApplied(NatsJetStreamMetaData md) {
    sinceSnapshot++;
    if (!ready && md.pendingCount() == 0) ready = true;
  }

  private void ack(Message m) {
    try {
      m.ack();
    } catch (RuntimeException e) {
      // connection trouble: the server redelivers and the duplicate rule skips it
    }
  }

  /** Nothing came within a poll: when not ready yet, ask the server whether we caught up. */
  private void onIdle() {
    if (ready) return;
    long now = System.nanoTime();
    if (now - nextReadyCheckNanos < 0) return;
    nextReadyCheckNanos = now + READY_CHECK_NANOS;
    try {
      ConsumerInfo ci = jsm.getConsumerInfo(stream.stream(), consumerName);
      if (ci.getNumPending() == 0 && ci.getDelivered().getStreamSequence() <= lastApplied) {
        ready = true;
      }
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() == Subjects.CONSUMER_NOT_FOUND) trouble("consumer look-up", e);
    } catch (IOException e) {
      // try again at the next idle turn
    }
  }

  private void maybeSnapshot() {
    boolean requested = !snapshotRequests.isEmpty();
    if (!requested && (!writeSnapshots || sinceSnapshot == 0)) return;
    if (snapshotInFlight.get()) return;
    long now = System.nanoTime();
    if (!requested
        && sinceSnapshot < snapshotThreshold
        && now - lastSnapshotNanos < snapshotIntervalNanos) {
      return;
    }
    List<CompletableFuture<SnapshotInfo>> waiting = new ArrayList<>();
    for (CompletableFuture<SnapshotInfo> f; (f = snapshotRequests.poll()) != null; ) {
      waiting.add(f);
    }
    List<RouterEvent> dump;
    try {
      index.flush();
      dump = index.dump();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "NATS replica " + replicaId + ": the index could not be dumped", e);
      for (CompletableFuture<SnapshotInfo> f : waiting) f.completeExceptionally(e);
      sinceSnapshot = 0; // try again on the normal schedule, not on every turn
      lastSnapshotNanos = now;
      return;
    }
    long seq = lastApplied;
    String own = consumerName;
    sinceSnapshot = 0;
    lastSnapshotNanos = now;
    snapshotInFlight.set(true);
    try {
      snapshotter.execute(() -> writeSnapshot(seq, dump, own, waiting));
    } catch (RuntimeException e) { // rejected: closing
      snapshotInFlight.set(false);
      for (CompletableFuture<SnapshotInfo> f : waiting) f.completeExceptionally(e);
    }
  }

  // ------------------------------------------------------------------ the snapshot thread

  private void writeSnapshot(
      long seq, List<RouterEvent> dump, String own, List<CompletableFuture<SnapshotInfo>> waiting) {
    try {
      ObjectInfo oi = snapshots.write(replicaId, seq, dump);
      counters.inc(C.SNAPSHOTS_WRITTEN);
      lastSnapshotSequence = seq;
      long through =
          PurgeRule.purgeThrough(seq, jsm.getConsumers(stream.stream()), own, stream.subject());
      if (through > purgedThrough) {
        PurgeResponse pr =
            jsm.purgeStream(
                stream.stream(),
                PurgeOptions.builder().subject(stream.subject()).sequence(through + 1).build());
        counters.inc(C.PURGES);
        counters.add(C.PURGED_MESSAGES, pr.getPurged());
        purgedThrough = through;
      }
      SnapshotInfo info =
          new SnapshotInfo(oi.getObjectName(), seq, dump.size(), oi.getSize(), through);
      LOG.fine(() -> "NATS replica " + replicaId + ": wrote " + info);
      for (CompletableFuture<SnapshotInfo> f : waiting) f.complete(info);
    } catch (IOException | JetStreamApiException | NoSuchAlgorithmException | RuntimeException e) {
      long n = counters.inc(C.SNAPSHOT_FAILURES);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning("NATS replica " + replicaId + ": snapshot through " + seq + " failed: " + e);
      }
      for (CompletableFuture<SnapshotInfo> f : waiting) f.completeExceptionally(e);
    } finally {
      snapshotInFlight.set(false);
    }
  }

  // ------------------------------------------------------------------ helpers

  private void closeIterator() {
    IterableConsumer c = it;
    it = null;
    if (c == null) return;
    try {
      c.stop();
      c.close();
    } catch (Exception e) {
      LOG.fine(() -> "NATS replica " + replicaId + ": closing the iterator: " + e);
    }
  }

  private void failRequests(RuntimeException why) {
    for (CompletableFuture<SnapshotInfo> f; (f = snapshotRequests.poll()) != null; ) {
      f.completeExceptionally(why);
    }
  }

  private boolean await(Duration timeout, BooleanSupplier done) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!done.getAsBoolean()) {
      if (!running || System.nanoTime() - deadline >= 0) return done.getAsBoolean();
      LockSupport.parkNanos(1_000_000L);
      if (Thread.interrupted()) {
        Thread.currentThread().interrupt();
        return done.getAsBoolean();
      }
    }
    return true;
  }
}
