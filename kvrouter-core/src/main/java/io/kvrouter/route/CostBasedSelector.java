package io.kvrouter.route;

import java.util.SplittableRandom;

/**
 * The default {@link WorkerSelector}: the cost is a {@link Scorers} composition, by default {@code
 * overlapWeight × prefillBlocks + decodeBlocks + pressureWeight × newBlocks × relativePressure}
 * (DESIGN.md §6 and docs/routing.md's pressure term, the figures all from {@link Candidates});
 * minimum at temperature 0, softmax sampling above.
 *
 * <pre>
 * Implementation notes
 *
 * The router reads each term's contribution afterwards from the decision (PricedCandidates asks
 * Scorers.contribution again, from the candidates' columns): choosing writes the costs alone.
 *
 * State: the parameters and one SplittableRandom (seeded), advanced by tie-breaks with more than
 * one tied candidate and by every sampled decision. Not thread-safe: KvRouter calls it under
 * its lock. Candidates arrive in ascending Worker order, so a decision depends only on the
 * candidates, the seed and the number of earlier random draws, never on hash-map order.
 *
 * Temperature > 0: logit_i = −(cost_i − min) / (max − min) / T lies in [−1/T, 0], so exp never
 * overflows and the cheapest candidate has weight 1; weights are summed, a uniform draw scaled
 * by the sum picks the bucket. Weights go to a reused scratch array: no allocation once it is
 * large enough. Candidates are read column by column (Candidates.prefillBlocks(i) ...), so no
 * Candidate record is built. The tie-break at temperature 0 (Candidates.leastCostFewestCached)
 * finds the least cost first and reads the cached blocks of the candidates at it alone, into a
 * reused array of their indices, from which the seeded draw picks (the same draw, the same
 * candidate as one pass comparing (cost, cached) pairs would).
 * </pre>
 */
final class CostBasedSelector implements WorkerSelector {
  private final Scorers scorers;
  private final double temperature;
  private final long seed;
  private final SplittableRandom random;
  private double[] scratch = new double[16]; // softmax weights, reused
  private int[] tiedScratch = new int[16]; // the tie-break's candidates, reused

  CostBasedSelector(double overlapWeight, double pressureWeight, double temperature, long seed) {
    this(
        Scorers.defaults(
            requireWeight("overlapWeight", overlapWeight),
            requireWeight("pressureWeight", pressureWeight)),
        temperature,
        seed);
  }

  CostBasedSelector(Scorers scorers, double temperature, long seed) {
    this.scorers = scorers;
    this.temperature = requireWeight("temperature", temperature);
    this.seed = seed;
    this.random = new SplittableRandom(seed);
  }

  /**
   * Returns {@code value} when it is a valid weight or temperature (finite and {@code >= 0});
   * throws {@link IllegalArgumentException} naming it otherwise. The one check of the cost's
   * parameters: KvRouter.Builder's setters call it too.
   */
  static double requireWeight(String name, double value) {
    if (!(value >= 0) || Double.isInfinite(value)) {
      throw new IllegalArgumentException(name + " must be finite and >= 0, got " + value);
    }
    return value;
  }

  /** The cost's terms. */
  Scorers scorers() {
    return scorers;
  }

  /**
   * This selector's parameters with {@code scorers} as the cost, its random draws from the seed.
   */
  CostBasedSelector withScorers(Scorers scorers) {
    return new CostBasedSelector(scorers, temperature, seed);
  }

  @Override
  public int select(Candidates candidates, double[] costs) {
    final int n = candidates.size();
    scorers.price(candidates, costs);
    if (n == 1) return 0;
    return temperature == 0 ? cheapest(candidates, costs, n) : sample(costs, n);
  }

  /** The minimum cost; ties: fewer cached blocks, then a seeded uniform choice. */
  private int cheapest(Candidates candidates, double[] costs, int n) {
    int[] tied = tiedScratch;
    if (tied.length < n) tiedScratch = tied = new int[Math.max(n, 2 * tied.length)];
    final int ties = candidates.leastCostFewestCached(costs, tied);
    if (ties == 0) {
      throw new IllegalStateException("no candidate has a least cost (a cost is NaN?)");
    }
    return tied[ties == 1 ? 0 : random.nextInt(ties)];
  }

  /** Softmax over range-normalised negated costs. */
  private int sample(double[] costs, int n) {
    double min = Double.POSITIVE_INFINITY;
    double max = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < n; i++) {
      min = Math.min(min, costs[i]);
      max = Math.max(max, costs[i]);
    }
    if (max == min) return random.nextInt(n);
    double[] weights = scratch;
    if (weights.length < n) scratch = weights = new double[Math.max(n, 2 * weights.length)];
    final double scale = 1.0 / ((max - min) * temperature);
    double sum = 0;
    for (int i = 0; i < n; i++) {
      double p = Math.exp(-(costs[i] - min) * scale);
      weights[i] = p;
      sum += p;
    }
    double u = random.nextDouble() * sum;
    int last = 0;
    for (int i = 0; i < n; i++) {
      double p = weights[i];
      if (p > 0) last = i;
      u -= p;
      if (u < 0) return i;
    }
    return last; // rounding left u >= 0: the last candidate with any weight
  }

  @Override
  public String toString() {
    return "CostBasedSelector[scorers=" + scorers + ", temperature=" + temperature + "]";
  }
}
