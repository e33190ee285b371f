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
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Seeded random operation streams (stores that share prefixes, holes, unknown parents and blocks,
 * clears, worker removal, dp ranks) applied to every index kind and to {@link ReferenceIndex};
 * every query must give the reference's exact scores and block counts.
 */
class RandomizedModelTest {
  private static final int OPS = TestBudget.count("kvrouter.model.ops", 4000, 40_000);
  private static final long[] SEEDS = {1, 2, 3, 42, 1337};

  @TestFactory
  Stream<DynamicTest> everyKindAgreesWithTheReference() {
    List<DynamicTest> tests = new ArrayList<>();
    List<Supplier<KvIndex>> kinds = IndexKinds.suppliers();
    for (int k = 0; k < kinds.size(); k++) {
      Supplier<KvIndex> kind = kinds.get(k);
      for (long seed : SEEDS) {
        String name;
        try (KvIndex probe = kind.get()) {
          name = probe.getClass().getSimpleName() + " #" + k;
        }
        tests.add(DynamicTest.dynamicTest(name + " seed " + seed, () -> run(kind, seed)));
      }
    }
    return tests.stream();
  }

  private static void run(Supplier<KvIndex> kind, long seed) {
    try (KvIndex index = kind.get()) {
      new Run(index, seed).go();
    } catch (AssertionError e) {
      throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
    }
  }

  /** One seeded run. */
  private static final class Run {
    final KvIndex index;
    final SplittableRandom rnd;
    final ReferenceIndex ref = new ReferenceIndex();
    final Worker[] workers = {
      new Worker(0, 0), new Worker(0, 1), new Worker(1, 0), new Worker(2, 0), new Worker(3, 1)
    };
    long eventId;
    int queries;

    Run(KvIndex index, long seed) {
      this.index = index;
      this.rnd = new SplittableRandom(seed);
    }

    /** A small alphabet per depth makes workers share prefixes often. */
    long randomLocal() {
      return rnd.nextInt(3);
    }

    void apply(RouterEvent e) {
      index.apply(e);
      ref.apply(e);
    }

    void go() {
      for (int op = 0; op < OPS; op++) {
        Worker w = workers[rnd.nextInt(workers.length)];
        int dice = rnd.nextInt(100);
        if (dice < 40) {
          store(w);
        } else if (dice < 55) {
          removeSome(w);
        } else if (dice < 57) {
          apply(new RouterEvent(w, eventId++, CacheEvent.cleared()));
        } else if (dice < 58) {
          index.clearWorker(w.workerId());
          ref.clearWorker(w.workerId());
        } else if (dice < 59) {
          index.removeWorker(w.workerId());
          ref.removeWorker(w.workerId());
        } else if (dice < 62) {
          // a store under a parent nobody holds: rejected whole
          apply(
              new RouterEvent(
                  w,
                  eventId++,
                  CacheEvent.stored(rnd.nextLong(), new long[] {rnd.nextLong()}, new long[] {1})));
        } else {
          query();
        }
      }
      assertThat(queries).isGreaterThan(OPS / 4);
      // and the dump of the final state gives the same answers in every kind
      index.flush();
      List<RouterEvent> dump = index.dump();
      for (KvIndex other : IndexKinds.all()) {
        try (other) {
          dump.forEach(other::apply);
          for (int i = 0; i < 50; i++) {
            long[] q = randomQuery();
            other.flush();
            assertThat(other.findMatches(q, false).scores())
                .as("dump replayed into %s", other)
                .isEqualTo(ref.scores(q));
          }
        }
      }
    }

    void store(Worker w) {
      Map<Long, List<Long>> mine = ref.blocksOf(w);
      List<Long> prefix = List.of();
      boolean underParent = !mine.isEmpty() && rnd.nextInt(3) > 0;
      long parentSeq = 0;
      if (underParent) {
        List<Long> keys = new ArrayList<>(mine.keySet());
        parentSeq = keys.get(rnd.nextInt(keys.size()));
        prefix = mine.get(parentSeq);
      }
      int n = 1 + rnd.nextInt(rnd.nextInt(10) == 0 ? 40 : 5);
      long[] locals = new long[n];
      long[] seqs = new long[n];
      // engines following §2 name a block by the hash of its whole path; one in ten events
      // uses the worker's own private names for the same content (DESIGN.md §4 rule 3)
      boolean privateNames = rnd.nextInt(10) == 0;
      long prev = pathSeq(prefix);
      for (int i = 0; i < n; i++) {
        locals[i] = randomLocal();
        prev = prefix.isEmpty() && i == 0 ? locals[0] : SequenceHasher.next(prev, locals[i]);
        seqs[i] = privateNames ? prev ^ (0x5bd1e995L * (w.workerId() + 7)) : prev;
      }
      CacheEvent ev =
          underParent
              ? CacheEvent.stored(parentSeq, seqs, locals)
              : CacheEvent.storedAtRoot(seqs, locals);
      apply(new RouterEvent(w, eventId++, ev));
    }

    static long pathSeq(List<Long> path) {
      long prev = 0;
      for (int i = 0; i < path.size(); i++) {
        prev = i == 0 ? path.get(0) : SequenceHasher.next(prev, path.get(i));
      }
      return prev;
    }

    void removeSome(Worker w) {
      List<Long> keys = new ArrayList<>(ref.blocksOf(w).keySet());
      int n = 1 + rnd.nextInt(3);
      long[] hashes = new long[n];
      for (int i = 0; i < n; i++) {
        hashes[i] =
            keys.isEmpty() || rnd.nextInt(8) == 0
                ? rnd.nextLong()
                : keys.get(rnd.nextInt(keys.size()));
      }
      apply(new RouterEvent(w, eventId++, CacheEvent.removed(hashes)));
    }

    long[] randomQuery() {
      // either a held path extended by a few random blocks, or a random path
      List<Long> base = List.of();
      for (Worker w : workers) {
        Map<Long, List<Long>> mine = ref.blocksOf(w);
        if (!mine.isEmpty() && rnd.nextBoolean()) {
          List<List<Long>> paths = new ArrayList<>(mine.values());
          base = paths.get(rnd.nextInt(paths.size()));
          break;
        }
      }
      int extra = rnd.nextInt(4);
      long[] q = new long[base.size() + extra];
      for (int i = 0; i < base.size(); i++) q[i] = base.get(i);
      for (int i = base.size(); i < q.length; i++) q[i] = randomLocal();
      return q;
    }

    void query() {
      long[] q = randomQuery();
      index.flush();
      OverlapScores got = index.findMatches(q, false);
      Map<Worker, Integer> want = ref.scores(q);
      assertThat(got.scores()).as("query %s", Arrays.toString(q)).isEqualTo(want);
      for (Worker w : want.keySet()) {
        assertThat(got.blockCount(w)).as("blockCount %s", w).isEqualTo(ref.blockCount(w));
      }
      OverlapScores early = index.findMatches(q, true);
      for (int i = 0; i < early.size(); i++) {
        Worker w = early.worker(i);
        assertThat(early.scoreAt(i)).as("early exit %s", w).isBetween(1, want.getOrDefault(w, 0));
      }
      queries++;
    }
  }
}
