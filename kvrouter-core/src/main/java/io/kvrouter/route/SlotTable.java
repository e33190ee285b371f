package io.kvrouter.route;

import io.kvrouter.event.Worker;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredScores;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * KvRouter's bookkeeping: the registered worker ranks (slots), each with its {@link
 * ActiveSequences} and KV capacity, and the requests in flight on them.
 *
 * <pre>
 * Implementation notes
 *
 * Data: slots, the registered ranks in ascending Worker order (an array replaced when ranks come
 * or go; route() iterates it); byWorker finds a slot by Worker; requests maps a request id in
 * flight to its slot. rootHolders maps the sequence hash of block 0 of every request in flight to
 * the slots holding such requests, with counts: since active sets are closed under prefixes
 * (ActiveSequences.newBlocksOfChain), only those slots can hold any block of a prompt that starts
 * with that block, so prepare() marks them (the root column) and route() takes "all blocks new" for every
 * other slot without touching its hash table (one lookup instead of one cache miss per rank).
 * prepare() also finds the prompt's active prefix on each of them (the active column), in one
 * tight pass so that their lookups, cache misses into different tables, overlap. Each entry keeps,
 * per slot, the last prompt whose active prefix was found there, that prefix, and a version bumped
 * whenever a request of this root comes to the slot or leaves it: while the version holds, a
 * prompt that agrees with the last one past its answer takes that answer with no lookup, one that
 * agrees up to it one lookup (ActiveSequences.activePrefix, ActivePrefixMemoTest). Without an
 * earlier answer the search starts from activeHint, the last answer on any holder (a guess that
 * costs two lookups when right and never changes the answer; ActiveSequencesHintTest).
 *
 * Invariants: requests holds exactly the ids in flight in the slots' ActiveSequences, each
 * mapped to the slot that holds it; rootHolders counts, per root block, the requests in flight
 * starting with it on each slot, and has no empty entry. ActiveSequences reports every request
 * that leaves (freed or expired) to a listener that keeps requests and rootHolders in step;
 * removing a rank drops its ids and root entries here.
 *
 * Expiry: nextDeadline is at most the earliest deadline of any request in flight (record lowers
 * it, a pass of expire() recomputes it, frees and removals only make the true earliest later),
 * so expire(now) before it has nothing to drop and skips the pass over every rank.
 *
 * Departures: when set (KvRouter does, when sequence sync is on), departed is told of every
 * request that leaves without free(): expired, or dropped with its rank (remove, removeWorker).
 *
 * Columns: what route() reads of every rank sits in arrays indexed by the rank's position in
 * slots (Slot.index), replaced with slots (the worker column is never written in place, so
 * route() may hand it to a decision as it is): the worker, capacity
 * (changed only by setCapacity, in the slot and its column together), eviction meter and KV
 * source (fixed per slot), the active blocks, prefill tokens and requests in flight (each
 * ActiveSequences copies its counts there after every change, mirrorInto),
 * and the scratch of one route, written by prepare() and read by the same route(): overlap,
 * cached blocks, whether it holds the prompt's root block, its active prefix there (0 elsewhere),
 * and its tiered overlap (only when prepareTiers ran). prepare() notes the positions it writes
 * (written: the matched ranks first, then the root holders) and the next one sets those back to
 * 0: O(matched ranks) instead of filling columns of every rank; route() takes the matched ranks'
 * (position, overlap, cached) triples from the same list (matchedTriples). So the loop over 256 ranks streams a few contiguous arrays
 * instead of touching three objects per rank (docs/BENCHMARKS.md, Routing).
 *
 * Threading: not thread-safe; KvRouter calls everything under its lock.
 * </pre>
 */
final class SlotTable {

  /** One registered worker rank. */
  static final class Slot {
    final Worker worker;
    final Long boxedWorkerId; // for RouteOptions' Set<Long> without boxing per route
    long kvBlocks; // capacity; 0 = unknown (setCapacity changes it, and its column)
    final int dpSize; // 0: registered on its own (registerRank)
    final boolean predicted; // KvSource.PREDICTED: the router predicts what it caches

    @SuppressWarnings("NullAway.Init") // set once, right after construction
    ActiveSequences seqs;

