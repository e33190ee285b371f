package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The bound of {@link TieredIndex#of(Supplier, int)} (docs/routing.md, "Blocks beyond the GPU"): a
 * rank keeps at most N blocks per tier beyond the device; past it only leaves of its chains on that
 * tier go, least recently stored first, a parent left childless next, as a removal of that tier
 * would remove them (a device copy still counts). So a drop never cuts a chain: every block kept
 * still scores. A store of a held block makes its chain recent again, and each drop is counted.
 * Over every index kind.
 */
class TieredBoundTest {
  private static final Worker W = new Worker(1, 0);

  /** A chain of {@code n} blocks whose local hashes start at {@code first}. */
  private static long[] local(long first, int n) {
    long[] l = new long[n];
    for (int i = 0; i < n; i++) l[i] = first + i;
    return l;
  }

  /** Two chains joined: the prompt {@code a} then {@code b}. */
  private static long[] concat(long[] a, long[] b) {
    long[] c = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }

  private static RouterEvent stored(long[] local) {
    return new RouterEvent(
        W, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local));
  }

  /** A store of the blocks of prompt {@code local} from {@code from} on, under block from-1. */
  private static RouterEvent storedUnder(long[] local, int from) {
    long[] seq = SequenceHasher.sequenceHashes(local);
    return new RouterEvent(
        W,
        0,
        CacheEvent.stored(
            seq[from - 1],
            Arrays.copyOfRange(seq, from, seq.length),
            Arrays.copyOfRange(local, from, local.length)));
  }

  private static RouterEvent removed(long[] local, int i) {
    return new RouterEvent(W, 0, CacheEvent.removed(SequenceHasher.sequenceHashes(local)[i]));
  }

  /** P_1 (device) and P_2 (device ∪ host) of W for {@code local}. */
  private static String scores(TieredIndex index, long[] local) {
    index.flush();
    TieredScores s = index.findTiered(local);
    return s.blocks(W, Tier.DEVICE) + "/" + s.blocks(W, Tier.HOST);
  }

  private static int held(TieredIndex index, long[] local) {
    index.flush();
    return index.findTiered(local).blocks(W, Tier.HOST);
  }

  @Test
  void aChainLongerThanTheBoundKeepsItsFirstBlocks() {
    long[] a = local(100, 7);
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      String k = kind.get().toString();
      try (TieredIndex index = TieredIndex.of(kind, 4)) {
        index.apply(Tier.HOST, stored(a));
        assertThat(index.blockCount(W, Tier.HOST)).as(k).isEqualTo(4);
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(3);
        assertThat(scores(index, a)).as(k + ": the first 4 blocks stay").isEqualTo("0/4");
        // stored again: the tail comes back and goes again, the prefix stays
        index.apply(Tier.HOST, stored(a));
        assertThat(scores(index, a)).as(k).isEqualTo("0/4");
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(6);
      }
    }
  }

  @Test
  void theLeastRecentlyStoredLeavesGoAndACopyOnTheDeviceStillCounts() {
    long[] a = local(100, 3);
    long[] b = local(200, 3);
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      String k = kind.get().toString();
      try (TieredIndex index = TieredIndex.of(kind, 4)) {
        index.apply(stored(new long[] {a[0]})); // a's first block is also on the device
        index.apply(Tier.HOST, stored(a));
        index.apply(Tier.HOST, stored(b)); // 6 host blocks: a[2], then a[1] go
        assertThat(index.blockCount(W, Tier.HOST)).as(k).isEqualTo(4);
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(2);
        assertThat(scores(index, a)).as(k).isEqualTo("1/1");
        assertThat(scores(index, b)).as(k).isEqualTo("0/3");

        // a stored again: a[1] and a[2] come back; b's tail goes, b[2] then b[1]
        index.apply(Tier.HOST, stored(a));
        assertThat(index.blockCount(W, Tier.HOST)).as(k).isEqualTo(4);
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(4);
        assertThat(scores(index, a)).as(k).isEqualTo("1/3");
        assertThat(scores(index, b)).as(k).isEqualTo("0/1");
        assertThat(index.evictedBlocks(Tier.DEVICE)).isZero();
        assertThat(index.evictedBlocks(Tier.DISK)).isZero();

        // a removal of b[0] (a leaf now) frees room: the next store within the bound drops nothing
        index.apply(Tier.HOST, removed(b, 0));
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
  void aSharedPrefixStoredOnceOutlivesTheColdChainsUnderIt() {
    long[] prefix = local(100, 2); // LMCache: stored once, the oldest store of all
    long[] a = concat(prefix, local(200, 2));
    long[] b = concat(prefix, local(300, 2));
    long[] c = concat(prefix, local(400, 2));
    long[] d = concat(prefix, local(500, 2));
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      String k = kind.get().toString();
      try (TieredIndex index = TieredIndex.of(kind, 6)) {
        index.apply(Tier.HOST, stored(prefix));
        index.apply(Tier.HOST, storedUnder(a, 2));
        index.apply(Tier.HOST, storedUnder(b, 2));
        index.apply(Tier.HOST, storedUnder(c, 2)); // 8 blocks: a's tail goes, the prefix stays
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(2);
        assertThat(scores(index, a)).as(k).isEqualTo("0/2");
        assertThat(scores(index, b)).as(k).isEqualTo("0/4");
        assertThat(scores(index, c)).as(k).isEqualTo("0/4");

        index.apply(Tier.HOST, stored(b)); // b used again (the whole prompt stored)
        index.apply(Tier.HOST, storedUnder(d, 2)); // c is now the coldest chain
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(4);
        assertThat(scores(index, b)).as(k).isEqualTo("0/4");
        assertThat(scores(index, c)).as(k).isEqualTo("0/2");
        assertThat(scores(index, d)).as(k).isEqualTo("0/4");
        assertThat(index.blockCount(W, Tier.HOST)).as(k).isEqualTo(6);
      }
    }
  }

  @Test
  void aBlockOffloadedAfterItsChildrenIsNoLeaf() {
    long[] a = local(100, 3);
    long[] b = local(200, 1);
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      String k = kind.get().toString();
      try (TieredIndex index = TieredIndex.of(kind, 3)) {
        index.apply(stored(new long[] {a[0]})); // a[0] on the device only
        index.apply(Tier.HOST, storedUnder(a, 1)); // a[1], a[2] on the host, under it
        index.apply(Tier.HOST, stored(new long[] {a[0]})); // a[0] offloaded later
        index.apply(Tier.HOST, storedUnder(a, 2)); // a[2] stored again: a[0] the oldest store
        index.apply(removed(a, 0)); // gone from the device: only the host copy of a[0] is left
        assertThat(scores(index, a)).as(k).isEqualTo("0/3");
        index.apply(Tier.HOST, stored(b)); // 4 host blocks: a[2] goes, not a[0] under it
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isEqualTo(1);
        assertThat(scores(index, a)).as(k).isEqualTo("0/2");
        assertThat(scores(index, b)).as(k).isEqualTo("0/1");
      }
    }
  }

  /**
   * Random prompts, many sharing prefixes: after every store the prompt just stored scores min(its
   * length, N) on the host, the rank holds at most N host blocks, and every block it counts scores
   * for some prompt stored (none is cut off behind a dropped block).
   */
  @Test
  void aRecentlyStoredPromptScoresWhatFitsAndEveryKeptBlockScores() {
    final int bound = 8;
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      long seed = new Random().nextLong();
      String k = kind.get() + " seed " + seed;
      Random rnd = new Random(seed);
      List<long[]> prompts = new ArrayList<>();
      long next = 1;
      try (TieredIndex index = TieredIndex.of(kind, bound)) {
        for (int step = 0; step < 60; step++) {
          long[] p;
          int tail = 1 + rnd.nextInt(6);
          if (prompts.isEmpty() || rnd.nextBoolean()) {
            p = local(next, tail);
          } else {
            long[] from = prompts.get(rnd.nextInt(prompts.size()));
            p = concat(Arrays.copyOf(from, 1 + rnd.nextInt(from.length)), local(next, tail));
          }
          next += tail;
          prompts.add(p);
          int shared = p.length - tail;
          // a store under the shared prefix only while the host holds all of it (else refused)
          boolean under = shared > 0 && rnd.nextBoolean() && held(index, p) >= shared;
          index.apply(Tier.HOST, under ? storedUnder(p, shared) : stored(p));
          assertThat(scores(index, p))
              .as(k + " step " + step)
              .isEqualTo("0/" + Math.min(p.length, bound));
          assertThat(index.blockCount(W, Tier.HOST)).as(k).isLessThanOrEqualTo(bound);
          Set<Long> scoring = new HashSet<>();
          for (long[] q : prompts) {
            long[] seq = SequenceHasher.sequenceHashes(q);
            int n = held(index, q);
            for (int i = 0; i < n; i++) scoring.add(seq[i]);
          }
          assertThat(scoring).as(k + " step " + step).hasSize(index.blockCount(W, Tier.HOST));
        }
        assertThat(index.evictedBlocks(Tier.HOST)).as(k).isPositive();
      }
    }
  }

  @Test
  void aReplayOfTheDumpDropsWhatTheIndexWouldDrop() {
    long[][] singles = {local(400, 1), local(500, 1), local(600, 1), local(700, 1)};
    long[] prefix = local(100, 1);
    long[][] chains = {concat(prefix, local(200, 1)), concat(prefix, local(300, 1))};
    long[][] next = {local(800, 1), local(900, 1), local(1000, 1), local(1100, 1)};
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      String k = kind.get().toString();
      try (TieredIndex index = TieredIndex.of(kind, 7);
          TieredIndex copy = TieredIndex.of(kind, 7)) {
        index.apply(Tier.HOST, stored(chains[0]));
        for (long[] c : singles) index.apply(Tier.HOST, stored(c));
        index.apply(Tier.HOST, storedUnder(chains[1], 1));
        index.apply(Tier.HOST, stored(singles[0]));
        index.apply(Tier.HOST, stored(singles[2]));
        // 7 blocks; leaves, oldest first: 200, 500, 700, 300, 400, 600 (100 is under 200, 300)
        copy.addTiers(index.slowestTier());
        for (TieredIndex.Entry e : index.dumpTiered()) copy.apply(e.tier(), e.event());
        assertThat(copy.evictedBlocks(Tier.HOST)).as(k).isZero();
        for (TieredIndex x : new TieredIndex[] {index, copy}) {
          for (long[] n : next) x.apply(Tier.HOST, stored(n)); // drops 200, 500, 700, 300
        }
        for (long[][] set : new long[][][] {singles, chains, next}) {
          for (long[] c : set) {
            assertThat(scores(copy, c)).as(k + " " + c[c.length - 1]).isEqualTo(scores(index, c));
          }
        }
        assertThat(copy.evictedBlocks(Tier.HOST)).as(k).isEqualTo(4);
        assertThat(scores(index, chains[0])).as(k).isEqualTo("0/1");
        assertThat(scores(index, chains[1])).as(k).isEqualTo("0/1");
        assertThat(scores(index, singles[1])).as(k).isEqualTo("0/0");
        assertThat(scores(index, singles[3])).as(k).isEqualTo("0/0");
        assertThat(scores(index, singles[2])).as(k).isEqualTo("0/1");
        // one more: the prefix, childless since 300 went, is next (before 400 and 600)
        for (TieredIndex x : new TieredIndex[] {index, copy})
          x.apply(Tier.HOST, stored(local(1200, 1)));
        assertThat(scores(index, chains[0])).as(k).isEqualTo("0/0");
        assertThat(scores(copy, chains[0])).as(k).isEqualTo("0/0");
        assertThat(scores(copy, singles[0])).as(k).isEqualTo("0/1");
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
