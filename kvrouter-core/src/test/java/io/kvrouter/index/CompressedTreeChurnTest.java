package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.TestBudget;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Prefix churn on the compressed tree: a stable live set (workers holding sequences that share
 * prefixes) while chains diverging inside its runs are stored and removed, blocks of the live set
 * are removed (holes) and stored again, for {@code kvrouter.churn.events} events (200,000 in CI;
 * the long run is {@code -Dkvrouter.churn.events=10000000}, docs/BENCHMARKS.md). Splits that are no
 * longer needed must be merged: at every checkpoint, once the churn is undone, the tree has exactly
 * the nodes and no more estimated heap than an index built from the live set alone, and answers the
 * same; between checkpoints the node count stays within a bound set by what is live, not by how
 * many events ran.
 */
class CompressedTreeChurnTest {
  private static final long EVENTS =
      TestBudget.count("kvrouter.churn.events", 200_000L, 2_000_000L);
  private static final int WORKERS = 8;
  private static final int SEQUENCES = 4; // per worker
  private static final int LENGTH = 48;
  private static final int PREFIX = 16;
  private static final int OUTSTANDING = 64;
  private static final long CHECKPOINT = 20_000;

  /** A chain stored by the churn, to be removed again. */
  private record Chain(Worker worker, long[] seqs) {}

  private final long[][] baseLocals = new long[WORKERS * SEQUENCES][];
  private final long[][] baseSeqs = new long[WORKERS * SEQUENCES][];
  private long eventId;

  private static Worker worker(int s) {
    return new Worker(s % WORKERS, 0);
  }

  private void storeBase(KvIndex index) {
    for (int s = 0; s < baseLocals.length; s++) {
      index.apply(
          new RouterEvent(
              worker(s),
              eventId++,
              CacheEvent.storedAtRoot(baseSeqs[s].clone(), baseLocals[s].clone())));
    }
  }

