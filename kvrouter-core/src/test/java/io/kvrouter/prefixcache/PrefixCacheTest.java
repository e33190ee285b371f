package io.kvrouter.prefixcache;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Hand-checked admissions, evictions and events of {@link PrefixCache}. */
class PrefixCacheTest {
  private static final Worker W = new Worker(7, 1);

  private final List<RouterEvent> events = new ArrayList<>();

  private PrefixCache cache(int blockSize, int capacity) {
    return new PrefixCache(W, blockSize, capacity, events::add);
  }

  private static long[] seq(BlockHasher h, int... tokens) {
    return SequenceHasher.sequenceHashes(h.localHashes(tokens));
  }

  private static long[] local(BlockHasher h, int... tokens) {
    return h.localHashes(tokens);
  }

  private static long[] slice(long[] a, int from, int to) {
    return Arrays.copyOfRange(a, from, to);
  }

  private CacheEvent onlyEvent() {
    assertThat(events).hasSize(1);
    CacheEvent e = events.get(0).data();
    events.clear();
    return e;
  }

  @Test
  void storedEventsCarryTheParentAndBothHashes() {
    PrefixCache c = cache(2, 8);
    BlockHasher h = BlockHasher.of(2);
    int[] a = {1, 2, 3, 4, 5}; // two full blocks, a trailing partial one
    assertThat(c.admit(1, a)).isEqualTo(new PrefixCache.Admission(true, 0, 2, 0));
    assertThat(onlyEvent())
        .isEqualTo(CacheEvent.storedAtRoot(seq(h, 1, 2, 3, 4), local(h, 1, 2, 3, 4)));
    assertThat(c.lookup(a)).isEqualTo(2);
    assertThat(c.cachedBlocks()).isEqualTo(2);

    int[] b = {1, 2, 3, 4, 6, 7};
    assertThat(c.admit(2, b)).isEqualTo(new PrefixCache.Admission(true, 2, 1, 0));
    long[] seqB = seq(h, b);
    assertThat(onlyEvent())
        .isEqualTo(CacheEvent.stored(seqB[1], slice(seqB, 2, 3), slice(local(h, b), 2, 3)));
    assertThat(c.lookup(b)).isEqualTo(3);

    // a full hit stores nothing and publishes nothing
    assertThat(c.admit(3, new int[] {1, 2, 3, 4}))
        .isEqualTo(new PrefixCache.Admission(true, 2, 0, 0));
    assertThat(events).isEmpty();
    // a prompt shorter than a block caches nothing
    assertThat(c.admit(4, new int[] {9})).isEqualTo(new PrefixCache.Admission(true, 0, 0, 0));
    assertThat(events).isEmpty();
    assertThat(c.activeRequests()).isEqualTo(4);
    c.checkInvariants();
  }

  @Test
  void eventIdsIncreaseAndNameTheWorker() {
    PrefixCache c = cache(1, 4);
    c.admit(1, new int[] {1, 2});
    c.release(1);
    c.admit(2, new int[] {3, 4, 5}); // evicts [1 2]
    c.clear();
    assertThat(events).extracting(RouterEvent::eventId).containsExactly(1L, 2L, 3L, 4L);
    assertThat(events).extracting(RouterEvent::worker).containsOnly(W);
    assertThat(events.get(3).data()).isEqualTo(CacheEvent.cleared());
    assertThat(c.lastEventId()).isEqualTo(4);
  }

  @Test
  void evictionRemovesExactlyTheFreedBlocks() {
    PrefixCache c = cache(2, 5);
    BlockHasher h = BlockHasher.of(2);
    int[] a = {1, 1, 2, 2, 3, 3, 4, 4};
    int[] b = {1, 1, 2, 2, 9, 9};
    c.admit(1, a);
    c.admit(2, b); // shares two blocks with a; the tree splits a's edge
    c.release(1);
    c.release(2);
    events.clear();
    assertThat(c.freeBlocks()).isZero();

    // two new blocks: the oldest leaf is a's lower part [3 3 4 4], which frees two
    int[] d = {5, 5, 6, 6};
    assertThat(c.admit(3, d)).isEqualTo(new PrefixCache.Admission(true, 0, 2, 2));
    assertThat(events).hasSize(2);
    long[] seqA = seq(h, a);
    assertThat(events.get(0).data()).isEqualTo(CacheEvent.removed(seqA[2], seqA[3]));
    assertThat(events.get(1).data()).isEqualTo(CacheEvent.storedAtRoot(seq(h, d), local(h, d)));
    assertThat(c.lookup(a)).isEqualTo(2);
    assertThat(c.lookup(b)).isEqualTo(3);
    events.clear();

    // a whole leaf goes even when one block would do; its parent is kept while b's leaf is there
    assertThat(c.evict(1)).isEqualTo(1);
    assertThat(onlyEvent()).isEqualTo(CacheEvent.removed(seq(h, b)[2]));
    assertThat(c.evict(10)).isEqualTo(2); // the shared part, now a leaf; d is locked
    assertThat(onlyEvent()).isEqualTo(CacheEvent.removed(seqA[0], seqA[1]));
    assertThat(c.evict(10)).isZero();
    assertThat(events).isEmpty();
    assertThat(c.lookup(d)).isEqualTo(2);
    c.checkInvariants();
  }

