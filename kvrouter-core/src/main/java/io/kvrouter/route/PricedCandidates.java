package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.AbstractList;
import java.util.List;
import java.util.Objects;
import java.util.RandomAccess;
import org.jspecify.annotations.Nullable;

/**
 * The {@link RouteDecision.Routed#candidates()} of a decision the router made: an unmodifiable list
 * view of the {@link Candidates} the selector saw and the costs it wrote, whose {@link
 * CandidateCost} elements are built on first access.
 *
 * <pre>
 * Implementation notes
 *
 * Holds the decision's Candidates (whose columns nothing changes afterwards) and the costs array
 * the selector filled (the router's own, not handed to anyone else once select returned), or,
 * when the cost is of built-in terms only (the default), no costs: the selector wrote them to
 * the router's scratch array, and costs() prices the candidates again on first use (the
 * built-in terms read the columns alone, so the same bits; the array is published through a
 * volatile field, and concurrent first readers each compute an equal one). So a route that
 * nobody asks the costs of allocates no array of them. So
 * route() builds no object per candidate; a caller that reads the list pays for the records it
 * reads, each built once and kept (get(i) returns the same object each time). Routed keeps this
 * list as it is instead of copying it (List.copyOf would build every element).
 *
 * With a cost of named terms (Scorers), contribution(i, j) asks the composition again for term
 * j of candidate i, from the Candidates' columns (which nothing changes): nothing is stored per
 * term, so route() allocates no row of terms; a caller that reads them (POST /route's scores, a
 * trace) pays for them. scorers is null when the selector was another (then no term is reported).
 *
 * Threading: the columns and costs are written before the decision is returned and never
 * after. The element cache is racy on purpose: threads that read one decision at once may each
 * build an element (equal records with final fields, so never a torn one) and keep their own,
 * so "the same object each time" holds within a thread; equality always holds.
 * </pre>
 */
final class PricedCandidates extends AbstractList<CandidateCost> implements RandomAccess {
  private final Candidates candidates;
  private final double @Nullable [] costs; // null: priced again from the candidates when asked
  private final @Nullable Scorers scorers; // null: the terms are not known
  private volatile double @Nullable [] priced; // costs() when costs is null, made on first use
  private CandidateCost @Nullable [] built;

  PricedCandidates(Candidates candidates, double[] costs) {
    this(candidates, costs, null);
  }

  PricedCandidates(Candidates candidates, double[] costs, @Nullable Scorers scorers) {
    this.candidates = candidates;
    this.costs = costs;
    this.scorers = scorers;
  }

  /**
   * The view of a decision whose cost is of built-in terms only ({@link Scorers#builtInOnly}): the
   * costs are not kept but priced again from the candidates when first read, to the bits the
   * selector saw (the columns do not change, and the built-in terms read nothing else).
   */
  PricedCandidates(Candidates candidates, Scorers scorers) {
    if (!scorers.builtInOnly()) {
      throw new IllegalArgumentException("costs of terms that are not built in must be kept");
    }
    this.candidates = candidates;
    this.costs = null;
    this.scorers = scorers;
  }

  /** Each candidate's cost: the selector's array, or priced again on first use (then kept). */
  private double[] costs() {
    final double[] c = costs;
    if (c != null) return c;
    double[] p = priced;
    if (p == null) {
      final Scorers s = scorers;
      if (s == null) throw new IllegalStateException("unreachable: no costs and no scorers");
      p = new double[candidates.size()];
      s.price(candidates, p);
      priced = p; // racy on purpose: concurrent readers compute equal arrays; volatile publishes
    }
    return p;
  }

  /** The cost's terms' names; empty when the selector reported none. */
  List<String> scorerNames() {
    return scorers == null ? List.of() : scorers.names();
  }

  /** Term {@code j}'s contribution to candidate {@code i}'s cost; NaN when not reported. */
  double contribution(int i, int j) {
    Objects.checkIndex(i, candidates.size());
    final Scorers s = scorers;
    if (s == null) return Double.NaN;
    Objects.checkIndex(j, s.size());
    return s.contribution(candidates, i, j);
  }

  @Override
  public CandidateCost get(int i) {
    Objects.checkIndex(i, candidates.size());
    CandidateCost[] b = built;
    if (b == null) built = b = new CandidateCost[candidates.size()];
    CandidateCost c = b[i];
    if (c == null) b[i] = c = new CandidateCost(candidates.get(i), costs()[i]);
    return c;
  }

  @Override
  public int size() {
    return candidates.size();
  }

  /** The tier split of the candidate whose worker is {@code worker}, or null. */
  @Nullable TierOverlap tierOverlapOf(Worker worker) {
    for (int i = 0, n = candidates.size(); i < n; i++) {
      if (candidates.worker(i).equals(worker)) return candidates.tierOverlap(i);
    }
    return null;
  }

  /** The cost of the candidate whose worker is {@code worker}, or NaN; builds no element. */
  double costOf(Worker worker) {
    for (int i = 0, n = candidates.size(); i < n; i++) {
      if (candidates.worker(i).equals(worker)) return costs()[i];
    }
    return Double.NaN;
  }
}
