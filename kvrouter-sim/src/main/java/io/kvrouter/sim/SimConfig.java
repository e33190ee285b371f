package io.kvrouter.sim;

import io.kvrouter.route.KvRouter;
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
 * @param overlapWeight the kv policy's overlap weight (DESIGN.md §6; default 1)
 * @param pressureWeight the kv policy's eviction-pressure weight (docs/routing.md)
 * @param seed seeds the random policy and KvRouter's tie-breaks
 * @param verifyPrompts at most this many trace prompts are scored against every cache at the end
 * @param loadSamples about this many samples of per-rank load over the arrival period
 * @param maxBlocks the router index's bound on (rank, block) pairs (--max-blocks); 0: none
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
 */
record SimConfig(
    int workers,
    int dpSize,
    int gpuBlocks,
    int blockSize,
    double speedup,
    TimingModel timing,
    double eventDelayMs,
    boolean jsonEvents,
    double overlapWeight,
    double pressureWeight,
    long seed,
    int verifyPrompts,
    int loadSamples,
    long maxBlocks,
    RemovedEvents removedEvents,
    boolean approxCorrection,
    long approxKvBlocks,
    int hostBlocks,
    double hostMsPerBlock) {

  /** The default of {@link #hostMsPerBlock()}, docs/SIMULATION.md, "A host tier". */
  static final double DEFAULT_HOST_MS_PER_BLOCK = 0.6;

  /** Without a host tier. */
  SimConfig(
      int workers,
      int dpSize,
      int gpuBlocks,
      int blockSize,
      double speedup,
      TimingModel timing,
      double eventDelayMs,
      boolean jsonEvents,
      double overlapWeight,
      double pressureWeight,
      long seed,
      int verifyPrompts,
      int loadSamples,
      long maxBlocks,
      RemovedEvents removedEvents,
      boolean approxCorrection,
      long approxKvBlocks) {
    this(
        workers,
        dpSize,
        gpuBlocks,
        blockSize,
        speedup,
        timing,
        eventDelayMs,
        jsonEvents,
        overlapWeight,
        pressureWeight,
        seed,
        verifyPrompts,
        loadSamples,
        maxBlocks,
        removedEvents,
        approxCorrection,
        approxKvBlocks,
        0,
        DEFAULT_HOST_MS_PER_BLOCK);
  }

  /** With the approx policy's correction on. */
  SimConfig(
      int workers,
      int dpSize,
      int gpuBlocks,
      int blockSize,
      double speedup,
      TimingModel timing,
      double eventDelayMs,
      boolean jsonEvents,
      double overlapWeight,
      double pressureWeight,
      long seed,
      int verifyPrompts,
      int loadSamples,
      long maxBlocks,
      RemovedEvents removedEvents) {
    this(
        workers,
        dpSize,
        gpuBlocks,
        blockSize,
        speedup,
        timing,
        eventDelayMs,
        jsonEvents,
        overlapWeight,
        pressureWeight,
        seed,
        verifyPrompts,
        loadSamples,
        maxBlocks,
        removedEvents,
        true,
        -1);
  }

  SimConfig {
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
    if (!(eventDelayMs >= 0) || Double.isInfinite(eventDelayMs)) {
      throw new IllegalArgumentException("event delay must be >= 0 ms, got " + eventDelayMs);
    }
    KvRouter.requireWeight("overlap weight", overlapWeight);
    KvRouter.requireWeight("pressure weight", pressureWeight);
    if (maxBlocks < 0) {
      throw new IllegalArgumentException(
          "max blocks must be >= 1 (or 0 for none), got " + maxBlocks);
    }
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
  }

  /** The KV blocks per rank the approx policy's router registers. */
  long approxRegisteredBlocks() {
    return approxKvBlocks < 0 ? gpuBlocks : approxKvBlocks;
  }

  /** Worker ranks in the fleet. */
  int ranks() {
    return workers * dpSize;
  }
}