  @Test
  void nodeCountAndFootprintReturnToTheLiveSetsUnderPrefixChurn() {
    final long seed = 20261201L;
    final SplittableRandom rnd = new SplittableRandom(seed);
    final long[][] prefixes = new long[4][PREFIX];
    for (long[] p : prefixes) for (int i = 0; i < PREFIX; i++) p[i] = rnd.nextLong();
    for (int s = 0; s < baseLocals.length; s++) {
      long[] l = new long[LENGTH];
      System.arraycopy(prefixes[s % prefixes.length], 0, l, 0, PREFIX);
      for (int i = PREFIX; i < LENGTH; i++) l[i] = rnd.nextLong();
      baseLocals[s] = l;
      baseSeqs[s] = SequenceHasher.sequenceHashes(l);
    }
    CompressedTreeIndex fresh = (CompressedTreeIndex) KvIndexes.concurrentCompressedTree();
    storeBase(fresh);
    final int liveNodes = fresh.nodeCount();
    final long liveBytes = fresh.footprintBytes();
    // chains live at once, each adding at most a split, a leaf and a hole's two cuts
    final int bound = liveNodes + 4 * OUTSTANDING + 8;

    CompressedTreeIndex index = (CompressedTreeIndex) KvIndexes.concurrentCompressedTree();
    storeBase(index);
    List<Chain> outstanding = new ArrayList<>();
    int maxNodes = 0;
    int checkpoints = 0;
    long splitsStored = 0;
    try {
      for (long e = 0; e < EVENTS; ) {
        int dice = rnd.nextInt(100);
        if (dice < 45 && outstanding.size() < OUTSTANDING) {
          // a chain diverging inside a run of the live set (a split), under a block its worker
          // holds
          int s = rnd.nextInt(baseLocals.length);
          int at = 1 + rnd.nextInt(LENGTH - 1);
          int n = 1 + rnd.nextInt(12);
          long[] l = new long[n];
          for (int i = 0; i < n; i++) l[i] = rnd.nextLong();
          long[] seqs = new long[n];
          long prev = baseSeqs[s][at - 1];
          for (int i = 0; i < n; i++) seqs[i] = prev = SequenceHasher.next(prev, l[i]);
          index.apply(
              new RouterEvent(
                  worker(s), eventId++, CacheEvent.stored(baseSeqs[s][at - 1], seqs, l)));
          outstanding.add(new Chain(worker(s), seqs));
          splitsStored++;
          e++;
        } else if (dice < 85 && !outstanding.isEmpty()) {
          Chain c = outstanding.remove(rnd.nextInt(outstanding.size()));
          e += removeChain(index, c, rnd.nextInt(3));
        } else {
          // a hole in the live set, filled again: remove a block and store it back
          int s = rnd.nextInt(baseLocals.length);
          int at = rnd.nextInt(LENGTH);
          index.apply(new RouterEvent(worker(s), eventId++, CacheEvent.removed(baseSeqs[s][at])));
          long[] one = {baseSeqs[s][at]};
          long[] local = {baseLocals[s][at]};
          index.apply(
              new RouterEvent(
                  worker(s),
                  eventId++,
                  at == 0
                      ? CacheEvent.storedAtRoot(one, local)
                      : CacheEvent.stored(baseSeqs[s][at - 1], one, local)));
          e += 2;
        }
        int nodes = index.nodeCount();
        maxNodes = Math.max(maxNodes, nodes);
        assertThat(nodes).as("nodes after %d events (seed %d)", e, seed).isLessThanOrEqualTo(bound);
        if (e / CHECKPOINT > checkpoints) {
          checkpoints++;
          for (Chain c : outstanding) removeChain(index, c, 0);
          outstanding.clear();
          assertThat(index.nodeCount())
              .as("nodes at checkpoint %d (seed %d)", checkpoints, seed)
              .isEqualTo(liveNodes);
          assertThat(index.footprintBytes())
              .as("estimated bytes at checkpoint %d (seed %d)", checkpoints, seed)
              .isLessThanOrEqualTo(liveBytes + liveBytes / 2);
          for (long[] q : baseLocals) {
            assertThat(index.findMatches(q, false).scores())
                .as("scores at checkpoint %d (seed %d)", checkpoints, seed)
                .isEqualTo(fresh.findMatches(q, false).scores());
          }
          assertThat(index.stats().blocksIndexed()).isEqualTo(fresh.stats().blocksIndexed());
        }
      }
    } catch (AssertionError err) {
      throw new AssertionError("seed " + seed + ": " + err.getMessage(), err);
    }
    System.out.printf(
        "churn: %,d events, %,d diverging chains, %d checkpoints; live set %d nodes, %,d bytes;"
            + " at most %d nodes during churn; now %d nodes, %,d bytes%n",
        EVENTS,
        splitsStored,
        checkpoints,
        liveNodes,
        liveBytes,
        maxNodes,
        index.nodeCount(),
        index.footprintBytes());
    // and once every block is removed, no node is left (each base sequence in one event, in
    // one of the three orders)
    for (Chain c : outstanding) removeChain(index, c, 0);
    for (int s = 0; s < baseSeqs.length; s++) {
      removeChain(index, new Chain(worker(s), baseSeqs[s]), s % 3);
    }
    assertThat(index.stats().blocksIndexed()).isZero();
    assertThat(index.nodeCount()).as("nodes once every block is removed").isZero();
    assertThat(checkpoints).isGreaterThanOrEqualTo((int) (EVENTS / CHECKPOINT));
    assertThat(splitsStored).isGreaterThan(EVENTS / 10);
  }

  /**
   * Removes a chain: 0 one event deepest first, 1 one event per block deepest first, 2 top first.
   */
  private long removeChain(KvIndex index, Chain c, int how) {
    long[] s = c.seqs();
    long[] deepestFirst = new long[s.length];
    for (int i = 0; i < s.length; i++) deepestFirst[i] = s[s.length - 1 - i];
    switch (how) {
      case 0 -> {
        index.apply(new RouterEvent(c.worker(), eventId++, CacheEvent.removed(deepestFirst)));
        return 1;
      }
      case 1 -> {
        for (long h : deepestFirst) {
          index.apply(new RouterEvent(c.worker(), eventId++, CacheEvent.removed(h)));
        }
        return s.length;
      }
      default -> {
        index.apply(
            new RouterEvent(c.worker(), eventId++, CacheEvent.removed(Arrays.copyOf(s, s.length))));
        return 1;
      }
    }
  }
}
