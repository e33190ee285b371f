package io.kvrouter.cli;

import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RoutingSettings;
import picocli.CommandLine.Option;

/**
 * The routing cost's flags that every command which routes takes ({@code serve}, {@code gateway},
 * {@code simulate}): the weights of prefill work and eviction pressure, and the index's bound.
 * Declared once here as a picocli mixin; {@link #applyTo} writes them into the shared {@link
 * RoutingSettings} value.
 */
final class CostOptions {
  @Option(
      names = "--overlap-weight",
      paramLabel = "W",
      description = "Routing: weight of prefill work in the cost (default: ${DEFAULT-VALUE}).")
  double overlapWeight = RoutingSettings.DEFAULTS.overlapWeight();

  @Option(
      names = "--pressure-weight",
      paramLabel = "G",
      description =
          "Routing: weight of eviction pressure in the cost, new blocks costing more on a rank"
              + " whose cache evicts faster than the others' (default: ${DEFAULT-VALUE}; 0 gives"
              + " DESIGN.md §6's cost).")
  double pressureWeight = KvRouter.DEFAULT_PRESSURE_WEIGHT;

  @Option(
      names = "--max-blocks",
      paramLabel = "N",
      description =
          "Bound each model's index to N (worker rank, block) pairs, dropping the least recently"
              + " used past it (counted in kvrouter_index_evicted_blocks_total; default: no"
              + " bound).")
  Long maxBlocks;

  /** {@code base} with these flags' values. */
  RoutingSettings applyTo(RoutingSettings base) {
    KvRouter.requireWeight("--overlap-weight", overlapWeight);
    KvRouter.requireWeight("--pressure-weight", pressureWeight);
    if (maxBlocks != null && maxBlocks < 1) {
      throw new IllegalArgumentException("--max-blocks must be >= 1, got " + maxBlocks);
    }
    return base.withOverlapWeight(overlapWeight)
        .withPressureWeight(pressureWeight)
        .withMaxBlocks(maxBlocks == null ? 0 : maxBlocks);
  }
}