    @SuppressWarnings("NullAway.Init") // set at registration, before the slot is used
    EvictionPressure.Meter meter; // the rank's eviction count (under the router's lock)

    int index; // its position in slots and in the columns (rebuilt when ranks come or go)

    private Slot(Worker worker, int dpSize, long kvBlocks, boolean predicted) {
      this.worker = worker;
      this.boxedWorkerId = worker.workerId();
      this.dpSize = dpSize;
      this.kvBlocks = kvBlocks;
      this.predicted = predicted;
    }
  }

  /**
   * The slots with requests in flight whose block 0 is one given root block, with how many each
   * (parallel arrays, linear search: a root is in flight on a handful of ranks).
   */
  private static final class RootHolders {
    Slot[] slots = new Slot[2];
    int[] counts = new int[2];
    int size;
    int activeHint; // the active prefix a route last found on one of these slots (a guess)
    // per slot: version, bumped whenever a request of this root comes to it or leaves it; the
    // last prompt whose active prefix was found there (null: none), that prefix, and the version
    // then: while the version is the same, the answer holds (ActiveSequences.activePrefix)
    int[] version = new int[2];
    long[] @Nullable [] memoPrompt = new long[2][];
    int[] memoActive = new int[2];
    int[] memoVersion = new int[2];

    void add(Slot s) {
      for (int i = 0; i < size; i++) {
        if (slots[i] == s) {
          counts[i]++;
          version[i]++;
          return;
        }
      }
      if (size == slots.length) {
        slots = Arrays.copyOf(slots, size * 2);
        counts = Arrays.copyOf(counts, size * 2);
        version = Arrays.copyOf(version, size * 2);
        memoPrompt = Arrays.copyOf(memoPrompt, size * 2);
        memoActive = Arrays.copyOf(memoActive, size * 2);
        memoVersion = Arrays.copyOf(memoVersion, size * 2);
      }
      slots[size] = s;
      version[size] = 0;
      memoPrompt[size] = null;
      counts[size++] = 1;
    }

    /** Returns true when no slot is left. */
    boolean remove(Slot s) {
      for (int i = 0; i < size; i++) {
        if (slots[i] == s) {
          version[i]++;
          if (--counts[i] == 0) removeAt(i);
          return size == 0;
        }
      }
      throw new IllegalStateException("root holders lost track of " + s.worker);
    }

    /** Drops {@code s} whatever its count. */
    void removeAll(Slot s) {
      for (int i = 0; i < size; i++) {
        if (slots[i] == s) {
          removeAt(i);
          return;
        }
      }
    }

    private void removeAt(int i) {
      size--;
      slots[i] = slots[size];
      counts[i] = counts[size];
      version[i] = version[size];
      memoPrompt[i] = memoPrompt[size];
      memoActive[i] = memoActive[size];
      memoVersion[i] = memoVersion[size];
      slots[size] = null;
      memoPrompt[size] = null;
    }

    /**
     * The active prefix of {@code seq} on the slot at {@code j}, noted for the next prompt. The
     * note keeps {@code seq} itself, not a copy: it must never be written after (route's chain is a
     * fresh array per route, kept by its request); a reused buffer would compare equal to itself.
     */
    int activePrefix(int j, long[] seq, int hint) {
      final long[] earlier = memoVersion[j] == version[j] ? memoPrompt[j] : null;
      final int active = slots[j].seqs.activePrefix(seq, hint, earlier, memoActive[j]);
      memoPrompt[j] = seq;
      memoActive[j] = active;
      memoVersion[j] = version[j];
      return active;
    }
  }

  /** Told of a request that leaves without {@link #free}: expired, or dropped with its rank. */
  @FunctionalInterface
  interface Departures {
    void departed(String requestId, boolean expired);
  }

