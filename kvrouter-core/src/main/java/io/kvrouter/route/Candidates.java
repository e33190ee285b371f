package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.AbstractList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.RandomAccess;
import org.jspecify.annotations.Nullable;

/**
 * The candidates of one routing decision, as a {@link WorkerSelector} gets them: an unmodifiable
 * list of the eligible worker ranks' {@link Candidate}s (DESIGN.md §6's load terms) in ascending
 * worker order, with what the eviction-pressure term of docs/routing.md needs for each: its {@link
 * #newBlocks new blocks} and its {@link #relativePressure relative eviction pressure}. The terms of
 * candidate {@code i} can also be read one by one ({@link #worker(int)}, {@link
 * #overlapBlocks(int)}, ...), which builds no {@code Candidate}.
 *
 * <pre>
 * Implementation notes
 *
 * Columns: parallel arrays the router fills for this decision alone (workers, overlap, cached,
 * prefill, decode, relativePressure, each used on [0..size)); nothing changes them afterwards,
 * so a selector may keep the view. A Candidate record is built only when get(i) asks for it, and
 * kept in a lazily allocated array so that get(i) returns the same object each time (the router's
 * default selector reads the columns and builds none: no object per worker on the route path).
 * newBlocks is derived from promptBlocks and the candidate's overlap, not stored.
 *
 * Sparse overlaps: when few ranks matched the prompt (event mode at fleet scale: a prompt is
 * cached on a handful of ranks out of hundreds), the router passes no overlap and cached columns
 * but sparse, the (index, overlap, cached) triples of the candidates where either is not 0, in
 * ascending index: 12 bytes per matched candidate instead of 8 per candidate. A read of one
 * candidate searches the triples (binary search); the passes over every candidate (priceBuiltIn,
 * the selector's tie-break) walk them alongside. Every figure read is the same as from the
 * columns (CandidatesSparseTest compares the two on seeded random candidates).
 *
 * requests: the queue scorer's column. When no weighted term of the router's cost may read it
 * after the choice (Scorers.readsRequests is false), it is the router's scratch array, rewritten
 * by its next decision, or its table's requests column itself (the plain passes), changed by this
 * decision's record: read only before the selector returns, both hold the figures of the moment;
 * the contributions PricedCandidates recomputes later never ask for it.
 *
 * Threading: the router builds it and calls the selector under its lock; the decision's
 * candidate list keeps reading it afterwards from whatever thread holds the decision. The
 * columns never change after construction; the record cache is racy on purpose, as in
 * PricedCandidates (concurrent readers may each build an equal record).
 * </pre>
 */
public final class Candidates extends AbstractList<Candidate> implements RandomAccess {
  private final Worker[] workers;
  private final int @Nullable [] overlap; // null: sparse holds the overlaps (and cached blocks)
  private final int @Nullable [] cached; // null exactly when overlap is
  // when overlap and cached are null: (index, overlap, cached) triples, ascending index, of the
  // candidates whose overlap or cached blocks are not 0 (every other one has 0 of both)
  private final int[] sparse;
  private final double[] prefill;
  private final int[] decode;
  private final int size;
  private final int promptBlocks;
  private final double[] relativePressure;
  private final TierOverlap @Nullable [] tiers; // null without tiers
  private final int @Nullable [] requests; // null: none known (Candidates.of)
  private final RouteOptions options;
  private Candidate @Nullable [] built; // get(i)'s records, made on first use
  // every relative pressure is 0 and every other term of every candidate is +0.0 or more (the
  // router's candidates before any rank evicted): the pressure term adds +0.0, nothing to price
  private final boolean noPressure;

  // the built-in terms' kinds for priceBuiltIn (Scorers notes each weighted term's)
  static final byte SKIP = 0;
  static final byte PREFILL = 1;
  static final byte DECODE = 2;
  static final byte PRESSURE = 3;
  static final byte QUEUE = 4;
  static final byte SESSION = 5;

  private static final int[] NONE = new int[0];

  /** The router's constructor: no copies, no checks (see the class comment). */
  Candidates(
      Worker[] workers,
      int[] overlap,
      int[] cached,
      double[] prefill,
      int[] decode,
      int size,
      int promptBlocks,
      double[] relativePressure) {
    this(workers, overlap, cached, prefill, decode, size, promptBlocks, relativePressure, null);
  }

