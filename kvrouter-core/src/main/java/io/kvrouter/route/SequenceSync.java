package io.kvrouter.route;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.route.SequenceChange.Corrected;
import io.kvrouter.route.SequenceChange.Predicted;
import io.kvrouter.route.SequenceChange.Prediction;
import io.kvrouter.route.SequenceChange.PrefillCompleted;
import io.kvrouter.route.SequenceChange.Released;
import io.kvrouter.route.SequenceChange.Routed;
import io.kvrouter.route.SlotTable.Slot;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * A router's side of sharing in-flight bookkeeping between replicas (docs/service.md, "Several
 * replicas share their in-flight load"): the outbox of this replica's own changes, numbered, and a
 * view of every peer's requests in flight, kept in the router's own {@link ActiveSequences} so that
 * routing prices the whole fleet's load. The transport (kvrouter-transport's {@code
 * NatsSequenceSync}) drains the outbox, publishes it, and hands every peer's batches to {@link
 * #apply}. Get one with {@link KvRouter#sequenceSync(String)}.
 *
 * <pre>
 * Implementation notes
 *
 * Outbox: KvRouter calls localRouted / localPrefillCompleted / localReleased under its lock, in
 * the order the changes happen; each change gets the next sequence number (1, 2, ...) of this
 * incarnation and is appended to pending, under the outbox lock (a ReentrantLock, a leaf: nothing
 * is taken under it; the transport's publisher thread takes only it, in drain and awaitPending). Sequence
 * numbers are assigned under the router's lock too, so snapshot() (under that lock) sees exactly
 * the changes numbered up to its upToSequence. pending holds at most MAX_PENDING changes: past
 * that (a publisher that cannot publish) it is emptied, numbering goes on, and peers see the gap
 * and reload a snapshot. The outbox holds the request's hash array itself, not a copy.
 *
 * Peers: peers maps a peer's replica id to its incarnation (a random number each process draws),
 * the last sequence number applied and the keys of its requests here. A peer's request lives in
 * the table under the key MARK + peer + MARK + requestId (MARK = U+0001, which KvRouter refuses as
 * the first character of a local id), so it never meets a local id. Every peer method takes the
 * router's lock. Rules (apply): a batch of this replica's own id is ignored; a peer seen for the
 * first time, or with a new incarnation (it restarted: its old requests are dropped first), is
 * taken up only from sequence 1, otherwise the caller must load its snapshot; changes numbered at
 * or below the last applied are duplicates and skipped; a batch starting past last + 1 is a gap
 * (lost messages): nothing is applied and the caller must load a snapshot, which replaces the
 * peer's requests. A Routed whose key is already in flight, or whose rank is not registered here,
 * is skipped; a PrefillCompleted or Released of an unknown key does nothing. So loads only ever
 * hold requests added once and released at most once: never negative, and every peer request
 * leaves by its release, its peer's drop (silence, BYE, snapshot) or the request expiry.
 *
 * A peer request's deadline counts from when it was applied here (clocks of two machines are not
 * comparable); the expiry keeps the table's deadline order (ActiveSequences).
 *
 * Predictions (approximate mode): KvRouter also hands the outbox each prediction it records
 * (localPredicted, in decide after the Routed) and each engine report it applies
 * (localCorrected). They are numbered in a sequence of their own (predAssigned, also under both
 * locks) and take no number of the load changes: drain's first number counts only the others,
 * so a receiver that skips them numbers the rest the same. A peer's are applied to this router's
 * PredictedBlocks (nothing in event mode; a rank not registered here is counted as unknownRank):
 * a number at or below the peer's last applied prediction is a duplicate, skipped; past last + 1
 * is counted as a prediction gap and applied all the same (a lost prediction is a miss the next
 * decision or report repairs; lost load changes are a gap that reloads the snapshot, which
 * carries the model too). Predictions describe the engines' caches, not the peer's requests: a
 * dropped peer's stay. snapshot() adds the model (PredictedBlocks.chains, every rank's,
 * whoever predicted it), its capacities and predAssigned; load() takes predAssigned as the last
 * applied (the batches a snapshot covers are skipped whole) and merges the model into this one
 * (capacities first) only for the first snapshot with a model since this process started:
 * every peer's model is the fleet's, so a joiner needs one, and a live replica reloading a peer
 * after a gap already has it (the gap's predictions are then lost, as a prediction gap). Loading
 * costs about a second for a full 2^20-entry model, under the router's lock.
 * </pre>
 */
public final class SequenceSync {
  /** First character of a peer request's key in the router's table; refused in local ids. */
  static final char MARK = '\u0001';

  /** Most changes the outbox holds before it drops them (peers then reload a snapshot). */
  static final int MAX_PENDING = 1 << 17;

  /** What {@link #apply} did with a batch. */
  public enum Outcome {
    /** Applied (also a heartbeat that shows nothing was lost). */
    APPLIED,
    /** Every change was applied before: nothing done. */
    DUPLICATE,
    /** This replica's own batch: nothing done. */
    OWN,
    /** Unknown peer joined late, or a gap: nothing done; load the peer's {@link #snapshot()}. */
    NEEDS_SNAPSHOT
  }

  /**
   * A replica's requests in flight at one point of its change sequence and, in approximate mode,
   * its cache model.
   *
   * @param upToSequence the last change number the entries include
   * @param entries each request in flight, with the prefill tokens still charged
   * @param upToPrediction the last prediction number the model includes
   * @param predictions the model as chains with their ages (numbered 0), oldest first; empty in
   *     event mode
   * @param capacities the capacity the model has for each rank it predicts
   */
  public record Snapshot(
      long upToSequence,
      List<Routed> entries,
      long upToPrediction,
      List<Predicted> predictions,
      List<Capacity> capacities) {
    public Snapshot {
      entries = List.copyOf(entries);
      predictions = List.copyOf(predictions);
      capacities = List.copyOf(capacities);
    }

    /** A snapshot without a model. */
    public Snapshot(long upToSequence, List<Routed> entries) {
      this(upToSequence, entries, 0, List.of(), List.of());
    }
  }

  /**
   * The capacity approximate mode's model has for a rank: the registered KV blocks or what the
   * corrections made of it; {@code Long.MAX_VALUE} when unknown.
   */
  public record Capacity(Worker worker, long blocks) {
    public Capacity {
      Objects.requireNonNull(worker, "worker");
      if (blocks < 1) throw new IllegalArgumentException("blocks must be >= 1, got " + blocks);
    }
  }

  /**
   * A peer as this replica sees it.
   *
   * @param requests its requests in flight here
   * @param silentNanos time since its last batch or snapshot
   */
  public record PeerInfo(
      String replicaId, long incarnation, long appliedSequence, int requests, long silentNanos) {}

  /**
   * Counters since the start.
   *
   * @param localChanges changes of this replica numbered for the outbox
   * @param outboxDropped changes dropped from a full outbox (never published)
   * @param peerChangesApplied peer changes applied
   * @param duplicates peer changes skipped as already applied
   * @param gaps batches that showed lost changes (a snapshot was then needed)
   * @param unknownRank peer requests, predictions and corrections skipped because their rank is not
   *     registered here
   * @param snapshotsLoaded peer snapshots loaded
   * @param peersDropped peers whose requests were dropped (silent, gone, restarted)
   * @param localPredictions predictions and corrections of this replica numbered for the outbox
   * @param peerPredictionsApplied peer predictions and corrections applied to this model (snapshot
   *     chains included)
   * @param predictionGaps peer predictions that arrived past a missing number (applied; the missing
   *     ones are lost)
   */
  public record Stats(
      long localChanges,
      long outboxDropped,
      long peerChangesApplied,
      long duplicates,
      long gaps,
      long unknownRank,
      long snapshotsLoaded,
      long peersDropped,
      long localPredictions,
      long peerPredictionsApplied,
      long predictionGaps) {}

  private static final class Peer {
    final String id;
    final long incarnation;
    long applied;
    long predicted; // the last prediction number applied
    long lastHeard;
    final HashSet<String> keys = new HashSet<>();

    Peer(String id, long incarnation, long now) {
      this.id = id;
      this.incarnation = incarnation;
      this.lastHeard = now;
    }
  }

  private final String replicaId;
  private final long incarnation;
  private final ReentrantLock lock; // the router's

  @GuardedBy("lock")
  private final SlotTable table; // under lock

  @GuardedBy("lock")
  private final PredictedBlocks predictions; // under lock; holds only the predicted ranks

  private final LongSupplier clock;

  private final ReentrantLock outbox = new ReentrantLock(); // a leaf
  private final Condition nonEmpty = outbox.newCondition();

  @GuardedBy("outbox")
  private final ArrayList<SequenceChange> pending = new ArrayList<>(); // under outbox

  @GuardedBy("outbox")
  private long assigned; // under outbox (and written under lock): last number given

  @GuardedBy("outbox")
  private int pendingNumbered; // under outbox: changes of pending that are not predictions

  @GuardedBy("outbox")
  private long predAssigned; // under outbox (and written under lock): last prediction number

  @GuardedBy("outbox")
  private boolean woken; // under outbox: wake() was called since the last awaitPending

  @GuardedBy("lock")
  private final HashMap<String, Peer> peers = new HashMap<>(); // under lock

  @GuardedBy("outbox")
  private long localChanges; // under outbox

  @GuardedBy("outbox")
  private long localPredictions; // under outbox

  @GuardedBy("outbox")
  private long outboxDropped; // under outbox

  @GuardedBy("lock")
  private long applied; // the rest under lock

  @GuardedBy("lock")
  private long duplicates;

  @GuardedBy("lock")
  private long gaps;

  @GuardedBy("lock")
  private long unknownRank;

  @GuardedBy("lock")
  private long snapshotsLoaded;

  @GuardedBy("lock")
  private long peersDropped;

  @GuardedBy("lock")
  private long predictionsApplied;

  @GuardedBy("lock")
  private boolean modelLoaded; // a snapshot's model was loaded (once per process)

  @GuardedBy("lock")
  private long predictionGaps;

  SequenceSync(
      String replicaId,
      ReentrantLock lock,
      SlotTable table,
      PredictedBlocks predictions,
      LongSupplier clock) {
    this.replicaId = checkId(replicaId);
    this.incarnation = ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE | 1;
    this.lock = lock;
    this.table = table;
    this.predictions = predictions;
    this.clock = clock;
  }

  private static String checkId(String id) {
    Objects.requireNonNull(id, "replicaId");
    if (id.isEmpty() || id.indexOf(MARK) >= 0) {
      throw new IllegalArgumentException("replicaId must be non-empty without U+0001: " + id);
    }
    return id;
  }

  /** This replica's id: peers filter by it. */
  public String replicaId() {
    return replicaId;
  }

  /** This process's incarnation: a random positive number, new at every start. */
  public long incarnation() {
    return incarnation;
  }

  // ------------------------------------------------------------------ outbox (own changes)

  void localRouted(String requestId, Worker worker, long[] seq, long prefillTokens) {
    enqueue(new Routed(requestId, worker, seq, prefillTokens));
  }

  void localPrefillCompleted(String requestId) {
    enqueue(new PrefillCompleted(requestId));
  }

  void localReleased(String requestId, boolean expired) {
    enqueue(new Released(requestId, expired));
  }

  /** Approximate mode: {@code worker} now caches the chain of {@code localHashes} (not copied). */
  void localPredicted(Worker worker, long[] localHashes) {
    outbox.lock();
    try {
      enqueueLocked(new Predicted(++predAssigned, worker, localHashes, 0));
    } finally {
      outbox.unlock();
    }
  }

  /** Approximate mode: an engine's report, {@code cachedLocalHashes} its first k blocks. */
  void localCorrected(Worker worker, long[] cachedLocalHashes, int predictedBlocks) {
    outbox.lock();
    try {
      enqueueLocked(
          new Corrected(
              ++predAssigned,
              worker,
              cachedLocalHashes,
              predictedBlocks,
              cachedLocalHashes.length));
    } finally {
      outbox.unlock();
    }
  }

  /** A request of the table left without free(): a peer's key, or one of ours. */
  @SuppressWarnings("GuardedBy") // the router's table calls it under the router's lock, this.lock
  void departed(String key, boolean expired) {
    if (key.isEmpty() || key.charAt(0) != MARK) {
      localReleased(key, expired);
      return;
    }
    int at = key.indexOf(MARK, 1);
    Peer p = at < 0 ? null : peers.get(key.substring(1, at));
    if (p != null) p.keys.remove(key);
  }

  private void enqueue(SequenceChange c) {
    outbox.lock();
    try {
      assigned++;
      enqueueLocked(c);
    } finally {
      outbox.unlock();
    }
  }

  @GuardedBy("outbox")
  private void enqueueLocked(SequenceChange c) {
    final boolean numbered = !(c instanceof Prediction);
    if (numbered) localChanges++;
    else localPredictions++;
    if (pending.size() >= MAX_PENDING) {
      outboxDropped += pending.size();
      pending.clear();
      pendingNumbered = 0;
    }
    pending.add(c);
    if (numbered) pendingNumbered++;
    if (pending.size() == 1) nonEmpty.signalAll();
  }

  /**
   * Moves the pending changes, in order, to {@code out} and returns the sequence number of the
   * first one that is not a {@link Prediction}; the others follow it one by one (predictions carry
   * their own numbers and take none of these). With none pending, returns the number the next
   * change will get (a heartbeat's number: peers check it for a gap).
   */
  public long drain(List<? super SequenceChange> out) {
    outbox.lock();
    try {
      long first = assigned - pendingNumbered + 1;
      out.addAll(pending);
      pending.clear();
      pendingNumbered = 0;
      return first;
    } finally {
      outbox.unlock();
    }
  }

  /**
   * Waits until a change is pending, {@link #wake()} is called or {@code nanos} passed; returns
   * false only when the time passed.
   */
  public boolean awaitPending(long nanos) throws InterruptedException {
    long left = nanos;
    outbox.lock();
    try {
      while (pending.isEmpty()) {
        if (woken) {
          woken = false;
          return true;
        }
        if (left <= 0) return false;
        left = nonEmpty.awaitNanos(left);
      }
      return true;
    } finally {
      outbox.unlock();
    }
  }

  /** Ends a wait of {@link #awaitPending} now (the transport's publisher has something to do). */
  public void wake() {
    outbox.lock();
    try {
      woken = true;
      nonEmpty.signalAll();
    } finally {
      outbox.unlock();
    }
  }

  /**
   * This replica's requests in flight and the last change number they include; in approximate mode,
   * also its cache model (every rank's, whoever predicted it) and the last prediction number it
   * includes.
   */
  public Snapshot snapshot() {
    lock.lock();
    try {
      long upTo;
      long predUpTo;
      outbox.lock();
      try {
        upTo = assigned;
        predUpTo = predAssigned;
      } finally {
        outbox.unlock();
      }
      final long now = clock.getAsLong();
      table.expire(now);
      List<Predicted> model = List.of();
      List<Capacity> caps = new ArrayList<>();
      if (predictions != null) {
        predictions.expire(now);
        model = predictions.chains(now);
        predictions.capacities().forEach((w, c) -> caps.add(new Capacity(w, c)));
      }
      List<Routed> out = new ArrayList<>();
      for (Slot s : table.slots()) {
        final Worker w = s.worker;
        s.seqs.forEach(
            (id, seq, prefill) -> {
              if (id.isEmpty() || id.charAt(0) != MARK) out.add(new Routed(id, w, seq, prefill));
            });
      }
      return new Snapshot(upTo, out, predUpTo, model, caps);
    } finally {
      lock.unlock();
    }
  }

  // ------------------------------------------------------------------ peers

  /**
   * Applies a peer's batch: {@code changes} numbered {@code firstSequence}, {@code
   * firstSequence+1}, ... of incarnation {@code incarnation} of replica {@code peer}. An empty
   * batch is a heartbeat whose {@code firstSequence} is the peer's next number.
   */
  public Outcome apply(
      String peer, long incarnation, long firstSequence, List<? extends SequenceChange> changes) {
    Objects.requireNonNull(peer, "peer");
    if (peer.equals(replicaId)) return Outcome.OWN;
    lock.lock();
    try {
      final long now = clock.getAsLong();
      Peer p = peers.get(peer);
      if (p != null && p.incarnation != incarnation) {
        dropLocked(p); // it restarted: its old requests are gone with it
        p = null;
      }
      if (p == null) {
        if (firstSequence != 1) return Outcome.NEEDS_SNAPSHOT;
        p = new Peer(peer, incarnation, now);
        peers.put(peer, p);
      }
      p.lastHeard = now;
      final int n = changes.size();
      if (firstSequence > p.applied + 1) {
        gaps++;
        return Outcome.NEEDS_SNAPSHOT;
      }
      table.expire(now);
      if (predictions != null) predictions.expire(now);
      int numbered = 0; // changes other than predictions seen so far: the next one's offset
      int done = 0;
      for (int i = 0; i < n; i++) {
        final SequenceChange c = changes.get(i);
        if (c instanceof Prediction pr) {
          if (pr.number() <= p.predicted) {
            duplicates++;
            continue;
          }
          if (pr.number() > p.predicted + 1) predictionGaps++;
          p.predicted = pr.number();
          applyPrediction(pr, now);
          done++;
          continue;
        }
        if (firstSequence + numbered++ <= p.applied) {
          duplicates++;
          continue;
        }
        applyOne(p, c, now);
        done++;
      }
      p.applied = Math.max(p.applied, firstSequence + numbered - 1);
      return n > 0 && done == 0 ? Outcome.DUPLICATE : Outcome.APPLIED;
    } finally {
      lock.unlock();
    }
  }

  @GuardedBy("lock")
  private void applyOne(Peer p, SequenceChange c, long now) {
    applied++;
    switch (c) {
      case Routed r -> add(p, key(p.id, r.requestId()), r, now);
      case PrefillCompleted pc -> table.markPrefillCompleted(key(p.id, pc.requestId()), now);
      case Released rl -> {
        String key = key(p.id, rl.requestId());
        if (table.free(key, now)) p.keys.remove(key);
      }
      case Prediction pr -> throw new AssertionError("applied by applyPrediction");
    }
  }

  /**
   * A peer's prediction or correction, applied to this model as if made here; nothing for a rank
   * fed by events here, or for a rank not registered here (counted as unknownRank).
   */
  @GuardedBy("lock")
  private void applyPrediction(Prediction pr, long now) {
    if (predictions == null) return;
    Slot s = table.get(pr.worker());
    if (s == null) {
      unknownRank++;
      return;
    }
    if (!s.predicted) return; // registered with events here: its events keep the index
    predictionsApplied++;
    final long[] local = pr.localHashes();
    final long[] seq = SequenceHasher.sequenceHashes(local);
    switch (pr) {
      // every block looked up: the overlap here may differ from the peer's
      case Predicted x -> predictions.record(s.worker, s.kvBlocks, seq, local, local.length, now);
      case Corrected x ->
          // a peer's predicted count is bounded by the rank's blocks: one corrupt count must not
          // shrink the modelled capacity to nothing
          predictions.observe(
              s.worker,
              s.kvBlocks,
              seq,
              local,
              s.kvBlocks > 0
                  ? (int) Math.min(x.predictedBlocks(), s.kvBlocks)
                  : x.predictedBlocks(),
              x.cachedBlocks(),
              now);
    }
  }

  @GuardedBy("lock")
  private void add(Peer p, String key, Routed r, long now) {
    Slot s = table.get(r.worker());
    if (s == null) {
      unknownRank++;
      return;
    }
    if (table.holding(key) != null) {
      duplicates++;
      return;
    }
    table.record(key, s, r.seqHashes(), r.prefillTokens(), now);
    p.keys.add(key);
  }

  /**
   * Replaces everything known of {@code peer} by its snapshot (taken by its {@link #snapshot()}):
   * its requests are dropped, the snapshot's added, and its batches are applied from {@code
   * snapshot.upToSequence() + 1} on.
   */
  public void load(String peer, long incarnation, Snapshot snapshot) {
    Objects.requireNonNull(peer, "peer");
    if (peer.equals(replicaId)) return;
    lock.lock();
    try {
      final long now = clock.getAsLong();
      Peer old = peers.remove(peer);
      if (old != null) dropKeys(old);
      Peer p = new Peer(peer, incarnation, now);
      peers.put(peer, p);
      table.expire(now);
      for (Routed r : snapshot.entries()) add(p, key(peer, r.requestId()), r, now);
      p.applied = snapshot.upToSequence();
      p.predicted = snapshot.upToPrediction();
      if (predictions != null && !modelLoaded && !snapshot.predictions().isEmpty()) {
        modelLoaded = true; // one model is enough: every peer's is the fleet's
        predictions.expire(now);
        for (Capacity c : snapshot.capacities()) {
          Slot s = table.get(c.worker());
          if (s != null && s.predicted) {
            predictions.loadCapacity(s.worker, s.kvBlocks, c.blocks(), now);
          }
        }
        for (Predicted c : snapshot.predictions()) {
          Slot s = table.get(c.worker());
          if (s == null) unknownRank++;
          // an events rank is fed by events here: its peer's predictions are skipped
          else if (s.predicted && predictions.load(s.worker, s.kvBlocks, c, now)) {
            predictionsApplied++;
          }
        }
      }
      snapshotsLoaded++;
    } finally {
      lock.unlock();
    }
  }

  /** Drops {@code peer} and its requests (it said goodbye, or it is gone); false if unknown. */
  public boolean drop(String peer) {
    lock.lock();
    try {
      Peer p = peers.get(peer);
      if (p == null) return false;
      dropLocked(p);
      return true;
    } finally {
      lock.unlock();
    }
  }

  /** Drops every peer not heard from for {@code silenceNanos}; returns their ids. */
  public List<String> dropSilent(long silenceNanos) {
    lock.lock();
    try {
      long now = clock.getAsLong();
      List<Peer> gone = new ArrayList<>();
      for (Peer p : peers.values()) {
        if (now - p.lastHeard >= silenceNanos) gone.add(p);
      }
      List<String> ids = new ArrayList<>(gone.size());
      for (Peer p : gone) {
        dropLocked(p);
        ids.add(p.id);
      }
      return ids;
    } finally {
      lock.unlock();
    }
  }

  @GuardedBy("lock")
  private void dropLocked(Peer p) {
    peers.remove(p.id);
    dropKeys(p);
    peersDropped++;
  }

  @GuardedBy("lock")
  private void dropKeys(Peer p) {
    long now = clock.getAsLong();
    for (String key : p.keys.toArray(new String[0])) table.free(key, now);
    p.keys.clear();
  }

  /** The peers known now, in no particular order. */
  public List<PeerInfo> peers() {
    lock.lock();
    try {
      long now = clock.getAsLong();
      table.expire(now);
      List<PeerInfo> out = new ArrayList<>(peers.size());
      for (Peer p : peers.values()) {
        out.add(new PeerInfo(p.id, p.incarnation, p.applied, p.keys.size(), now - p.lastHeard));
      }
      return out;
    } finally {
      lock.unlock();
    }
  }

  /** The counters. */
  public Stats stats() {
    long lc;
    long od;
    long lp;
    outbox.lock();
    try {
      lc = localChanges;
      od = outboxDropped;
      lp = localPredictions;
    } finally {
      outbox.unlock();
    }
    lock.lock();
    try {
      return new Stats(
          lc,
          od,
          applied,
          duplicates,
          gaps,
          unknownRank,
          snapshotsLoaded,
          peersDropped,
          lp,
          predictionsApplied,
          predictionGaps);
    } finally {
      lock.unlock();
    }
  }

  static String key(String peer, String requestId) {
    return MARK + peer + MARK + requestId;
  }

  @Override
  public String toString() {
    return "SequenceSync[" + replicaId + "]";
  }
}
