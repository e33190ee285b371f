package io.kvrouter.transport.zmq;

import io.kvrouter.transport.kvevents.ClearScope;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One engine publisher as the router registers it: whose events they are, how to recognise and read
 * them, and where to ask for missed ones.
 *
 * @param workerId the worker every event of this publisher is attributed to
 * @param topic the first frame of its messages (vLLM's {@code topic}; {@code ""} by default); in
 *     bind mode it tells the publishers on one socket apart; in connect mode {@code ""} takes
 *     whatever topic the engine uses
 * @param blockSize the engine's tokens per block; must be a multiple of the router's
 * @param replayEndpoint the engine's ROUTER replay socket (vLLM's {@code replay_endpoint}, seen
 *     from the router, e.g. {@code tcp://10.0.0.5:5558}), or {@code null} when it has none
 * @param defaultDpRank the rank of batches that do not name one
 * @param clearScope the tiers the engine's {@code AllBlocksCleared} empties: {@link
 *     ClearScope#DEVICE} for vLLM (the default), {@link ClearScope#ALL_TIERS} for SGLang HiCache
 */
public record EngineSpec(
    long workerId,
    String topic,
    int blockSize,
    @Nullable String replayEndpoint,
    int defaultDpRank,
    ClearScope clearScope) {
  public EngineSpec {
    Objects.requireNonNull(topic, "topic (use \"\" for none)");
    Objects.requireNonNull(clearScope, "clearScope");
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
    }
    if (replayEndpoint != null && replayEndpoint.isBlank()) {
      throw new IllegalArgumentException("replayEndpoint must be null or an endpoint, got blank");
    }
    if (defaultDpRank < 0) {
      throw new IllegalArgumentException("defaultDpRank must be >= 0, got " + defaultDpRank);
    }
  }

  /** An engine whose {@code AllBlocksCleared} empties the device tier only. */
  public EngineSpec(
      long workerId,
      String topic,
      int blockSize,
      @Nullable String replayEndpoint,
      int defaultDpRank) {
    this(workerId, topic, blockSize, replayEndpoint, defaultDpRank, ClearScope.DEVICE);
  }

  /** Worker {@code workerId}, topic {@code ""}, no replay endpoint, rank 0. */
  public static EngineSpec of(long workerId, int blockSize) {
    return new EngineSpec(workerId, "", blockSize, null, 0);
  }

  /** The same engine with another topic. */
  public EngineSpec withTopic(String topic) {
    return new EngineSpec(workerId, topic, blockSize, replayEndpoint, defaultDpRank, clearScope);
  }

  /** The same engine with a replay endpoint ({@code null}: none). */
  public EngineSpec withReplay(@Nullable String replayEndpoint) {
    return new EngineSpec(workerId, topic, blockSize, replayEndpoint, defaultDpRank, clearScope);
  }

  /** The same engine with another default rank. */
  public EngineSpec withDefaultDpRank(int defaultDpRank) {
    return new EngineSpec(workerId, topic, blockSize, replayEndpoint, defaultDpRank, clearScope);
  }

  /** The same engine with another clear scope. */
  public EngineSpec withClearScope(ClearScope clearScope) {
    return new EngineSpec(workerId, topic, blockSize, replayEndpoint, defaultDpRank, clearScope);
  }
}