  @Test
  void perBlockRemovalsNameOneBlockEachDeepestFirst() {
    PrefixCache c =
        PrefixCache.builder(W, 2, 5).listener(events::add).removedEventPerBlock(true).build();
    BlockHasher h = BlockHasher.of(2);
    int[] a = {1, 1, 2, 2, 3, 3, 4, 4};
    int[] b = {1, 1, 2, 2, 9, 9};
    c.admit(1, a);
    c.admit(2, b);
    c.release(1);
    c.release(2);
    events.clear();

    // the same eviction as above: a's lower leaf [3 3 4 4], its deepest block first
    int[] d = {5, 5, 6, 6};
    assertThat(c.admit(3, d)).isEqualTo(new PrefixCache.Admission(true, 0, 2, 2));
    long[] seqA = seq(h, a);
    assertThat(events)
        .extracting(RouterEvent::data)
        .containsExactly(
            CacheEvent.removed(seqA[3]),
            CacheEvent.removed(seqA[2]),
            CacheEvent.storedAtRoot(seq(h, d), local(h, d)));
    assertThat(events).extracting(RouterEvent::eventId).containsExactly(3L, 4L, 5L);
    events.clear();

    // two leaves in one eviction: b's leaf, then the shared part that it leaves a leaf
    assertThat(c.evict(2)).isEqualTo(3);
    assertThat(events)
        .extracting(RouterEvent::data)
        .containsExactly(
            CacheEvent.removed(seq(h, b)[2]),
            CacheEvent.removed(seqA[1]),
            CacheEvent.removed(seqA[0]));
    assertThat(c.lookup(d)).isEqualTo(2);
    c.checkInvariants();
  }

  @Test
  void aRequestThatCannotFitIsRejectedAndChangesNothing() {
    PrefixCache c = cache(1, 4);
    c.admit(1, new int[] {1, 2, 3}); // held
    events.clear();
    // needs 2 new blocks, only 1 is free and nothing is evictable
    PrefixCache.Admission r = c.admit(2, new int[] {1, 2, 7, 8});
    assertThat(r).isEqualTo(new PrefixCache.Admission(false, 2, 0, 0));
    assertThat(events).isEmpty();
    assertThat(c.freeBlocks()).isEqualTo(1);
    assertThat(c.activeRequests()).isEqualTo(1);
    assertThat(c.release(2)).isFalse();
    // longer than the whole pool
    assertThat(c.admit(3, new int[] {4, 5, 6, 7, 8}).admitted()).isFalse();
    // an unlocked block on the request's own path does not count as room
    c.release(1);
    c.admit(4, new int[] {9}); // held, so 3 blocks [1 2 3] unlocked, none free
    events.clear();
    assertThat(c.admit(5, new int[] {1, 2, 3, 4, 5, 6}).admitted()).isFalse();
    assertThat(events).isEmpty();
    assertThat(c.lookup(new int[] {1, 2, 3})).isEqualTo(3);
    // but the part below the match is: [1 2 3] -> keep [1], evict [2 3] (split), store [5 6]
    assertThat(c.admit(6, new int[] {1, 5, 6})).isEqualTo(new PrefixCache.Admission(true, 1, 2, 2));
    assertThat(c.lookup(new int[] {1, 2, 3})).isEqualTo(1);
    c.checkInvariants();
  }

