package io.kvrouter.transport.nats;

import io.kvrouter.route.SequenceChange;
import io.kvrouter.route.SequenceChange.Predicted;
import io.kvrouter.route.SequenceChange.Prediction;
import io.kvrouter.route.SequenceChange.Routed;
import io.kvrouter.route.SequenceSync;
import io.kvrouter.route.SequenceSync.Outcome;
import io.kvrouter.transport.nats.SyncCodec.FormatException;
import io.nats.client.Connection;
import io.nats.client.Dispatcher;
import io.nats.client.Message;
import io.nats.client.Subscription;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAccumulator;
import java.util.function.BooleanSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * Moves a router's {@link SequenceSync} changes between replicas over core NATS (no JetStream):
 * every replica publishes its numbered changes in batches on one subject per index and applies
 * every other replica's, so that each router's loads count the whole fleet's requests in flight
 * (docs/service.md, "Several replicas share their in-flight load").
 *
 * <pre>{@code
 * SequenceSync sync = router.sequenceSync("gw-1");
 * try (NatsSequenceSync s = NatsSequenceSync.builder(nc, NatsSequenceSync.subject("llama", "default"), sync).start()) {
 *   ... serve once s.ready() ...
 * }
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * Subjects: the batches, heartbeats and goodbyes of every replica of one index go to subject
 * (kvrouter.seq.<model>.<group>); replica R answers snapshot requests on subject.snap.R. Core
 * NATS keeps the order of one publisher's messages on one subject, and each replica publishes
 * from one thread, so a peer's batches arrive in its numbering order unless some are lost (a slow
 * consumer, a reconnection): SequenceSync.apply sees that as a gap.
 *
 * Threads (docs/concurrency.md):
 *   publisher  "kvrouter-seqsync-<replica>": waits for pending changes (or the next heartbeat),
 *              lingers `linger` so that a burst becomes one batch, drains the outbox, publishes
 *              messages of at most maxBytes; an empty batch is the heartbeat, sent when nothing
 *              else went out for `heartbeat`. Once per heartbeat it drops peers silent for
 *              `peerTimeout` (SequenceSync.dropSilent).
 *   live       a jnats Dispatcher thread: decodes each message of subject, skips the replica's
 *              own (by replica id, before anything else), applies the others. A NEEDS_SNAPSHOT
 *              (a peer seen for the first time past its start, or a gap) fetches that peer's
 *              snapshot right there, blocking this dispatcher: the peer's later batches wait in
 *              the dispatcher's queue, in order, and after load() every one numbered at or below
 *              the snapshot is skipped as a duplicate. One attempt per peer per `heartbeat`.
 *   answers    a second Dispatcher thread: answers hello (below) and snapshot requests (so two replicas fetching
 *              each other's snapshot at once never wait on each other): SequenceSync.snapshot()
 *              under the router's lock, sent in chunks of at most maxBytes to the reply inbox:
 *              the requests, then (approximate mode) the model's chains, oldest first; chunk 0
 *              also carries the capacities, every chunk the last prediction number.
 * SequenceSync takes the router's lock for each apply, load, snapshot and drop; nothing here
 * holds a lock of its own while calling it. Counters are atomics.
 *
 * Start and readiness: the constructor subscribes subject and subject.snap.<own id>, then asks
 * subject.hello who is there (a NATS request, before this replica answers hello itself): the
 * first answer names its replica and every peer it knows, which is the set `expected`; NATS'
 * "no responders" means nobody (expected empty, ready at once); no answer in time leaves it
 * unknown (null: ready after 2 heartbeats, by when every live peer has sent one). A replica that
 * answers hello also sends a heartbeat at once (beatNow), so the newcomer takes it up (from 1, or
 * by its snapshot on the live dispatcher) within a round trip or two. ready(): every expected peer
 * taken up (or peerTimeout passed since start), and no peer waiting for a snapshot (unsynced:
 * peers whose snapshot fetch failed, until one succeeds or they fall silent). Two replicas that
 * start at the same instant may both hear "no responders"; they take each other up at their
 * first heartbeats.
 *
 * close(): stops the publisher (which sends what is pending and a goodbye, so that peers drop
 * this replica's requests at once), then unsubscribes both dispatchers. The connection is the
 * caller's.
 * </pre>
 */
public final class NatsSequenceSync implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(NatsSequenceSync.class.getName());
  private static final Pattern NOT_IN_TOKEN = Pattern.compile("[.*>\\s]");

  /** The default heartbeat interval. */
  public static final Duration DEFAULT_HEARTBEAT = Duration.ofSeconds(1);

  /**
   * Counters since the start.
   *
   * @param batchesPublished messages with changes or heartbeats published
   * @param changesPublished changes in them
   * @param bytesPublished their bytes
   * @param publishErrors publishes refused by the client (disconnected, buffer full)
   * @param batchesReceived peers' messages applied or skipped
   * @param ownSkipped this replica's own messages, skipped
   * @param decodeErrors messages that are not sequence sync messages
   * @param snapshotsServed snapshot requests answered
   * @param snapshotsFetched peer snapshots fetched and loaded
   * @param snapshotFailures snapshot fetches that failed (timeout, corrupt answer)
   * @param lagCount, lagSumMillis, lagMaxMillis the lag of each peer batch received, from its
   *     publication (the peer's wall clock) to its application here
   * @param sync the router side's counters
   */
  public record Stats(
      long batchesPublished,
      long changesPublished,
      long bytesPublished,
      long publishErrors,
      long batchesReceived,
      long ownSkipped,
      long decodeErrors,
      long snapshotsServed,
      long snapshotsFetched,
      long snapshotFailures,
      long lagCount,
      long lagSumMillis,
      long lagMaxMillis,
      int peers,
      int peerRequests,
      SequenceSync.Stats sync) {}

  private final Connection nc;
  private final String subject;
  private final SequenceSync sync;
  private final Duration heartbeat;
  private final Duration peerTimeout;
  private final Duration snapshotTimeout;
  private final Duration linger;
  private final int maxBytes;
  private final long startedAt = System.nanoTime();
  private final Thread publisher;
  private final Dispatcher live;
  private final Dispatcher answers;
  private volatile boolean closed;
  private volatile boolean beatNow; // a peer said hello: send a heartbeat at once
  private final @Nullable Set<String> expected; // peers named at start; null: unknown
  private final Object progress = new Object(); // notified after each message and sweep

  private final ConcurrentHashMap<String, Long> unsynced = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Long> lastAttempt = new ConcurrentHashMap<>();
  private final AtomicLong batchesPublished = new AtomicLong();
  private final AtomicLong changesPublished = new AtomicLong();
  private final AtomicLong bytesPublished = new AtomicLong();
  private final AtomicLong publishErrors = new AtomicLong();
  private final AtomicLong batchesReceived = new AtomicLong();
  private final AtomicLong ownSkipped = new AtomicLong();
  private final AtomicLong decodeErrors = new AtomicLong();
  private final AtomicLong snapshotsServed = new AtomicLong();
  private final AtomicLong snapshotsFetched = new AtomicLong();
  private final AtomicLong snapshotFailures = new AtomicLong();
  private final AtomicLong lagCount = new AtomicLong();
  private final AtomicLong lagSum = new AtomicLong();
  private final LongAccumulator lagMax = new LongAccumulator(Math::max, 0);

  /** The subject of one index's sequence sync: {@code kvrouter.seq.<model>.<group>}. */
  public static String subject(String modelName, String routingGroup) {
    return "kvrouter.seq." + token(modelName) + "." + token(routingGroup);
  }

  private static String token(String s) {
    return NOT_IN_TOKEN.matcher(Objects.requireNonNull(s)).replaceAll("_");
  }

  /** A builder for the sync of {@code sync} on {@code subject} over {@code nc}. */
  public static Builder builder(Connection nc, String subject, SequenceSync sync) {
    return new Builder(nc, subject, sync);
  }

  /** Settings; each has a default. */
  public static final class Builder {
    private final Connection nc;
    private final String subject;
    private final SequenceSync sync;
    private Duration heartbeat = DEFAULT_HEARTBEAT;
    private @Nullable Duration peerTimeout; // null: 3 heartbeats
    private Duration linger = Duration.ofMillis(1);

    private Builder(Connection nc, String subject, SequenceSync sync) {
      this.nc = Objects.requireNonNull(nc, "nc");
      this.subject = Objects.requireNonNull(subject, "subject");
      this.sync = Objects.requireNonNull(sync, "sync");
      String why = Subjects.problem(subject, false);
      if (why != null) throw new IllegalArgumentException("subject '" + subject + "': " + why);
    }

    /** Heartbeat interval (default 1 s); peers silent for 3 of them are dropped. */
    public Builder heartbeat(Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("heartbeat must be positive, got " + d);
      }
      this.heartbeat = d;
      return this;
    }

    /** How long a peer may be silent before its requests are dropped (default 3 heartbeats). */
    public Builder peerTimeout(Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("peerTimeout must be positive, got " + d);
      }
      this.peerTimeout = d;
      return this;
    }

    /** How long the publisher waits after a first change for more to batch (default 1 ms). */
    public Builder linger(Duration d) {
      if (d == null || d.isNegative()) {
        throw new IllegalArgumentException("linger must be >= 0, got " + d);
      }
      this.linger = d;
      return this;
    }

    /** Subscribes, starts the publisher; the first heartbeat goes out at once. */
    public NatsSequenceSync start() {
      return new NatsSequenceSync(this);
    }
  }

  private NatsSequenceSync(Builder b) {
    this.nc = b.nc;
    this.subject = b.subject;
    this.sync = b.sync;
    this.heartbeat = b.heartbeat;
    this.peerTimeout = b.peerTimeout != null ? b.peerTimeout : b.heartbeat.multipliedBy(3);
    this.snapshotTimeout = b.heartbeat.multipliedBy(2).plusSeconds(1);
    this.linger = b.linger;
    long max = nc.getMaxPayload() > 0 ? nc.getMaxPayload() : 1 << 20;
    this.maxBytes = (int) Math.max(4096, Math.min(512 * 1024, max / 2));
    Dispatcher liveD = null;
    Dispatcher answersD = null;
    try {
      liveD = nc.createDispatcher(this::onMessage);
      liveD.subscribe(subject);
      answersD = nc.createDispatcher(this::onSnapshotRequest);
      answersD.subscribe(snapshotSubject(sync.replicaId()));
    } catch (RuntimeException e) {
      // a subscribe refused (a closed connection, a bad subject): leave no dispatcher thread behind
      closeQuietly(nc, liveD);
      closeQuietly(nc, answersD);
      throw e;
    }
    this.live = liveD;
    this.answers = answersD;
    flush();
    this.expected = discover();
    try {
      answers.subscribe(subject + ".hello", this::onHello);
    } catch (RuntimeException e) {
      closeQuietly(nc, live);
      closeQuietly(nc, answers);
      throw e;
    }
    flush(); // subscribed before the first heartbeat goes out
    this.publisher = new Thread(this::publishLoop, "kvrouter-seqsync-" + sync.replicaId());
    publisher.setDaemon(true);
    publisher.start();
  }

  private static void closeQuietly(Connection nc, @Nullable Dispatcher d) {
    if (d == null) return;
    try {
      nc.closeDispatcher(d);
    } catch (RuntimeException ignored) {
      // the connection is closed already: so is the dispatcher
    }
  }

  private void flush() {
    try {
      nc.flush(Duration.ofSeconds(5));
    } catch (Exception e) {
      LOG.log(Level.FINE, "flush after subscribing", e);
    }
  }

  /**
   * Asks the live replicas of this subject who they are: the first answer names its replica and
   * every peer it knows. No answer at all (NATS' "no responders"): nobody, an empty set. Timeout or
   * failure: null (unknown; ready() then waits two heartbeats).
   */
  private @Nullable Set<String> discover() {
    try {
      Message r =
          nc.request(subject + ".hello", sync.replicaId().getBytes(StandardCharsets.UTF_8))
              .get(snapshotTimeout.toMillis(), TimeUnit.MILLISECONDS);
      Set<String> ids = new HashSet<>();
      for (String id : new String(r.getData(), StandardCharsets.UTF_8).split(",")) {
        if (!id.isEmpty() && !id.equals(sync.replicaId())) ids.add(id);
      }
      return ids;
    } catch (CancellationException e) {
      return Set.of(); // no responders: no peer is there
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    } catch (Exception e) {
      return null;
    }
  }

  /** A starting peer asks who is there: this replica and the peers it knows; then a heartbeat. */
  private void onHello(Message msg) {
    String asker = new String(msg.getData(), StandardCharsets.UTF_8);
    if (msg.getReplyTo() == null || asker.equals(sync.replicaId()) || closed) return;
    StringBuilder b = new StringBuilder(sync.replicaId());
    for (SequenceSync.PeerInfo p : sync.peers()) b.append(',').append(p.replicaId());
    try {
      nc.publish(msg.getReplyTo(), b.toString().getBytes(StandardCharsets.UTF_8));
    } catch (RuntimeException e) {
      publishErrors.incrementAndGet();
    }
    beatNow = true; // so that the asker takes this replica up now, not at the next heartbeat
    sync.wake();
  }

  private String snapshotSubject(String replica) {
    return subject + ".snap." + replica;
  }

  /** The subject this sync publishes and follows. */
  public String subject() {
    return subject;
  }

  /** The router side. */
  public SequenceSync sync() {
    return sync;
  }

  /**
   * Whether every live peer has been taken up: two heartbeats since start, and no peer waiting for
   * its snapshot.
   */
  public boolean ready() {
    return notReadyReason() == null;
  }

  /** Why not {@link #ready()}, or null when ready. */
  public @Nullable String notReadyReason() {
    long now = System.nanoTime();
    long age = now - startedAt;
    if (expected == null) {
      if (age < heartbeat.multipliedBy(2).toNanos()) {
        return "listening for peers (" + heartbeat.multipliedBy(2).toMillis() + " ms after start)";
      }
    } else if (!expected.isEmpty() && age < peerTimeout.toNanos()) {
      Set<String> missing = new TreeSet<>(expected);
      for (SequenceSync.PeerInfo p : sync.peers()) missing.remove(p.replicaId());
      if (!missing.isEmpty()) return "waiting to take up peer(s) " + missing;
    }
    unsynced.values().removeIf(since -> now - since >= peerTimeout.toNanos());
    if (!unsynced.isEmpty()) return "waiting for the snapshot of peer(s) " + unsynced.keySet();
    return null;
  }

  /**
   * Waits until {@code condition} holds, checking it again after every message this sync handled
   * and every sweep for silent peers; returns whether it held within {@code timeout}.
   */
  public boolean await(BooleanSupplier condition, Duration timeout) throws InterruptedException {
    long end = System.nanoTime() + timeout.toNanos();
    synchronized (progress) {
      while (!condition.getAsBoolean()) {
        long left = end - System.nanoTime();
        if (left <= 0) return false;
        TimeUnit.NANOSECONDS.timedWait(progress, left);
      }
      return true;
    }
  }

  private void progressed() {
    synchronized (progress) {
      progress.notifyAll();
    }
  }

  // ------------------------------------------------------------------ publishing

  private void publishLoop() {
    final long beat = heartbeat.toNanos();
    long lastSent = System.nanoTime() - beat; // the first heartbeat at once
    long lastSweep = System.nanoTime();
    List<SequenceChange> out = new ArrayList<>();
    try {
      while (!closed) {
        long untilBeat = Math.max(1, beat - (System.nanoTime() - lastSent));
        boolean any = sync.awaitPending(untilBeat);
        if (closed) break;
        if (any && !beatNow && !linger.isZero()) Thread.sleep(linger);
        out.clear();
        long first = sync.drain(out);
        long now = System.nanoTime();
        boolean beatAsked = beatNow;
        if (beatAsked) beatNow = false;
        if (!out.isEmpty() || beatAsked || now - lastSent >= beat) {
          try {
            publish(first, out);
          } catch (RuntimeException e) {
            // one batch lost, not the publisher: peers see the gap in the numbers and reload
            // this replica's snapshot, so nothing stays wrong
            long n = publishErrors.incrementAndGet();
            if (Long.bitCount(n) == 1) {
              LOG.log(Level.WARNING, "sequence sync " + subject + ": a batch was not sent", e);
            }
          }
          lastSent = now;
        }
        if (now - lastSweep >= beat) {
          lastSweep = now;
          for (String gone : sync.dropSilent(peerTimeout.toNanos())) {
            unsynced.remove(gone);
            lastAttempt.remove(gone);
            LOG.info(
                () ->
                    "sequence sync "
                        + subject
                        + ": peer "
                        + gone
                        + " silent for "
                        + peerTimeout.toMillis()
                        + " ms, its requests dropped");
          }
          progressed();
        }
      }
    } catch (InterruptedException e) {
      // closing
    } catch (RuntimeException e) {
      LOG.log(Level.SEVERE, "sequence sync publisher of " + subject + " stopped", e);
      return;
    }
    Thread.interrupted(); // the close() that ended the loop: send the rest and the goodbye
    out.clear();
    long first = sync.drain(out);
    if (!out.isEmpty()) publish(first, out);
    send(SyncCodec.bye(sync.replicaId(), sync.incarnation(), first + out.size(), wall()), 0);
  }

  /**
   * Publishes {@code changes}, the first that is not a prediction numbered {@code first}, in
   * messages of at most maxBytes.
   */
  private void publish(long first, List<SequenceChange> changes) {
    int header = SyncCodec.headerSize(sync.replicaId());
    int from = 0;
    long next = first; // the number of the first change of the next part (predictions take none)
    do {
      int size = header;
      int to = from;
      while (to < changes.size()) {
        int r = SyncCodec.recordSize(changes.get(to));
        if (to > from && size + r > maxBytes) break;
        size += r;
        to++;
      }
      List<SequenceChange> part = changes.subList(from, to);
      send(SyncCodec.batch(sync.replicaId(), sync.incarnation(), next, wall(), part), part.size());
      for (SequenceChange c : part) {
        if (!(c instanceof Prediction)) next++;
      }
      from = to;
    } while (from < changes.size());
  }

  private void send(byte[] data, int changes) {
    try {
      nc.publish(subject, data);
      batchesPublished.incrementAndGet();
      changesPublished.addAndGet(changes);
      bytesPublished.addAndGet(data.length);
    } catch (RuntimeException e) {
      // disconnected past the reconnect buffer: peers see the gap and reload a snapshot
      publishErrors.incrementAndGet();
    }
  }

  private static long wall() {
    return System.currentTimeMillis();
  }

  // ------------------------------------------------------------------ receiving

  private void onMessage(Message msg) {
    try {
      handle(msg);
    } finally {
      progressed();
    }
  }

  private void handle(Message msg) {
    SyncCodec.Message m;
    try {
      m = SyncCodec.decode(msg.getData());
    } catch (FormatException e) {
      decodeErrors.incrementAndGet();
      return;
    }
    if (m.replicaId().equals(sync.replicaId())) {
      ownSkipped.incrementAndGet();
      return;
    }
    batchesReceived.incrementAndGet();
    switch (m.kind()) {
      case SyncCodec.KIND_BYE -> {
        sync.drop(m.replicaId());
        unsynced.remove(m.replicaId());
      }
      case SyncCodec.KIND_BATCH -> {
        Outcome o = sync.apply(m.replicaId(), m.incarnation(), m.sequence(), m.changes());
        if (o == Outcome.NEEDS_SNAPSHOT && fetchAndLoad(m.replicaId())) {
          o = sync.apply(m.replicaId(), m.incarnation(), m.sequence(), m.changes());
        }
        if (o != Outcome.NEEDS_SNAPSHOT) unsynced.remove(m.replicaId());
        long lag = Math.max(0, wall() - m.sentAtMillis());
        lagCount.incrementAndGet();
        lagSum.addAndGet(lag);
        lagMax.accumulate(lag);
      }
      default -> decodeErrors.incrementAndGet(); // a snapshot chunk on the live subject
    }
  }

  /** Fetches {@code peer}'s snapshot and loads it; false (and counted) when that failed. */
  private boolean fetchAndLoad(String peer) {
    long now = System.nanoTime();
    // aged from the peer's last message needing it, so a live peer whose snapshot keeps failing
    // keeps this replica unready; a silent one ages out after peerTimeout
    unsynced.put(peer, now);
    Long last = lastAttempt.get(peer);
    if (last != null && now - last < heartbeat.toNanos()) return false;
    lastAttempt.put(peer, now);
    Subscription sub = null;
    try {
      String inbox = nc.createInbox();
      sub = nc.subscribe(inbox);
      nc.publish(snapshotSubject(peer), inbox, sync.replicaId().getBytes(StandardCharsets.UTF_8));
      long deadline = System.nanoTime() + snapshotTimeout.toNanos();
      SyncCodec.@Nullable Message @Nullable [] chunks = null; // null until the first chunk came
      SyncCodec.Message ref = null; // the first chunk that came; null with chunks
      int got = 0;
      while (chunks == null || got < chunks.length) {
        long left = deadline - System.nanoTime();
        if (left <= 0)
          throw new IllegalStateException("no whole snapshot within " + snapshotTimeout);
        Message reply = sub.nextMessage(Duration.ofNanos(left));
        if (reply == null) continue;
        SyncCodec.Message c = SyncCodec.decode(reply.getData());
        if (c.kind() != SyncCodec.KIND_SNAPSHOT || !c.replicaId().equals(peer)) {
          throw new IllegalStateException("not a snapshot of " + peer);
        }
        if (ref == null || chunks == null) { // both null until the first chunk
          ref = c;
          chunks = new SyncCodec.Message[c.chunks()];
        } else if (c.chunks() != ref.chunks()
            || c.incarnation() != ref.incarnation()
            || c.sequence() != ref.sequence()) {
          throw new IllegalStateException("snapshot chunks of two snapshots");
        }
        if (chunks[c.chunk()] == null) {
          chunks[c.chunk()] = c;
          got++;
        }
      }
      List<Routed> entries = new ArrayList<>();
      List<Predicted> model = new ArrayList<>();
      for (SyncCodec.Message c : chunks) {
        for (SequenceChange x : c.changes()) {
          if (x instanceof Routed r) entries.add(r);
          else if (x instanceof Predicted p) model.add(p);
        }
      }
      sync.load(
          peer,
          chunks[0].incarnation(),
          new SequenceSync.Snapshot(
              chunks[0].sequence(),
              entries,
              chunks[0].upToPrediction(),
              model,
              chunks[0].capacities()));
      snapshotsFetched.incrementAndGet();
      unsynced.remove(peer);
      return true;
    } catch (Exception e) {
      if (e instanceof InterruptedException) Thread.currentThread().interrupt();
      snapshotFailures.incrementAndGet();
      LOG.warning(
          () ->
              "sequence sync "
                  + subject
                  + ": no snapshot from peer "
                  + peer
                  + ": "
                  + e.getMessage());
      return false;
    } finally {
      if (sub != null) {
        try {
          sub.unsubscribe();
        } catch (RuntimeException ignored) {
          // closing connection
        }
      }
    }
  }

  private void onSnapshotRequest(Message msg) {
    String reply = msg.getReplyTo();
    if (reply == null || closed) return;
    SequenceSync.Snapshot s = sync.snapshot();
    int header = SyncCodec.headerSize(sync.replicaId()) + 10 + 12;
    List<List<SequenceChange>> parts = new ArrayList<>();
    List<SequenceChange> part = new ArrayList<>();
    int size = header + SyncCodec.capacitiesSize(s.capacities()); // in chunk 0
    List<SequenceChange> all = new ArrayList<>(s.entries().size() + s.predictions().size());
    all.addAll(s.entries());
    all.addAll(s.predictions()); // oldest first: the order load() takes them in
    for (SequenceChange r : all) {
      int n = SyncCodec.recordSize(r);
      if (!part.isEmpty() && size + n > maxBytes) {
        parts.add(part);
        part = new ArrayList<>();
        size = header;
      }
      part.add(r);
      size += n;
    }
    parts.add(part);
    try {
      for (int i = 0; i < parts.size(); i++) {
        nc.publish(
            reply,
            SyncCodec.snapshotChunk(
                sync.replicaId(),
                sync.incarnation(),
                s.upToSequence(),
                s.upToPrediction(),
                i == 0 ? s.capacities() : List.of(),
                wall(),
                i,
                parts.size(),
                parts.get(i)));
      }
      snapshotsServed.incrementAndGet();
    } catch (RuntimeException e) {
      publishErrors.incrementAndGet();
    }
  }

  // ------------------------------------------------------------------ observability, close

  /** The counters, and the peers known now. */
  public Stats stats() {
    List<SequenceSync.PeerInfo> peers = sync.peers();
    int requests = 0;
    for (SequenceSync.PeerInfo p : peers) requests += p.requests();
    return new Stats(
        batchesPublished.get(),
        changesPublished.get(),
        bytesPublished.get(),
        publishErrors.get(),
        batchesReceived.get(),
        ownSkipped.get(),
        decodeErrors.get(),
        snapshotsServed.get(),
        snapshotsFetched.get(),
        snapshotFailures.get(),
        lagCount.get(),
        lagSum.get(),
        lagMax.get(),
        peers.size(),
        requests,
        sync.stats());
  }

  /** Sends what is pending and a goodbye, then stops; the connection stays open. Idempotent. */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    publisher.interrupt();
    try {
      publisher.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      nc.flush(Duration.ofSeconds(2));
    } catch (Exception e) {
      LOG.log(Level.FINE, "flush at close", e);
    }
    try {
      nc.closeDispatcher(live);
      nc.closeDispatcher(answers);
    } catch (RuntimeException e) {
      LOG.log(Level.FINE, "closing dispatchers", e);
    }
  }

  @Override
  public String toString() {
    return "NatsSequenceSync[" + subject + ", " + sync.replicaId() + "]";
  }
}
