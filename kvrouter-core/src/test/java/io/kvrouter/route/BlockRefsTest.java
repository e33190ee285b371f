package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link BlockRefs} against a {@code HashMap<Long, Integer>} of counts on seeded random sequences
 * of increments and decrements: keys from a small pool (so counts pile up and probe clusters
 * collide), keys whose Fibonacci homes coincide (multiples that differ only in low bits the hash
 * spreads, and 0), phases of growth past several doublings and of draining to empty (so the table
 * halves again). After every step the answers agree, and every few steps every key's count and the
 * key set are compared whole. The seed of a failing case is in the message.
 */
class BlockRefsTest {

  @Test
  void agreesWithAMapOfCounts() {
    for (int c = 0; c < 60; c++) {
      final long seed = 0xB10C_2026L + c;
      final SplittableRandom r = new SplittableRandom(seed);
      final int poolSize = 1 + r.nextInt(c % 3 == 0 ? 20 : 3_000);
      final long[] pool = new long[poolSize];
      for (int i = 0; i < poolSize; i++) {
        pool[i] =
            switch (r.nextInt(4)) {
              case 0 -> 0L;
              case 1 -> (long) i << 58; // homes differ in the top bits only: long clusters
              case 2 -> r.nextInt(16);
              default -> r.nextLong();
            };
      }
      final BlockRefs refs = new BlockRefs();
      final Map<Long, Integer> expected = new HashMap<>();
      final List<Long> held = new ArrayList<>(); // one entry per count, for picking decrements
      final String what = "seed " + seed;
      for (int step = 0; step < 20_000; step++) {
        // phases: mostly adds, then mostly removes, so the table grows and shrinks
        final boolean adding = (step / 2_500) % 2 == 0 ? r.nextInt(10) < 8 : r.nextInt(10) < 2;
        if (adding || held.isEmpty()) {
          final long key = pool[r.nextInt(poolSize)];
          final boolean fresh = !expected.containsKey(key);
          assertThat(refs.increment(key)).as(what).isEqualTo(fresh);
          expected.merge(key, 1, Integer::sum);
          held.add(key);
        } else {
          final int at = r.nextInt(held.size());
          final long key = held.get(at);
          held.set(at, held.get(held.size() - 1));
          held.remove(held.size() - 1);
          final int left = expected.get(key) - 1;
          if (left == 0) expected.remove(key);
          else expected.put(key, left);
          assertThat(refs.decrement(key)).as(what).isEqualTo(left == 0);
        }
        assertThat(refs.size()).as(what).isEqualTo(expected.size());
        final long probe = pool[r.nextInt(poolSize)];
        assertThat(refs.contains(probe)).as(what).isEqualTo(expected.containsKey(probe));
        if (step % 997 == 0) {
          for (long k : pool) {
            assertThat(refs.count(k)).as(what).isEqualTo(expected.getOrDefault(k, 0));
          }
          final List<Long> keys = new ArrayList<>();
          for (long k : refs.keys()) keys.add(k);
          assertThat(keys).as(what).containsExactlyInAnyOrderElementsOf(expected.keySet());
        }
      }
    }
  }

  @Test
  void aKeyNotHeldCannotBeDecremented() {
    BlockRefs refs = new BlockRefs();
    refs.increment(7);
    assertThat(refs.decrement(7)).isTrue();
    assertThatThrownBy(() -> refs.decrement(7))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("block 7 is not held");
    assertThat(refs.size()).isZero();
  }
}
