package io.kvrouter.prefixcache;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.TestBudget;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The reason {@link PrefixCache} exists: several caches under a seeded random workload (shared
 * system prompts, divergent suffixes, partial blocks, eviction pressure, releases, explicit
 * evictions, clears, salted caches) feed their events into one mirror, and after every step, for
 * random queries, the mirror's score of each worker equals that worker's {@code lookup}, its block
 * count equals the cache's, and the publisher never breaks an event rule.
 *
 * <p>CI runs {@value #DEFAULT_STEPS} steps per seed. The documented long run
 * (docs/prefix-cache.md):
 *
 * <pre>
 * ./mvnw -B -q -pl kvrouter-core test -Dtest=PrefixCacheConsistencyTest \
 *     -Dkvrouter.consistency.steps=100000 -Dkvrouter.consistency.seeds=1,2,3
 * </pre>
 *
 * <p>The events feed {@link NaiveEventMirror} (which also checks the publisher's event rules) and
 * every index kind of {@code io.kvrouter.index}; each must score what the cache looks up.
 */
@Timeout(value = 600, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class PrefixCacheConsistencyTest {
  private static final int DEFAULT_STEPS = 5_000;
  private static final int BLOCK = 4;

  private static int steps() {
    return TestBudget.count("kvrouter.consistency.steps", DEFAULT_STEPS, 10 * DEFAULT_STEPS);
  }

  private static long[] seeds() {
    String prop = System.getProperty("kvrouter.consistency.seeds");
    if (prop == null || prop.isBlank()) {
      return new long[] {1L, 2L};
    }
    return Arrays.stream(prop.split(",")).mapToLong(s -> Long.parseLong(s.trim())).toArray();
  }

  @Test
  void mirrorScoresEqualLookupsAfterEveryStep() {
    for (long seed : seeds()) {
      Workload w = new Workload(seed, steps(), NaiveEventMirror::new);
      try {
        w.run();
      } catch (AssertionError | RuntimeException e) {
        throw new AssertionError(
            "consistency run failed: seed="
                + seed
                + " step="
                + w.step
                + " op="
                + w.op
                + " (rerun with -Dkvrouter.consistency.seeds="
                + seed
                + ")",
            e);
      } finally {
        w.indexes.forEach(KvIndex::close);
      }
      System.out.println(w.summary());
      assertThat(w.mirror.violations).as("publisher violations").isZero();
      assertThat(w.divergences)
          .as("divergences of seed %d, the first: %s", seed, w.firstDivergence)
          .isZero();
    }
  }

  private static final class Workload {
    final long seed;
    final int steps;
    final Random rnd;
    final NaiveEventMirror mirror;

    /** Every router-side index kind, fed the same events as the naive mirror. */
    final List<KvIndex> indexes =
        List.of(
            KvIndexes.radixTree(),
            KvIndexes.concurrentRadixTree(),
            KvIndexes.positional(32),
            KvIndexes.positional(1),
            KvIndexes.threadPool(KvIndexes.concurrentRadixTree(), 2),
            KvIndexes.threadPool(KvIndexes.positional(8), 2));

    final List<PrefixCache> caches = new ArrayList<>();
    final List<List<Long>> active = new ArrayList<>();
    final int[][] systemPrompts;
    final List<int[]> recent = new ArrayList<>();
    final List<BlockHasher> hashers = new ArrayList<>();

    int step;
    String op = "none";
    long nextRequest = 1;
    long admitted;
    long rejected;
    long evictedBlocks;
    long clears;
    long queries;
    long nonZeroScores;
    long divergences;
    String firstDivergence;

    Workload(long seed, int steps, Supplier<NaiveEventMirror> mirror) {
      this.seed = seed;
      this.steps = steps;
      this.rnd = new Random(seed);
      this.mirror = mirror.get();
      // three unsalted workers of different sizes, one LoRA-salted and one namespaced worker; two
      // of them publish a Removed event per block, as vLLM does
      int[] capacities = {24, 40, 64, 40, 40};
      String[] lora = {null, null, null, "adapter-a", null};
      String[] namespace = {null, null, null, null, "tenant-b"};
      for (int i = 0; i < capacities.length; i++) {
        caches.add(
            PrefixCache.builder(new Worker(100 + i, i % 2), BLOCK, capacities[i])
                .lora(lora[i])
                .namespace(namespace[i])
                .removedEventPerBlock(i % 2 == 1)
                .listener(
                    e -> {
                      this.mirror.apply(e);
                      for (KvIndex index : indexes) index.apply(e);
                    })
                .build());
        active.add(new ArrayList<>());
        BlockHasher h = caches.get(i).hasher();
        if (hashers.stream().noneMatch(x -> same(x, h))) {
          hashers.add(h);
        }
      }
      systemPrompts = new int[4][];
      for (int i = 0; i < systemPrompts.length; i++) {
        systemPrompts[i] = randomTokens(BLOCK * (2 + rnd.nextInt(6)) + rnd.nextInt(BLOCK));
      }
    }

    int[] randomTokens(int n) {
      int[] t = new int[n];
      for (int i = 0; i < n; i++) {
        t[i] = rnd.nextInt(8) == 0 ? rnd.nextInt() : rnd.nextInt(3); // many collisions, some wide
      }
      return t;
    }

    /** A prompt: a system prompt or a recent prompt, cut somewhere, plus a divergent tail. */
    int[] prompt(boolean remember) {
      int[] base;
      int r = rnd.nextInt(10);
      if (r < 4) {
        base = systemPrompts[rnd.nextInt(systemPrompts.length)];
      } else if (r < 8 && !recent.isEmpty()) {
        base = recent.get(rnd.nextInt(recent.size()));
      } else {
        base = new int[0];
      }
      int cut = base.length == 0 ? 0 : rnd.nextInt(base.length + 1);
      int[] tail = randomTokens(rnd.nextInt(BLOCK * 6));
      int[] p = Arrays.copyOf(base, cut + tail.length);
      System.arraycopy(tail, 0, p, cut, tail.length);
      if (remember) {
        recent.add(p);
        if (recent.size() > 40) {
          recent.remove(rnd.nextInt(recent.size()));
        }
      }
      return p;
    }

    void run() {
      for (step = 0; step < steps; step++) {
        int i = rnd.nextInt(caches.size());
        PrefixCache c = caches.get(i);
        List<Long> held = active.get(i);
        int dice = rnd.nextInt(1000);
        if (dice < 470) {
          admit(c, held);
        } else if (dice < 900) {
          if (!held.isEmpty()) {
            long id = held.remove(rnd.nextInt(held.size()));
            op = "release " + id + " on " + c.worker();
            assertThat(c.release(id)).isTrue();
          }
        } else if (dice < 990) {
          int n = 1 + rnd.nextInt(8);
          op = "evict " + n + " on " + c.worker();
          evictedBlocks += c.evict(n);
        } else {
          op = "clear " + c.worker();
          c.clear();
          for (long id : held) {
            assertThat(c.release(id)).isFalse();
          }
          held.clear();
          clears++;
        }
        check();
      }
    }

    void admit(PrefixCache c, List<Long> held) {
      int[] p = prompt(true);
      long id = nextRequest++;
      op = "admit " + id + " on " + c.worker() + " " + Arrays.toString(p);
      int before = c.lookup(p);
      int free = c.freeBlocks();
      int cached = c.cachedBlocks();
      long events = mirror.events;
      PrefixCache.Admission a = c.admit(id, p);
      assertThat(a.cachedBlocks()).isEqualTo(before);
      if (a.admitted()) {
        admitted++;
        held.add(id);
        assertThat(c.lookup(p)).isEqualTo(p.length / BLOCK);
        assertThat(a.cachedBlocks() + a.newBlocks()).isEqualTo(p.length / BLOCK);
        evictedBlocks += a.evictedBlocks();
      } else {
        rejected++;
        assertThat(c.freeBlocks()).isEqualTo(free);
        assertThat(c.cachedBlocks()).isEqualTo(cached);
        assertThat(mirror.events).isEqualTo(events);
      }
    }

    void check() {
      if (mirror.violations > 0) {
        throw new AssertionError("publisher broke an event rule: " + mirror.firstViolation);
      }
      for (PrefixCache c : caches) {
        c.checkInvariants();
        if (mirror.blockCount(c.worker()) != c.cachedBlocks()) {
          diverged(
              c.worker()
                  + " holds "
                  + c.cachedBlocks()
                  + " blocks, the mirror "
                  + mirror.blockCount(c.worker()));
        }
      }
      for (KvIndex index : indexes) index.flush();
      for (int q = 0; q < 3; q++) {
        int[] query =
            q == 0 || recent.isEmpty() ? prompt(false) : recent.get(rnd.nextInt(recent.size()));
        query(query);
      }
    }

    void query(int[] query) {
      // the router hashes a request with the request's salt: score every worker under every
      // salt; a worker with another salt must score 0
      for (BlockHasher h : hashers) {
        long[] local = h.localHashes(query);
        for (PrefixCache c : caches) {
          queries++;
          int expected = same(h, c.hasher()) ? c.lookup(query) : 0;
          int score = mirror.score(c.worker(), local);
          if (score > 0) {
            nonZeroScores++;
          }
          for (KvIndex index : indexes) {
            int indexed = index.findMatches(local, false).score(c.worker());
            if (indexed != expected) {
              diverged(
                  c.worker()
                      + " looks up "
                      + expected
                      + " blocks but "
                      + index
                      + " scores "
                      + indexed
                      + " for "
                      + Arrays.toString(query));
            }
          }
          if (score != expected) {
            diverged(
                c.worker()
                    + " looks up "
                    + expected
                    + " blocks but the mirror scores "
                    + score
                    + " for "
                    + Arrays.toString(query)
                    + " hashed with "
                    + h);
          }
        }
      }
    }

    void diverged(String what) {
      if (divergences++ == 0) {
        firstDivergence = "step " + step + " after " + op + ": " + what;
      }
    }

    static boolean same(BlockHasher a, BlockHasher b) {
      return a.seed() == b.seed() && a.blockSize() == b.blockSize();
    }

    String summary() {
      return "PrefixCache consistency: seed="
          + seed
          + " steps="
          + steps
          + " caches="
          + caches.size()
          + " events="
          + mirror.events
          + " admitted="
          + admitted
          + " rejected="
          + rejected
          + " evictedBlocks="
          + evictedBlocks
          + " clears="
          + clears
          + " scoreChecks="
          + queries
          + " nonZeroScores="
          + nonZeroScores
          + " divergences="
          + divergences;
    }
  }
}
