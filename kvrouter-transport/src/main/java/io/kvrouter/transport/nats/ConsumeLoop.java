package io.kvrouter.transport.nats;

import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.TieredEvent;
import io.kvrouter.transport.nats.ReplicaCounters.C;
import io.kvrouter.transport.nats.RestoreProtocol.Restored;
import io.nats.client.Connection;
import io.nats.client.ConsumeOptions;
import io.nats.client.IterableConsumer;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamStatusCheckedException;
import io.nats.client.Message;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.impl.NatsJetStreamMetaData;
import java.io.IOException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * The replica thread: pulls the subject's messages in stream order, applies each to the index,
 * acknowledges it, and recovers from lost deliveries, lost consumers and reconnections.
 */
final class ConsumeLoop implements Runnable {
  /*
   * Implementation notes
   *
   * Thread. run() is the replica thread ("kvrouter-nats-<replicaId>"), which alone touches the
   * iterator, the index's writes, expectedConsumerSeq, the recovery flags and the counters it
   * writes. The constructor runs on the caller's thread in start(); Thread.start() publishes it.
   * Other threads read consumerName, restoredSequence and running (volatile), and the Progress.
   *
   * jnats' connection thread calls reconnected(), which only sets a flag: after a reconnection
   * the iterator's pull request is gone with the old connection (jnats would only notice at the
   * next missed heartbeat, up to tens of seconds later), so the loop drops the iterator and pulls
   * again on its next turn.
   *
   * The loop (one turn waits at most POLL_MS for a message, so stop() is seen quickly):
   *   prepare()      if no iterator is open: check whether the consumer still exists, create a
   *                  new one when needed (gap or consumer lost), rebuild from a snapshot when
   *                  the stream may have been purged past lastApplied, open the iterator.
   *                  Failures are counted and retried with capped exponential backoff; the
   *                  backoff waits on the stop latch, so stop() ends it at once.
   *   nextMessage    -> onMessage, or onIdle when nothing came.
   *   maybeCut       SnapshotScheduler: take a dump when one is due and none is in flight.
   *
   * onMessage, per delivery (classify):
   *   consumer sequence > expected   deliveries were lost: drop the iterator, resubscribe at
   *                                  lastApplied + 1 (this message comes again from there)
   *   stream sequence <= lastApplied a redelivery: ack, count duplicate
   *   not decodable                  term (never redeliver), count malformed; it is dealt with
   *   otherwise                      apply to the event's tier (TierEvents.apply: a message
   *                                  with Dynamo's storage_tier goes to that tier of a tiered
   *                                  index), lastApplied = sequence, ack
   * The consumer sequence counts every delivery, redeliveries included, so it has no holes unless
   * messages were lost. Events are applied in stream order; the duplicate rule is safe because a
   * message is only skipped when a message at or after its sequence was applied, and everything
   * before that was applied or skipped in order.
   *
   * A resubscription creates the new consumer first and deletes the old one after, so the
   * replica's position always pins the purge floor (PurgeRule). A consumer that vanished
   * (deleted by an operator, or by the server after its inactive threshold) pinned nothing for a
   * while: after creating the new one, if the newest snapshot is past lastApplied, events between
   * may have been purged, and the replica rebuilds (resync): clear every worker the index knows
   * (index.workerIds()), restore (RestoreProtocol), consume after the snapshot.
   *
   * Ready: set when a delivery reports nothing pending, when a new consumer has nothing pending,
   * or when an idle turn's consumer look-up (at most every READY_CHECK_NANOS) shows the consumer
   * delivered nothing beyond lastApplied and has nothing pending. A resync clears it until done.
   */

  private static final Logger LOG = Logger.getLogger(NatsReplica.class.getName());

  private static final long POLL_MS = 50;
  private static final long READY_CHECK_NANOS = 100_000_000L;
  private static final long BACKOFF_INITIAL_MS = 50;
  private static final long BACKOFF_MAX_MS = 5_000;

