package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.route.TierWeights;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * {@link TieredIndex} over every index kind against a naive reference: per (worker rank, sequence
 * hash) the set of tiers holding the block. Streams store chains on each tier (a chain starts at
 * the root or under a block the same tier holds), remove random blocks of each tier (holes on every
 * tier), clear one tier of a rank, clear a rank on every tier, forget workers, and send stores
 * under unknown parents (refused everywhere). After each step, for every rank and query:
 *
 * <ul>
 *   <li>{@code P_k} equals the reference's: the longest prefix whose every block is on one of the
 *       first k tiers (so the device score and the tiered overlap, {@code P_4}, are exact);
 *   <li>the weighted blocks never exceed the reference's best-tier weighting of that prefix (a hole
 *       never over-scores) and are never below Dynamo's staircase (a device run, then a host run,
 *       then disk, then external);
 *   <li>{@link TieredIndex#dumpTiered()} replayed into a fresh tiered index answers alike.
 * </ul>
 */
class TieredModelTest {
  private static final int STEPS = 300;
  private static final Worker[] WORKERS = {
    new Worker(1, 0), new Worker(1, 1), new Worker(2, 0),
  };
  private static final TierWeights W = TierWeights.DEFAULTS;

  /** (worker, seq hash) → tier bit set; the reference. */
  private final Map<Worker, Map<Long, Integer>> tiers = new HashMap<>();

  @Test
  void everyKindMatchesTheReference() {
    List<Supplier<KvIndex>> kinds = IndexKinds.suppliers();
    for (int k = 0; k < kinds.size(); k++) {
      long seed = 0x7E1E5L * 31 + k;
      run(kinds.get(k), seed, true);
    }
  }

  @Test
  void lazyCreationMatchesWhenTheFirstOffloadComesFirst() {
    // lazy levels are exact when no device hole predates the first non-device event: the stream
    // below starts with a host store
    run(KvIndexes::concurrentRadixTree, 0xACE1L, false);
  }

  private void run(Supplier<KvIndex> kind, long seed, boolean eager) {
    tiers.clear();
    Random rnd = new Random(seed);
    long[][] local = documents(rnd);
    long[][] seq = new long[local.length][];
    for (int d = 0; d < local.length; d++) seq[d] = SequenceHasher.sequenceHashes(local[d]);
    TieredIndex index = eager ? TieredIndex.withTiers(kind, Tier.EXTERNAL) : TieredIndex.of(kind);
    String ctx = "seed " + seed + " kind " + kind.get() + (eager ? " eager" : " lazy");
    long eventId = 0;
    try {
      // a host store first: activation then happens on an empty index
      storeAt(index, WORKERS[0], Tier.HOST, seq[0], local[0], 0, 3, eventId++);
      for (int step = 0; step < STEPS; step++) {
        Worker w = WORKERS[rnd.nextInt(WORKERS.length)];
        Tier t = Tier.of(rnd.nextInt(4));
        int d = rnd.nextInt(local.length);
        int op = rnd.nextInt(100);
        String what;
        if (op < 50) {
          int len = seq[d].length;
          int a = rnd.nextInt(len);
          while (a > 0 && !holds(w, seq[d][a - 1], t)) a--;
          int b = a + 1 + rnd.nextInt(len - a);
          storeAt(index, w, t, seq[d], local[d], a, b, eventId++);
          what = "store " + w + " " + t + " doc " + d + " [" + a + "," + b + ")";
        } else if (op < 80) {
          int n = 1 + rnd.nextInt(3);
          long[] h = new long[n];
          for (int i = 0; i < n; i++) {
            h[i] = rnd.nextInt(8) == 0 ? rnd.nextLong() : seq[d][rnd.nextInt(seq[d].length)];
          }
          index.apply(t, new RouterEvent(w, eventId++, CacheEvent.removed(h)));
          Map<Long, Integer> mine = tiers.get(w);
          if (mine != null) {
            for (long x : h) {
              Integer m = mine.get(x);
              if (m != null) put(mine, x, m & ~(1 << t.ordinal()));
            }
          }
          what = "remove " + w + " " + t + " " + Arrays.toString(h);
        } else if (op < 88) {
          index.apply(t, new RouterEvent(w, eventId++, CacheEvent.cleared()));
          Map<Long, Integer> mine = tiers.get(w);
          if (mine != null) {
            for (Long x : new ArrayList<>(mine.keySet())) {
              put(mine, x, mine.get(x) & ~(1 << t.ordinal()));
            }
          }
          what = "clear " + w + " " + t;
        } else if (op < 92) {
          index.apply(new RouterEvent(w, eventId++, CacheEvent.cleared()));
          tiers.remove(w);
          what = "clear " + w + " on every tier";
        } else if (op < 94) {
          index.removeWorker(w.workerId());
          tiers.keySet().removeIf(x -> x.workerId() == w.workerId());
          what = "removeWorker " + w.workerId();
        } else {
          // a store under a parent nobody holds: refused on every level
          long parent = rnd.nextLong();
          index.apply(
              t,
              new RouterEvent(
                  w,
                  eventId++,
                  CacheEvent.stored(parent, new long[] {rnd.nextLong()}, new long[] {7})));
          what = "orphan store " + w + " " + t;
        }
        index.flush();
        check(index, local, seq, ctx + " step " + step + " after " + what);
        if (step % 60 == 59) checkReplay(index, kind, local, ctx + " step " + step);
      }
    } finally {
      index.close();
    }
  }

  private void storeAt(
      TieredIndex index, Worker w, Tier t, long[] seq, long[] local, int a, int b, long eventId) {
    long[] s = Arrays.copyOfRange(seq, a, b);
    long[] l = Arrays.copyOfRange(local, a, b);
    CacheEvent e = a == 0 ? CacheEvent.storedAtRoot(s, l) : CacheEvent.stored(seq[a - 1], s, l);
    index.apply(t, new RouterEvent(w, eventId, e));
    Map<Long, Integer> mine = tiers.computeIfAbsent(w, x -> new HashMap<>());
    for (long h : s) put(mine, h, mine.getOrDefault(h, 0) | 1 << t.ordinal());
  }

  private static void put(Map<Long, Integer> m, long h, int bits) {
    if (bits == 0) m.remove(h);
    else m.put(h, bits);
  }

  private boolean holds(Worker w, long h, Tier t) {
    Map<Long, Integer> mine = tiers.get(w);
    Integer m = mine == null ? null : mine.get(h);
    return m != null && (m & 1 << t.ordinal()) != 0;
  }

  private int bits(Worker w, long h) {
    Map<Long, Integer> mine = tiers.get(w);
    Integer m = mine == null ? null : mine.get(h);
    return m == null ? 0 : m;
  }

  private void check(TieredIndex index, long[][] local, long[][] seq, String ctx) {
    for (int d = 0; d < local.length; d++) {
      for (int len : new int[] {local[d].length, 1 + d % local[d].length}) {
        long[] q = Arrays.copyOf(local[d], len);
        TieredScores got = index.findTiered(q);
        for (Worker w : WORKERS) {
          String at = ctx + ": doc " + d + " len " + len + " worker " + w;
          int[] p = new int[4];
          for (int k = 0; k < 4; k++) {
            int lowMask = (1 << (k + 1)) - 1;
            int n = 0;
            while (n < len && (bits(w, seq[d][n]) & lowMask) != 0) n++;
            p[k] = n;
            assertThat(got.blocks(w, Tier.of(k))).as(at + " P_" + (k + 1)).isEqualTo(n);
          }
          assertThat(got.device().score(w)).as(at + " device").isEqualTo(p[0]);
          double weighted = W.weightedBlocks(p[0], p[1], p[2], p[3]);
          // best tier of each block of the tiered prefix, from the tier sets alone
          double best = 0;
          for (int i = 0; i < p[3]; i++) {
            int m = bits(w, seq[d][i]);
            best += W.of(Tier.of(Integer.numberOfTrailingZeros(m)));
          }
          assertThat(weighted).as(at + " never over-scores").isLessThanOrEqualTo(best + 1e-9);
          assertThat(weighted)
              .as(at + " at least the staircase")
              .isGreaterThanOrEqualTo(staircase(w, seq[d], len) - 1e-9);
        }
      }
    }
  }

  /** Dynamo's rule: a device run from 0, then a host run, a disk run, an external run. */
  private double staircase(Worker w, long[] seq, int len) {
    int i = 0;
    double sum = 0;
    for (int t = 0; t < 4; t++) {
      while (i < len && (bits(w, seq[i]) & 1 << t) != 0) {
        sum += W.of(Tier.of(t));
        i++;
      }
    }
    return sum;
  }

  private void checkReplay(TieredIndex index, Supplier<KvIndex> kind, long[][] local, String ctx) {
    try (TieredIndex copy = TieredIndex.withTiers(kind, Tier.EXTERNAL)) {
      for (TieredIndex.Entry e : index.dumpTiered()) copy.apply(e.tier(), e.event());
      copy.flush();
      for (long[] doc : local) {
        TieredScores a = index.findTiered(doc);
        TieredScores b = copy.findTiered(doc);
        for (Worker w : WORKERS) {
          for (Tier t : Tier.values()) {
            assertThat(b.blocks(w, t)).as(ctx + " replay " + w + " " + t).isEqualTo(a.blocks(w, t));
          }
        }
      }
    }
  }

  /** Six documents of 10 blocks; pairs share a prefix of 4 blocks. */
  private static long[][] documents(Random rnd) {
    long[][] out = new long[6][10];
    for (int d = 0; d < out.length; d++) {
      for (int i = 0; i < 10; i++) {
        out[d][i] = d % 2 == 1 && i < 4 ? out[d - 1][i] : rnd.nextLong();
      }
    }
    return out;
  }
}
