package io.kvrouter.route;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.NullUnmarked;

/**
 * The requests in flight on one worker rank, with the KV blocks they hold and the prefill tokens
 * they still owe: the load half of the routing cost (DESIGN.md §6).
 *
 * <pre>
 * Implementation notes
 *
 * Layout: requests maps a request id to its Request (sequence hashes, prefill tokens still
 * charged, deadline). The Requests also form an intrusive doubly linked list in registration
 * order; the expiry is one fixed duration and the clock is monotonic, so that order is deadline
 * order and lazy expiry pops from the head in O(1) per request, freeing unlinks in O(1).
 * blockRefs (BlockRefs: key and count side by side, one cache line per probe) maps every active
 * sequence hash to the number of (request, position) pairs that hold it, so a block shared by several requests counts once and leaves when the last one is freed;
 * activeBlocks() is its size (kept in a field of its own). The owner may have both counts copied
 * into its per-rank columns after every change (mirrorInto), so that the router's loop over every
 * rank reads primitive arrays instead of one object per rank. activePrefillTokens is the sum of the live requests' charges.
 *
 * Threading: not thread-safe. KvRouter owns one instance per worker rank and calls it only under
 * its lock (docs/routing.md).
 *
 * Invariants: blockRefs holds exactly the union of the live requests' hashes, each with its
 * occurrence count; activePrefillTokens == Σ request.prefillTokens; every live request is on the
 * list exactly once, and the list is sorted by deadline.
 *
 * Expiry is lazy: expire(now) drops the requests whose deadline has passed; the owner calls it
 * before reading loads or adding (KvRouter does, once per decision, with the time it read). Every
 * request that leaves, freed or expired, is reported to the owner's Listener (KvRouter's
 * SlotTable forgets an expired id and keeps its root-block directory in step). Reads do not
 * expire.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class ActiveSequences {
  /** The default time after which a request that was never freed is dropped. */
  static final Duration DEFAULT_EXPIRY = Duration.ofSeconds(300);

  /** Told of every request that leaves, after its blocks and tokens are released. */
  @FunctionalInterface
  interface Listener {
    /**
     * Told that request {@code requestId} left.
     *
     * @param seqHashes the request's hashes, as given to add (do not change them)
     * @param expired true when dropped by expiry, false when freed
     */
    void released(String requestId, long[] seqHashes, boolean expired);
  }

  private static final class Request {
    final String id;
    final long[] seqHashes;
    final long deadline;
    long prefillTokens;
    Request prev;
    Request next;

    Request(String id, long[] seqHashes, long prefillTokens, long deadline) {
      this.id = id;
      this.seqHashes = seqHashes;
      this.prefillTokens = prefillTokens;
      this.deadline = deadline;
    }
  }

  private final long expiryNanos;
  private final Listener listener;
  private final HashMap<String, Request> requests = new HashMap<>();
  private final BlockRefs blockRefs = new BlockRefs();
  private long activePrefillTokens;
  private int activeBlocks; // blockRefs.size(), kept here so reading it touches only this object
  private long heldBlocks; // Σ seqHashes.length of the live requests: what their arrays hold
  private AtomicLong heldTotal; // the owner's sum of heldBlocks over its ranks, or null
  private Request head; // oldest deadline
  private Request tail;
  // the owner's load columns (SlotTable's, indexed by rank): activeBlocks and activePrefillTokens
  // are copied to [mirrorAt] after every change, so that the router's loop over every rank reads
  // contiguous arrays instead of this object; null: not mirrored
  private int[] blocksMirror;
  private long[] prefillMirror;
  private int[] requestsMirror; // requestCount()
  private int mirrorAt;

  /**
   * @param expiry how long a request may stay in flight without being freed
   * @param listener told of each request that is freed or expires
   */
  ActiveSequences(Duration expiry, Listener listener) {
    if (expiry == null || expiry.isNegative() || expiry.isZero()) {
      throw new IllegalArgumentException("expiry must be positive, got " + expiry);
    }
    this.expiryNanos = saturatedNanos(expiry);
    this.listener = Objects.requireNonNull(listener, "listener");
  }

  /**
   * The prefill tokens a request of {@code isl} tokens costs on a worker that caches its first
   * {@code overlapBlocks} blocks: {@code isl − overlapBlocks·blockSize}, never negative.
   */
  static long prefillTokens(int isl, int overlapBlocks, int blockSize) {
    return Math.max(0L, (long) isl - (long) overlapBlocks * blockSize);
  }

  /**
   * From now on adds every change of {@link #heldBlocks()} to {@code total} (the owner's sum over
   * its ranks, read without its lock); call it while no request is in flight.
   */
  void countInto(AtomicLong total) {
    heldTotal = total;
  }

  /**
   * Adds {@code delta} to the owner's total: a plain read and a release write, since every writer
   * holds the owner's lock (the readers, without it, read with acquire).
   */
  static void addHeld(AtomicLong total, long delta) {
    total.setRelease(total.getPlain() + delta);
  }

  /**
   * From now on copies this rank's load to {@code blocks[at]}, {@code prefill[at]} and {@code
   * requests[at]} (its {@link #requestCount()}) after every change, starting now (the owner
   * replaces its columns when ranks come or go and calls this again for each rank with its new
   * position).
   */
  void mirrorInto(int[] blocks, long[] prefill, int[] requests, int at) {
    blocksMirror = blocks;
    prefillMirror = prefill;
    requestsMirror = requests;
    mirrorAt = at;
    mirror();
  }

  private void mirror() {
    if (blocksMirror != null) {
      blocksMirror[mirrorAt] = activeBlocks;
      prefillMirror[mirrorAt] = activePrefillTokens;
      requestsMirror[mirrorAt] = requests.size();
    }
  }

  // ------------------------------------------------------------------ writes

  /**
   * Records a request in flight at {@code nowNanos}: it holds the blocks named by {@code seqHashes}
   * and is charged {@code prefillTokens} (see {@link #prefillTokens}) until {@link
   * #markPrefillCompleted}. Expires nothing: the caller has expired at {@code nowNanos}.
   *
   * <p>{@code seqHashes} is kept, not copied: the caller must not change it afterwards.
   */
  void add(String requestId, long[] seqHashes, long prefillTokens, long nowNanos) {
    if (requestId == null) {
      throw new IllegalArgumentException("requestId must not be null");
    }
    if (seqHashes == null) {
      throw new IllegalArgumentException("seqHashes must not be null");
    }
    if (prefillTokens < 0) {
      throw new IllegalArgumentException("prefillTokens must be >= 0, got " + prefillTokens);
    }
    Request r = new Request(requestId, seqHashes, prefillTokens, nowNanos + expiryNanos);
    if (requests.putIfAbsent(requestId, r) != null) { // one lookup; nothing changed when taken
      throw new IllegalArgumentException(
          "request id '"
              + requestId
              + "' is already in flight on this worker; free it before reusing the id");
    }
    final BlockRefs refs = blockRefs;
    int added = 0;
    for (long h : seqHashes) {
      if (refs.increment(h)) added++;
    }
    activeBlocks += added;
    heldBlocks += seqHashes.length;
    if (heldTotal != null) addHeld(heldTotal, seqHashes.length);
    activePrefillTokens += prefillTokens;
    mirror();
    append(r);
  }

  /**
   * Stops charging the request's prefill tokens (its prefill is done; its blocks stay until {@link
   * #free}). Returns false when the request is not in flight here; true otherwise, also when its
   * prefill was already marked complete.
   */
  boolean markPrefillCompleted(String requestId) {
    Request r = requests.get(requestId);
    if (r == null) return false;
    activePrefillTokens -= r.prefillTokens;
    r.prefillTokens = 0;
    mirror();
    return true;
  }

  /**
   * Releases the request's blocks and any prefill tokens still charged. Returns false when the
   * request is not in flight here (never added, already freed, or expired).
   */
  boolean free(String requestId) {
    Request r = requests.remove(requestId);
    if (r == null) return false;
    release(r);
    listener.released(r.id, r.seqHashes, false);
    return true;
  }

  /** Drops the requests whose deadline has passed at {@code nowNanos}; returns how many. */
  int expire(long nowNanos) {
    int n = 0;
    Request r;
    while ((r = head) != null && nowNanos - r.deadline >= 0) {
      requests.remove(r.id);
      release(r);
      n++;
      listener.released(r.id, r.seqHashes, true);
    }
    return n;
  }

  private void release(Request r) {
    final BlockRefs refs = blockRefs;
    int gone = 0;
    for (long h : r.seqHashes) {
      if (refs.decrement(h)) gone++;
    }
    activeBlocks -= gone;
    heldBlocks -= r.seqHashes.length;
    if (heldTotal != null) addHeld(heldTotal, -r.seqHashes.length);
    activePrefillTokens -= r.prefillTokens;
    r.prefillTokens = 0;
    mirror();
    unlink(r);
  }

  private void append(Request r) {
    r.prev = tail;
    r.next = null;
    if (tail == null) head = r;
    else tail.next = r;
    tail = r;
  }

  private void unlink(Request r) {
    Request p = r.prev;
    Request n = r.next;
    if (p == null) head = n;
    else p.next = n;
    if (n == null) tail = p;
    else n.prev = p;
    r.prev = null;
    r.next = null;
  }

  // ------------------------------------------------------------------ reads

  /** Distinct blocks held by the requests in flight. */
  int activeBlocks() {
    return activeBlocks;
  }

  /** Blocks the requests in flight hold, each request's counted whole (shared ones too). */
  long heldBlocks() {
    return heldBlocks;
  }

  /** Whether any request is in flight; then {@link #nextDeadline()} is defined. */
  boolean hasRequests() {
    return head != null;
  }

  /** The deadline of the oldest request in flight (call only when {@link #hasRequests()}). */
  long nextDeadline() {
    return head.deadline;
  }

  /** The deadline of the request added last (call only when {@link #hasRequests()}). */
  long lastDeadline() {
    return tail.deadline;
  }

  /** Prefill tokens charged to the requests in flight. */
  long activePrefillTokens() {
    return activePrefillTokens;
  }

  /** Requests in flight. */
  int requestCount() {
    return requests.size();
  }

  /** Sees one request in flight (see {@link #forEach}). */
  @FunctionalInterface
  interface Visitor {
    /**
     * Sees request {@code requestId} and the prefill tokens still charged to it.
     *
     * @param seqHashes the request's hashes, as given to add (do not change them)
     */
    void visit(String requestId, long[] seqHashes, long prefillTokens);
  }

  /** Shows every request in flight, oldest first, with the prefill tokens still charged. */
  void forEach(Visitor v) {
    for (Request r = head; r != null; r = r.next) v.visit(r.id, r.seqHashes, r.prefillTokens);
  }

  /** The ids of the requests in flight, oldest first. */
  List<String> requestIds() {
    List<String> ids = new ArrayList<>(requests.size());
    for (Request r = head; r != null; r = r.next) ids.add(r.id);
    return ids;
  }

  /**
   * How many of the chain of §2 sequence hashes {@code seqHashes} (from the root) are not active,
   * in O(log n) lookups.
   *
   * <p>A sequence hash names its whole prefix, and every request in flight holds its chain from the
   * root, so the active set is closed under prefixes: if block i of the query is active, so are
   * blocks 0..i-1 (short of a 64-bit hash collision, which the index assumes away as well). The
   * active blocks of the query are therefore a prefix of it, found by binary search. Exact whenever
   * every request was added with a root chain (KvRouter's case).
   */
  int newBlocksOfChain(long[] seqHashes) {
    return newBlocksOfChain(seqHashes, 0);
  }

  /**
   * {@link #newBlocksOfChain(long[])} with a guess: {@code hint} is the number of leading blocks of
   * {@code seqHashes} probably active here (0: no guess), such as the answer of another rank for
   * the same prompt (ranks that hold the same system prompt hold the same prefix of it). The answer
   * is the same whatever the guess; a right one costs two lookups instead of about {@code 1 +
   * log2(n)}: is block {@code hint - 1} active (then so is the root, by closure), is block {@code
   * hint} not; a wrong one narrows the binary search by what those lookups found.
   */
  int newBlocksOfChain(long[] seqHashes, int hint) {
    final BlockRefs refs = blockRefs;
    final int n = seqHashes.length;
    if (n == 0 || activeBlocks == 0) return n;
    // invariant: seqHashes[lo - 1] is active; seqHashes[hi] is not (hi == n: past the end)
    int lo;
    int hi = n;
    if (hint > 1 && hint <= n) {
      if (refs.contains(seqHashes[hint - 1])) {
        lo = hint; // the root is active too (closure)
        if (lo < n) {
          if (!refs.contains(seqHashes[lo])) return n - lo;
          lo++;
        }
      } else {
        if (!refs.contains(seqHashes[0])) return n;
        lo = 1;
        hi = hint - 1;
      }
    } else {
      if (!refs.contains(seqHashes[0])) return n;
      lo = 1;
    }
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (refs.contains(seqHashes[mid])) lo = mid + 1;
      else hi = mid;
    }
    return n - lo;
  }

  /**
   * How many leading blocks of the chain {@code seqHashes} are active ({@code seqHashes.length −}
   * {@link #newBlocksOfChain(long[], int)}), given an earlier answer: the chain {@code earlier}, of
   * the same root block, had {@code earlierActive} leading blocks active, and no request of that
   * root block was added here or left since ({@code earlier} null: no such answer). A request of
   * another root holds none of these chains' blocks (a sequence hash names its whole prefix), so
   * the answer follows from how far the two chains agree, {@code c} blocks: past the earlier answer
   * ({@code c > earlierActive}) it is that answer, with no lookup (block {@code earlierActive} is
   * the same in both chains, and was not active); else the first {@code c} blocks are active and
   * the search starts at block {@code c}: one lookup when that one is not active. Without an
   * earlier answer it is the search from {@code hint}. The same answer in every case, by the
   * closure of the active set under prefixes (newBlocksOfChain's notes).
   */
  int activePrefix(long[] seqHashes, int hint, long[] earlier, int earlierActive) {
    if (earlier == null) {
      return seqHashes.length - newBlocksOfChain(seqHashes, hint);
    }
    final int m = Arrays.mismatch(seqHashes, earlier);
    final int c = m < 0 ? seqHashes.length : m;
    if (c > earlierActive) return earlierActive;
    // blocks [0, c) are active (they are the earlier chain's, within its active prefix)
    final int n = seqHashes.length;
    if (c >= n) return n;
    final BlockRefs refs = blockRefs;
    if (!refs.contains(seqHashes[c])) return c;
    // invariant: seqHashes[lo - 1] is active; seqHashes[hi] is not (hi == n: past the end)
    int lo = c + 1;
    int hi = n;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (refs.contains(seqHashes[mid])) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private static long saturatedNanos(Duration d) {
    try {
      return d.toNanos();
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE / 4;
    }
  }

  @Override
  public String toString() {
    return "ActiveSequences[requests="
        + requests.size()
        + ", blocks="
        + blockRefs.size()
        + ", prefillTokens="
        + activePrefillTokens
        + "]";
  }
}
