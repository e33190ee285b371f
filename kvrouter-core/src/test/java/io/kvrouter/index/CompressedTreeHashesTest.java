package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The compressed tree keeps a block's sequence hash only where it departs from §2 (RunSeqs):
 * engines that follow §2 and engines with their own hashes, side by side on shared content, must
 * get the reference's answers after every event, and the tree must keep no hashes for the first
 * kind.
 */
class CompressedTreeHashesTest {
  private static final int WORKERS = 4;

  /** Worker w's hashes for a path: §2 (0, 1), §2 with chain seed 0 (2), arbitrary (3). */
  private static long[] hashes(int w, long[] path, Map<String, Long> arbitrary) {
    return switch (w) {
      case 0, 1 -> SequenceHasher.sequenceHashes(path);
      case 2 -> SequenceHasher.sequenceHashes(path, 0);
      default -> {
        final long[] out = new long[path.length];
        for (int i = 0; i < path.length; i++) {
          final String key = Arrays.toString(Arrays.copyOf(path, i + 1));
          out[i] =
              arbitrary.computeIfAbsent(key, k -> new SplittableRandom(k.hashCode()).nextLong());
        }
        yield out;
      }
    };
  }

  private static long[] randomPath(SplittableRandom rnd) {
    final long[] p = new long[1 + rnd.nextInt(14)];
    for (int i = 0; i < p.length; i++) p[i] = 1L + rnd.nextInt(i < 6 ? 2 : 3); // shared prefixes
    return p;
  }

  @Test
  void enginesFollowingSection2AndEnginesWithTheirOwnHashesStayExact() {
    for (long seed = 1; seed <= 30; seed++) {
      run(seed, true);
      run(seed, false);
    }
  }

  private static void run(long seed, boolean concurrent) {
    final SplittableRandom rnd = new SplittableRandom(seed);
    final Map<String, Long> arbitrary = new HashMap<>();
    final CompressedTreeIndex index = new CompressedTreeIndex(concurrent);
    final ReferenceIndex ref = new ReferenceIndex();
    final long[] eventIds = new long[WORKERS];
    for (int step = 0; step < 400; step++) {
      final int w = rnd.nextInt(WORKERS);
      final Worker worker = new Worker(w, 0);
      final long[] path = randomPath(rnd);
      final long[] seqs = hashes(w, path, arbitrary);
      final int dice = rnd.nextInt(100);
      final CacheEvent e;
      if (dice < 55) {
        // a store of path[a..], under path[a - 1] (rejected when the worker does not hold it)
        final int a = rnd.nextInt(3) == 0 ? rnd.nextInt(path.length) : 0;
        final int b = a + 1 + rnd.nextInt(path.length - a);
        final long[] s = Arrays.copyOfRange(seqs, a, b);
        final long[] l = Arrays.copyOfRange(path, a, b);
        e = a == 0 ? CacheEvent.storedAtRoot(s, l) : CacheEvent.stored(seqs[a - 1], s, l);
      } else if (dice < 97) {
        // a removal of some of the path's blocks, deepest first, from the top or shuffled
        final List<Long> gone = new ArrayList<>();
        for (int i = path.length - 1; i >= 0; i--) if (rnd.nextInt(3) > 0) gone.add(seqs[i]);
        if (rnd.nextBoolean()) Collections.reverse(gone);
        e = CacheEvent.removed(gone.stream().mapToLong(Long::longValue).toArray());
      } else {
        e = CacheEvent.cleared();
      }
      final RouterEvent re = new RouterEvent(worker, eventIds[w]++, e);
      index.apply(re);
      ref.apply(re);
      for (int k = 0; k < 3; k++) {
        final long[] q = randomPath(rnd);
        assertThat(index.findMatches(q, false).scores())
            .as("seed %d step %d query %s", seed, step, Arrays.toString(q))
            .isEqualTo(ref.scores(q));
      }
      long held = 0;
      for (int v = 0; v < WORKERS; v++) held += ref.blockCount(new Worker(v, 0));
      assertThat(index.stats().blocksIndexed()).as("seed %d step %d", seed, step).isEqualTo(held);
    }
    // the dump, replayed, gives the same answers (every block's name recomputed or stored)
    final CompressedTreeIndex replay = new CompressedTreeIndex(false);
    index.dump().forEach(replay::apply);
    for (int k = 0; k < 50; k++) {
      final long[] q = randomPath(rnd);
      assertThat(replay.findMatches(q, false).scores()).isEqualTo(ref.scores(q));
    }
  }

  @Test
  void runsOfSection2EnginesKeepNoHashesAndOthersKeepThemAll() {
    final SplittableRandom rnd = new SplittableRandom(7);
    final CompressedTreeIndex follows = new CompressedTreeIndex(false);
    final CompressedTreeIndex departs = new CompressedTreeIndex(false);
    final Map<String, Long> arbitrary = new HashMap<>();
    for (int i = 0; i < 200; i++) {
      final long[] path = randomPath(rnd);
      final int w = i % 2;
      follows.apply(
          new RouterEvent(
              new Worker(w, 0), i, CacheEvent.storedAtRoot(hashes(w, path, arbitrary), path)));
      departs.apply(
          new RouterEvent(
              new Worker(3, 0), i, CacheEvent.storedAtRoot(hashes(3, path, arbitrary), path)));
    }
    int nodes = 0;
    for (RunNode n : nodes(follows)) {
      assertThat(n.plain().seqs).as("a run of §2 hashes").isNull();
      nodes++;
    }
    assertThat(nodes).isGreaterThan(10);
    for (RunNode n : nodes(departs)) {
      // the first block's hash is the head; every later one departs from §2, so it is kept
      if (n.plain().length() > 1) assertThat(n.plain().seqs).as("a run of own hashes").isNotNull();
    }
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