  @Test
  void releaseMakesBlocksEvictableAndClearDropsEverything() {
    PrefixCache c = cache(2, 4);
    c.admit(1, new int[] {1, 1, 2, 2});
    c.admit(2, new int[] {1, 1, 2, 2}); // same prompt, two holders
    assertThat(c.evict(4)).isZero();
    assertThat(c.release(1)).isTrue();
    assertThat(c.release(1)).isFalse();
    assertThat(c.evict(4)).isZero();
    assertThat(c.release(2)).isTrue();
    assertThat(c.evict(4)).isEqualTo(2);
    assertThatThrownBy(
            () -> {
              c.admit(3, new int[] {5, 5});
              c.admit(3, new int[] {6, 6});
            })
        .isInstanceOf(IllegalArgumentException.class);
    events.clear();
    c.clear();
    assertThat(onlyEvent()).isEqualTo(CacheEvent.cleared());
    assertThat(c.cachedBlocks()).isZero();
    assertThat(c.freeBlocks()).isEqualTo(4);
    assertThat(c.activeRequests()).isZero();
    assertThat(c.release(3)).isFalse();
    assertThat(c.lookup(new int[] {5, 5})).isZero();
    c.checkInvariants();
  }

  @Test
  void saltChangesEveryHash() {
    BlockHasher h = BlockHasher.of(2).withLora("adapter").withNamespace("tenant");
    PrefixCache c =
        PrefixCache.builder(W, 2, 8)
            .lora("adapter")
            .namespace("tenant")
            .listener(events::add)
            .build();
    int[] a = {1, 2, 3, 4};
    c.admit(1, a);
    assertThat(onlyEvent()).isEqualTo(CacheEvent.storedAtRoot(seq(h, a), local(h, a)));
    int[] b = {1, 2, 3, 4, 5, 6};
    c.admit(2, b);
    long[] seqB = seq(h, b);
    assertThat(onlyEvent())
        .isEqualTo(CacheEvent.stored(seqB[1], slice(seqB, 2, 3), slice(local(h, b), 2, 3)));
    assertThat(seq(h, a)).doesNotContain(seq(BlockHasher.of(2), a));
  }

  @Test
  void constructorArgumentsAreChecked() {
    assertThatThrownBy(() -> cache(0, 4)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> cache(4, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new PrefixCache(null, 4, 4, e -> {}))
        .isInstanceOf(NullPointerException.class);
  }

  @Test
  void abortEvictsTheBlocksItStoredUnlessAnotherRequestUsesThem() {
    PrefixCache c = cache(2, 8);
    BlockHasher h = BlockHasher.of(2);
    int[] a = {1, 2, 3, 4};
    c.admit(1, a);
    c.release(1); // [1 2][3 4] cached, unlocked
    events.clear();
    int[] b = {1, 2, 3, 4, 5, 6, 7, 8};
    assertThat(c.admit(2, b)).isEqualTo(new PrefixCache.Admission(true, 2, 2, 0));
    events.clear();
    // b's own two blocks go, with one Removed naming exactly them; a's prefix stays cached
    assertThat(c.abort(2, true)).isEqualTo(2);
    long[] seqB = seq(h, b);
    assertThat(onlyEvent()).isEqualTo(CacheEvent.removed(slice(seqB, 2, 4)));
    assertThat(c.lookup(b)).isEqualTo(2);
    assertThat(c.cachedBlocks()).isEqualTo(2);
    assertThat(c.freeBlocks()).isEqualTo(6);
    assertThat(c.activeRequests()).isZero();
    assertThat(c.abort(2, true)).isEqualTo(-1); // once
    c.checkInvariants();

    // a request that stored nothing (a full hit) evicts nothing when told it stored nothing
    c.admit(3, a);
    assertThat(c.abort(3, false)).isZero();
    assertThat(events).isEmpty();
    assertThat(c.lookup(a)).isEqualTo(2);

    // blocks another request holds or extends stay
    c.admit(4, b);
    c.admit(5, b); // locks b's blocks too
    events.clear();
    assertThat(c.abort(4, true)).isZero();
    assertThat(events).isEmpty();
    assertThat(c.lookup(b)).isEqualTo(4);
    c.release(5);
    c.checkInvariants();
    PrefixCache d = cache(2, 8);
    d.admit(1, b); // stores b's four blocks
    d.admit(2, new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}); // one block under them
    d.release(2);
    events.clear();
    assertThat(d.abort(1, true)).isZero();
    assertThat(events).isEmpty();
    assertThat(d.lookup(b)).isEqualTo(4);
    d.checkInvariants();
    c.checkInvariants();
  }
}
