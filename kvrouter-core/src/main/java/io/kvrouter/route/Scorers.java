package io.kvrouter.route;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * The routing cost as a weighted sum of named {@link Scorer}s (docs/routing.md, "Scorers"): {@code
 * cost(i) = Σ_j weight_j × score_j(i)}, in the order the terms were added, terms of weight 0 left
 * out. {@link #defaults} is DESIGN.md §6's cost with the eviction-pressure term, the router's
 * default, equal to it bit for bit.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable: three parallel arrays fixed at build (names, scorers, weights), read by the selector
 * once per candidate and term under the router's lock: a loop over an array of interface
 * references and a double[], no map, no boxing. Terms of weight 0 are kept (their names still
 * appear in a decision's scores, at 0) but never called, as the old selector never computed the
 * pressure term at weight 0; that and Scorer.weighted's order of multiplication are what make
 * the default composition equal to the old formula in every bit (ScorersDefaultTest).
 *
 * kinds: when every weighted term is a built-in one, the build notes each term's kind, and price
 * hands the loop to Candidates.priceBuiltIn, which reads its columns directly with a switch per
 * term: the interface call per candidate and term (a megamorphic call site once three terms
 * share it) goes, and the arithmetic is the scorers' own, in the same order (ScorersPricingTest
 * compares the two bit for bit on seeded random candidates).
 * </pre>
 */
public final class Scorers {

  /** Prefill work queued on the rank with this request, in blocks ({@code prefillBlocks}). */
  public static final String PREFILL = "prefill";

  /** The rank's active blocks after this request's new ones ({@code decodeBlocks}). */
  public static final String DECODE = "decode";

  /** {@code newBlocks × relativePressure}: new blocks cost more where the cache evicts faster. */
  public static final String PRESSURE = "pressure";

  /** Requests in flight on the rank (running and prefilling), before this one. */
  public static final String QUEUE = "queue";

  /**
   * 1 unless the rank is the one the request's session is bound to ({@link RouteOptions#affinity}).
   */
  public static final String SESSION = "session";

  /**
   * The LoRA placement term's name: a {@link LoraResidency#scorer()} added under it with {@link
   * Builder#add(String, double, Scorer)} (not built in: it needs the engines' resident adapters).
   */
  public static final String LORA = "lora";

  private static final Pattern NAME = Pattern.compile("[a-z][a-z0-9_-]{0,31}");

  private static final Scorer PREFILL_SCORER = Candidates::prefillBlocks;
  private static final Scorer DECODE_SCORER = Candidates::decodeBlocks;
  private static final Scorer QUEUE_SCORER = Candidates::requests;
  private static final Scorer SESSION_SCORER = Scorers::sessionMiss;
  private static final Scorer PRESSURE_SCORER =
      new Scorer() {
        @Override
        public double score(Candidates c, int i) {
          return c.newBlocks(i) * c.relativePressure(i);
        }

        @Override
        public double weighted(double weight, Candidates c, int i) {
          return weight * c.newBlocks(i) * c.relativePressure(i); // the old selector's rounding
        }
      };

  private final String[] names;
  private final Scorer[] scorers;
  private final double[] weights;
  private final boolean readsRequests;
  // each term's built-in kind (Candidates.SKIP for weight 0), or null when a weighted term is not
  // built in: then price() calls the scorers
  private final byte @Nullable [] kinds;

  private Scorers(String[] names, Scorer[] scorers, double[] weights) {
    this.names = names;
    this.scorers = scorers;
    this.weights = weights;
    byte[] k = new byte[names.length];
    for (int j = 0; j < names.length && k != null; j++) {
      final Scorer s = scorers[j];
      if (weights[j] == 0) k[j] = Candidates.SKIP;
      else if (s == PREFILL_SCORER) k[j] = Candidates.PREFILL;
      else if (s == DECODE_SCORER) k[j] = Candidates.DECODE;
      else if (s == PRESSURE_SCORER) k[j] = Candidates.PRESSURE;
      else if (s == QUEUE_SCORER) k[j] = Candidates.QUEUE;
      else if (s == SESSION_SCORER) k[j] = Candidates.SESSION;
      else k = null;
    }
    this.kinds = k;
    boolean reads = false;
    for (int j = 0; j < names.length; j++) {
      final Scorer s = scorers[j];
      if (weights[j] == 0) continue;
      reads |=
          s != PREFILL_SCORER
              && s != DECODE_SCORER
              && s != PRESSURE_SCORER
              && s != SESSION_SCORER
              && !(s instanceof LoraResidency.PlacementScorer);
    }
    this.readsRequests = reads;
  }

  /**
   * Today's cost: {@code prefill} at {@code overlapWeight}, {@code decode} at 1, {@code pressure}
   * at {@code pressureWeight} (DESIGN.md §6 and docs/routing.md's pressure term).
   */
  public static Scorers defaults(double overlapWeight, double pressureWeight) {
    return builder()
        .add(PREFILL, overlapWeight)
        .add(DECODE, 1.0)
        .add(PRESSURE, pressureWeight)
        .build();
  }

  /** The built-in names, in the order {@link #defaults} and the docs give them. */
  public static List<String> builtInNames() {
    return List.of(PREFILL, DECODE, PRESSURE, QUEUE, SESSION);
  }

  /** The built-in scorer called {@code name}, or null. */
  public static @Nullable Scorer builtIn(String name) {
    return switch (name) {
      case PREFILL -> PREFILL_SCORER;
      case DECODE -> DECODE_SCORER;
      case PRESSURE -> PRESSURE_SCORER;
      case QUEUE -> QUEUE_SCORER;
      case SESSION -> SESSION_SCORER;
      default -> null;
    };
  }

  /** An empty builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding these terms, to change or extend. */
  public Builder toBuilder() {
    Builder b = new Builder();
    for (int j = 0; j < names.length; j++) b.terms.put(names[j], new Term(scorers[j], weights[j]));
    return b;
  }

  /** The number of terms. */
  public int size() {
    return names.length;
  }

  /** The terms' names, in order. */
  public List<String> names() {
    return List.of(names);
  }

  /** Term {@code j}'s name. */
  public String name(int j) {
    return names[j];
  }

  /** Term {@code j}'s weight. */
  public double weight(int j) {
    return weights[j];
  }

  /** The weight of the term called {@code name}; 0 when there is none. */
  public double weight(String name) {
    for (int j = 0; j < names.length; j++) if (names[j].equals(name)) return weights[j];
    return 0;
  }

  /**
   * Writes each candidate's cost to {@code costs[i]}. No allocation. A composition of built-in
   * terms only (the default) is priced by the candidates from their columns, without a call per
   * candidate and term, to the same bits ({@link #priceByScorers} is the reference).
   */
  void price(Candidates c, double[] costs) {
    final byte[] k = kinds;
    if (k != null) {
      c.priceBuiltIn(k, weights, costs);
    } else {
      priceByScorers(c, costs);
    }
  }

  /** {@link #price} by calling every weighted term's scorer for every candidate. */
  void priceByScorers(Candidates c, double[] costs) {
    final int n = c.size();
    final int k = names.length;
    final Scorer[] s = scorers;
    final double[] w = weights;
    for (int i = 0; i < n; i++) {
      double cost = 0;
      for (int j = 0; j < k; j++) {
        final double wj = w[j];
        if (wj == 0) continue;
        final double v = s[j].weighted(wj, c, i);
        cost = j == 0 ? v : cost + v;
      }
      costs[i] = cost;
    }
  }

  /**
   * Term {@code j}'s contribution to candidate {@code i}'s cost, as {@link #price} adds it (0 at
   * weight 0): computed again from the candidates' columns, so the same figure for the built-in
   * terms; a term with state of its own (the {@code lora} term) answers from its state now.
   */
  double contribution(Candidates c, int i, int j) {
    final double wj = weights[j];
    return wj == 0 ? 0.0 : scorers[j].weighted(wj, c, i);
  }

  /**
   * Whether a weighted term may read {@link Candidates#requests(int)}: the {@code queue} term, or a
   * scorer that is not built in (its contribution is computed again after the decision, from the
   * candidates: then the router keeps their requests column).
   */
  boolean readsRequests() {
    return readsRequests;
  }

  /**
   * Whether every weighted term is a built-in one: then {@link #price} reads nothing but the
   * candidates' columns (no state of its own), so the costs can be computed again from the
   * candidates after the decision, to the same bits (PricedCandidates does, when first asked).
   */
  boolean builtInOnly() {
    return kinds != null;
  }

  /** {@code name=weight} pairs, comma-separated. */
  @Override
  public String toString() {
    StringBuilder b = new StringBuilder();
    for (int j = 0; j < names.length; j++) {
      if (j > 0) b.append(',');
      b.append(names[j]).append('=').append(weights[j]);
    }
    return b.toString();
  }

  @Override
  public boolean equals(@Nullable Object o) {
    return o instanceof Scorers s
        && Arrays.equals(names, s.names)
        && Arrays.equals(scorers, s.scorers)
        && Arrays.equals(weights, s.weights);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(names) * 31 + Arrays.hashCode(weights);
  }

  private static double sessionMiss(Candidates c, int i) {
    final var affinity = c.options().affinity();
    return affinity == null || affinity.equals(c.worker(i)) ? 0 : 1;
  }

  private record Term(Scorer scorer, double weight) {}

  /** Collects terms; {@link #build()} fixes them. Not thread-safe. */
  public static final class Builder {
    private final Map<String, Term> terms = new LinkedHashMap<>();

    private Builder() {}

    /**
     * Sets the built-in term {@code name} to {@code weight} (added at the end when new, in its
     * place when present).
     *
     * @throws IllegalArgumentException on an unknown name (the message lists the known ones) or a
     *     weight that is negative, infinite or NaN
     */
    public Builder add(String name, double weight) {
      Scorer s = builtIn(Objects.requireNonNull(name, "name"));
      if (s == null) {
        Term t = terms.get(name);
        if (t != null) return add(name, weight, t.scorer);
        throw new IllegalArgumentException(
            "unknown scorer '" + name + "'; the scorers are " + String.join(", ", known()));
      }
      return add(name, weight, s);
    }

    /**
     * Sets term {@code name} to {@code scorer} at {@code weight}: a scorer of your own under a name
     * of its own, or a built-in one replaced.
     *
     * @throws IllegalArgumentException on a name that is not 1 to 32 of {@code [a-z0-9_-]} starting
     *     with a letter, or a weight that is negative, infinite or NaN
     */
    public Builder add(String name, double weight, Scorer scorer) {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(scorer, "scorer");
      if (!NAME.matcher(name).matches()) {
        throw new IllegalArgumentException(
            "scorer name '"
                + name
                + "' must be 1 to 32 lower-case letters, digits, '_' or '-', starting with a"
                + " letter");
      }
      CostBasedSelector.requireWeight("weight of scorer " + name, weight);
      terms.put(name, new Term(scorer, weight));
      return this;
    }

    /** The names this builder would accept in {@link #add(String, double)}. */
    private List<String> known() {
      List<String> out = new ArrayList<>(builtInNames());
      for (String n : terms.keySet()) if (!out.contains(n)) out.add(n);
      return out;
    }

    /**
     * The composition.
     *
     * @throws IllegalStateException when it has no term
     */
    public Scorers build() {
      if (terms.isEmpty()) throw new IllegalStateException("a cost needs at least one scorer");
      int k = terms.size();
      String[] names = new String[k];
      Scorer[] scorers = new Scorer[k];
      double[] weights = new double[k];
      int j = 0;
      for (Map.Entry<String, Term> e : terms.entrySet()) {
        names[j] = e.getKey();
        scorers[j] = e.getValue().scorer;
        weights[j] = e.getValue().weight;
        j++;
      }
      return new Scorers(names, scorers, weights);
    }
  }
}