  /** The router's constructor with each candidate's prefix by tier ({@code null}: no tiers). */
  Candidates(
      Worker[] workers,
      int[] overlap,
      int[] cached,
      double[] prefill,
      int[] decode,
      int size,
      int promptBlocks,
      double[] relativePressure,
      TierOverlap @Nullable [] tiers) {
    this(
        workers,
        overlap,
        cached,
        prefill,
        decode,
        size,
        promptBlocks,
        relativePressure,
        tiers,
        null,
        RouteOptions.defaults());
  }

  /**
   * The router's constructor with each candidate's requests in flight ({@code null}: unknown, read
   * as 0) and the request's options (what scorers of a session or an adapter read).
   */
  Candidates(
      Worker[] workers,
      int[] overlap,
      int[] cached,
      double[] prefill,
      int[] decode,
      int size,
      int promptBlocks,
      double[] relativePressure,
      TierOverlap @Nullable [] tiers,
      int @Nullable [] requests,
      RouteOptions options) {
    this(
        workers,
        overlap,
        cached,
        NONE,
        prefill,
        decode,
        size,
        promptBlocks,
        relativePressure,
        tiers,
        requests,
        options);
  }

  /**
   * The router's constructor with either the overlap and cached columns or, both null, {@code
   * sparse}: the (index, overlap, cached) triples, ascending index, of every candidate where either
   * is not 0 (see the class comment).
   */
  Candidates(
      Worker[] workers,
      int @Nullable [] overlap,
      int @Nullable [] cached,
      int[] sparse,
      double[] prefill,
      int[] decode,
      int size,
      int promptBlocks,
      double[] relativePressure,
      TierOverlap @Nullable [] tiers,
      int @Nullable [] requests,
      RouteOptions options) {
    this(
        workers,
        overlap,
        cached,
        sparse,
        prefill,
        decode,
        size,
        promptBlocks,
        relativePressure,
        tiers,
        requests,
        options,
        false);
  }

  /**
   * The router's constructor as above; {@code noPressure}: every relative pressure is 0 (no rank
   * has evicted yet), so that pricing need not add the pressure term, which is +0.0 for every
   * candidate and changes no cost (every other term of a router's candidate is +0.0 or more).
   */
  Candidates(
      Worker[] workers,
      int @Nullable [] overlap,
      int @Nullable [] cached,
      int[] sparse,
      double[] prefill,
      int[] decode,
      int size,
      int promptBlocks,
      double[] relativePressure,
      TierOverlap @Nullable [] tiers,
      int @Nullable [] requests,
      RouteOptions options,
      boolean noPressure) {
    this.noPressure = noPressure;
    if ((overlap == null) != (cached == null)) {
      throw new IllegalArgumentException("overlap and cached are both columns or both sparse");
    }
    this.tiers = tiers;
    this.requests = requests;
    this.options = options;
    this.workers = workers;
    this.overlap = overlap;
    this.cached = cached;
    this.sparse = sparse;
    this.prefill = prefill;
    this.decode = decode;
    this.size = size;
    this.promptBlocks = promptBlocks;
    this.relativePressure = relativePressure;
  }

  /**
   * Candidates as the router would pass them, for testing or wrapping a selector.
   *
   * @param candidates the candidates, in the order the selector should see them (the router's is
   *     ascending worker order); at least one
   * @param promptBlocks full blocks of the prompt
   * @param relativePressure each candidate's relative eviction pressure (finite, {@code >= 0}),
   *     copied
   * @throws IllegalArgumentException on an empty list, lengths that differ, or bad values
   */
  public static Candidates of(
      List<Candidate> candidates, int promptBlocks, double[] relativePressure) {
    Candidate[] c = candidates.toArray(new Candidate[0]);
    if (c.length == 0) throw new IllegalArgumentException("no candidates");
    if (relativePressure.length != c.length) {
      throw new IllegalArgumentException(
          relativePressure.length + " relative pressures for " + c.length + " candidates");
    }
    if (promptBlocks < 0) {
      throw new IllegalArgumentException("promptBlocks must be >= 0, got " + promptBlocks);
    }
    final int n = c.length;
    Worker[] workers = new Worker[n];
    int[] overlap = new int[n];
    int[] cached = new int[n];
    double[] prefill = new double[n];
    int[] decode = new int[n];
    for (int i = 0; i < n; i++) {
      Objects.requireNonNull(c[i], "candidate");
      double p = relativePressure[i];
      if (!(p >= 0) || Double.isInfinite(p)) {
        throw new IllegalArgumentException(
            "relative pressure " + i + " must be finite and >= 0, got " + p);
      }
      workers[i] = c[i].worker();
      overlap[i] = c[i].overlapBlocks();
      cached[i] = c[i].cachedBlocks();
      prefill[i] = c[i].prefillBlocks();
      decode[i] = c[i].decodeBlocks();
    }
    Candidates out =
        new Candidates(
            workers, overlap, cached, prefill, decode, n, promptBlocks, relativePressure.clone());
    out.built = c;
    return out;
  }

