package io.kvrouter.transport.nats;

import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.nats.ReplicaCounters.C;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.PurgeOptions;
import io.nats.client.api.ObjectInfo;
import io.nats.client.api.PurgeResponse;
import java.io.IOException;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * When a replica snapshots its index, and the writing: the replica thread asks {@link #maybeCut}
 * between two messages, which takes the dump when one is due; the snapshot thread writes it to the
 * object store and purges the stream as far as {@link PurgeRule} allows.
 */
final class SnapshotScheduler {
  /*
   * Implementation notes
   *
   * Due: a snapshot() request is waiting; or writeSnapshots and something was applied since the
   * last cut and (threshold messages since the last cut, or interval passed since it by the
   * clock, System.nanoTime() unless a test gives another). At most one snapshot is in flight
   * (inFlight, set by the replica thread, cleared by the snapshot thread): requests made
   * meanwhile wait in the queue and are served by the next cut.
   *
   * Cut, on the replica thread between two messages: index.flush() then the index's dump on every
   * tier (TierEvents.dump: dumpTiered() of a tiered index, dump() of another), with seq = the
   * last applied sequence, so the dump holds exactly the events up to seq. The dump (an
   * immutable list) and the futures of the requests it serves go to the snapshot thread through
   * ExecutorService.execute (a happens-before edge). A dump that throws fails those requests and
   * counts as a cut for the schedule (no retry on every turn).
   *
   * Write, on the snapshot thread ("kvrouter-nats-snapshot-<id>", a single-thread executor): the
   * object first, then the consumer list for the purge floor, then the purge: a starting
   * replica's restore relies on that order (RestoreProtocol). purgedThrough is that thread's own.
   *
   * Threads: sinceSnapshot and lastCutNanos belong to the replica thread; lastSnapshotSequence is
   * volatile (written by the snapshot thread); the request queue and checkWaiter take any thread.
   * checkWaiter lets a test wait for the replica thread's next look at the schedule (nextCheck()):
   * one volatile read per turn when nobody waits.
   */

  private static final Logger LOG = Logger.getLogger(NatsReplica.class.getName());

  private final KvIndex index;
  private final Snapshots snapshots;
  private final JetStreamManagement jsm;
  private final NatsEventStream stream;
  private final String replicaId;
  private final boolean writeSnapshots;
  private final long intervalNanos;
  private final long threshold;
  private final LongSupplier clock;
  private final SingleWriterCounters<C> counters;
  private final Queue<CompletableFuture<SnapshotInfo>> requests = new ConcurrentLinkedQueue<>();
  private final AtomicBoolean inFlight = new AtomicBoolean();
  private final AtomicReference<@Nullable CompletableFuture<Void>> checkWaiter =
      new AtomicReference<>(); // null: no test waits
  private final ExecutorService writer;
  private volatile long lastSnapshotSequence = -1;

  // replica thread only
  private long sinceSnapshot;
  private long lastCutNanos;

  // snapshot thread only
  private long purgedThrough;

  SnapshotScheduler(
      KvIndex index,
      Snapshots snapshots,
      JetStreamManagement jsm,
      NatsEventStream stream,
      String replicaId,
      boolean writeSnapshots,
      Duration interval,
      long threshold,
      LongSupplier clock,
      SingleWriterCounters<C> counters) {
    this.index = index;
    this.snapshots = snapshots;
    this.jsm = jsm;
    this.stream = stream;
    this.replicaId = replicaId;
    this.writeSnapshots = writeSnapshots;
    this.intervalNanos = interval.toNanos();
    this.threshold = threshold;
    this.clock = clock;
    this.counters = counters;
    this.lastCutNanos = clock.getAsLong();
    this.writer =
        Executors.newSingleThreadExecutor(
            task -> {
              Thread t = new Thread(task, "kvrouter-nats-snapshot-" + replicaId);
              t.setDaemon(true);
              return t;
            });
  }

  // ---------------------------------------------------------------- any thread

  /** A request for a snapshot at the next cut; see {@link NatsReplica#snapshot()}. */
  CompletableFuture<SnapshotInfo> request() {
    CompletableFuture<SnapshotInfo> f = new CompletableFuture<>();
    requests.add(f);
    return f;
  }

  /** Fails every waiting request. */
  void failRequests(RuntimeException why) {
    for (CompletableFuture<SnapshotInfo> f; (f = requests.poll()) != null; ) {
      f.completeExceptionally(why);
    }
  }

  /** The sequence of the last snapshot written; -1 before the first. */
  long lastSnapshotSequence() {
    return lastSnapshotSequence;
  }

  /**
   * Completes after the replica thread's next look at the schedule (for tests: "the replica thread
   * considered a snapshot after this point and did or did not take one").
   */
  CompletableFuture<Void> nextCheck() {
    return checkWaiter.updateAndGet(f -> f != null ? f : new CompletableFuture<>());
  }

  /** Lets a snapshot in flight finish (up to 10 s) and stops the snapshot thread. */
  void shutdown() {
    writer.shutdown();
    try {
      if (!writer.awaitTermination(10, TimeUnit.SECONDS)) writer.shutdownNow();
    } catch (InterruptedException e) {
      writer.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  // ---------------------------------------------------------------- the replica thread

  /** One more message was dealt with (applied, or skipped as malformed). */
  void applied() {
    sinceSnapshot++;
  }

  /**
   * Takes the dump and hands it to the snapshot thread when a snapshot is due and none is in
   * flight; {@code lastApplied} is the sequence the dump covers, {@code ownConsumer} the consumer
   * the purge floor leaves out.
   */
  void maybeCut(long lastApplied, String ownConsumer) {
    cutIfDue(lastApplied, ownConsumer);
    CompletableFuture<Void> w = checkWaiter.get();
    if (w != null && checkWaiter.compareAndSet(w, null)) w.complete(null);
  }

  private void cutIfDue(long seq, String own) {
    boolean requested = !requests.isEmpty();
    if (!requested && (!writeSnapshots || sinceSnapshot == 0)) return;
    if (inFlight.get()) return;
    long now = clock.getAsLong();
    if (!requested && sinceSnapshot < threshold && now - lastCutNanos < intervalNanos) {
      return;
    }
    List<CompletableFuture<SnapshotInfo>> waiting = new ArrayList<>();
    for (CompletableFuture<SnapshotInfo> f; (f = requests.poll()) != null; ) {
      waiting.add(f);
    }
    TierEvents.Dump dump;
    try {
      index.flush();
      dump = TierEvents.dump(index);
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "NATS replica " + replicaId + ": the index could not be dumped", e);
      for (CompletableFuture<SnapshotInfo> f : waiting) f.completeExceptionally(e);
      sinceSnapshot = 0; // try again on the normal schedule, not on every turn
      lastCutNanos = now;
      return;
    }
    sinceSnapshot = 0;
    lastCutNanos = now;
    inFlight.set(true);
    try {
      writer.execute(() -> write(seq, dump, own, waiting));
    } catch (RuntimeException e) { // rejected: closing
      inFlight.set(false);
      for (CompletableFuture<SnapshotInfo> f : waiting) f.completeExceptionally(e);
    }
  }

  // ---------------------------------------------------------------- the snapshot thread

  private void write(
      long seq, TierEvents.Dump dump, String own, List<CompletableFuture<SnapshotInfo>> waiting) {
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
          new SnapshotInfo(oi.getObjectName(), seq, dump.events().size(), oi.getSize(), through);
      LOG.fine(() -> "NATS replica " + replicaId + ": wrote " + info);
      for (CompletableFuture<SnapshotInfo> f : waiting) f.complete(info);
    } catch (IOException | JetStreamApiException | NoSuchAlgorithmException | RuntimeException e) {
      long n = counters.inc(C.SNAPSHOT_FAILURES);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning("NATS replica " + replicaId + ": snapshot through " + seq + " failed: " + e);
      }
      for (CompletableFuture<SnapshotInfo> f : waiting) f.completeExceptionally(e);
    } finally {
      inFlight.set(false);
    }
  }
}
