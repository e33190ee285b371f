package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

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
 * {@link PositionalNames}: a worker that names blocks by the router's own §2 hashes keeps no name,
 * and mixed naming (private hashes, one hash re-used for several blocks, a block under two names, a
 * Removed event listing a name twice) answers exactly as {@link ReferenceIndex}.
 */
class PositionalNamesTest {
  private static final Worker[] WORKERS = {new Worker(0, 0), new Worker(1, 0), new Worker(2, 1)};

  @Test
  void keyNamesAreNotKept() {
    PositionalIndex index = new PositionalIndex(32);
    ReferenceIndex ref = new ReferenceIndex();
    SplittableRandom rnd = new SplittableRandom(7);
    long id = 0;
    List<long[]> paths = new ArrayList<>();
    for (int i = 0; i < 400; i++) {
      long[] path = randomPath(rnd, paths);
      paths.add(path);
      Worker w = WORKERS[rnd.nextInt(WORKERS.length)];
      RouterEvent e =
          new RouterEvent(
              w, id++, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(path), path));
      index.apply(e);
      ref.apply(e);
    }
    // remove the tails of some paths, names listed from the leaf up
    for (int i = 0; i < 100; i++) {
      long[] path = paths.get(rnd.nextInt(paths.size()));
      long[] seq = SequenceHasher.sequenceHashes(path);
      int from = rnd.nextInt(path.length);
      long[] gone = new long[path.length - from];
      for (int k = 0; k < gone.length; k++) gone[k] = seq[path.length - 1 - k];
      RouterEvent e =
          new RouterEvent(WORKERS[rnd.nextInt(WORKERS.length)], id++, CacheEvent.removed(gone));
      index.apply(e);
      ref.apply(e);
    }
    int held = 0;
    for (Worker w : WORKERS) {
      WorkerBlocks<PositionalEntry> ws = index.workers.find(w);
      PositionalNames names = (PositionalNames) ws.blocks;
      assertThat(names.keptNames()).as("names kept for %s", w).isZero();
      assertThat(names.size()).as("names of %s", w).isEqualTo(ws.heldBlocks);
      assertThat(ws.heldBlocks).as("blocks of %s", w).isEqualTo(ref.blockCount(w));
      held += ws.heldBlocks;
    }
    assertThat(held).isPositive();
    for (long[] q : paths) {
      assertThat(index.findMatches(q, false).scores())
          .as(Arrays.toString(q))
          .isEqualTo(ref.scores(q));
    }
  }

  @Test
  void mixedNamesAnswerAsTheReference() {
    for (long seed = 1; seed <= 12; seed++) {
      run(new PositionalIndex(32), seed);
      run(new PositionalIndex(4, null, 1L << 40), seed); // bounded: the backward index of names
    }
  }

  private static void run(PositionalIndex index, long seed) {
    ReferenceIndex ref = new ReferenceIndex();
    SplittableRandom rnd = new SplittableRandom(seed);
    List<long[]> paths = new ArrayList<>();
    // hashes several blocks and workers re-use; 3 and 4 are also the keys of root blocks 3 and 4
    long[] shared = {11, 12, 3, 4};
    long id = 0;
    for (int op = 0; op < 1500; op++) {
      Worker w = WORKERS[rnd.nextInt(WORKERS.length)];
      long[] path =
          paths.isEmpty() || rnd.nextInt(3) == 0 ? null : paths.get(rnd.nextInt(paths.size()));
      CacheEvent data;
      int kind = rnd.nextInt(10);
      if (kind < 6 || path == null) {
        path = randomPath(rnd, paths);
        paths.add(path);
        data = CacheEvent.storedAtRoot(names(rnd, path, shared), path);
      } else if (kind < 9) {
        long[] seq = names(rnd, path, shared);
        int n = 1 + rnd.nextInt(path.length);
        long[] gone = new long[n + (rnd.nextInt(4) == 0 ? 1 : 0)];
        for (int k = 0; k < n; k++) gone[k] = seq[path.length - 1 - k];
        if (gone.length > n) gone[n] = gone[0]; // a name listed twice
        data = CacheEvent.removed(gone);
      } else {
        data =
            rnd.nextInt(5) == 0
                ? CacheEvent.cleared()
                : CacheEvent.storedAtRoot(
                    new long[] {shared[rnd.nextInt(shared.length)]}, new long[] {path[0]});
      }
      RouterEvent e = new RouterEvent(w, id++, data);
      index.apply(e);
      ref.apply(e);
      for (int q = 0; q < 3; q++) {
        long[] query = paths.get(rnd.nextInt(paths.size()));
        assertThat(index.findMatches(query, false).scores())
            .as("seed %d op %d %s on %s", seed, op, data, Arrays.toString(query))
            .isEqualTo(ref.scores(query));
      }
      for (Worker x : WORKERS) {
        assertThat(held(index, x)).as("seed %d op %d %s", seed, op, x).isEqualTo(ref.blockCount(x));
      }
    }
    // the dump names every block as the worker does: replayed, it answers the same
    PositionalIndex copy = new PositionalIndex(32);
    index.dump().forEach(copy::apply);
    for (long[] q : paths) {
      assertThat(copy.findMatches(q, false).scores())
          .as("seed %d dump replayed on %s", seed, Arrays.toString(q))
          .isEqualTo(ref.scores(q));
    }
  }

  /** Distinct blocks {@code w} holds, connected or behind a hole (as ReferenceIndex counts). */
  private static int held(PositionalIndex index, Worker w) {
    WorkerBlocks<PositionalEntry> ws = index.workers.find(w);
    return ws == null ? 0 : ws.heldBlocks;
  }

  /** A path of 1 to 8 local hashes from a small alphabet, often extending an earlier one. */
  private static long[] randomPath(SplittableRandom rnd, List<long[]> earlier) {
    int len = 1 + rnd.nextInt(8);
    long[] path = new long[len];
    int k = 0;
    if (!earlier.isEmpty() && rnd.nextBoolean()) {
      long[] base = earlier.get(rnd.nextInt(earlier.size()));
      k = Math.min(len, 1 + rnd.nextInt(base.length));
      System.arraycopy(base, 0, path, 0, k);
    }
    for (; k < len; k++) path[k] = 1L + rnd.nextInt(5);
    return path;
  }

  /** The names of a path's blocks: mostly §2 hashes, some private, some shared with others. */
  private static long[] names(SplittableRandom rnd, long[] path, long[] shared) {
    long[] seq = SequenceHasher.sequenceHashes(path);
    int style = rnd.nextInt(4);
    for (int i = 0; i < seq.length; i++) {
      if (style == 1 && rnd.nextInt(3) == 0) seq[i] ^= 0x5bd1e995L;
      if (style == 2 && rnd.nextInt(4) == 0) seq[i] = shared[rnd.nextInt(shared.length)];
    }
    return seq;
  }
}
