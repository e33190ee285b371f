package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link PositionSet} against {@link HashSet} on seeded random adds, removes and clears. */
class PositionSetTest {
  @Test
  void theKeysItUsesAsMarkersAreKeysLikeAnyOther() {
    PositionSet s = new PositionSet();
    assertThat(s.contains(0)).isFalse();
    assertThat(s.add(0)).isTrue();
    assertThat(s.add(1)).isTrue();
    assertThat(s.add(0)).isFalse();
    assertThat(s.contains(0)).isTrue();
    assertThat(s.contains(1)).isTrue();
    assertThat(s.toArray()).containsExactlyInAnyOrder(0L, 1L);
    assertThat(s.remove(0)).isTrue();
    assertThat(s.remove(0)).isFalse();
    assertThat(s.contains(0)).isFalse();
    assertThat(s.size()).isEqualTo(1);
  }

  @ParameterizedTest
  @ValueSource(longs = {1, 2, 3})
  void agreesWithAHashSet(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PositionSet s = new PositionSet();
    Set<Long> model = new HashSet<>();
    for (int op = 0; op < 200_000; op++) {
      // a small key space makes removals hit, tombstones pile up and rehashes reuse them
      long k = rnd.nextInt(4) == 0 ? rnd.nextLong() : rnd.nextInt(3000) - 2;
      int dice = rnd.nextInt(100);
      if (dice < 50) {
        assertThat(s.add(k)).as("add %d", k).isEqualTo(model.add(k));
      } else if (dice < 95) {
        assertThat(s.remove(k)).as("remove %d", k).isEqualTo(model.remove(k));
      } else if (dice == 99 && rnd.nextInt(20) == 0) {
        s.clear();
        model.clear();
      } else {
        assertThat(s.contains(k)).as("contains %d", k).isEqualTo(model.contains(k));
      }
      assertThat(s.size()).isEqualTo(model.size());
    }
    assertThat(Arrays.stream(s.toArray()).boxed().toList())
        .containsExactlyInAnyOrderElementsOf(model);
  }
}