  private final Duration requestExpiry;
  private @Nullable Departures departed; // null: nobody listens
  private Slot[] slots = new Slot[0];
  private final HashMap<Worker, Slot> byWorker = new HashMap<>();
  private final HashMap<String, Slot> requests = new HashMap<>();
  private final Long2ObjectOpenHashMap<RootHolders> rootHolders = new Long2ObjectOpenHashMap<>();
  // the columns (implementation notes), all of slots.length
  private Worker[] workerCol = new Worker[0];
  private long[] capacityCol = new long[0];
  private EvictionPressure.Meter[] meterCol = new EvictionPressure.Meter[0];
  private int[] blocksCol = new int[0];
  private long[] prefillCol = new long[0];
  private int[] requestsCol = new int[0];
  private boolean[] predictedCol = new boolean[0];
  private int[] overlapCol = new int[0];
  private int[] cachedCol = new int[0];
  private boolean[] rootCol = new boolean[0];
  // where rootCol is true: the prompt's active prefix there; 0 everywhere else
  private int[] activeCol = new int[0];
  // the positions where the last prepare() wrote overlapCol, cachedCol or rootCol (each once as a
  // match and once as a root holder: 2n at most), so that the next one clears those alone; -1: not
  // known (a prepare that did not finish, or an index that answered for a rank twice), clear all
  private int[] written = new int[0];
  private int writtenCount;
  private TierOverlap[] tiersCol = new TierOverlap[0];
  private boolean tiersPrepared; // tiersCol holds this route's tiered overlaps
  private int preparedMatches; // this route's registered ranks the index answered for (prepare)
  // no request in flight has a deadline before nextDeadline (when deadlinePending): expire(now)
  // skips the pass over every rank until then
  private boolean deadlinePending;
  private long nextDeadline;

  SlotTable(Duration requestExpiry) {
    this.requestExpiry = requestExpiry;
  }

  /** Sets the listener of requests that leave without {@link #free} (once, under lock). */
  void departures(Departures d) {
    this.departed = d;
  }

  // ------------------------------------------------------------------ ranks

  /** The registered ranks in ascending Worker order; the caller must not change the array. */
  Slot[] slots() {
    return slots;
  }

  /** The slot of {@code rank}, or null. */
  @Nullable Slot get(Worker rank) {
    return byWorker.get(rank);
  }

  /** Some registered rank of {@code workerId}, or null. */
  @Nullable Slot anyRankOf(long workerId) {
    for (Slot s : slots) {
      if (s.worker.workerId() == workerId) return s;
    }
    return null;
  }

  /**
   * Registers {@code ranks} (none registered yet) with the same dpSize, capacity and KV source
   * ({@code predicted}), each with the eviction meter {@code meters} gives it.
   */
  void add(
      List<Worker> ranks,
      int dpSize,
      long kvBlocks,
      boolean predicted,
      Function<Worker, EvictionPressure.Meter> meters) {
    List<Slot> next = new ArrayList<>(Arrays.asList(slots));
    for (Worker w : ranks) {
      Slot s = newSlot(w, dpSize, kvBlocks, predicted);
      s.meter = meters.apply(w);
      next.add(s);
    }
    next.sort((a, b) -> a.worker.compareTo(b.worker));
    setSlots(next.toArray(new Slot[0]));
  }

  /** Replaces slots and rebuilds the columns from them (ranks came or went). */
  private void setSlots(Slot[] next) {
    final int n = next.length;
    slots = next;
    workerCol = new Worker[n];
    capacityCol = new long[n];
    meterCol = new EvictionPressure.Meter[n];
    blocksCol = new int[n];
    prefillCol = new long[n];
    requestsCol = new int[n];
    predictedCol = new boolean[n];
    overlapCol = new int[n];
    cachedCol = new int[n];
    rootCol = new boolean[n];
    activeCol = new int[n];
    written = new int[2 * n];
    writtenCount = 0;
    tiersCol = new TierOverlap[n];
    tiersPrepared = false;
    for (int i = 0; i < n; i++) {
      Slot s = next[i];
      s.index = i;
      workerCol[i] = s.worker;
      capacityCol[i] = s.kvBlocks;
      meterCol[i] = s.meter;
      predictedCol[i] = s.predicted;
      s.seqs.mirrorInto(blocksCol, prefillCol, requestsCol, i);
    }
  }

  /** Sets the capacity of a registered slot, in the slot and in its column. */
  void setCapacity(Slot s, long kvBlocks) {
    s.kvBlocks = kvBlocks;
    capacityCol[s.index] = kvBlocks;
  }

