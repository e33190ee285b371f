package io.kvrouter.sim;

import io.kvrouter.event.Worker;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceTokens;
import java.util.List;

/**
 * The hit rate of one cache holding the whole fleet's capacity, serving every request in arrival
 * order: the ceiling a router that splits the requests over separate caches aims for.
 *
 * <p>Each request is admitted (its cached prefix counted, its new blocks stored with LRU eviction)
 * and released at once, so the pool is a pure LRU prefix cache of {@code capacityBlocks} blocks
 * with no blocks pinned by requests in flight.
 *
 * @param capacityBlocks blocks in the pooled cache
 * @param promptTokens prompt tokens of the requests it could hold
 * @param cachedTokens of those, tokens found in the cache
 * @param rejected requests larger than the whole pool
 * @param hits prompt and cached tokens per slice of the arrival span
 */
public record PooledCeiling(
    long capacityBlocks, long promptTokens, long cachedTokens, int rejected, HitSeries hits) {

  /** Tokens served from cache / prompt tokens. */
  public double hitRate() {
    return promptTokens == 0 ? 0 : (double) cachedTokens / promptTokens;
  }

  /** Runs the pool; {@code buckets} slices of the arrival span for the hit rate over time. */
  public static PooledCeiling run(
      List<TraceRequest> trace, int capacityBlocks, int blockSize, int buckets) {
    HitSeries hits =
        new HitSeries(
            trace.get(0).timestampMs(), trace.get(trace.size() - 1).timestampMs(), buckets);
    PrefixCache pool = new PrefixCache(new Worker(0, 0), blockSize, capacityBlocks, e -> {});
    long prompt = 0;
    long cached = 0;
    int rejected = 0;
    long id = 0;
    for (TraceRequest r : trace) {
      PrefixCache.Admission a = pool.admit(id, TraceTokens.tokens(r));
      if (!a.admitted()) {
        rejected++;
        continue;
      }
      pool.release(id++);
      prompt += r.inputLength();
      cached += (long) a.cachedBlocks() * blockSize;
      hits.add(r.timestampMs(), r.inputLength(), (long) a.cachedBlocks() * blockSize);
    }
    return new PooledCeiling(capacityBlocks, prompt, cached, rejected, hits);
  }
}
