package io.kvrouter.transport.kvevents;

import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One decoded {@code KVEventBatch}: what an engine published in one ZMQ message.
 *
 * @param ts the engine's wall-clock time of the batch, in seconds
 * @param dpRank the data-parallel rank that published it ({@code data_parallel_rank}, SGLang's
 *     {@code attn_dp_rank}), or {@code null} when the batch does not say
 * @param events the events in publication order, without the skipped ones
 * @param skipped events of a type this decoder does not know, counted and left out
 */
public record KvEventBatch(
    double ts, @Nullable Integer dpRank, List<EngineEvent> events, int skipped) {
  public KvEventBatch {
    events = List.copyOf(Objects.requireNonNull(events, "events"));
    if (skipped < 0) {
      throw new IllegalArgumentException("skipped must be >= 0, got " + skipped);
    }
  }
}
