package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The bound of {@link TieredIndex#of(Supplier, int)} (docs/routing.md, "Blocks beyond the GPU"): a
 * rank keeps at most N blocks per tier beyond the device; past it the blocks of that tier stored
 * least recently go, as a removal of that tier would remove them (a device copy still counts), a
 * store of a held block makes it recent again, and each drop is counted. Over every index kind.
 */
class TieredBoundTest {
  private static final Worker W = new Worker(1, 0);

  /** A chain of {@code n} blocks whose local hashes start at {@code first}. */
  private static long[] local(long first, int n) {
    long[] l = new long[n];
    for (int i = 0; i < n; i++) l[i] = first + i;
    return l;
  }

  private static RouterEvent stored(long[] local) {
    return new RouterEvent(
        W, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local));
  }

  /** P_1 (device) and P_2 (device ∪ host) of W for {@code local}. */
  private static String scores(TieredIndex index, long[] local) {
    index.flush();
    TieredScores s = index.findTiered(local);
    return s.blocks(W, Tier.DEVICE) + "/" + s.blocks(W, Tier.HOST);
  }

  @Test
  void theLeastRecentlyStoredBlocksOfATierGoPastTheBound() {
    long[] a = local(100, 3);
    long[] b = local(200, 3);
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      String k = kind.get().toString();
      try (TieredIndex index = TieredIndex.of(kind, 4)) {
        index.apply(stored(new long[] {a[0]})); // a's first block is also on the device
        index.apply(Tier.HOST, stored(a));
        index.apply(Tier.HOST, stored(b)); // 6 host blocks: a[0] and a[1] go
        assertThat(index.blockCount(W, Tier.HOST)).as(k).isEqualTo(4);
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(2);
        assertThat(scores(index, a))
            .as(k + ": a[0] stays on the device, a[1] is gone")
            .isEqualTo("1/1");
        assertThat(scores(index, b)).as(k).isEqualTo("0/3");

        // a stored again: a[2] was held (now recent), a[0] and a[1] come back; b[0], b[1] go
        index.apply(Tier.HOST, stored(a));
        assertThat(index.blockCount(W, Tier.HOST)).as(k).isEqualTo(4);
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(4);
        assertThat(scores(index, a)).as(k).isEqualTo("1/3");
        assertThat(scores(index, b)).as(k).isEqualTo("0/0");
        assertThat(index.evictedBlocks(Tier.DEVICE)).isZero();
        assertThat(index.evictedBlocks(Tier.DISK)).isZero();

        // a removal frees room: nothing more is evicted by the next store within the bound
        index.apply(
            Tier.HOST,
            new RouterEvent(W, 0, CacheEvent.removed(SequenceHasher.sequenceHashes(b)[2])));
        index.apply(Tier.HOST, stored(new long[] {300}));
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(4);
        assertThat(index.blockCount(W, Tier.HOST)).as(k).isEqualTo(4);

        // the dump and a replay into a bounded index agree
        try (TieredIndex copy = TieredIndex.of(kind, 4)) {
          copy.addTiers(index.slowestTier());
          for (TieredIndex.Entry e : index.dumpTiered()) copy.apply(e.tier(), e.event());
          assertThat(scores(copy, a)).as(k).isEqualTo("1/3");
          assertThat(copy.evictedBlocks(Tier.HOST)).isZero();
        }
      }
    }
  }

  @Test
  void aReplayOfTheDumpDropsWhatTheIndexWouldDrop() {
    long[][] singles = {local(400, 1), local(500, 1), local(600, 1), local(700, 1)};
    long[][] next = {local(800, 1), local(900, 1)};
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      String k = kind.get().toString();
      try (TieredIndex index = TieredIndex.of(kind, 4);
          TieredIndex copy = TieredIndex.of(kind, 4)) {
        for (long[] c : singles) index.apply(Tier.HOST, stored(c));
        index.apply(Tier.HOST, stored(singles[0]));
        index.apply(Tier.HOST, stored(singles[2])); // recency, oldest first: 500, 700, 400, 600
        copy.addTiers(index.slowestTier());
        for (TieredIndex.Entry e : index.dumpTiered()) copy.apply(e.tier(), e.event());
        assertThat(copy.evictedBlocks(Tier.HOST)).as(k).isZero();
        for (TieredIndex x : new TieredIndex[] {index, copy}) {
          x.apply(Tier.HOST, stored(next[0])); // drops 500
          x.apply(Tier.HOST, stored(next[1])); // drops 700
        }
        for (long[] c : singles) {
          assertThat(scores(copy, c)).as(k + " " + c[0]).isEqualTo(scores(index, c));
        }
        assertThat(scores(index, singles[1])).as(k).isEqualTo("0/0");
        assertThat(scores(index, singles[3])).as(k).isEqualTo("0/0");
        assertThat(scores(index, singles[2])).as(k).isEqualTo("0/1");
      }
    }
  }

  @Test
  void withoutABoundNothingGoes() {
    try (TieredIndex index = TieredIndex.of(KvIndexes::concurrentRadixTree)) {
      for (int c = 0; c < 10; c++) index.apply(Tier.HOST, stored(local(1000L * c, 8)));
      assertThat(index.blockCount(W, Tier.HOST)).isEqualTo(80);
      assertThat(index.evictedBlocks(Tier.HOST)).isZero();
      assertThat(index.maxTierBlocks()).isZero();
    }
    assertThatThrownBy(() -> TieredIndex.of(KvIndexes::concurrentRadixTree, -1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxTierBlocks");
  }
}
