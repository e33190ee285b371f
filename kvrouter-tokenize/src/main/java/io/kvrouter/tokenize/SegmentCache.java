package io.kvrouter.tokenize;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;

/**
 * A bounded memo of token ids for the text between added tokens: multi-turn chats resend every
 * earlier turn, and each turn is such a segment, so the second time around it costs a lookup.
 *
 * <pre>
 * Implementation notes
 *
 * A Caffeine cache from segment text to its ids (int[], never handed out: callers copy), bounded
 * by weight: 2 bytes per char of the key plus 4 per id plus 64 of overhead per entry, evicting
 * by Caffeine's W-TinyLFU. Hits and misses are LongAdders counted on every lookup (a miss is a
 * call to the Rust core). Concurrent lookups of the same missing segment may both compute it
 * (Cache.getIfPresent then put, not a per-key lock that would block one caller on the other's
 * native call); both results are identical. Safe from any thread.
 * </pre>
 */
final class SegmentCache {
  private final Cache<String, int[]> cache;
  private final long maxBytes;
  private final LongAdder hits = new LongAdder();
  private final LongAdder misses = new LongAdder();

  SegmentCache(long maxBytes) {
    this.maxBytes = maxBytes;
    this.cache =
        Caffeine.newBuilder()
            .maximumWeight(maxBytes)
            .weigher(
                (String k, int[] v) ->
                    (int) Math.min(Integer.MAX_VALUE, 64L + 2L * k.length() + 4L * v.length))
            .build();
  }

  /** The ids of {@code segment}, computed by {@code encode} on a miss. */
  int[] get(String segment, Function<String, int[]> encode) {
    int[] ids = cache.getIfPresent(segment);
    if (ids != null) {
      hits.increment();
      return ids;
    }
    misses.increment();
    ids = encode.apply(segment);
    cache.put(segment, ids);
    return ids;
  }

  Tokenizer.CacheStats stats() {
    cache.cleanUp();
    long weight = cache.policy().eviction().map(e -> e.weightedSize().orElse(0L)).orElse(0L);
    return new Tokenizer.CacheStats(
        true, hits.sum(), misses.sum(), cache.estimatedSize(), weight, maxBytes);
  }
}
