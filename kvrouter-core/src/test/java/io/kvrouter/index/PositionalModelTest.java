package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Seeded random operation streams applied to the positional index and to {@link ReferenceIndex};
 * every answer must be equal (DESIGN.md §4). Streams mix engines that follow §2 with engines that
 * do not, holes and their refills, rejected stores, hash reuse, clears and removed workers, on
 * paths that branch and run past several jump windows. A failure names its seed and step.
 */
class PositionalModelTest {
  private static final int PATH_LENGTH = 80;

  static Stream<Arguments> runs() {
    List<Arguments> out = new ArrayList<>();
    for (int jump : new int[] {1, 2, 3, 7, 32}) {
      for (long seed = 1; seed <= 3; seed++) out.add(Arguments.of(jump, seed * 7919 + jump));
    }
    return out.stream();
  }

  @ParameterizedTest(name = "jump {0}, seed {1}")
  @MethodSource("runs")
  void randomStreamsMatchTheReference(int jump, long seed) {
    new Run(jump, seed, false).go(1_500);
  }

  /**
   * The write order that lock-free readers rely on (DESIGN.md §4, Concurrency): after every single
   * change of an entry's holders, on the writer's thread, every worker's score on every path is
   * within one block of its score before the change. A write that exposed a hole, or connected a
   * block before its parent, would let a probe jump past it and move a score further.
   */
  @ParameterizedTest(name = "jump {0}, seed {1}")
  @MethodSource("runs")
  void everyIntermediateStateMovesAScoreByAtMostOneBlock(int jump, long seed) {
    new Run(jump, seed, true).go(600);
  }

  /** One stream: its own random source, index, reference and paths. */
  private static final class Run {
    final int jump;
    final long seed;
    final SplittableRandom rnd;
    final KvIndex index;
    final int[][] lastScores; // [path][worker]: scores at the last holders change
    final boolean checkSteps;
    int steps;
    int deepQueries; // some score past the first probe
    int holeQueries; // some worker holds a block of the query behind its score
    final ReferenceIndex ref = new ReferenceIndex();
    final long[][] paths;
    final Worker[] workers = {
      new Worker(0, 0), new Worker(1, 0), new Worker(1, 1), new Worker(2, 0), new Worker(3, 0)
    };
    long eventId;
    String step = "start";

    Run(int jump, long seed, boolean checkSteps) {
      this.jump = jump;
      this.seed = seed;
      this.rnd = new SplittableRandom(seed);
      this.checkSteps = checkSteps;
      this.index =
          checkSteps
              // every freed id back into use at once: the most reuse (PackedPositionalIndex)
              ? new PackedPositionalIndex(jump, this::stepped, 1)
              : KvIndexes.positional(jump);
      // a few paths that share prefixes and branch at random positions
      paths = new long[6][];
      paths[0] = randomPath(PATH_LENGTH);
      for (int i = 1; i < paths.length; i++) {
        long[] base = paths[rnd.nextInt(i)];
        int at = rnd.nextInt(PATH_LENGTH);
        long[] p = base.clone();
        long[] tail = randomPath(PATH_LENGTH - at);
        System.arraycopy(tail, 0, p, at, tail.length);
        paths[i] = p;
      }
      lastScores = new int[paths.length][workers.length];
    }

    /** Runs after every holders change, on the writer's thread. */
    void stepped() {
      steps++;
      for (int p = 0; p < paths.length; p++) {
        OverlapScores got = index.findMatches(paths[p], false);
        for (int i = 0; i < workers.length; i++) {
          int score = got.score(workers[i]);
          assertThat(Math.abs(score - lastScores[p][i]))
              .as(
                  "seed %d, jump %d, %s on path %d moved %d -> %d in one step of %s",
                  seed, jump, workers[i], p, lastScores[p][i], score, step)
              .isLessThanOrEqualTo(1);
          lastScores[p][i] = score;
        }
      }
    }

    private long[] randomPath(int n) {
      long[] p = new long[n];
      for (int i = 0; i < n; i++) p[i] = rnd.nextInt(1, 1_000_000);
      return p;
    }

