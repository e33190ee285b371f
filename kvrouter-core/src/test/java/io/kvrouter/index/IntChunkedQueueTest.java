package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayDeque;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link IntChunkedQueue} against {@link ArrayDeque} on seeded streams that grow the queue over
 * many chunks, cycle it (poll and add back, as the clock hand and a compaction do), drain it, clear
 * it now and then and grow it again; sizes and every polled int must agree.
 */
class IntChunkedQueueTest {

  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1, 2, 3})
  void behavesLikeArrayDeque(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    IntChunkedQueue queue = new IntChunkedQueue();
    ArrayDeque<Integer> ref = new ArrayDeque<>();
    int next = 0;
    int maxSize = 0;
    int emptied = 0;
    for (int op = 0; op < 300_000; op++) {
      int phase = (op / 30_000) % 3; // grow, cycle, drain
      int r = rnd.nextInt(1000);
      if (r == 0 && phase == 2) {
        queue.clear();
        ref.clear();
      } else if (phase == 0 ? r < 700 : phase == 1 ? r < 500 : r < 100) {
        queue.addLast(next);
        ref.addLast(next);
        next++;
      } else if (!ref.isEmpty()) {
        int a = queue.pollFirst();
        assertThat(a).as("seed %d, op %d", seed, op).isEqualTo(ref.pollFirst());
        if (phase == 1) {
          queue.addLast(a);
          ref.addLast(a);
        }
      }
      assertThat(queue.size()).isEqualTo(ref.size());
      assertThat(queue.isEmpty()).isEqualTo(ref.isEmpty());
      maxSize = Math.max(maxSize, ref.size());
      if (ref.isEmpty()) emptied++;
    }
    assertThat(maxSize).as("grew over several chunks").isGreaterThan(2 * IntChunkedQueue.CHUNK);
    assertThat(emptied).as("drained to empty").isPositive();
    while (!ref.isEmpty()) assertThat(queue.pollFirst()).isEqualTo(ref.pollFirst());
    assertThatThrownBy(queue::pollFirst).isInstanceOf(IllegalStateException.class);
  }
}
