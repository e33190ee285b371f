package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * RunNames's ordered layout against a HashMap, seeded: single puts and removals, reserved batches
 * of puts and batches of removals by found slots (as CompressedTreeIndex makes them), with a live
 * set that swings so the table grows and shrinks through many rebuilds. Half of the names have
 * fingerprints in the top sixteenth, so their homes are the table's last and their clusters run
 * into the overflow tail; some names share a fingerprint with another (collisions found among
 * random hashes), so a lookup passes matches and tombstones of its own fingerprint. After every
 * step the layout's invariants hold (RunNames.invariantViolation: order, homes, the empty last
 * slot, the counts), and every name the map holds is found where the map says, every other not.
 */
class RunNamesOrderedTest {
  private static final int RUN = 64;
  private static final long FP_RANGE = 1L << 27;

  @Test
  void orderedTableMatchesAMapThroughGrowthShrinkageAndTheTail() {
    for (long seed = 1; seed <= 12; seed++) {
      run(seed);
    }
  }

  private static void run(long seed) {
    final SplittableRandom rnd = new SplittableRandom(seed);
    final List<Long> keys = new ArrayList<>();
    // high fingerprints: homes at the end of the table, clusters into the overflow tail
    while (keys.size() < 1_500) {
      final long s = rnd.nextLong();
      if (RunNames.fingerprint(s) >= FP_RANGE - FP_RANGE / 16) keys.add(s);
    }
    while (keys.size() < 3_000) keys.add(rnd.nextLong());
    // pairs that share a fingerprint
    final Map<Long, Long> byFp = new HashMap<>();
    int shared = 0;
    for (int k = 0; k < 400_000 && shared < 24; k++) {
      final long s = rnd.nextLong();
      final Long other = byFp.putIfAbsent(RunNames.fingerprint(s), s);
      if (other != null) {
        keys.add(other);
        keys.add(s);
        shared++;
      }
    }
    assertThat(shared).as("seed %d: fingerprint collisions found", seed).isPositive();
    // nodes whose runs hold the keys (stored hashes: a slot's key is its block's hash)
    final RunSeqs runSeqs = new RunSeqs();
    final List<RunNode> nodes = new ArrayList<>();
    final List<RunNode> twins = new ArrayList<>(); // the same hashes: where a split moves blocks
    final Map<Long, int[]> where = new HashMap<>();
    for (int from = 0; from < keys.size(); from += RUN) {
      final int n = Math.min(RUN, keys.size() - from);
      final long[] seqs = new long[n];
      for (int j = 0; j < n; j++) {
        seqs[j] = keys.get(from + j);
        where.put(seqs[j], new int[] {nodes.size(), j});
      }
      nodes.add(RunNamesTest.node(runSeqs, seqs));
      twins.add(RunNamesTest.node(runSeqs, seqs));
    }
    final RunNames names = new RunNames(runSeqs);
    final Map<Long, int[]> model = new HashMap<>();
    int grew = 0;
    int shrank = 0;
    for (int step = 0; step < 1_500; step++) {
      // phases: fill toward most keys, then drain toward a few
      final boolean filling = step / 150 % 2 == 0;
      final int homesBefore = names.homes();
      switch (rnd.nextInt(4)) {
        case 0 -> { // one name in or out
          final long s = keys.get(rnd.nextInt(keys.size()));
          final int found = names.find(s);
          assertThat(found >= 0).as("seed %d step %d", seed, step).isEqualTo(model.containsKey(s));
          if (found < 0 && filling) {
            final int[] w = where.get(s);
            names.putAt(found, s, nodes.get(w[0]), w[1]);
            model.put(s, w);
          } else if (found >= 0 && !filling) {
            names.removeAt(found);
            model.remove(s);
          }
        }
        case 1 -> { // a reserved batch of new names: no rebuild between the puts
          final List<Long> batch =
              pick(rnd, keys, model, false, 1 + rnd.nextInt(filling ? 300 : 20));
          names.reserve(batch.size());
          final int length = names.capacity();
          for (long s : batch) {
            final int[] w = where.get(s);
            names.putAt(names.find(s), s, nodes.get(w[0]), w[1]);
            model.put(s, w);
            assertThat(names.invariantViolation()).as("seed %d step %d", seed, step).isNull();
          }
          assertThat(names.capacity())
              .as("seed %d step %d: no rebuild", seed, step)
              .isEqualTo(length);
        }
        case 2 -> { // a batch of removals by the slots found first, one shrink at the end
          final List<Long> batch =
              pick(rnd, keys, model, true, 1 + rnd.nextInt(filling ? 20 : 300));
          final int[] slots = new int[batch.size()];
          for (int b = 0; b < slots.length; b++) slots[b] = names.find(batch.get(b));
          for (int b = 0; b < slots.length; b++) {
            final int[] w = model.get(batch.get(b));
            assertThat(names.nodeAt(slots[b])).isSameAs(nodes.get(w[0]));
            assertThat(names.offAt(slots[b])).isEqualTo(w[1]);
            names.removeAtKeepingCapacity(slots[b]);
            model.remove(batch.get(b));
            assertThat(names.invariantViolation()).as("seed %d step %d", seed, step).isNull();
          }
          names.shrinkIfSparse();
        }
        default -> { // a repoint in place (a split moving the block): order and slot stay
          final List<Long> one = pick(rnd, keys, model, true, 1);
          if (!one.isEmpty()) {
            final long s = one.get(0);
            final int[] w = model.get(s);
            final int slot = names.find(s);
            names.repoint(s, nodes.get(w[0]), w[1], twins.get(w[0]), w[1]);
            assertThat(names.find(s)).as("seed %d step %d: repointed", seed, step).isEqualTo(slot);
            assertThat(names.nodeAt(slot)).isSameAs(twins.get(w[0]));
            assertThat(names.offAt(slot)).isEqualTo(w[1]);
            names.repoint(s, twins.get(w[0]), w[1], nodes.get(w[0]), w[1]);
            assertThat(names.nodeAt(slot)).isSameAs(nodes.get(w[0]));
          }
        }
      }
      if (names.homes() > homesBefore) grew++;
      if (names.homes() < homesBefore) shrank++;
      assertThat(names.invariantViolation()).as("seed %d step %d", seed, step).isNull();
      assertThat(names.size()).as("seed %d step %d", seed, step).isEqualTo(model.size());
      if (step % 25 == 0) {
        for (long s : keys) {
          final int i = names.find(s);
          final int[] w = model.get(s);
          if (w == null) {
            assertThat(i).as("seed %d step %d: not named", seed, step).isNegative();
          } else {
            assertThat(i).as("seed %d step %d: named", seed, step).isNotNegative();
            assertThat(names.nodeAt(i)).isSameAs(nodes.get(w[0]));
            assertThat(names.offAt(i)).isEqualTo(w[1]);
          }
        }
      }
    }
    assertThat(grew).as("seed %d: the table grew", seed).isGreaterThan(3);
    assertThat(shrank).as("seed %d: the table shrank", seed).isGreaterThan(3);
  }

  /** Up to {@code n} distinct keys that the model holds ({@code named}) or does not. */
  private static List<Long> pick(
      SplittableRandom rnd, List<Long> keys, Map<Long, int[]> model, boolean named, int n) {
    final List<Long> out = new ArrayList<>();
    for (int tries = 0; tries < 4 * n && out.size() < n; tries++) {
      final long s = keys.get(rnd.nextInt(keys.size()));
      if (model.containsKey(s) == named && !out.contains(s)) out.add(s);
    }
    return out;
  }
}
