package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * RunNames against a map: random names and removals (a tombstone where a probe may pass, an empty
 * slot where none can), on tables small enough that probe clusters run into the overflow tail, and
 * a live set that swings so the table grows, shrinks and rebuilds.
 */
class RunNamesTest {
  private static final int RUN = 64;

  @Test
  void findsExactlyWhatWasNamedThroughChurn() {
    for (long seed = 1; seed <= 40; seed++) {
      churn(seed);
    }
  }

  /** A run whose blocks keep the given hashes (departing from §2), with an id. */
  static RunNode node(RunSeqs runSeqs, long[] seqs) {
    final RunNode n =
        new RunNode(seqs[0], null, new RunState(seqs, seqs, RunState.NONE, RunState.NONE, null));
    n.head = seqs[0];
    runSeqs.register(n);
    return n;
  }

  private static void churn(long seed) {
    final SplittableRandom rnd = new SplittableRandom(seed);
    // nodes whose runs hold the keys: a slot's key is its block's hash
    final RunSeqs runSeqs = new RunSeqs();
    final List<RunNode> nodes = new ArrayList<>();
    final Map<Long, long[]> where = new HashMap<>(); // seq -> {node index, offset}
    for (int n = 0; n < 8; n++) {
      final long[] seqs = new long[RUN];
      for (int j = 0; j < RUN; j++) {
        seqs[j] = rnd.nextLong();
        where.put(seqs[j], new long[] {n, j});
      }
      nodes.add(node(runSeqs, seqs));
    }
    final List<Long> all = new ArrayList<>(where.keySet());
    final RunNames names = new RunNames(runSeqs);
    final Map<Long, long[]> model = new HashMap<>();
    // the live set swings between a few and most keys, so the table grows and shrinks too
    final int target = 2 + rnd.nextInt(all.size() - 2);
    for (int step = 0; step < 6_000; step++) {
      final long seq = all.get(rnd.nextInt(all.size()));
      final int found = names.find(seq);
      final boolean named = model.containsKey(seq);
      assertThat(found >= 0).as("seed %d step %d: named %d", seed, step, seq).isEqualTo(named);
      final boolean add = model.size() < (step / 500 % 2 == 0 ? target : 3);
      if (named && !add) {
        names.removeAt(found);
        model.remove(seq);
      } else if (!named && add) {
        final long[] w = where.get(seq);
        names.putAt(found, seq, nodes.get((int) w[0]), (int) w[1]);
        model.put(seq, w);
      }
      if (step % 97 == 0) {
        assertThat(names.size()).as("seed %d step %d", seed, step).isEqualTo(model.size());
        for (long s : all) {
          final int i = names.find(s);
          final long[] w = model.get(s);
          if (w == null) {
            assertThat(i).as("seed %d step %d: %d not named", seed, step, s).isNegative();
          } else {
            assertThat(i).as("seed %d step %d: %d named", seed, step, s).isNotNegative();
            assertThat(names.nodeAt(i)).isSameAs(nodes.get((int) w[0]));
            assertThat(names.offAt(i)).isEqualTo((int) w[1]);
          }
        }
      }
    }
  }

  /**
   * Batches as CompressedTreeIndex makes them: a Removed finds every slot first and then removes by
   * those slots with the table held at its size, shrinking once at the end; a run of new names is
   * reserved for and then put without any rebuild in between.
   */
  @Test
  void batchedRemovalsAndReservedPutsMatchTheModel() {
    for (long seed = 1; seed <= 20; seed++) {
      final SplittableRandom rnd = new SplittableRandom(seed);
      final RunSeqs runSeqs = new RunSeqs();
      final List<RunNode> nodes = new ArrayList<>();
      final List<long[]> keys = new ArrayList<>(); // {seq, node index, offset}
      for (int n = 0; n < 16; n++) {
        final long[] seqs = new long[RUN];
        for (int j = 0; j < RUN; j++) {
          seqs[j] = rnd.nextLong();
          keys.add(new long[] {seqs[j], n, j});
        }
        nodes.add(node(runSeqs, seqs));
      }
      final RunNames names = new RunNames(runSeqs);
      final Map<Long, long[]> model = new HashMap<>();
      for (int round = 0; round < 60; round++) {
        final boolean grow = round % 20 < 12;
        final int batch = 1 + rnd.nextInt(200);
        final List<long[]> pick = new ArrayList<>();
        for (int b = 0; b < batch; b++) {
          final long[] k = keys.get(rnd.nextInt(keys.size()));
          if (model.containsKey(k[0]) == grow) continue; // grow: new names; else: named ones
          boolean dup = false;
          for (long[] p : pick) dup |= p[0] == k[0];
          if (!dup) pick.add(k);
        }
        if (grow) {
          names.reserve(pick.size());
          final int capacity = names.capacity();
          for (long[] k : pick) {
            names.putAt(names.find(k[0]), k[0], nodes.get((int) k[1]), (int) k[2]);
            model.put(k[0], k);
          }
          assertThat(names.capacity())
              .as("seed %d round %d: no rebuild", seed, round)
              .isEqualTo(capacity);
        } else {
          final int[] slots = new int[pick.size()];
          for (int b = 0; b < slots.length; b++) slots[b] = names.find(pick.get(b)[0]);
          for (int b = 0; b < slots.length; b++) {
            assertThat(names.nodeAt(slots[b])).isSameAs(nodes.get((int) pick.get(b)[1]));
            names.removeAtKeepingCapacity(slots[b]);
            model.remove(pick.get(b)[0]);
          }
          names.shrinkIfSparse();
          assertThat(names.size() * 8L >= names.homes() || names.homes() == 16)
              .as(
                  "seed %d round %d: %d names in %d home slots",
                  seed, round, names.size(), names.homes())
              .isTrue();
        }
        assertThat(names.size()).isEqualTo(model.size());
        for (long[] k : keys) {
          final int i = names.find(k[0]);
          if (model.containsKey(k[0])) {
            assertThat(i).as("seed %d round %d: named", seed, round).isNotNegative();
            assertThat(names.nodeAt(i)).isSameAs(nodes.get((int) k[1]));
            assertThat(names.offAt(i)).isEqualTo((int) k[2]);
          } else {
            assertThat(i).as("seed %d round %d: not named", seed, round).isNegative();
          }
        }
      }
    }
  }
}
