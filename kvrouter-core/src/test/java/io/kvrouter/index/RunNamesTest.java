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
 * slot where none can), on tables small enough that probe clusters wrap around the end, and a live
 * set that swings so the table grows, shrinks and rebuilds.
 */
class RunNamesTest {
  private static final int RUN = 64;

  @Test
  void findsExactlyWhatWasNamedThroughChurn() {
    for (long seed = 1; seed <= 40; seed++) {
      churn(seed);
    }
  }

  private static void churn(long seed) {
    final SplittableRandom rnd = new SplittableRandom(seed);
    // nodes whose runs hold the keys: a slot's key is its block's hash
    final List<RunNode> nodes = new ArrayList<>();
    final Map<Long, long[]> where = new HashMap<>(); // seq -> {node index, offset}
    for (int n = 0; n < 8; n++) {
      final long[] seqs = new long[RUN];
      for (int j = 0; j < RUN; j++) {
        seqs[j] = rnd.nextLong();
        where.put(seqs[j], new long[] {n, j});
      }
      nodes.add(new RunNode(n, null, new RunState(seqs, seqs, RunState.NONE, RunState.NONE, null)));
    }
    final List<Long> all = new ArrayList<>(where.keySet());
    final RunNames names = new RunNames();
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
}
