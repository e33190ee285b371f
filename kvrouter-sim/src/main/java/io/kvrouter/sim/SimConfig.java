package io.kvrouter.sim;

import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.route.RoutingSettings;
import java.util.Objects;

/**
 * What a simulation runs: the fleet, the clock, the event path and the checks.
 *
 * @param workers engines (worker ids 0..workers-1)
 * @param dpSize data-parallel ranks per engine, each with its own cache and queue
 * @param gpuBlocks KV blocks per rank
 * @param blockSize tokens per KV block, for engines and router alike
 * @param speedup trace time is divided by this (2 = twice the request rate)
 * @param timing the engines' timing model
 * @param eventDelayMs simulated delay between an engine's event and its application to the index
 * @param jsonEvents whether events travel as Dynamo JSON (encoded, then decoded) rather than as
 *     objects
 * @param routing the kv policies' routing settings ({@link RoutingSettings}, the same value {@code
 *     serve} and {@code gateway} take): the overlap and pressure weights and the index's bound
 *     (maxBlocks; 0: none) are what the simulator reads
 * @param seed seeds the random policy and KvRouter's tie-breaks
 * @param verifyPrompts at most this many trace prompts are scored against every cache at the end
 * @param loadSamples about this many samples of per-rank load over the arrival period
 * @param removedEvents how the engines publish evictions (--removed-events)
 * @param approxCorrection whether the approx policy's router is told each request's cached tokens
 *     when it finishes ({@code KvRouter.observeCachedTokens}), as the gateway tells it from {@code
 *     usage} (--no-approx-correction turns it off)
 * @param approxKvBlocks the KV blocks per rank the approx policy's router is registered with: -1
 *     for the engines' real count (gpuBlocks), 0 for unknown (learned from the correction), or any
 *     other count, to see the model with a wrong capacity (--approx-kv-blocks)
 * @param hostBlocks each rank's host tier (CPU offloading) in KV blocks, 0 for none (--host-blocks;
 *     docs/SIMULATION.md, "A host tier")
 * @param hostMsPerBlock simulated milliseconds to load one block from the host tier
 *     (--host-ms-per-block)
 * @param kvGroups the KV cache groups of a hybrid model (--kv-groups; docs/SIMULATION.md, "Hybrid
 *     models"), or null for a model of one full-attention group: each rank is then a {@code
 *     HybridKvCache} of {@code gpuBlocks} pages shared by the groups
 */
