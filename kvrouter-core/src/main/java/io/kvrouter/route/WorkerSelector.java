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

  /**
   * {@code selector} with term {@code name} of its cost bound to {@code scorer}: at the weight the
   * composition gives {@code name} when it has that term (a {@code --scorer name=W}), else added at
   * {@code weight}. How a term that needs state of its own, such as the LoRA placement term ({@link
   * LoraResidency#scorer()}), joins a cost of named terms. The result's random draws start again
   * from the selector's seed.
   *
   * @throws IllegalArgumentException when {@code selector} is not a cost of named terms ({@link
   *     #scored}, {@link #costBased}), or on a bad name or weight
   */
  static WorkerSelector withTerm(
      WorkerSelector selector, String name, double weight, Scorer scorer) {
    if (!(selector instanceof CostBasedSelector c)) {
      throw new IllegalArgumentException(
          "the term '" + name + "' needs a cost of named terms; the selector is " + selector);
    }
    Scorers s = c.scorers();
    boolean given = s.names().contains(name);
    return c.withScorers(s.toBuilder().add(name, given ? s.weight(name) : weight, scorer).build());
  }
}