  private Slot newSlot(Worker w, int dpSize, long kvBlocks, boolean predicted) {
    Slot s = new Slot(w, dpSize, kvBlocks, predicted);
    s.seqs =
        new ActiveSequences(
            requestExpiry,
            (id, seq, expired) -> {
              if (expired) requests.remove(id);
              forgetRoot(s, seq);
              if (expired && departed != null) departed.departed(id, true);
            });
    s.seqs.countInto(heldBlocks);
    byWorker.put(w, s);
    return s;
  }

  /**
   * Blocks held by the requests in flight on every rank, each request's counted whole: the ranks'
   * ActiveSequences add to it under the router's lock (a plain read and a release write: one writer
   * at a time, so no atomic add); read without it (an acquire read).
   */
  final AtomicLong heldBlocks = new AtomicLong();

  /** Forgets {@code rank} and its requests in flight; returns false when it was not registered. */
  boolean remove(Worker rank) {
    Slot gone = byWorker.remove(rank);
    if (gone == null) return false;
    ActiveSequences.addHeld(heldBlocks, -gone.seqs.heldBlocks());
    for (String id : gone.seqs.requestIds()) {
      requests.remove(id);
      if (departed != null) departed.departed(id, false);
    }
    List<Slot> keep = new ArrayList<>(slots.length);
    for (Slot s : slots) {
      if (s != gone) keep.add(s);
    }
    setSlots(keep.toArray(new Slot[0]));
    var it = rootHolders.values().iterator();
    while (it.hasNext()) {
      RootHolders h = it.next();
      h.removeAll(gone);
      if (h.size == 0) it.remove();
    }
    return true;
  }

  /** Forgets every rank of {@code workerId} and their requests; returns the ranks forgotten. */
  List<Worker> removeWorker(long workerId) {
    List<Slot> keep = new ArrayList<>(slots.length);
    List<Worker> gone = new ArrayList<>();
    for (Slot s : slots) {
      if (s.worker.workerId() != workerId) {
        keep.add(s);
        continue;
      }
      gone.add(s.worker);
      byWorker.remove(s.worker);
      ActiveSequences.addHeld(heldBlocks, -s.seqs.heldBlocks());
      for (String id : s.seqs.requestIds()) {
        requests.remove(id);
        if (departed != null) departed.departed(id, false);
      }
    }
    if (gone.isEmpty()) return gone;
    setSlots(keep.toArray(new Slot[0]));
    var it = rootHolders.values().iterator();
    while (it.hasNext()) {
      RootHolders h = it.next();
      for (int i = h.size - 1; i >= 0; i--) {
        if (h.slots[i].worker.workerId() == workerId) h.removeAll(h.slots[i]);
      }
      if (h.size == 0) it.remove();
    }
    return gone;
  }

  // ------------------------------------------------------------------ requests

  /**
   * Gets every slot ready to be priced for the prompt {@code seq}: expires overdue requests at
   * {@code now}, writes each slot's overlap and cached blocks from {@code scores} (0 for ranks the
   * index did not match; workers it knows that are not registered are ignored), and marks the slots
   * that hold the prompt's root block.
   */
  void prepare(long now, OverlapScores scores, long[] seq) {
    expire(now);
    // the last route's entries back to 0 (every other one is 0 already): O(matched), not O(ranks)
    final int[] w = written;
    if (writtenCount < 0) {
      Arrays.fill(overlapCol, 0);
      Arrays.fill(cachedCol, 0);
      Arrays.fill(rootCol, false);
      Arrays.fill(activeCol, 0);
    } else {
      for (int k = 0; k < writtenCount; k++) {
        final int at = w[k];
        overlapCol[at] = 0;
        cachedCol[at] = 0;
        rootCol[at] = false;
        activeCol[at] = 0;
      }
    }
    writtenCount = -1; // until this one finishes
    int dirty = 0;
    tiersPrepared = false;
    int matched = 0;
    for (int i = 0, n = scores.size(); i < n; i++) {
      Slot s = byWorker.get(scores.worker(i));
      if (s != null) {
        overlapCol[s.index] = scores.scoreAt(i);
        cachedCol[s.index] = scores.blockCountAt(i);
        if (dirty < w.length) w[dirty] = s.index;
        dirty++;
        matched++;
      }
    }
    preparedMatches = matched;
    RootHolders roots = seq.length == 0 ? null : rootHolders.get(seq[0]);
    if (roots != null) {
      // the active prefix on every holder, in one tight pass: each holder's lookup is a cache miss
      // into its own table, and with nothing else between them the processor overlaps them. Each
      // holder keeps, per root block, the last prompt it answered for (RootHolders.activePrefix):
      // while no request of that root came to it or left it, a prompt that agrees with that one
      // past its answer needs no lookup, and one that agrees up to it one. hint: the answer on
      // the holder before (at first: of the last route of this root), newBlocksOfChain's guess
      // when a holder has no earlier answer (it never changes the answer)
      int hint = roots.activeHint;
      for (int i = 0; i < roots.size; i++) {
        final int at = roots.slots[i].index;
        rootCol[at] = true;
        if (dirty < w.length) w[dirty] = at;
        dirty++;
        activeCol[at] = hint = roots.activePrefix(i, seq, hint);
      }
      roots.activeHint = hint;
    }
    writtenCount = dirty <= w.length ? dirty : -1;
  }

