package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Without threads or timing: a clear of a large worker runs as many short steps, so the version
 * readers check is even (readable) again after every {@link BlockIndex#STEP_CHANGES} holder changes
 * instead of once at the end. The writer's hook after each holder change records the version; a
 * clear in one step would show one odd version, a clear in steps one per step. {@link
 * ClearRaceTest} checks, with real readers, that every state between steps is a valid one.
 */
class ClearStepsTest {
  private static final VarHandle VERSION;

  static {
    try {
      VERSION =
          MethodHandles.privateLookupIn(SteppedIndex.class, MethodHandles.lookup())
              .findVarHandle(SteppedIndex.class, "version", long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 32})
  void aLargeClearIsManyStepsEachEndingWithAnEvenVersion(int jump) {
    largeClear(jump, false);
  }

  /** The same on the unbounded kind's packed index (PackedPositionalIndex). */
  @ParameterizedTest
  @ValueSource(ints = {1, 32})
  void aLargeClearOfThePackedIndexIsManySteps(int jump) {
    largeClear(jump, true);
  }

  private void largeClear(int jump, boolean packed) {
    final int blocks = 10_000;
    final Set<Long> versions = new HashSet<>();
    final boolean[] recording = {false};
    final SteppedIndex[] self = new SteppedIndex[1];
    final long[] oddSeen = {0};
    final Runnable hook =
        () -> {
          if (!recording[0]) return;
          long v = (long) VERSION.get(self[0]);
          if ((v & 1) == 1) oddSeen[0]++;
          versions.add(v);
        };
    SteppedIndex index =
        packed
            ? new PackedPositionalIndex(jump, hook, PackedPositionalIndex.REUSE_BATCH)
            : new PositionalIndex(jump, hook);
    self[0] = index;
    long[] locals = new long[blocks];
    for (int i = 0; i < blocks; i++) locals[i] = 1L + i;
    Worker w = new Worker(7, 0);
    index.apply(
        new RouterEvent(
            w, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(locals), locals)));
    long before = (long) VERSION.get(index);
    assertThat(before & 1).as("version between operations").isZero();
    recording[0] = true;
    index.clearWorker(7);
    recording[0] = false;
    long after = (long) VERSION.get(index);
    assertThat(after & 1).as("version after the clear").isZero();
    // docs/concurrency.md: steps of at most 256 holder changes, so 10,000 blocks need 40 steps
    int steps = 40;
    assertThat(oddSeen[0]).as("holder changes seen inside a step").isGreaterThanOrEqualTo(blocks);
    assertThat(versions)
        .as("distinct (odd) versions during the clear: one per step of at most 256 changes")
        .hasSizeGreaterThanOrEqualTo(steps)
        .allMatch(v -> (v & 1) == 1);
    assertThat(after - before)
        .as("version advance: two per step")
        .isGreaterThanOrEqualTo(2L * steps);
    assertThat(index.findMatches(locals, false).score(w)).isZero();
  }
}