    /**
     * The engine's hash of the block at {@code path[0..len)}: §2 for workers 0 and 1 (both ranks),
     * a per-worker scramble of it for the others, as an engine with another chain seed would.
     */
    long engineHash(Worker w, long[] path, int len) {
      long s = SequenceHasher.sequenceHashes(Arrays.copyOf(path, len))[len - 1];
      return w.workerId() <= 1 ? s : Long.rotateLeft(s, 17) ^ (w.workerId() * 0x9E3779B97F4A7C15L);
    }

    /** Whether {@code w} holds the block at {@code path[0..len)}, per the reference. */
    boolean holds(Worker w, long[] path, int len) {
      return ref.blocksOf(w).containsKey(engineHash(w, path, len));
    }

    void apply(Worker w, CacheEvent data) {
      RouterEvent e = new RouterEvent(w, eventId++, data);
      step = eventId + " " + e;
      index.apply(e);
      ref.apply(e);
    }

    void go(int ops) {
      try (index) {
        for (int op = 0; op < ops; op++) {
          int kind = rnd.nextInt(100);
          Worker w = workers[rnd.nextInt(workers.length)];
          if (kind < 45) store(w);
          else if (kind < 64) removeHeld(w);
          else if (kind < 66) removeUnknown(w);
          else if (kind < 69) reuseHash(w);
          else if (kind < 70) apply(w, CacheEvent.cleared());
          else if (kind < 72) {
            step = "clearWorker " + w.workerId();
            index.clearWorker(w.workerId());
            ref.clearWorker(w.workerId());
          } else if (kind < 73) {
            step = "removeWorker " + w.workerId();
            index.removeWorker(w.workerId());
            ref.removeWorker(w.workerId());
          } else {
            query();
          }
        }
        checkStats();
        checkDump();
        // the stream must have exercised what it is for
        String where = "seed " + seed + ", jump " + jump;
        if (checkSteps) assertThat(steps).as("holders changes, %s", where).isGreaterThan(500);
        assertThat(deepQueries)
            .as("queries scoring past the first probe, %s", where)
            .isGreaterThan(20);
        assertThat(holeQueries).as("worker-queries with a hole, %s", where).isGreaterThan(20);
      }
    }

    void store(Worker w) {
      long[] p = paths[rnd.nextInt(paths.length)];
      int from;
      int how = rnd.nextInt(10);
      if (how < 2) {
        from = 0;
      } else if (how < 3) {
        from = rnd.nextInt(PATH_LENGTH); // most likely rejected: parent not held
      } else {
        // under a block the worker holds (connected or behind a hole), or at the root
        int[] held = new int[PATH_LENGTH];
        int n = 0;
        for (int len = 1; len < PATH_LENGTH; len++) if (holds(w, p, len)) held[n++] = len;
        from = n == 0 ? 0 : held[rnd.nextInt(n)];
        if (how < 6) {
          // fill the first hole of the path: reconnects what the worker holds behind it
          from = 0;
          while (from < PATH_LENGTH - 1 && holds(w, p, from + 1)) from++;
        }
      }
      int n = 1 + rnd.nextInt(Math.min(PATH_LENGTH - from, 3 * jump + 2));
      long[] hashes = new long[n];
      long[] locals = Arrays.copyOfRange(p, from, from + n);
      for (int i = 0; i < n; i++) hashes[i] = engineHash(w, p, from + i + 1);
      apply(
          w,
          from == 0
              ? CacheEvent.storedAtRoot(hashes, locals)
              : CacheEvent.stored(engineHash(w, p, from), hashes, locals));
    }

    void removeHeld(Worker w) {
      Long[] held = ref.blocksOf(w).keySet().toArray(new Long[0]);
      if (held.length == 0) return;
      Arrays.sort(held); // HashMap order is not part of the seed
      int n = 1 + rnd.nextInt(Math.min(3, held.length));
      long[] hashes = new long[n];
      for (int i = 0; i < n; i++) hashes[i] = held[rnd.nextInt(held.length)];
      apply(w, CacheEvent.removed(hashes));
    }