  /**
   * After {@link #prepare}: at least the number of ranks whose overlap or cached blocks are not 0
   * (the registered ranks the index answered for).
   */
  int matchedRanks() {
    return preparedMatches;
  }

  /**
   * After {@link #prepare}: writes to {@code out} the (position, overlap, cached) triples, in
   * ascending position, of every rank whose overlap or cached blocks are not 0, from the matched
   * ranks' positions prepare noted (the first {@link #matchedRanks()} of written), not from a pass
   * over every rank; returns how many ints it wrote (3 per rank), or -1 when prepare noted no
   * positions (then the caller scans the columns). The same triples as such a scan: only prepare's
   * matched loop writes a non-zero overlap or cached count, each at a position it notes. An
   * insertion sort (the index's answer is usually in worker order already, which is position
   * order): the caller uses it for a handful of matched ranks.
   */
  int matchedTriples(int[] out) {
    final int matched = preparedMatches;
    if (writtenCount < matched) return -1; // (writtenCount -1: positions not noted)
    final int[] w = written;
    final int[] ov = overlapCol;
    final int[] cb = cachedCol;
    int found = 0;
    for (int k = 0; k < matched; k++) {
      final int at = w[k];
      final int o = ov[at];
      final int c = cb[at];
      if ((o | c) == 0) continue;
      int j = found;
      while (j > 0 && out[j - 3] > at) {
        out[j] = out[j - 3];
        out[j + 1] = out[j - 2];
        out[j + 2] = out[j - 1];
        j -= 3;
      }
      if (j > 0 && out[j - 3] == at) { // noted twice: one triple, as the scan has (undo the shift)
        System.arraycopy(out, j + 3, out, j, found - j);
        continue;
      }
      out[j] = at;
      out[j + 1] = o;
      out[j + 2] = c;
      found += 3;
    }
    return found;
  }

  /**
   * After {@link #prepare}: for each rank of the root column, how many leading blocks of the prompt
   * it holds (the active prefix, ActiveSequences.newBlocksOfChain); 0 for every other rank.
   */
  int[] activePrefixColumn() {
    return activeCol;
  }

  /**
   * After {@link #prepare}: writes each slot's cached prefix by tier from {@code tiered} (a slot
   * with no score on any tier gets all zeros).
   */
  void prepareTiers(TieredScores tiered, TierWeights weights) {
    final TierOverlap none = TierOverlap.of(0, 0, 0, 0, weights);
    Arrays.fill(tiersCol, none);
    tiersPrepared = true;
    for (int i = 0, n = tiered.size(); i < n; i++) {
      Slot s = byWorker.get(tiered.worker(i));
      if (s == null) continue;
      tiersCol[s.index] =
          TierOverlap.of(
              tiered.blocks(i, Tier.DEVICE),
              tiered.blocks(i, Tier.HOST),
              tiered.blocks(i, Tier.DISK),
              tiered.blocks(i, Tier.EXTERNAL),
              weights);
    }
  }

  // the columns, for route() after prepare (the caller must not change them)