  @Override
  public Candidate get(int i) {
    Objects.checkIndex(i, size);
    Candidate[] b = built;
    if (b == null) built = b = new Candidate[size];
    Candidate c = b[i];
    if (c == null) {
      b[i] = c = new Candidate(workers[i], overlapAt(i), cachedAt(i), prefill[i], decode[i]);
    }
    return c;
  }

  @Override
  public int size() {
    return size;
  }

  /** Full blocks of the prompt being routed (its partial last block is never cached). */
  public int promptBlocks() {
    return promptBlocks;
  }

  /** {@code get(i).worker()}, without building the candidate. */
  public Worker worker(int i) {
    Objects.checkIndex(i, size);
    return workers[i];
  }

  /** {@code get(i).overlapBlocks()}, without building the candidate. */
  public int overlapBlocks(int i) {
    Objects.checkIndex(i, size);
    return overlapAt(i);
  }

  private int overlapAt(int i) {
    final int[] o = overlap;
    if (o != null) return o[i];
    final int t = triple(i);
    return t < 0 ? 0 : sparse[t + 1];
  }

  private int cachedAt(int i) {
    final int[] c = cached;
    if (c != null) return c[i];
    final int t = triple(i);
    return t < 0 ? 0 : sparse[t + 2];
  }

  /** The offset in sparse of candidate {@code i}'s triple, or -1 when it has none. */
  private int triple(int i) {
    final int[] sp = sparse;
    int lo = 0;
    int hi = sp.length / 3 - 1;
    while (lo <= hi) {
      final int mid = (lo + hi) >>> 1;
      final int at = sp[3 * mid];
      if (at < i) lo = mid + 1;
      else if (at > i) hi = mid - 1;
      else return 3 * mid;
    }
    return -1;
  }

  /** {@code get(i).cachedBlocks()}, without building the candidate. */
  public int cachedBlocks(int i) {
    Objects.checkIndex(i, size);
    return cachedAt(i);
  }

  /**
   * The candidates among [0, size) of the least cost in {@code costs} and, among those, the fewest
   * cached blocks: writes their indices, ascending, to {@code out} (at least size long) and returns
   * how many. The selector's tie-break, in one pass: a cost below the least so far starts the ties
   * afresh, one equal to it is weighed by its cached blocks (a cost that is never the least, such
   * as NaN, is never among them). The same indices as taking the least cost first and then the
   * fewest cached blocks among the candidates at it: each candidate at the final least cost is
   * weighed after the last reset, in ascending order, as that second pass weighs it.
   */
  int leastCostFewestCached(double[] costs, int[] out) {
    final int n = size;
    double best = Double.POSITIVE_INFINITY;
    int bestCached = Integer.MAX_VALUE;
    int ties = 0;
    final int[] c = cached;
    final int[] sp = sparse;
    int p = 0; // the walk through sparse (when c is null)
    for (int i = 0; i < n; i++) {
      final double cost = costs[i];
      if (!(cost <= best)) continue; // above the least so far, or NaN
      if (cost < best) {
        best = cost;
        bestCached = Integer.MAX_VALUE;
        ties = 0;
      }
      final int cb;
      if (c != null) {
        cb = c[i];
      } else {
        while (p < sp.length && sp[p] < i) p += 3;
        cb = p < sp.length && sp[p] == i ? sp[p + 2] : 0;
      }
      if (cb < bestCached) {
        bestCached = cb;
        ties = 0;
      }
      if (cb == bestCached) out[ties++] = i;
    }
    return ties;
  }

  /** {@code get(i).prefillBlocks()}, without building the candidate. */
  public double prefillBlocks(int i) {
    Objects.checkIndex(i, size);
    return prefill[i];
  }

  /** {@code get(i).decodeBlocks()}, without building the candidate. */
  public int decodeBlocks(int i) {
    Objects.checkIndex(i, size);
    return decode[i];
  }

  /**
   * Candidate {@code i}'s cached prefix by tier, whose weighted blocks its {@link
   * #prefillBlocks(int) prefill} credits; {@code null} when the index tracks no tier beyond the
   * device (then the prefill credits {@link #overlapBlocks(int)}).
   */
  public @Nullable TierOverlap tierOverlap(int i) {
    Objects.checkIndex(i, size);
    return tiers == null ? null : tiers[i];
  }

