package io.kvrouter.route;

import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.TieredIndex;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * The routing settings that {@code serve}, {@code gateway} and {@code simulate} share: the cost's
 * weights, the busy limits, request expiry, the index's bounds and the mode. One value, declared
 * once: {@link KvRouter.Builder#settings} takes it, {@code KvRouterServer.Config} holds it, the
 * simulator's config holds it, and the command line's routing options build it.
 *
 * <pre>
 * Implementation notes
 *
 * An immutable record; the compact constructor validates every component, so a value that exists
 * is a valid one. "Never" and "no bound" are encoded as -1 (busyPrefillTokens) and 0
 * (busyBlockFraction, maxBlocks, maxTierBlocks), the encoding the flags have always used, so
 * that describe() prints what a user typed. Built once at start-up; read by any thread.
 * </pre>
 *
 * @param overlapWeight weight of prefill work in the default cost (DESIGN.md §6); 0 ignores cached
 *     prefixes
 * @param pressureWeight weight of the eviction-pressure term (docs/routing.md); 0 gives DESIGN.md
 *     §6's cost exactly
 * @param temperature softmax temperature of the default selector; 0 takes the cheapest
 * @param seed seed of the default selector's tie-breaks and sampling
 * @param busyPrefillTokens a rank with more prefill tokens in flight is busy; -1: never
 * @param busyBlockFraction a rank whose active blocks exceed this fraction of its KV capacity is
 *     busy; 0: never
 * @param requestExpiry how long a request may stay in flight without being freed
 * @param approximate predict caches from the router's own decisions (engines without KV events)
 * @param maxBlocks the index holds at most this many (rank, block) pairs, least recently used
 *     dropped past it; 0: no bound
 * @param maxTierBlocks each rank holds at most this many blocks on each tier beyond the device; 0:
 *     no bound
 * @param tierWeights what a block on each slower tier saves of a recompute
 * @param busyRequests a rank with this many requests in flight is busy; 0: never (the gateway's
 *     admission queues requests while every rank of their model is busy: docs/gateway.md)
 */
public record RoutingSettings(
    double overlapWeight,
    double pressureWeight,
    double temperature,
    long seed,
    long busyPrefillTokens,
    double busyBlockFraction,
    Duration requestExpiry,
    boolean approximate,
    long maxBlocks,
    int maxTierBlocks,
    TierWeights tierWeights,
    int busyRequests) {

  /** The default of {@link #requestExpiry()}, 300 s. */
  public static final Duration DEFAULT_REQUEST_EXPIRY = Duration.ofSeconds(300);

  /** Every setting at its default. */
  public static final RoutingSettings DEFAULTS =
      new RoutingSettings(
          1.0,
          KvRouter.DEFAULT_PRESSURE_WEIGHT,
          0.0,
          0L,
          -1,
          0.0,
          DEFAULT_REQUEST_EXPIRY,
          false,
          0,
          0,
          TierWeights.DEFAULTS,
          0);

  /** Validates every component (the messages name the setting as the API does). */
  public RoutingSettings {
    KvRouter.requireWeight("overlapWeight", overlapWeight);
    KvRouter.requireWeight("pressureWeight", pressureWeight);
    KvRouter.requireWeight("temperature", temperature);
    if (busyPrefillTokens < -1) {
      throw new IllegalArgumentException(
          "busyPrefillTokens must be >= 0 (or -1 for never), got " + busyPrefillTokens);
    }
    if (!(busyBlockFraction >= 0) || Double.isInfinite(busyBlockFraction)) {
      throw new IllegalArgumentException(
          "busyBlockFraction must be > 0 (or 0 for never), got " + busyBlockFraction);
    }
    Objects.requireNonNull(requestExpiry, "requestExpiry");
    if (requestExpiry.isNegative() || requestExpiry.isZero()) {
      throw new IllegalArgumentException("requestExpiry must be positive, got " + requestExpiry);
    }
    if (maxBlocks < 0) {
      throw new IllegalArgumentException(
          "maxBlocks must be >= 1 (or 0 for no bound), got " + maxBlocks);
    }
    if (maxTierBlocks < 0) {
      throw new IllegalArgumentException(
          "maxTierBlocks must be >= 1 (or 0 for no bound), got " + maxTierBlocks);
    }
    if (tierWeights == null) tierWeights = TierWeights.DEFAULTS;
    if (busyRequests < 0) {
      throw new IllegalArgumentException(
          "busyRequests must be >= 1 (or 0 for never), got " + busyRequests);
    }
  }

  /** A copy with {@link #overlapWeight()} replaced. */
  public RoutingSettings withOverlapWeight(double v) {
    return new RoutingSettings(
        v,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #pressureWeight()} replaced. */
  public RoutingSettings withPressureWeight(double v) {
    return new RoutingSettings(
        overlapWeight,
        v,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #temperature()} replaced. */
  public RoutingSettings withTemperature(double v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        v,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #seed()} replaced. */
  public RoutingSettings withSeed(long v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        v,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #busyPrefillTokens()} replaced (-1: never busy by tokens). */
  public RoutingSettings withBusyPrefillTokens(long v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        v,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #busyBlockFraction()} replaced (0: never busy by blocks). */
  public RoutingSettings withBusyBlockFraction(double v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        v,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #requestExpiry()} replaced. */
  public RoutingSettings withRequestExpiry(Duration v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        v,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #approximate()} replaced. */
  public RoutingSettings withApproximate(boolean v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        v,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #maxBlocks()} replaced (0: no bound). */
  public RoutingSettings withMaxBlocks(long v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        v,
        maxTierBlocks,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #maxTierBlocks()} replaced (0: no bound). */
  public RoutingSettings withMaxTierBlocks(int v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        v,
        tierWeights,
        busyRequests);
  }

  /** A copy with {@link #tierWeights()} replaced. */
  public RoutingSettings withTierWeights(TierWeights v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        v,
        busyRequests);
  }

  /** A copy with {@link #busyRequests()} replaced (0: never busy by requests). */
  public RoutingSettings withBusyRequests(int v) {
    return new RoutingSettings(
        overlapWeight,
        pressureWeight,
        temperature,
        seed,
        busyPrefillTokens,
        busyBlockFraction,
        requestExpiry,
        approximate,
        maxBlocks,
        maxTierBlocks,
        tierWeights,
        v);
  }

  /**
   * A new device index of the router's default kind: the concurrent compressed tree, bounded to
   * {@link #maxBlocks()} pairs when that is set.
   */
  public KvIndex newDeviceIndex() {
    return maxBlocks > 0
        ? KvIndexes.concurrentCompressedTree(maxBlocks)
        : KvIndexes.concurrentCompressedTree();
  }

  /**
   * A router for blocks of {@code blockSize} tokens with these settings: in approximate mode its
   * own prediction index; otherwise a {@link TieredIndex} over {@link #newDeviceIndex()} kinds,
   * each slower tier bounded by {@link #maxTierBlocks()}. {@code selector}, when not null, makes a
   * selector that replaces the weighted cost.
   */
  public KvRouter newRouter(int blockSize, Supplier<WorkerSelector> selector) {
    KvRouter.Builder b = KvRouter.builder(blockSize).settings(this);
    if (!approximate) {
      b.index(TieredIndex.of(this::newDeviceIndex, maxTierBlocks)).tierWeights(tierWeights);
    }
    if (selector != null) b.selector(selector.get());
    return b.build();
  }

  /** The settings by flag name, as the start-up banners print them. */
  public Map<String, String> describe() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("overlap-weight", Double.toString(overlapWeight));
    m.put("pressure-weight", Double.toString(pressureWeight));
    m.put("temperature", Double.toString(temperature));
    m.put("seed", Long.toString(seed));
    m.put(
        "busy-prefill-tokens",
        busyPrefillTokens < 0 ? "(never)" : Long.toString(busyPrefillTokens));
    m.put(
        "busy-block-fraction",
        busyBlockFraction == 0 ? "(never)" : Double.toString(busyBlockFraction));
    m.put("busy-requests", busyRequests == 0 ? "(never)" : Integer.toString(busyRequests));
    m.put("request-expiry-seconds", Long.toString(requestExpiry.toSeconds()));
    return m;
  }
}