  Worker[] workerColumn() {
    return workerCol;
  }

  long[] capacityColumn() {
    return capacityCol;
  }

  EvictionPressure.Meter[] meterColumn() {
    return meterCol;
  }

  int[] activeBlocksColumn() {
    return blocksCol;
  }

  long[] activePrefillColumn() {
    return prefillCol;
  }

  /** Each rank's requests in flight ({@link ActiveSequences#requestCount()}). */
  int[] requestsColumn() {
    return requestsCol;
  }

  /** Whether each rank is of {@link KvSource#PREDICTED} ({@link Slot#predicted}). */
  boolean[] predictedColumn() {
    return predictedCol;
  }

  int[] overlapColumn() {
    return overlapCol;
  }

  int[] cachedColumn() {
    return cachedCol;
  }

  /** Whether the rank at each position holds a request in flight with the prompt's root block. */
  boolean[] rootColumn() {
    return rootCol;
  }

  /** The tiered overlaps of this route (prepareTiers), or null when there are none. */
  TierOverlap @Nullable [] tierColumn() {
    return tiersPrepared ? tiersCol : null;
  }

  /** {@code s}'s overlap in this route (after prepare). */
  int overlap(Slot s) {
    return overlapCol[s.index];
  }

  /** {@code s}'s tiered overlap in this route, or null without tiers (after prepare). */
  @Nullable TierOverlap tiers(Slot s) {
    return tiersPrepared ? tiersCol[s.index] : null;
  }

  /** The slot holding request {@code requestId} in flight, or null (call after expiring). */
  @Nullable Slot holding(String requestId) {
    return requests.get(requestId);
  }

  /**
   * Records request {@code requestId} (not in flight) on {@code target}, holding the blocks {@code
   * seq} (kept, not copied) and charged {@code prefillTokens}, at {@code now}.
   */
  void record(String requestId, Slot target, long[] seq, long prefillTokens, long now) {
    target.seqs.add(requestId, seq, prefillTokens, now);
    final long deadline = target.seqs.lastDeadline();
    if (!deadlinePending || deadline - nextDeadline < 0) {
      deadlinePending = true;
      nextDeadline = deadline;
    }
    requests.put(requestId, target);
    if (seq.length > 0) {
      RootHolders h = rootHolders.get(seq[0]);
      if (h == null) rootHolders.put(seq[0], h = new RootHolders());
      h.add(target);
    }
  }

  /** Stops charging the request's prefill; false when it is not in flight at {@code now}. */
  boolean markPrefillCompleted(String requestId, long now) {
    Slot s = requests.get(requestId);
    if (s == null) return false;
    s.seqs.expire(now); // past its deadline, a request is expired
    return s.seqs.markPrefillCompleted(requestId);
  }

  /** Releases the request; false when it is not in flight at {@code now}. */
  boolean free(String requestId, long now) {
    Slot s = requests.get(requestId);
    if (s == null) return false;
    s.seqs.expire(now); // past its deadline, a request is expired
    requests.remove(requestId);
    return s.seqs.free(requestId);
  }

  /**
   * Expires overdue requests on every rank: a pass over the ranks when the earliest deadline in
   * flight has come, nothing before.
   */
  void expire(long now) {
    if (!deadlinePending || now - nextDeadline < 0) return;
    boolean pending = false;
    long next = 0;
    for (Slot s : slots) {
      final ActiveSequences a = s.seqs;
      a.expire(now);
      if (a.hasRequests()) {
        final long d = a.nextDeadline();
        if (!pending || d - next < 0) next = d;
        pending = true;
      }
    }
    deadlinePending = pending;
    nextDeadline = next;
  }

  /** Requests in flight (call after expiring). */
  int inFlight() {
    return requests.size();
  }

  /** Distinct root blocks of requests in flight. */
  int rootBlocksInFlight() {
    return rootHolders.size();
  }

  /** Keeps rootHolders in step when a request of {@code s} leaves. */
  private void forgetRoot(Slot s, long[] seq) {
    if (seq.length == 0) return;
    RootHolders h = rootHolders.get(seq[0]);
    if (h != null && h.remove(s)) rootHolders.remove(seq[0]);
  }
}
