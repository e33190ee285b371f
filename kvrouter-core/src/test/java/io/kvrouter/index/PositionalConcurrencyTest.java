package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.TestWaits;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import it.unimi.dsi.fastutil.longs.LongOpenHashSet;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Queue;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Lock-free readers against concurrent writers on the positional index (DESIGN.md §4, Concurrency):
 * every score a reader reports must be one the worker had at some instant of the call, and with no
 * write in flight every score is exact.
 *
 * <p>Two writer threads each own two workers and apply a precomputed, seeded event stream (growing
 * chains, holes, refills that reconnect whole subtrees, clears); after each event a writer
 * publishes how many events it has applied. Every event moves a worker's score monotonically, and
 * the index moves it one block at a time, so the scores a worker passes through while a reader runs
 * are exactly the range spanned by the model's scores over the versions the reader saw before and
 * after its call (plus the one event that may have been in flight). Readers check every score, of
 * every worker, against that range.
 */
class PositionalConcurrencyTest {
  private static final int WRITERS = 2;
  private static final int WORKERS_PER_WRITER = 2;
  private static final int EVENTS = 12_000;
  private static final int READERS = 2;

  private static final long[] MAIN = range(1, 120);
  private static final long[][] QUERIES = {
    MAIN, branch(MAIN, 40, 5_000), branch(MAIN, 70, 9_000), Arrays.copyOf(MAIN, 33)
  };
  private static final long[][] PATHS = {MAIN, QUERIES[1], branch(MAIN, 90, 7_000)};

  private static long[] range(long from, int n) {
    long[] out = new long[n];
    for (int i = 0; i < n; i++) out[i] = from + i;
    return out;
  }

  private static long[] branch(long[] base, int at, long from) {
    long[] out = base.clone();
    for (int i = at; i < out.length; i++) out[i] = from + i;
    return out;
  }

  /** A precomputed stream of one writer: its events and its workers' exact scores after each. */
  private static final class Stream {
    final Worker[] workers = new Worker[WORKERS_PER_WRITER];
    final List<RouterEvent> events = new ArrayList<>();
    final long[] clearWorkerIds; // >= 0: this step is clearWorker(id) instead of an event
    final int[][][] scores; // [version][query][worker]; version v = after v steps

    Stream(int writer, long seed) {
      SplittableRandom rnd = new SplittableRandom(seed);
      for (int i = 0; i < WORKERS_PER_WRITER; i++) {
        // ranks of one worker id, so that clearWorker acts on this writer's workers only
        workers[i] = new Worker(writer, i);
      }
      long[][] pathSeqs = new long[PATHS.length][];
      for (int p = 0; p < PATHS.length; p++) pathSeqs[p] = SequenceHasher.sequenceHashes(PATHS[p]);
      long[][] querySeqs = new long[QUERIES.length][];
      for (int q = 0; q < QUERIES.length; q++) {
        querySeqs[q] = SequenceHasher.sequenceHashes(QUERIES[q]);
      }
      LongOpenHashSet[] held = new LongOpenHashSet[WORKERS_PER_WRITER];
      for (int i = 0; i < held.length; i++) held[i] = new LongOpenHashSet();
      clearWorkerIds = new long[EVENTS];
      scores = new int[EVENTS + 1][QUERIES.length][WORKERS_PER_WRITER];
      for (int step = 0; step < EVENTS; step++) {
        clearWorkerIds[step] = -1;
        int wi = rnd.nextInt(WORKERS_PER_WRITER);
        Worker w = workers[wi];
        LongOpenHashSet mine = held[wi];
        int p = rnd.nextInt(PATHS.length);
        long[] path = PATHS[p];
        long[] seqs = pathSeqs[p];
        int kind = rnd.nextInt(100);
        CacheEvent data;
        if (kind < 45) {
          // store a run under a random position (rejected when the parent is not held)
          int from = rnd.nextInt(8) == 0 ? 0 : rnd.nextInt(path.length);
          int n = 1 + rnd.nextInt(Math.min(20, path.length - from));
          long[] hashes = Arrays.copyOfRange(seqs, from, from + n);
          long[] locals = Arrays.copyOfRange(path, from, from + n);
          if (from == 0) {
            data = CacheEvent.storedAtRoot(hashes, locals);
            for (long h : hashes) mine.add(h);
          } else {
            data = CacheEvent.stored(seqs[from - 1], hashes, locals);
            if (mine.contains(seqs[from - 1])) for (long h : hashes) mine.add(h);
          }
        } else if (kind < 80) {
          // a hole (or a trimmed tail) somewhere on the path
          int at = rnd.nextInt(path.length);
          data = CacheEvent.removed(seqs[at]);
          mine.remove(seqs[at]);
        } else if (kind < 97) {
          // refill the first hole of the path: reconnects everything held behind it
          int at = 0;
          while (at < path.length && mine.contains(seqs[at])) at++;
          if (at == path.length) at = path.length - 1;
          long[] one = {seqs[at]};
          long[] local = {path[at]};
          data =
              at == 0
                  ? CacheEvent.storedAtRoot(one, local)
                  : CacheEvent.stored(seqs[at - 1], one, local);
          if (at == 0 || mine.contains(seqs[at - 1])) mine.add(seqs[at]);
        } else if (kind < 99) {
          data = CacheEvent.cleared();
          mine.clear();
        } else {
          data = null;
          clearWorkerIds[step] = writer;
          for (LongOpenHashSet h : held) h.clear();
        }
        events.add(data == null ? null : new RouterEvent(w, step, data));
        for (int q = 0; q < QUERIES.length; q++) {
          for (int i = 0; i < WORKERS_PER_WRITER; i++) {
            int k = 0;
            while (k < querySeqs[q].length && held[i].contains(querySeqs[q][k])) k++;
            scores[step + 1][q][i] = k;
          }
        }
      }
    }