    void removeUnknown(Worker w) {
      long[] p = paths[rnd.nextInt(paths.length)];
      apply(w, CacheEvent.removed(engineHash(w, p, 1 + rnd.nextInt(PATH_LENGTH)), rnd.nextLong()));
    }

    /** A store whose engine hashes reuse one the worker already holds (another block's name). */
    void reuseHash(Worker w) {
      Long[] held = ref.blocksOf(w).keySet().toArray(new Long[0]);
      if (held.length == 0) return;
      Arrays.sort(held);
      long[] p = paths[rnd.nextInt(paths.length)];
      if (rnd.nextBoolean()) {
        // the engine names a child with its parent's own hash: the parent stops being held
        int from = 1 + rnd.nextInt(PATH_LENGTH - 1);
        long parent = engineHash(w, p, from);
        apply(w, CacheEvent.stored(parent, new long[] {parent}, new long[] {p[from]}));
        return;
      }
      int n = 1 + rnd.nextInt(4);
      long[] hashes = new long[n];
      long[] locals = Arrays.copyOf(p, n);
      for (int i = 0; i < n; i++) hashes[i] = engineHash(w, p, i + 1);
      hashes[rnd.nextInt(n)] = held[rnd.nextInt(held.length)];
      apply(w, CacheEvent.storedAtRoot(hashes, locals));
    }

    void query() {
      long[] p = paths[rnd.nextInt(paths.length)];
      long[] q = Arrays.copyOf(p, 1 + rnd.nextInt(PATH_LENGTH));
      if (rnd.nextInt(3) == 0) q[rnd.nextInt(q.length)] = rnd.nextInt(1, 1_000_000);
      index.flush();
      Map<Worker, Integer> want = ref.scores(q);
      if (want.values().stream().anyMatch(v -> v > Math.min(jump, 40))) deepQueries++;
      for (Worker w : workers) {
        int score = want.getOrDefault(w, 0);
        for (int len = score + 2; len <= q.length; len++) {
          if (holds(w, q, len)) {
            holeQueries++;
            break;
          }
        }
      }
      OverlapScores got = index.findMatches(q, false);
      String where = "seed " + seed + ", jump " + jump + ", after " + step;
      assertThat(got.scores()).as(where).isEqualTo(want);
      for (Worker w : want.keySet()) {
        assertThat(got.blockCount(w))
            .as("blockCount %s, %s", w, where)
            .isEqualTo(ref.blockCount(w));
      }
      // earlyExit: same workers, never more than exact, at most one below exact
      OverlapScores early = index.findMatches(q, true);
      assertThat(early.scores().keySet()).as(where).isEqualTo(want.keySet());
      int below = 0;
      for (Map.Entry<Worker, Integer> e : early.scores().entrySet()) {
        int exact = want.get(e.getKey());
        assertThat(e.getValue())
            .as("earlyExit %s, %s", e.getKey(), where)
            .isLessThanOrEqualTo(exact);
        if (e.getValue() < exact) below++;
      }
      assertThat(below).as("earlyExit, %s", where).isLessThanOrEqualTo(1);
    }

    void checkStats() {
      index.flush();
      long held = 0;
      for (Worker w : ref.workers()) held += ref.blockCount(w);
      IndexStats s = index.stats();
      String where = "seed " + seed + ", jump " + jump;
      assertThat(s.blocksIndexed()).as(where).isEqualTo(held);
      assertThat(s.workers()).as(where).isEqualTo(ref.workers().size());
    }

    /** The dump, replayed into every kind, answers every path prefix as this index does. */
    void checkDump() {
      List<RouterEvent> dump = index.dump();
      for (KvIndex other : IndexKinds.all()) {
        try (other) {
          dump.forEach(other::apply);
          other.flush();
          for (long[] p : paths) {
            for (int len = 1; len <= PATH_LENGTH; len += 1 + rnd.nextInt(9)) {
              long[] q = Arrays.copyOf(p, len);
              assertThat(other.findMatches(q, false).scores())
                  .as("dump of seed %d jump %d into %s", seed, jump, other)
                  .isEqualTo(ref.scores(q));
            }
          }
        }
      }
    }
  }
}
