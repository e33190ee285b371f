package io.kvrouter.cli;

import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.Scorer;
import io.kvrouter.route.Scorers;
import io.kvrouter.route.TierWeights;
import io.kvrouter.route.WorkerSelector;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * The routing flags of the live routers, {@code serve} and {@code gateway}: the cost's ({@link
 * CostOptions}), the selector's temperature and seed, the busy limits, request expiry, approximate
 * mode, the tier bounds and weights. Declared once here as a picocli mixin; {@link #settings()}
 * builds the shared {@link RoutingSettings} value.
 */
final class RoutingOptions {
  @Mixin CostOptions cost = new CostOptions();

  @Option(
      names = "--scorer",
      paramLabel = "NAME=WEIGHT",
      description =
          "Routing: the weight of one named term of the cost (docs/routing.md, Scorers): prefill,"
              + " decode, pressure, queue, session (and the gateway's lora with --lora-placement). The cost starts as prefill=--overlap-weight,"
              + " decode=1, pressure=--pressure-weight; each --scorer sets one term's weight (0"
              + " drops it) or adds a term. Repeatable; in a --config file: scorer=prefill=2"
              + " queue=0.5.")
  List<String> scorers = new ArrayList<>();

  @Option(
      names = "--temperature",
      paramLabel = "T",
      description =
          "Routing: softmax temperature, 0 takes the cheapest (default: ${DEFAULT-VALUE}).")
  double temperature = 0;

  @Option(
      names = "--seed",
      paramLabel = "N",
      description = "Routing: seed of tie-breaks and sampling (default: ${DEFAULT-VALUE}).")
  long seed = 0;

  @Option(
      names = "--busy-prefill-tokens",
      paramLabel = "N",
      description =
          "Routing: a rank with more prefill tokens in flight is busy; when every rank is busy the"
              + " gateway queues the request, serve refuses it with 503 (default: never).")
  long busyPrefillTokens = -1;

  @Option(
      names = "--busy-requests",
      paramLabel = "N",
      description =
          "Routing: a rank with N requests in flight is busy; when every rank of a model is busy"
              + " the gateway queues the request (--max-queue-depth, --max-queue-time), serve"
              + " refuses it with 503 (default: never).")
  int busyRequests = 0;

  @Option(
      names = "--busy-block-fraction",
      paramLabel = "F",
      description =
          "Routing: a rank with more active blocks than this fraction of its capacity_blocks is busy"
              + " (default: never).")
  double busyBlockFraction = 0;

  @Option(
      names = "--request-expiry-seconds",
      paramLabel = "S",
      description =
          "Routed requests never freed are dropped after this (default: ${DEFAULT-VALUE}).")
  long requestExpirySeconds = RoutingSettings.DEFAULT_REQUEST_EXPIRY.toSeconds();

  @Option(
      names = "--approximate",
      description =
          "Track every engine's KV cache by predictions (approximate mode: the router's own"
              + " decisions, corrected by the cached tokens each answer reports) instead of KV"
              + " events; a registration with a ZMQ endpoint is then refused. Without it, only"
              + " engines registered with a base URL and no event source are predicted"
              + " (docs/routing.md, Mixed fleets).")
  boolean approximate;

  @Option(
      names = "--max-tier-blocks",
      paramLabel = "N",
      description =
          "Keep at most N blocks per worker rank on each tier beyond the device (host, disk,"
              + " external), dropping past it the least recently stored leaves of its chains, so"
              + " what is left of a chain still scores (counted in"
              + " kvrouter_tier_evicted_blocks_total). LMCache publishes no removals: without a"
              + " bound its copies stay indexed (default: no bound).")
  Integer maxTierBlocks;

  @Option(
      names = "--host-tier-weight",
      paramLabel = "W",
      description =
          "Routing: what a block cached in a worker's host memory (CPU offloading) saves of a"
              + " recompute, 0..1; its prefill costs 1 - W (default: ${DEFAULT-VALUE}, Dynamo's"
              + " host_cache_hit_weight).")
  double hostTierWeight = TierWeights.DEFAULTS.host();

  @Option(
      names = "--disk-tier-weight",
      paramLabel = "W",
      description =
          "Routing: the same for a block on a worker's disk (default: ${DEFAULT-VALUE}, Dynamo's"
              + " disk_cache_hit_weight).")
  double diskTierWeight = TierWeights.DEFAULTS.disk();

  @Option(
      names = "--external-tier-weight",
      paramLabel = "W",
      description =
          "Routing: the same for a block in an external store (default: ${DEFAULT-VALUE}).")
  double externalTierWeight = TierWeights.DEFAULTS.external();

  /**
   * The cost's terms: the default composition of {@code --overlap-weight} and {@code
   * --pressure-weight}, with each {@code --scorer NAME=WEIGHT} applied in order.
   *
   * @throws IllegalArgumentException naming the bad {@code --scorer} and why
   */
  Scorers scorers() {
    return scorers(Map.of());
  }

  /**
   * {@link #scorers()}, where a {@code --scorer NAME=W} of a name in {@code own} sets that term
   * (the command's own, e.g. the gateway's {@code lora}) at W.
   */
  Scorers scorers(Map<String, Scorer> own) {
    KvRouter.requireWeight("--overlap-weight", cost.overlapWeight);
    KvRouter.requireWeight("--pressure-weight", cost.pressureWeight);
    Scorers.Builder b = Scorers.defaults(cost.overlapWeight, cost.pressureWeight).toBuilder();
    Set<String> seen = new HashSet<>();
    for (String s : scorers) {
      int eq = s.indexOf('=');
      if (eq < 1 || eq == s.length() - 1) {
        throw new IllegalArgumentException(
            "--scorer '" + s + "': expected NAME=WEIGHT, e.g. --scorer queue=0.5");
      }
      String name = s.substring(0, eq).trim();
      String w = s.substring(eq + 1).trim();
      if (!seen.add(name)) {
        throw new IllegalArgumentException("--scorer " + name + " is given twice");
      }
      double weight;
      try {
        weight = Double.parseDouble(w);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "--scorer " + name + "=" + w + ": the weight is not a number");
      }
      try {
        Scorer o = own.get(name);
        if (o != null) {
          b.add(name, weight, o);
        } else {
          b.add(name, weight);
        }
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--scorer " + s + ": " + e.getMessage(), e);
      }
    }
    return b.build();
  }

  /** The selector of each model's router: {@code scorers} with --temperature and --seed. */
  Supplier<WorkerSelector> selector(Scorers scorers) {
    final double t = KvRouter.requireWeight("--temperature", temperature);
    final long s = seed;
    return () -> WorkerSelector.scored(scorers, t, s);
  }

  /** The settings these flags give. */
  RoutingSettings settings() {
    if (maxTierBlocks != null && maxTierBlocks < 1) {
      throw new IllegalArgumentException("--max-tier-blocks must be >= 1, got " + maxTierBlocks);
    }
    return cost.applyTo(RoutingSettings.DEFAULTS)
        .withTemperature(temperature)
        .withSeed(seed)
        .withBusyPrefillTokens(busyPrefillTokens)
        .withBusyBlockFraction(busyBlockFraction)
        .withBusyRequests(busyRequests)
        .withRequestExpiry(Duration.ofSeconds(requestExpirySeconds))
        .withApproximate(approximate)
        .withMaxTierBlocks(maxTierBlocks == null ? 0 : maxTierBlocks)
        .withTierWeights(new TierWeights(hostTierWeight, diskTierWeight, externalTierWeight));
  }
}