    void apply(KvIndex index, int step) {
      if (clearWorkerIds[step] >= 0) index.clearWorker(clearWorkerIds[step]);
      else index.apply(events.get(step));
    }
  }

  @ParameterizedTest(name = "jump {0}")
  @ValueSource(ints = {1, 4, 32})
  void readersSeeOnlyScoresTheWorkersHadDuringTheCall(int jump) throws InterruptedException {
    final long seed = 20_260_000L + jump;
    final KvIndex index = KvIndexes.positional(jump);
    final Stream[] streams = new Stream[WRITERS];
    for (int j = 0; j < WRITERS; j++) streams[j] = new Stream(j, seed * 31 + j);
    final AtomicIntegerArray version = new AtomicIntegerArray(WRITERS);
    final Queue<String> failures = new ConcurrentLinkedQueue<>();
    final AtomicLong reads = new AtomicLong();
    final CountDownLatch start = new CountDownLatch(1);
    final CountDownLatch writersDone = new CountDownLatch(WRITERS);
    // writers wait half-way for every reader to finish a read begun after they started, so the
    // racing phase is never empty (fast writers used to finish before any read)
    final CountDownLatch readDuringWrites = new CountDownLatch(READERS);
    List<Thread> threads = new ArrayList<>();
    for (int j = 0; j < WRITERS; j++) {
      final int writer = j;
      threads.add(
          new Thread(
              () -> {
                try {
                  start.await();
                  for (int step = 0; step < EVENTS; step++) {
                    if (step == EVENTS / 2)
                      readDuringWrites.await(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS);
                    streams[writer].apply(index, step);
                    version.set(writer, step + 1);
                  }
                } catch (Throwable t) {
                  failures.add("writer " + writer + ": " + t);
                } finally {
                  writersDone.countDown();
                }
              },
              "writer-" + j));
    }
    for (int r = 0; r < READERS; r++) {
      final int reader = r;
      threads.add(
          new Thread(
              () -> {
                SplittableRandom rnd = new SplittableRandom(seed + 1000 + reader);
                int[] before = new int[WRITERS];
                int[] after = new int[WRITERS];
                boolean counted = false;
                try {
                  start.await();
                  while (writersDone.getCount() > 0 && failures.size() < 20) {
                    int q = rnd.nextInt(QUERIES.length);
                    boolean earlyExit = rnd.nextInt(4) == 0;
                    for (int j = 0; j < WRITERS; j++) before[j] = version.get(j);
                    OverlapScores got = index.findMatches(QUERIES[q], earlyExit);
                    for (int j = 0; j < WRITERS; j++) {
                      after[j] = version.get(j);
                    }
                    reads.incrementAndGet();
                    for (int j = 0; j < WRITERS && !counted; j++) {
                      if (before[j] > 0) {
                        readDuringWrites.countDown(); // once per reader
                        counted = true;
                      }
                    }
                    for (int j = 0; j < WRITERS; j++) {
                      Stream s = streams[j];
                      int last = Math.min(after[j] + 1, EVENTS);
                      for (int i = 0; i < WORKERS_PER_WRITER; i++) {
                        int min = Integer.MAX_VALUE;
                        int max = Integer.MIN_VALUE;
                        for (int v = before[j]; v <= last; v++) {
                          min = Math.min(min, s.scores[v][q][i]);
                          max = Math.max(max, s.scores[v][q][i]);
                        }
                        int score = got.score(s.workers[i]);
                        // earlyExit may stop the last worker early, never late
                        boolean ok = score <= max && (earlyExit || score >= min);
                        if (!ok) {
                          failures.add(
                              String.format(
                                  "seed %d jump %d query %d earlyExit %b worker %s: score %d"
                                      + " outside [%d, %d] over versions %d..%d",
                                  seed,
                                  jump,
                                  q,
                                  earlyExit,
                                  s.workers[i],
                                  score,
                                  min,
                                  max,
                                  before[j],
                                  last));
                        }
                      }
                    }
                  }
                } catch (Throwable t) {
                  failures.add("reader " + reader + ": " + t);
                }
              },
              "reader-" + r));
    }
    threads.forEach(Thread::start);
    start.countDown();
    for (Thread t : threads) t.join(TestWaits.WAIT.toMillis());
    assertThat(threads).noneMatch(Thread::isAlive);
    assertThat(failures).as("seed %d", seed).isEmpty();
    assertThat(reads.get()).isPositive();
    assertThat(readDuringWrites.getCount()).as("readers that read while writers ran").isZero();
    // quiescent: every score exact
    for (int q = 0; q < QUERIES.length; q++) {
      OverlapScores got = index.findMatches(QUERIES[q], false);
      for (Stream s : streams) {
        for (int i = 0; i < WORKERS_PER_WRITER; i++) {
          assertThat(got.score(s.workers[i]))
              .as("seed %d query %d worker %s at rest", seed, q, s.workers[i])
              .isEqualTo(s.scores[EVENTS][q][i]);
        }
      }
    }
  }
}
