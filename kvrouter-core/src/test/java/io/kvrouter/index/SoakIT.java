package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.TestBudget;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Soak: continuous store/remove churn with prefix splits, holes and queries on every tree kind, the
 * compressed trees included, unbounded and bounded; memory must not grow and every node must go
 * when every block does.
 *
 * <pre>
 * Implementation notes
 *
 * Runs under failsafe (verify), in a JVM of its own, so the heap readings hold nothing of other
 * tests. The ten kinds run one after the other in that JVM; each one's index is closed and
 * unreachable, and collected, before the next one's first reading.
 * Phases, per kind: fill (every worker's FIFO full: WORKERS * PATHS_PER_WORKER stores), warm-up
 * (STORES more stores: the workload's node count settles only after several generations of
 * paths, as holes and continuations accumulate and then balance), measured (STORES more). Both
 * are counted, not timed, so a slow machine makes them slower, never emptier. With
 * kvrouter.soak.seconds (the long form) each kind gets a tenth of it: the warm-up runs to at least
 * half of that share and the measured phase to its end, each still at least STORES stores.
 * Workload, per kind: WORKERS workers each keep their last PATHS_PER_WORKER paths live (a FIFO).
 * A path is one of PROMPTS shared 4-block prompts followed by 4..28 blocks drawn from a 4-letter
 * alphabet per depth, so paths share prefixes and split at random depths (tree nodes gain and
 * lose second children all the time). A store is the whole path at the root (30 %: a
 * continuation under the last block of one of the worker's live paths, one conversation turn
 * later, while that path is under 40 blocks); a new path past the FIFO's size removes the oldest
 * one's blocks, leaf first or root first (making holes below it) at random. Every store is
 * followed by QUERIES findMatches of random live paths. Bounded kinds get under half the pairs
 * the unbounded steady state holds, so eviction runs all the time (and removals hit blocks it
 * dropped).
 * Heap: used heap (MemoryMXBean) after System.gc() three times, 50 ms apart, the least of three
 * such readings. Asserted: the measured phase applied at least STORES stores and as many path
 * removals (the index's own counters) and its queries scored; after it the heap is within 5 % + 2
 * MiB of the reading after warm-up (2 MiB: the allocator's and JIT's own small drifts, which are
 * not the index's); after every path is removed the index has no node, no pair and (bounded) no
 * queued node, and the heap is back within 5 % + 2 MiB of the reading before the index was filled.
 * Each kind prints one line "soak ..." with its numbers (docs/RELIABILITY.md).
 * </pre>
 */
class SoakIT {
  /** The long form's time in all (0: counts only, the CI form; 300 under -Pthorough). */
  private static final int SECONDS = TestBudget.count("kvrouter.soak.seconds", 0, 300);

  /** Stores of the warm-up, and at least as many in the measured phase, per kind. */
  private static final long STORES = Long.getLong("kvrouter.soak.stores", 40_000);

  private static final int WORKERS = 8;
  private static final int PATHS_PER_WORKER = Integer.getInteger("kvrouter.soak.paths", 1024);
  private static final int PROMPTS = 32;
  private static final int QUERIES = 4;
  private static final long SLACK = 2L << 20;
  private static final long BOUND = Long.getLong("kvrouter.soak.maxBlocks", 40_000);

  /** The kinds below, among which the long form's time is shared. */
  private static final int KINDS = 10;

  @TestFactory
  Stream<DynamicTest> churnLeaksNothing() {
    List<DynamicTest> tests = new ArrayList<>();
    addKind(tests, "radixTree", KvIndexes::radixTree);
    addKind(tests, "concurrentRadixTree", KvIndexes::concurrentRadixTree);
    addKind(tests, "positional(32)", () -> KvIndexes.positional(32));
    addKind(tests, "compressedTree", KvIndexes::compressedTree);
    addKind(tests, "concurrentCompressedTree", KvIndexes::concurrentCompressedTree);
    addKind(tests, "radixTree(" + BOUND + ")", () -> KvIndexes.radixTree(BOUND));
    addKind(
        tests, "concurrentRadixTree(" + BOUND + ")", () -> KvIndexes.concurrentRadixTree(BOUND));
    addKind(tests, "positional(32, " + BOUND + ")", () -> KvIndexes.positional(32, BOUND));
    addKind(tests, "compressedTree(" + BOUND + ")", () -> KvIndexes.compressedTree(BOUND));
    addKind(
        tests,
        "concurrentCompressedTree(" + BOUND + ")",
        () -> KvIndexes.concurrentCompressedTree(BOUND));
    return tests.stream();
  }

  private static void addKind(List<DynamicTest> tests, String name, Supplier<KvIndex> kind) {
    long nanos = SECONDS * 1_000_000_000L / KINDS;
    tests.add(DynamicTest.dynamicTest(name, () -> new Soak(name, kind, nanos).run()));
  }

  /**
   * Used heap after full collections: the least of three readings, each after three collections
   * that the collectors' own counts show happened (no pause standing in for them).
   */
  static long heapAfterGc() {
    long best = Long.MAX_VALUE;
    for (int r = 0; r < 3; r++) {
      for (int i = 0; i < 3; i++) collectOnce();
      best = Math.min(best, ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
    }
    return best;
  }

  /**
   * Asks for a full collection and waits until a collector counts one more: System.gc() returns
   * after a stop-the-world collection on the default collectors, and a concurrent one
   * (-XX:+ExplicitGCInvokesConcurrent) is seen when its count moves. Under -XX:+DisableExplicitGC
   * no count moves: the wait gives up after 10 s and the reading is taken as it is.
   */
  private static void collectOnce() {
    long before = collections();
    System.gc();
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (collections() == before && System.nanoTime() < deadline) Thread.onSpinWait();
  }

  private static long collections() {
    long n = 0;
    for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
      n += Math.max(0, b.getCollectionCount());
    }
    return n;
  }

  /** One path a worker holds: its locals and their §2 sequence hashes. */
  private record Path(long[] locals, long[] seqs) {}

  private static final class Soak {
    final String name;
    final Supplier<KvIndex> kind;
    final long nanos;
    final SplittableRandom rnd = new SplittableRandom(2026);
    final Worker[] workers = new Worker[WORKERS];
    final List<ArrayDeque<Path>> live = new ArrayList<>();
    final long[] eventIds = new long[WORKERS];
    long stores;
    long removes;
    long queries;
    long scoreSum;

    Soak(String name, Supplier<KvIndex> kind, long nanos) {
      this.name = name;
      this.kind = kind;
      this.nanos = nanos;
      for (int w = 0; w < WORKERS; w++) {
        workers[w] = new Worker(w, 0);
        live.add(new ArrayDeque<>());
      }
    }

    void run() throws InterruptedException {
      final long before = heapAfterGc();
      final long start = System.nanoTime();
      try (KvIndex index = kind.get()) {
        final BlockIndex<?> bi = index instanceof BlockIndex<?> b ? b : null;
        final CompressedTreeIndex ci = index instanceof CompressedTreeIndex c ? c : null;
        final PackedPositionalIndex pi = index instanceof PackedPositionalIndex p ? p : null;
        final boolean bounded =
            bi != null
                ? bi.bounded
                : ci != null ? ci.bound != null : pi != null && pi.bound != null;
        // fill: every worker's FIFO full
        for (int i = 0; i < WORKERS * PATHS_PER_WORKER; i++) step(index, i % WORKERS);
        for (long i = 0; i < STORES || System.nanoTime() - start < nanos / 2; i++) {
          step(index, rnd.nextInt(WORKERS));
        }
        final long warmHeap = heapAfterGc();
        final int warmNodes = IndexProbe.nodeCount(index);
        final IndexStats warmStats = index.stats();
        final long warmPairs = warmStats.blocksIndexed();
        final long runFrom = System.nanoTime();
        final long opsBefore = stores;
        final long queriesBefore = queries;
        final long scoreBefore = scoreSum;
        for (long i = 0; i < STORES || System.nanoTime() - start < nanos; i++) {
          step(index, rnd.nextInt(WORKERS));
        }
        final double runSeconds = (System.nanoTime() - runFrom) / 1e9;
        final long endHeap = heapAfterGc();
        final int endNodes = IndexProbe.nodeCount(index);
        final IndexStats endStats = index.stats();

        // remove everything: every node must go (splits merged, nothing left behind)
        for (int w = 0; w < WORKERS; w++) {
          ArrayDeque<Path> q = live.get(w);
          while (!q.isEmpty()) removePath(index, w, q.pollFirst());
        }
        index.flush();
        final int emptyNodes = IndexProbe.nodeCount(index);
        final long emptyPairs = index.stats().blocksIndexed();
        final int emptyClock = IndexProbe.clockSize(index);
        final long emptyHeap = heapAfterGc();

        System.out.printf(
            Locale.ROOT,
            "soak %s: %.0f s, %,d stores + %,d path removals + %,d queries (measured: %,d"
                + " stores, %.0f stores/s, %.0f queries/s), pairs warm %,d end %,d, nodes warm %,d end"
                + " %,d, evicted %,d, heap before %.2f MiB, warm %.2f MiB, end %.2f MiB"
                + " (%+.2f%%), emptied %.2f MiB, nodes after removing all %d%n",
            name,
            (System.nanoTime() - start) / 1e9,
            stores,
            removes,
            queries,
            stores - opsBefore,
            (stores - opsBefore) / runSeconds,
            (stores - opsBefore) * QUERIES / runSeconds,
            warmPairs,
            endStats.blocksIndexed(),
            warmNodes,
            endNodes,
            endStats.evictedBlocks(),
            mib(before),
            mib(warmHeap),
            mib(endHeap),
            100.0 * (endHeap - warmHeap) / warmHeap,
            mib(emptyHeap),
            emptyNodes);

        // the measured phase did its work, as the index counted it
        // (a continuation under a block that an older path's removal or the bound took counts as
        // parentMissing, not storedEvents)
        assertThat(
                endStats.storedEvents()
                    + endStats.parentMissing()
                    - warmStats.storedEvents()
                    - warmStats.parentMissing())
            .as("stores applied in the measured phase")
            .isGreaterThanOrEqualTo(STORES);
        assertThat(endStats.removedEvents() - warmStats.removedEvents())
            .as("path removals applied in the measured phase")
            .isGreaterThanOrEqualTo(STORES);
        assertThat(queries - queriesBefore)
            .as("queries in the measured phase")
            .isGreaterThanOrEqualTo(STORES * QUERIES);
        assertThat(scoreSum - scoreBefore)
            .as("measured queries found cached prefixes")
            .isPositive();
        assertThat(endHeap)
            .as("heap after the run vs after warm-up")
            .isLessThanOrEqualTo((long) (warmHeap * 1.05) + SLACK);
        assertThat(emptyNodes).as("nodes once every block is removed").isZero();
        assertThat(emptyPairs).isZero();
        assertThat(emptyClock).as("queued nodes once every block is removed").isZero();
        if (bounded) {
          assertThat(endStats.blocksIndexed()).isLessThanOrEqualTo(BOUND);
          assertThat(endNodes).isLessThanOrEqualTo((int) BOUND);
          assertThat(endStats.evictedBlocks()).isPositive();
        } else {
          assertThat(endStats.evictedBlocks()).isZero();
        }
        live.forEach(ArrayDeque::clear);
        assertThat(emptyHeap)
            .as("heap once emptied vs before filling")
            .isLessThanOrEqualTo((long) (before * 1.05) + SLACK);
      }
    }

    static double mib(long bytes) {
      return bytes / 1048576.0;
    }

    /** One store (and the removal it pushes out), then a few queries. */
    void step(KvIndex index, int w) {
      ArrayDeque<Path> mine = live.get(w);
      Path p;
      Path prev = mine.isEmpty() || rnd.nextInt(10) >= 3 ? null : randomOf(mine);
      if (prev != null && prev.locals.length < 40) { // conversations end: paths stay bounded
        int extra = 1 + rnd.nextInt(8);
        long[] locals = Arrays.copyOf(prev.locals, prev.locals.length + extra);
        for (int i = prev.locals.length; i < locals.length; i++) locals[i] = branchLocal(i);
        p = new Path(locals, SequenceHasher.sequenceHashes(locals));
        long parent = prev.seqs[prev.seqs.length - 1];
        long[] tailSeqs = Arrays.copyOfRange(p.seqs, prev.locals.length, locals.length);
        long[] tailLocals = Arrays.copyOfRange(locals, prev.locals.length, locals.length);
        index.apply(
            new RouterEvent(
                workers[w], eventIds[w]++, CacheEvent.stored(parent, tailSeqs, tailLocals)));
      } else {
        int prompt = rnd.nextInt(PROMPTS);
        long[] locals = new long[4 + 4 + rnd.nextInt(25)];
        for (int i = 0; i < 4; i++) locals[i] = 1_000_000L * (prompt + 1) + i;
        for (int i = 4; i < locals.length; i++) locals[i] = branchLocal(i);
        p = new Path(locals, SequenceHasher.sequenceHashes(locals));
        index.apply(
            new RouterEvent(workers[w], eventIds[w]++, CacheEvent.storedAtRoot(p.seqs, p.locals)));
      }
      stores++;
      mine.addLast(p);
      if (mine.size() > PATHS_PER_WORKER) removePath(index, w, mine.pollFirst());
      for (int k = 0; k < QUERIES; k++) {
        ArrayDeque<Path> any = live.get(rnd.nextInt(WORKERS));
        if (any.isEmpty()) continue;
        long[] q = randomOf(any).locals;
        OverlapScores s = index.findMatches(q, false);
        for (int i = 0; i < s.size(); i++) scoreSum += s.scoreAt(i);
        queries++;
      }
    }

    long branchLocal(int depth) {
      return depth * 16L + rnd.nextInt(4);
    }

    Path randomOf(ArrayDeque<Path> q) {
      // a deque has no index: sample among the newest few or the oldest few
      int k = rnd.nextInt(Math.min(q.size(), 8));
      var it = rnd.nextBoolean() ? q.iterator() : q.descendingIterator();
      Path p = it.next();
      for (int i = 0; i < k; i++) p = it.next();
      return p;
    }

    void removePath(KvIndex index, int w, Path p) {
      long[] seqs = p.seqs.clone();
      if (rnd.nextBoolean()) {
        for (int i = 0, j = seqs.length - 1; i < j; i++, j--) {
          long t = seqs[i];
          seqs[i] = seqs[j];
          seqs[j] = t;
        }
      }
      index.apply(new RouterEvent(workers[w], eventIds[w]++, CacheEvent.removed(seqs)));
      removes++;
    }
  }
}
