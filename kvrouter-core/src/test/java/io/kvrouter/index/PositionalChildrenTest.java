package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A positional entry's children (one inline, then a {@link PositionalChildren} set) against a plain
 * set, on seeded random streams of links and unlinks that grow the set through several resizes and
 * shrink it back to one child and to none, so removal's backward shifts run over long probe runs.
 */
class PositionalChildrenTest {

  @ParameterizedTest(name = "seed {0}")
  @ValueSource(longs = {1, 2, 3})
  void behavesLikeASet(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PositionalEntry parent = new PositionalEntry(1L, 1L, null);
    Set<PositionalEntry> ref = new HashSet<>();
    List<PositionalEntry> members = new ArrayList<>();
    int maxSize = 0;
    for (int op = 0; op < 100_000; op++) {
      // phases: grow to a few hundred children, shrink to none, grow again
      boolean growing = (op / 5_000) % 2 == 0;
      if (rnd.nextInt(100) < (growing ? 65 : 30) || members.isEmpty()) {
        PositionalEntry c = new PositionalEntry(rnd.nextLong(), rnd.nextLong(64), parent);
        parent.linkChild(c);
        ref.add(c);
        members.add(c);
      } else {
        int k = rnd.nextInt(members.size());
        PositionalEntry c = members.get(k);
        members.set(k, members.get(members.size() - 1));
        members.remove(members.size() - 1);
        try {
          parent.unlinkChild(c);
        } catch (IllegalStateException e) {
          throw new AssertionError("seed " + seed + ", op " + op + ": a child was lost", e);
        }
        ref.remove(c);
      }
      maxSize = Math.max(maxSize, ref.size());
      if (op % 97 == 0 || ref.size() <= 2) {
        List<PositionalEntry> got = new ArrayList<>();
        parent.addChildrenTo(got);
        assertThat(got).as("seed %d, op %d", seed, op).hasSize(ref.size());
        assertThat(new HashSet<>(got)).as("seed %d, op %d", seed, op).isEqualTo(ref);
        assertThat(parent.hasChildren()).isEqualTo(!ref.isEmpty());
      }
    }
    assertThat(maxSize).isGreaterThan(200);
    PositionalEntry stranger = new PositionalEntry(2L, 2L, parent);
    assertThatThrownBy(() -> parent.unlinkChild(stranger))
        .isInstanceOf(IllegalStateException.class);
  }

  @Test
  void anUnlinkedEntryTakesNoChildren() {
    PositionalEntry e = new PositionalEntry(5L, 5L, null);
    assertThat(e.isLinked()).isTrue();
    PositionalEntry c = new PositionalEntry(6L, 5L, e);
    e.linkChild(c);
    assertThatThrownBy(e::markUnlinked).isInstanceOf(IllegalStateException.class);
    e.unlinkChild(c);
    e.markUnlinked();
    assertThat(e.isLinked()).isFalse();
    assertThat(e.hasChildren()).isFalse();
    assertThatThrownBy(() -> e.linkChild(c)).isInstanceOf(IllegalStateException.class);
  }
}
