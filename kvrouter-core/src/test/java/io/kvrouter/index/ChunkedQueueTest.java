package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link ChunkedQueue} against {@link ArrayDeque} on seeded random streams of adds and polls that
 * grow the queue over many chunks, cycle it (poll and add back, as the clock hand does), drain it
 * to empty and grow it again; the sizes, every polled element and the iteration order must agree.
 */
class ChunkedQueueTest {

  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1, 2, 3, 4})
  void behavesLikeArrayDeque(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    ChunkedQueue<Integer> queue = new ChunkedQueue<>();
    ArrayDeque<Integer> ref = new ArrayDeque<>();
    int next = 0;
    int maxSize = 0;
    int emptied = 0;
    for (int op = 0; op < 200_000; op++) {
      // phases: grow, cycle, drain
      int phase = (op / 20_000) % 3;
      int r = rnd.nextInt(100);
      if (phase == 0 ? r < 70 : phase == 1 ? r < 50 : r < 10) {
        queue.addLast(next);
        ref.addLast(next);
        next++;
      } else if (phase == 1 && r < 75) {
        Integer a = queue.pollFirst();
        Integer b = ref.pollFirst();
        assertThat(a).as("seed %d, op %d: cycled", seed, op).isEqualTo(b);
        if (a != null) {
          queue.addLast(a);
          ref.addLast(a);
        }
      } else {
        assertThat(queue.pollFirst())
            .as("seed %d, op %d: poll", seed, op)
            .isEqualTo(ref.pollFirst());
        if (ref.isEmpty()) emptied++;
      }
      assertThat(queue.size()).isEqualTo(ref.size());
      assertThat(queue.isEmpty()).isEqualTo(ref.isEmpty());
      maxSize = Math.max(maxSize, ref.size());
      if (op % 9_973 == 0) assertThat(listOf(queue)).isEqualTo(new ArrayList<>(ref));
    }
    assertThat(maxSize).isGreaterThan(3 * ChunkedQueue.CHUNK);
    assertThat(emptied).isPositive();
    assertThat(listOf(queue)).isEqualTo(new ArrayList<>(ref));
    while (!ref.isEmpty()) assertThat(queue.pollFirst()).isEqualTo(ref.pollFirst());
    assertThat(queue.pollFirst()).isNull();
    assertThat(queue.iterator().hasNext()).isFalse();
  }

  @ParameterizedTest(name = "{0} elements")
  @ValueSource(ints = {ChunkedQueue.CHUNK - 1, ChunkedQueue.CHUNK, ChunkedQueue.CHUNK + 1})
  void fillsAndEmptiesAtChunkEdges(int n) {
    ChunkedQueue<Integer> queue = new ChunkedQueue<>();
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < n; i++) queue.addLast(i);
      assertThat(listOf(queue)).hasSize(n).startsWith(0, 1).endsWith(n - 2, n - 1);
      for (int i = 0; i < n; i++) assertThat(queue.pollFirst()).isEqualTo(i);
      assertThat(queue.isEmpty()).isTrue();
      assertThat(queue.pollFirst()).isNull();
    }
  }

  private static List<Integer> listOf(ChunkedQueue<Integer> queue) {
    List<Integer> out = new ArrayList<>();
    for (Integer x : queue) out.add(x);
    return out;
  }
}