  private final Connection nc;
  private final NatsEventStream stream;
  private final KvIndex index;
  private final String replicaId;
  private final RestoreProtocol restore;
  private final SnapshotScheduler snapshots;
  private final Progress progress;
  private final SingleWriterCounters<C> counters;
  private final ConsumeOptions consumeOptions;
  private final AtomicBoolean reconnected = new AtomicBoolean();
  private final CountDownLatch stopLatch = new CountDownLatch(1);

  private volatile boolean running = true;
  private volatile String consumerName;
  private volatile long restoredSequence;

  // replica thread only
  private @Nullable IterableConsumer it; // null: none open (before prepare(), after trouble)
  private long lastApplied; // the owner's copy of progress.lastApplied()
  private long expectedConsumerSeq = 1;
  private boolean needCheck;
  private boolean needResubscribe;
  private boolean consumerLost;
  private boolean needLossCheck;
  private long retryAtNanos;
  private long backoffMs = BACKOFF_INITIAL_MS;
  private long nextReadyCheckNanos;

  /** A loop that continues after {@code start}, the consumer and snapshot start() restored. */
  ConsumeLoop(
      Connection nc,
      NatsEventStream stream,
      KvIndex index,
      String replicaId,
      RestoreProtocol restore,
      SnapshotScheduler snapshots,
      Progress progress,
      SingleWriterCounters<C> counters,
      int batchSize,
      Restored start) {
    this.nc = nc;
    this.stream = stream;
    this.index = index;
    this.replicaId = replicaId;
    this.restore = restore;
    this.snapshots = snapshots;
    this.progress = progress;
    this.counters = counters;
    this.consumeOptions = ConsumeOptions.builder().batchSize(batchSize).build();
    adopt(start);
    progress.ready(start.pending() == 0);
  }

  // ---------------------------------------------------------------- other threads

  /** The connection came back (jnats' thread): pull again on the next turn. */
  void reconnected() {
    reconnected.set(true);
  }

  /** Asks the loop to end; it does within one turn (about 50 ms) unless an apply blocks. */
  void stop() {
    running = false;
    stopLatch.countDown();
  }

  boolean running() {
    return running;
  }

  String consumerName() {
    return consumerName;
  }

  long restoredSequence() {
    return restoredSequence;
  }

  // ---------------------------------------------------------------- the replica thread

  @Override
  public void run() {
    try {
      while (running) {
        if (reconnected.getAndSet(false) && it != null) {
          // the pull request died with the old connection: pull again on the new one
          closeIterator();
          needCheck = true;
        }
        IterableConsumer c = prepare();
        if (c == null) {
          awaitRetry();
          continue;
        }
        Message m;
        try {
          m = c.nextMessage(POLL_MS);
        } catch (JetStreamStatusCheckedException | IllegalStateException e) {
          trouble("pull failed", e);
          continue;
        }
        if (m != null) {
          onMessage(m);
        } else {
          onIdle();
        }
        snapshots.maybeCut(lastApplied, consumerName);
      }
    } catch (InterruptedException e) {
      if (running) LOG.warning("NATS replica " + replicaId + " interrupted; stopping");
    } catch (RuntimeException | Error e) {
      LOG.log(Level.SEVERE, "NATS replica " + replicaId + " stopped on an error", e);
    } finally {
      running = false;
      progress.ready(false);
      progress.stop();
      closeIterator();
      snapshots.failRequests(new IllegalStateException("replica " + replicaId + " stopped"));
    }
  }

  /** Waits until the backoff after a failure is over, or stop() is called. */
  private void awaitRetry() throws InterruptedException {
    long wait = retryAtNanos - System.nanoTime();
    if (wait > 0) stopLatch.await(wait, TimeUnit.NANOSECONDS);
  }

