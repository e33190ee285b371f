package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * {@link ActiveSequences#newBlocksOfChain(long[], int)}, the binary search started from a guess,
 * against a straightforward reference: walk the prompt's chain from the root and count the blocks
 * past the first one no request in flight holds. Seeded random prompts that share prefixes (a few
 * system prompts, then random turns), random adds and frees, and for every query every guess from 0
 * to past the end: the answer must not depend on the guess.
 */
class ActiveSequencesHintTest {

  @Test
  void theAnswerDoesNotDependOnTheGuess() {
    SplittableRandom rnd = new SplittableRandom(20261205);
    AtomicLong held = new AtomicLong();
    ActiveSequences a = new ActiveSequences(Duration.ofSeconds(300), (id, seq, expired) -> {});
    int[] blocks = new int[1];
    a.mirrorInto(blocks, new long[1], new int[1], 0);
    a.countInto(held);
    List<String> live = new ArrayList<>();
    List<long[]> liveSeqs = new ArrayList<>();
    long[][] systems = new long[5][];
    for (int s = 0; s < systems.length; s++) systems[s] = randomLocal(rnd, 1 + rnd.nextInt(12));
    int queries = 0;
    long heldSum = 0;
    for (int step = 0; step < 3_000; step++) {
      if (!live.isEmpty() && rnd.nextInt(3) == 0) {
        int k = rnd.nextInt(live.size());
        assertThat(a.free(live.remove(k))).isTrue();
        heldSum -= liveSeqs.remove(k).length;
      } else {
        long[] seq = prompt(rnd, systems);
        String id = "r" + step;
        a.add(id, seq, 0, 0);
        live.add(id);
        liveSeqs.add(seq);
        heldSum += seq.length;
      }
      assertThat(held.get()).as("the owner's held total").isEqualTo(heldSum);
      HashSet<Long> active = new HashSet<>();
      for (long[] s : liveSeqs) for (long h : s) active.add(h);
      assertThat(blocks[0]).as("the mirrored active blocks").isEqualTo(active.size());
      for (int q = 0; q < 4; q++) {
        long[] query = prompt(rnd, systems);
        int expected = query.length;
        for (long h : query) {
          if (!active.contains(h)) break;
          expected--;
        }
        for (int hint = 0; hint <= query.length + 1; hint++) {
          assertThat(a.newBlocksOfChain(query, hint))
              .as("step %d, %d blocks, guess %d", step, query.length, hint)
              .isEqualTo(expected);
          queries++;
        }
      }
    }
    assertThat(queries).isGreaterThan(50_000);
  }

  /** A system prompt (or none), then 0 to 20 random blocks: its chain of sequence hashes. */
  private static long[] prompt(SplittableRandom rnd, long[][] systems) {
    long[] system = rnd.nextInt(6) == 0 ? new long[0] : systems[rnd.nextInt(systems.length)];
    long[] turn = randomLocal(rnd, rnd.nextInt(21));
    long[] local = new long[system.length + turn.length];
    System.arraycopy(system, 0, local, 0, system.length);
    System.arraycopy(turn, 0, local, system.length, turn.length);
    return SequenceHasher.sequenceHashes(local);
  }

  private static long[] randomLocal(SplittableRandom rnd, int n) {
    long[] out = new long[n];
    for (int i = 0; i < n; i++) out[i] = rnd.nextInt(4); // few values: chains often share blocks
    return out;
  }
}
