package io.kvrouter.route;

import java.util.Objects;

/**
 * Turns the candidates of one request into costs and picks one: the policy half of routing.
 *
 * <p>{@link KvRouter} calls {@code select} under its lock, one call at a time, so an implementation
 * need not be thread-safe when it is used by a single router. The default is {@link #costBased};
 * plug another through {@link KvRouter.Builder#selector}.
 */
@FunctionalInterface
public interface WorkerSelector {

  /**
   * Writes the cost of {@code candidates.get(i)} to {@code costs[i]} (lower is better; reported in
   * the decision) and returns the index of the chosen candidate.
   *
   * @param candidates eligible (not busy) candidates, at least one, in ascending worker order, with
   *     their DESIGN.md §6 load terms and their eviction-pressure figures
   * @param costs as long as {@code candidates}; to fill
   */
  int select(Candidates candidates, double[] costs);

  /**
   * DESIGN.md §6: cost {@code overlapWeight × prefillBlocks + decodeBlocks}. At temperature 0 the
   * cheapest candidate wins; ties go to fewer cached blocks, then to a choice drawn from a random
   * generator seeded with {@code seed}. Above 0 the choice is sampled with probability proportional
   * to {@code exp(−(cost − min) / (max − min) / temperature)} (uniform when all costs are equal).
   * Not thread-safe (see the class comment).
   *
   * @param overlapWeight weight of prefill work; 0 ignores cached prefixes (pure load balance)
   * @param temperature 0 for the minimum, above for softmax sampling
   * @param seed seeds tie-breaks and sampling
   * @throws IllegalArgumentException when a weight is negative, infinite or NaN
   */
  static WorkerSelector costBased(double overlapWeight, double temperature, long seed) {
    return new CostBasedSelector(overlapWeight, 0.0, temperature, seed);
  }

  /**
   * {@link #costBased(double, double, long)} plus the eviction-pressure term {@code pressureWeight
   * × newBlocks × relativePressure} of each candidate (docs/routing.md): new blocks cost more on a
   * worker whose cache evicts faster than the others', since storing them there evicts more
   * recently used blocks. The router's default selector.
   *
   * @param pressureWeight weight of the pressure term; 0 gives DESIGN.md §6's cost exactly
   * @throws IllegalArgumentException when a weight is negative, infinite or NaN
   */
  static WorkerSelector costBased(
      double overlapWeight, double pressureWeight, double temperature, long seed) {
    return new CostBasedSelector(overlapWeight, pressureWeight, temperature, seed);
  }

  /**
   * A cost of named terms ({@link Scorers}, docs/routing.md "Scorers") with the default selector's
   * choice: the cheapest at temperature 0 (ties: fewer cached blocks, then a seeded draw), softmax
   * sampling above. {@code scored(Scorers.defaults(w, g), t, seed)} chooses exactly as {@link
   * #costBased(double, double, double, long) costBased(w, g, t, seed)} does. Each term's
   * contribution is reported in the router's decisions ({@link RouteDecision.Routed#scores}).
   *
   * @throws IllegalArgumentException when the temperature is negative, infinite or NaN
   */
  static WorkerSelector scored(Scorers scorers, double temperature, long seed) {
    return new CostBasedSelector(Objects.requireNonNull(scorers, "scorers"), temperature, seed);
  }
}
