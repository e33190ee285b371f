package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The checkpoints of a run's folded hashes (RunSeqs.K, RunNode.marks): one hash of a block of a
 * long run whose hashes are not stored costs at most K - 1 XXH3s (counted by RunSeqs.folds, not
 * timed), and the checkpoints stay exact through extends, per-block stores, splits, merges and
 * trims of runs longer than K, up to MAX_RUN. Every expected hash comes from DESIGN.md §2 over the
 * block's path from the root (SequenceHasher), not from the tree.
 */
class RunSeqsMarksTest {
  private static final int K = RunSeqs.K;

  @Test
  void oneHashDeepInALongRunFoldsAtMostKMinusOne() {
    final CompressedTreeIndex index = new CompressedTreeIndex(false);
    final SplittableRandom rnd = new SplittableRandom(37);
    final long[] path = randomLocals(rnd, CompressedTreeIndex.MAX_RUN);
    final long[] seqs = SequenceHasher.sequenceHashes(path);
    index.apply(new RouterEvent(new Worker(0, 0), 0, CacheEvent.storedAtRoot(seqs, path)));
    final long[] other = randomLocals(rnd, 10);
    index.apply(
        new RouterEvent(
            new Worker(1, 0),
            0,
            CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(other), other)));
    final RunNode run = RunNode.child(index.root.plain().children, path[0]);
    final RunNode small = RunNode.child(index.root.plain().children, other[0]);
    assertThat(run.plain().length()).isEqualTo(CompressedTreeIndex.MAX_RUN);
    assertThat(run.plain().seqs).as("a run of §2 hashes keeps none").isNull();
    final RunSeqs rs = index.runSeqs;
    for (int o : new int[] {2047, 2046, 1999, 1025, 1024, 1023, 700, 128, 127, 65, 64, 63, 1}) {
      rs.seqAt(small, 9); // the memo on another run: this hash starts from scratch
      final long before = rs.folds;
      assertThat(rs.seqAt(run, o)).as("block %d", o).isEqualTo(seqs[o]);
      assertThat(rs.folds - before).as("XXH3s for block %d", o).isLessThanOrEqualTo(K - 1);
    }
  }

  @Test
  void checkpointsStayExactThroughExtendsSplitsMergesAndTrims() {
    for (long seed = 1; seed <= 4; seed++) run(seed);
  }

  private static void run(long seed) {
    final SplittableRandom rnd = new SplittableRandom(seed);
    final CompressedTreeIndex index = new CompressedTreeIndex(seed % 2 == 0);
    final long[][] trunks = new long[3][];
    for (int t = 0; t < trunks.length; t++) trunks[t] = randomLocals(rnd, 2600);
    final long[] eventIds = new long[3];
    for (int step = 0; step < 120; step++) {
      final int w = rnd.nextInt(3);
      final long[] trunk = trunks[rnd.nextInt(trunks.length)];
      final int len = 1 + rnd.nextInt(rnd.nextBoolean() ? 300 : trunk.length);
      final long[] path = Arrays.copyOf(trunk, len);
      if (rnd.nextInt(4) == 0) path[len - 1] = rnd.nextLong(); // a branch at the end
      final long[] seqs = SequenceHasher.sequenceHashes(path);
      final Worker worker = new Worker(w, 0);
      final int dice = rnd.nextInt(10);
      final List<CacheEvent> events = new ArrayList<>();
      if (dice < 4) {
        events.add(CacheEvent.storedAtRoot(seqs, path));
      } else if (dice < 6) {
        // one Stored per block below the first (vLLM's shape: extends of the worker's own leaf)
        final int a = Math.max(1, len - 1 - rnd.nextInt(150));
        events.add(CacheEvent.storedAtRoot(Arrays.copyOf(seqs, a), Arrays.copyOf(path, a)));
        for (int i = a; i < len; i++) {
          events.add(CacheEvent.stored(seqs[i - 1], new long[] {seqs[i]}, new long[] {path[i]}));
        }
      } else if (dice < 8) {
        // a removal of a tail, deepest first
        final int a = rnd.nextInt(len);
        final long[] gone = new long[len - a];
        for (int i = 0; i < gone.length; i++) gone[i] = seqs[len - 1 - i];
        events.add(CacheEvent.removed(gone));
      } else {
        // one block from the middle: a split
        events.add(CacheEvent.removed(seqs[rnd.nextInt(len)]));
      }
      for (CacheEvent e : events) {
        index.apply(new RouterEvent(worker, eventIds[w]++, e));
        checkHashes(index, seed, step, rnd);
      }
    }
  }

  /** Every checkpointed block, the last block and a random block of every run, from scratch. */
  private static void checkHashes(
      CompressedTreeIndex index, long seed, int step, SplittableRandom rnd) {
    final RunSeqs rs = index.runSeqs;
    final List<RunNode> nodes = nodes(index);
    for (RunNode x : nodes) {
      final RunState st = x.plain();
      final int len = st.length();
      final long[] expected = SequenceHasher.sequenceHashes(pathTo(index, x));
      final int top = expected.length - len; // the path's index of the run's block 0
      final List<Integer> offsets = new ArrayList<>();
      for (int o = 0; o < len; o += K) offsets.add(o);
      offsets.add(len - 1);
      offsets.add(rnd.nextInt(len));
      for (int o : offsets) {
        final RunNode away = nodes.get(rnd.nextInt(nodes.size()));
        if (away != x) rs.seqAt(away, away.plain().length() - 1);
        else rs.seqAt(x, 0);
        final long before = rs.folds;
        assertThat(rs.seqAt(x, o))
            .as("seed %d step %d: block %d of a run of %d", seed, step, o, len)
            .isEqualTo(expected[top + o]);
        if (away != x) {
          assertThat(rs.folds - before)
              .as("seed %d step %d: XXH3s for block %d of a run of %d", seed, step, o, len)
              .isLessThanOrEqualTo(K - 1);
        }
      }
    }
  }

  /** The local hashes from the top down to the end of {@code x}'s run. */
  private static long[] pathTo(CompressedTreeIndex index, RunNode x) {
    final ArrayDeque<long[]> runs = new ArrayDeque<>();
    int n = 0;
    for (RunNode a = x; a != index.root; a = a.parent) {
      final RunState as = a.plain();
      runs.push(Arrays.copyOf(as.locals, as.length()));
      n += as.length();
    }
    final long[] out = new long[n];
    int at = 0;
    for (long[] r : runs) {
      System.arraycopy(r, 0, out, at, r.length);
      at += r.length;
    }
    return out;
  }

  private static long[] randomLocals(SplittableRandom rnd, int n) {
    final long[] out = new long[n];
    for (int i = 0; i < n; i++) out[i] = rnd.nextLong();
    return out;
  }

  private static List<RunNode> nodes(CompressedTreeIndex index) {
    final List<RunNode> out = new ArrayList<>();
    final ArrayDeque<RunNode> stack = new ArrayDeque<>();
    final List<RunNode> children = new ArrayList<>();
    stack.push(index.root);
    while (!stack.isEmpty()) {
      final RunNode x = stack.pop();
      children.clear();
      RunNode.addChildren(x.plain().children, children);
      out.addAll(children);
      children.forEach(stack::push);
    }
    return out;
  }
}
