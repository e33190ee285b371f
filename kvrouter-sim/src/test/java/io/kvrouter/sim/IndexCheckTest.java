package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceTokens;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link IndexCheck} passes on a faithfully fed index and catches a broken one. */
class IndexCheckTest {
  private final List<TraceRequest> trace = SyntheticTrace.conversations(4, 3, 1000);

  private static PrefixCache cache(long worker, KvIndex index) {
    return new PrefixCache(new Worker(worker, 0), 64, 64, index::apply);
  }

  private static void admitAll(List<TraceRequest> trace, PrefixCache... caches) {
    long id = 0;
    for (TraceRequest r : trace) {
      PrefixCache c = caches[(int) (id % caches.length)];
      c.admit(id, TraceTokens.tokens(r));
      c.release(id++);
    }
  }

  @Test
  void passesWhenTheIndexMirrorsTheCaches() {
    try (KvIndex index = KvIndexes.concurrentRadixTree()) {
      PrefixCache a = cache(0, index);
      PrefixCache b = cache(1, index);
      admitAll(trace, a, b);
      Verification v = IndexCheck.verify(index, List.of(a, b), trace, 100);
      assertThat(v.problems()).isEmpty();
      assertThat(v.ok()).isTrue();
      assertThat(v.blocks()).isEqualTo(a.cachedBlocks() + b.cachedBlocks()).isPositive();
      assertThat(v.prompts()).isEqualTo(trace.size());
    }
  }

  @Test
  void catchesABlockTheIndexForgot() {
    try (KvIndex index = KvIndexes.concurrentRadixTree()) {
      PrefixCache a = cache(0, index);
      admitAll(trace, a);
      long victim = a.blockHashes()[0];
      index.apply(new RouterEvent(a.worker(), 1_000, CacheEvent.removed(victim)));
      Verification v = IndexCheck.verify(index, List.of(a), trace, 100);
      assertThat(v.ok()).isFalse();
      // block 0 is every prompt's root: without it the index holds nothing reachable
      assertThat(v.problems())
          .anySatisfy(p -> assertThat(p).contains("the index lacks " + a.cachedBlocks()))
          .anySatisfy(p -> assertThat(p).contains("(rank, block) pairs"))
          .anySatisfy(p -> assertThat(p).contains("the index says 0"));
    }
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aBoundedIndexPassesWithDroppedBlocksButNotWithAnExtraOne(boolean compressed) {
    try (KvIndex index =
        compressed ? KvIndexes.concurrentCompressedTree(20) : KvIndexes.concurrentRadixTree(20)) {
      PrefixCache a = cache(0, index);
      PrefixCache b = cache(1, index);
      admitAll(trace, a, b);
      assertThat(index.stats().evictedBlocks()).isPositive();
      assertThat(IndexCheck.verify(index, List.of(a, b), trace, 100, 20).problems()).isEmpty();
      // the exact check sees the dropped blocks
      assertThat(IndexCheck.verify(index, List.of(a, b), trace, 100).ok()).isFalse();
      // a block no cache holds is an over-count either way
      index.apply(
          new RouterEvent(
              a.worker(), 9_999, CacheEvent.storedAtRoot(new long[] {7}, new long[] {7})));
      Verification v = IndexCheck.verify(index, List.of(a, b), trace, 100, 20);
      assertThat(v.ok()).isFalse();
      assertThat(v.problems()).anySatisfy(p -> assertThat(p).contains("holds 1 others"));
    }
  }

  @Test
  void catchesBlocksOfAnUnknownRank() {
    try (KvIndex index = KvIndexes.concurrentRadixTree()) {
      PrefixCache a = cache(0, index);
      admitAll(trace, a);
      index.apply(
          new RouterEvent(
              new Worker(9, 0), 1, CacheEvent.storedAtRoot(new long[] {1}, new long[] {1})));
      Verification v = IndexCheck.verify(index, List.of(a), trace, 0);
      assertThat(v.ok()).isFalse();
      assertThat(v.problems()).anySatisfy(p -> assertThat(p).contains("has no cache"));
    }
  }
}