public record SimConfig(
    int workers,
    int dpSize,
    int gpuBlocks,
    int blockSize,
    double speedup,
    TimingModel timing,
    double eventDelayMs,
    boolean jsonEvents,
    RoutingSettings routing,
    long seed,
    int verifyPrompts,
    int loadSamples,
    RemovedEvents removedEvents,
    boolean approxCorrection,
    long approxKvBlocks,
    int hostBlocks,
    double hostMsPerBlock,
    KvCacheGroups kvGroups) {

  /** The default of {@link #hostMsPerBlock()}, docs/SIMULATION.md, "A host tier". */
  public static final double DEFAULT_HOST_MS_PER_BLOCK = 0.6;

  public SimConfig {
    if (workers < 1) throw new IllegalArgumentException("workers must be >= 1, got " + workers);
    if (dpSize < 1) throw new IllegalArgumentException("dp size must be >= 1, got " + dpSize);
    if (gpuBlocks < 1) {
      throw new IllegalArgumentException("gpu blocks must be >= 1, got " + gpuBlocks);
    }
    if (blockSize < 1) {
      throw new IllegalArgumentException("block size must be >= 1, got " + blockSize);
    }
    if (!(speedup > 0) || Double.isInfinite(speedup)) {
      throw new IllegalArgumentException("speedup must be > 0, got " + speedup);
    }
    Objects.requireNonNull(timing, "timing");
    if (!(eventDelayMs >= 0) || Double.isInfinite(eventDelayMs)) {
      throw new IllegalArgumentException("event delay must be >= 0 ms, got " + eventDelayMs);
    }
    Objects.requireNonNull(routing, "routing");
    Objects.requireNonNull(removedEvents, "removedEvents");
    if (approxKvBlocks < -1) {
      throw new IllegalArgumentException(
          "approx kv blocks must be >= 0 (or -1 for the engines'), got " + approxKvBlocks);
    }
    if (hostBlocks < 0) {
      throw new IllegalArgumentException("host blocks must be >= 0, got " + hostBlocks);
    }
    if (!(hostMsPerBlock >= 0) || Double.isInfinite(hostMsPerBlock)) {
      throw new IllegalArgumentException("host ms per block must be >= 0, got " + hostMsPerBlock);
    }
    if (verifyPrompts < 0) {
      throw new IllegalArgumentException("verify prompts must be >= 0, got " + verifyPrompts);
    }
    if (kvGroups != null && !kvGroups.isHybrid()) kvGroups = null; // one group: not hybrid
    if (kvGroups != null) {
      if (hostBlocks > 0) {
        throw new IllegalArgumentException(
            "--kv-groups with --host-blocks: a host tier of a hybrid model is not simulated");
      }
      if (jsonEvents) {
        throw new IllegalArgumentException(
            "--kv-groups with --events-as-json: Dynamo's JSON events carry no KV cache group");
      }
      if (routing.maxBlocks() > 0) {
        throw new IllegalArgumentException(
            "--kv-groups with --max-blocks: a bounded index of a hybrid model is not simulated");
      }
    }
  }

  /** Whether the ranks model a hybrid model's KV cache groups. */
  public boolean hybrid() {
    return kvGroups != null;
  }

  /** A builder holding the defaults of {@code kvrouter simulate}. */
  public static Builder builder() {
    return new Builder();
  }

  /** The kv policy's overlap weight, from {@link #routing()}. */
  public double overlapWeight() {
    return routing.overlapWeight();
  }

  /** The kv policy's eviction-pressure weight, from {@link #routing()}. */
  public double pressureWeight() {
    return routing.pressureWeight();
  }

  /** The router index's bound on (rank, block) pairs, from {@link #routing()}; 0: none. */
  public long maxBlocks() {
    return routing.maxBlocks();
  }

  /** The KV blocks per rank the approx policy's router registers. */
  public long approxRegisteredBlocks() {
    return approxKvBlocks < 0 ? gpuBlocks : approxKvBlocks;
  }

  /** This config with another {@link #speedup()}. */
  public SimConfig withSpeedup(double v) {
    return new SimConfig(
        workers,
        dpSize,
        gpuBlocks,
        blockSize,
        v,
        timing,
        eventDelayMs,
        jsonEvents,
        routing,
        seed,
        verifyPrompts,
        loadSamples,
        removedEvents,
        approxCorrection,
        approxKvBlocks,
        hostBlocks,
        hostMsPerBlock,
        kvGroups);
  }

  /** Worker ranks in the fleet. */
  public int ranks() {
    return workers * dpSize;
  }

  /** Sets {@link SimConfig} fields one by one; {@link #build()} validates them. */
  public static final class Builder {
    private int workers = 8;
    private int dpSize = 1;
    private int gpuBlocks = 1024;
    private int blockSize = 64;
    private double speedup = 1.0;
    private TimingModel timing = new TimingModel(5, 50, 20, 16);
    private double eventDelayMs;
    private boolean jsonEvents;
    private RoutingSettings routing = RoutingSettings.DEFAULTS;
    private long seed;
    private int verifyPrompts = 300;
    private int loadSamples = 200;
    private RemovedEvents removedEvents = RemovedEvents.PER_BLOCK;
    private boolean approxCorrection = true;
    private long approxKvBlocks = -1;
    private int hostBlocks;
    private double hostMsPerBlock = DEFAULT_HOST_MS_PER_BLOCK;
    private KvCacheGroups kvGroups;

    private Builder() {}

    public Builder workers(int v) {
      workers = v;
      return this;
    }

    public Builder dpSize(int v) {
      dpSize = v;
      return this;
    }

    public Builder gpuBlocks(int v) {
      gpuBlocks = v;
      return this;
    }

    public Builder blockSize(int v) {
      blockSize = v;
      return this;
    }

    public Builder speedup(double v) {
      speedup = v;
      return this;
    }

    public Builder timing(TimingModel v) {
      timing = v;
      return this;
    }

    public Builder eventDelayMs(double v) {
      eventDelayMs = v;
      return this;
    }

    public Builder jsonEvents(boolean v) {
      jsonEvents = v;
      return this;
    }

    public Builder routing(RoutingSettings v) {
      routing = v;
      return this;
    }

    public Builder seed(long v) {
      seed = v;
      return this;
    }

    public Builder verifyPrompts(int v) {
      verifyPrompts = v;
      return this;
    }

    public Builder loadSamples(int v) {
      loadSamples = v;
      return this;
    }

    public Builder removedEvents(RemovedEvents v) {
      removedEvents = v;
      return this;
    }

    public Builder approxCorrection(boolean v) {
      approxCorrection = v;
      return this;
    }

    public Builder approxKvBlocks(long v) {
      approxKvBlocks = v;
      return this;
    }

    public Builder hostBlocks(int v) {
      hostBlocks = v;
      return this;
    }

    public Builder hostMsPerBlock(double v) {
      hostMsPerBlock = v;
      return this;
    }

    /** The KV cache groups of a hybrid model, or null (the default) for one group. */
    public Builder kvGroups(KvCacheGroups v) {
      kvGroups = v;
      return this;
    }

    public SimConfig build() {
      return new SimConfig(
          workers,
          dpSize,
          gpuBlocks,
          blockSize,
          speedup,
          timing,
          eventDelayMs,
          jsonEvents,
          routing,
          seed,
          verifyPrompts,
          loadSamples,
          removedEvents,
          approxCorrection,
          approxKvBlocks,
          hostBlocks,
          hostMsPerBlock,
          kvGroups);
    }
  }
}
