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
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Real threads: one writer per worker applies a scripted stream full of holes, refills and stores
 * below holes, while readers query the same path. Every score a reader sees must lie within the
 * scores that worker passed through while the query ran (no over-count, no invented state), and
 * after the writers finish every score is exact.
 */
class ConcurrentStressTest {
  private static final int WORKERS = 3;
  private static final int EVENTS = TestBudget.count("kvrouter.stress.events", 3000, 30_000);
  private static final int CHAIN = 24;

  @TestFactory
  Stream<DynamicTest> readersNeverSeeAScoreTheWorkerDidNotHave() {
    List<DynamicTest> tests = new ArrayList<>();
    tests.add(
        DynamicTest.dynamicTest(
            "concurrentRadixTree", () -> run(KvIndexes::concurrentRadixTree, 11)));
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      try (KvIndex probe = kind.get()) {
        if (probe instanceof TreeIndex t && !t.isConcurrent()) continue;
        if (probe instanceof CompressedTreeIndex c && !c.isConcurrent()) continue;
        if (probe instanceof ThreadPoolIndexer) continue; // progress is not observable through it
        if (probe instanceof TreeIndex) continue; // covered above
        tests.add(DynamicTest.dynamicTest(probe.getClass().getSimpleName(), () -> run(kind, 12)));
      }
    }
    return tests.stream();
  }

  /** The locals of the one path every worker works on and every reader queries. */
  static final long[] PATH = new long[CHAIN];

  static {
    for (int i = 0; i < CHAIN; i++) PATH[i] = 100L + i;
  }

  static final long[] SEQ = SequenceHasher.sequenceHashes(PATH);

  /** A script for one worker, with each event's lowest and highest score along the path. */
  static final class Script {
    final List<RouterEvent> events = new ArrayList<>();
    int[] lo; // lo[e]: lowest score from before event e until after it, intermediates included
    int[] hi;
    int[] after; // after[e]: score after events 0..e-1

    Script(Worker w, long seed) {
      SplittableRandom rnd = new SplittableRandom(seed);
      ReferenceIndex ref = new ReferenceIndex();
      boolean[] held = new boolean[CHAIN];
      lo = new int[EVENTS];
      hi = new int[EVENTS];
      after = new int[EVENTS + 1];
      for (int e = 0; e < EVENTS; e++) {
        int before = ref.scores(PATH).getOrDefault(w, 0);
        int min = before;
        int max = before;
        RouterEvent ev;
        int dice = rnd.nextInt(10);
        if (dice < 5) {
          // store a run starting at a position whose parent is held (or the root)
          int start = rnd.nextInt(CHAIN);
          while (start > 0 && !held[start - 1]) start--;
          int end = Math.min(CHAIN, start + 1 + rnd.nextInt(6));
          long[] seqs = Arrays.copyOfRange(SEQ, start, end);
          long[] locals = Arrays.copyOfRange(PATH, start, end);
          ev =
              new RouterEvent(
                  w,
                  e,
                  start == 0
                      ? CacheEvent.storedAtRoot(seqs, locals)
                      : CacheEvent.stored(SEQ[start - 1], seqs, locals));
          // intermediate states: each prefix of the store
          for (int k = start + 1; k <= end; k++) {
            ReferenceIndex step = copyOf(ref, w);
            long[] s = Arrays.copyOfRange(SEQ, start, k);
            long[] l = Arrays.copyOfRange(PATH, start, k);
            step.apply(
                new RouterEvent(
                    w,
                    e,
                    start == 0
                        ? CacheEvent.storedAtRoot(s, l)
                        : CacheEvent.stored(SEQ[start - 1], s, l)));
            int sc = step.scores(PATH).getOrDefault(w, 0);
            min = Math.min(min, sc);
            max = Math.max(max, sc);
          }
          for (int k = start; k < end; k++) held[k] = true;
        } else if (dice < 9) {
          // remove one block anywhere: often a hole
          int at = rnd.nextInt(CHAIN);
          ev = new RouterEvent(w, e, CacheEvent.removed(SEQ[at]));
          held[at] = false;
        } else {
          ev = new RouterEvent(w, e, CacheEvent.cleared());
          Arrays.fill(held, false);
        }
        ref.apply(ev);
        int now = ref.scores(PATH).getOrDefault(w, 0);
        after[e] = before;
        lo[e] = Math.min(min, now);
        hi[e] = Math.max(max, now);
        events.add(ev);
        after[e + 1] = now;
      }
    }

    static ReferenceIndex copyOf(ReferenceIndex ref, Worker w) {
      ReferenceIndex c = new ReferenceIndex();
      for (Map.Entry<Long, List<Long>> b : ref.blocksOf(w).entrySet()) {
        // replay each block as a single store under its parent's path (parents first)
        List<Long> path = b.getValue();
        long[] l = {path.get(path.size() - 1)};
        long[] s = {b.getKey()};
        c.apply(
            new RouterEvent(
                w,
                0,
                path.size() == 1
                    ? CacheEvent.storedAtRoot(s, l)
                    : CacheEvent.stored(SEQ[path.size() - 2], s, l)));
      }
      return c;
    }
  }

  private static void run(Supplier<KvIndex> kind, long seed) throws InterruptedException {
    Worker[] workers = new Worker[WORKERS];
    Script[] scripts = new Script[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
      workers[i] = new Worker(i + 1, 0);
      scripts[i] = new Script(workers[i], seed * 31 + i);
    }
    AtomicIntegerArray done = new AtomicIntegerArray(WORKERS); // events fully applied
    ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
    try (KvIndex index = kind.get()) {
      List<Thread> threads = new ArrayList<>();
      for (int i = 0; i < WORKERS; i++) {
        int wi = i;
        threads.add(
            new Thread(
                () -> {
                  for (RouterEvent e : scripts[wi].events) {
                    index.apply(e);
                    done.incrementAndGet(wi);
                  }
                }));
      }
      long[] reads = new long[1];
      CountDownLatch readerStarted = new CountDownLatch(1);
      Thread reader =
          new Thread(
              () -> {
                do {
                  readerStarted.countDown();
                  int[] c1 = new int[WORKERS];
                  for (int i = 0; i < WORKERS; i++) c1[i] = done.get(i);
                  OverlapScores s = index.findMatches(PATH, false);
                  for (int i = 0; i < WORKERS; i++) {
                    int c2 = done.get(i);
                    int got = s.score(workers[i]);
                    int lo = scripts[i].after[c1[i]];
                    int hi = lo;
                    for (int e = c1[i]; e <= Math.min(c2, EVENTS - 1); e++) {
                      lo = Math.min(lo, scripts[i].lo[e]);
                      hi = Math.max(hi, scripts[i].hi[e]);
                    }
                    if (got < lo || got > hi) {
                      violations.add(
                          workers[i]
                              + " scored "
                              + got
                              + " outside ["
                              + lo
                              + ", "
                              + hi
                              + "] while events "
                              + c1[i]
                              + ".."
                              + c2
                              + " ran");
                    }
                  }
                  reads[0]++;
                } while (done.get(0) < EVENTS || done.get(1) < EVENTS || done.get(2) < EVENTS);
              });
      reader.start();
      readerStarted.await(); // the writers race a reader that is already reading
      threads.forEach(Thread::start);
      for (Thread t : threads) t.join();
      reader.join();
      assertThat(violations).as("seed %d", seed).isEmpty();
      assertThat(reads[0]).isPositive();
      index.flush();
      OverlapScores s = index.findMatches(PATH, false);
      for (int i = 0; i < WORKERS; i++) {
        assertThat(s.score(workers[i])).isEqualTo(scripts[i].after[EVENTS]);
      }
    }
  }
}