  /** Adopts a restored consumer and its start sequence (start and resync). */
  private void adopt(Restored r) {
    consumerName = r.consumer();
    restoredSequence = r.sequence();
    lastApplied = r.sequence();
    progress.applied(r.sequence());
    expectedConsumerSeq = 1;
  }

  /**
   * Makes sure an iterator is open, handling consumer trouble first, and returns it; null to wait
   * and retry.
   */
  private @Nullable IterableConsumer prepare() throws InterruptedException {
    IterableConsumer open = it;
    if (open != null) return open;
    if (System.nanoTime() - retryAtNanos < 0) return null;
    try {
      if (needCheck) {
        if (!restore.consumerExists(consumerName)) {
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
        if (restore.latestSnapshotSequence() > lastApplied) {
          resync();
        }
        needLossCheck = false;
      }
      open =
          nc.getStreamContext(stream.stream())
              .getConsumerContext(consumerName)
              .iterate(consumeOptions);
      it = open;
      backoffMs = BACKOFF_INITIAL_MS;
      return open;
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
      return null;
    }
  }

  /** A new consumer at lastApplied + 1, then the old one deleted. */
  private void resubscribe() throws IOException, JetStreamApiException {
    String old = consumerName;
    ConsumerInfo ci = restore.createConsumer(lastApplied + 1);
    consumerName = ci.getName();
    expectedConsumerSeq = 1;
    if (old != null) restore.deleteQuietly(old);
    counters.inc(C.RESUBSCRIBES);
    if (consumerLost) {
      needLossCheck = true; // ready waits for the loss check (and a resync, if one is needed)
      consumerLost = false;
    } else if (ci.getNumPending() == 0) {
      progress.ready(true);
    }
  }

  /** Rebuilds the index from the newest snapshot and consumes after it. */
  private void resync() throws IOException, JetStreamApiException, InterruptedException {
    progress.ready(false);
    counters.inc(C.RESYNCS);
    LOG.warning(
        "NATS replica "
            + replicaId
            + ": the stream may have been purged past sequence "
            + lastApplied
            + " while the consumer was gone; rebuilding the index from the newest snapshot");
    Restored r = restore.restore(consumerName);
    index.flush();
    for (long w : index.workerIds()) {
      index.clearWorker(w);
    }
    restore.install(r, index);
    adopt(r);
    if (r.pending() == 0) progress.ready(true);
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
    TieredEvent event;
    try {
      byte[] data = m.getData();
      event = RouterEventJson.readTieredEvent(data == null ? new byte[0] : data);
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
      setApplied(sseq);
      try {
        m.term();
      } catch (RuntimeException ignored) {
        // connection trouble: the message comes again and is skipped as a duplicate
      }
      afterApplied(md);
      return;
    }
    try {
      TierEvents.apply(index, event);
      counters.inc(C.APPLIED);
    } catch (RuntimeException e) {
      long n = counters.inc(C.APPLY_ERRORS);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.log(Level.WARNING, "NATS replica " + replicaId + ": the index refused " + event, e);
      }
    }
    setApplied(sseq);
    ack(m);
    afterApplied(md);
  }

  private void setApplied(long sseq) {
    lastApplied = sseq;
    progress.applied(sseq);
  }

  private void afterApplied(NatsJetStreamMetaData md) {
    snapshots.applied();
    if (md.pendingCount() == 0 && !progress.ready()) progress.ready(true);
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
    if (progress.ready()) return;
    long now = System.nanoTime();
    if (now - nextReadyCheckNanos < 0) return;
    nextReadyCheckNanos = now + READY_CHECK_NANOS;
    try {
      ConsumerInfo ci = restore.consumerInfo(consumerName);
      if (ci.getNumPending() == 0 && ci.getDelivered().getStreamSequence() <= lastApplied) {
        progress.ready(true);
      }
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() == Subjects.CONSUMER_NOT_FOUND) trouble("consumer look-up", e);
    } catch (IOException e) {
      // try again at the next idle turn
    }
  }

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
}