  /**
   * Requests in flight on candidate {@code i}'s rank before this one (running or prefilling, the
   * peers' too with sequence sync); 0 when the candidates were built by {@link #of}.
   */
  public int requests(int i) {
    Objects.checkIndex(i, size);
    final int[] r = requests;
    return r == null ? 0 : r[i];
  }

  /**
   * The options of the request being routed: its adapter, namespace, allowed workers and session
   * affinity, for scorers that weigh them.
   */
  public RouteOptions options() {
    return options;
  }

  /**
   * Writes each candidate's cost for terms of built-in {@code kinds} at {@code weights} (both
   * Scorers'): for every candidate, {@code cost = Σ weight_j × score_j} in term order, the first
   * term's product taken as it is, exactly as Scorers.priceByScorers computes it through the
   * built-in scorers, but from the columns, with no call per candidate and term.
   */
  void priceBuiltIn(byte[] kinds, double[] weights, double[] costs) {
    final int n = size;
    // term by term over every candidate (each loop a plain pass over columns, which the compiler
    // can vectorise); per candidate the same operations in the same order as term by term within
    // it: the first term's product as it is, then each later one added
    if (kinds.length == 0 || kinds[0] == SKIP) Arrays.fill(costs, 0, n, 0.0);
    for (int j = 0; j < kinds.length; j++) {
      final double w = weights[j];
      final boolean first = j == 0;
      switch (kinds[j]) {
        // (the first term's loop apart from the others': straight loops the compiler vectorises)
        case PREFILL -> {
          final double[] p = prefill;
          if (first) {
            for (int i = 0; i < n; i++) costs[i] = w * p[i];
          } else {
            for (int i = 0; i < n; i++) costs[i] = costs[i] + w * p[i];
          }
        }
        case DECODE -> {
          final int[] d = decode;
          if (first) {
            for (int i = 0; i < n; i++) costs[i] = w * (double) d[i];
          } else {
            for (int i = 0; i < n; i++) costs[i] = costs[i] + w * (double) d[i];
          }
        }
        case PRESSURE -> {
          if (noPressure) {
            // w × newBlocks × 0 is +0.0 for every candidate: x + 0.0 is x for every x that is
            // not -0.0, and no term of the router's candidates is negative
            if (first) Arrays.fill(costs, 0, n, 0.0);
            continue;
          }
          final int @Nullable [] o = overlap;
          final double[] r = relativePressure;
          final int blocks = promptBlocks;
          if (o != null) {
            for (int i = 0; i < n; i++) {
              final double v = w * Math.max(0, blocks - o[i]) * r[i];
              costs[i] = first ? v : costs[i] + v;
            }
          } else {
            final int[] sp = sparse;
            int p = 0; // the next triple
            for (int i = 0; i < n; i++) {
              int ov = 0;
              if (p < sp.length && sp[p] == i) {
                ov = sp[p + 1];
                p += 3;
              }
              final double v = w * Math.max(0, blocks - ov) * r[i];
              costs[i] = first ? v : costs[i] + v;
            }
          }
        }
        case QUEUE -> {
          final int @Nullable [] q = requests;
          for (int i = 0; i < n; i++) {
            final double v = w * (double) (q == null ? 0 : q[i]);
            costs[i] = first ? v : costs[i] + v;
          }
        }
        case SESSION -> {
          final @Nullable Worker affinity = options.affinity();
          for (int i = 0; i < n; i++) {
            final double v = w * (affinity == null || affinity.equals(workers[i]) ? 0.0 : 1.0);
            costs[i] = first ? v : costs[i] + v;
          }
        }
        default -> {} // SKIP: weight 0
      }
    }
  }

  /**
   * The prompt's full blocks that candidate {@code i} does not cache: {@code promptBlocks −
   * overlapBlocks}, never negative; what storing the prompt there adds to its cache.
   */
  public int newBlocks(int i) {
    return Math.max(0, promptBlocks - overlapBlocks(i));
  }

  /**
   * How fast candidate {@code i}'s cache has been evicting compared with the ranks allowed for this
   * request: its decaying count of evicted blocks over the mean count of those ranks (busy ones
   * included), the mean taken as at least one block. 1 is average, 0 when it never evicted (about 0
   * when not lately), always 0 in approximate mode (docs/routing.md).
   */
  public double relativePressure(int i) {
    Objects.checkIndex(i, size);
    return relativePressure[i];
  }
}
