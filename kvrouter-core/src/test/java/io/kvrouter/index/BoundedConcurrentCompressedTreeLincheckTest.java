package io.kvrouter.index;

import java.util.List;
import org.jetbrains.kotlinx.lincheck.Actor;
import org.junit.jupiter.api.Test;

/**
 * The Lincheck scenarios of {@link ConcurrentRadixTreeLincheckTest} on {@code
 * concurrentCompressedTree(2)}: the scenarios' three-block path does not fit, so stores evict
 * (dropping the tails of runs, then pruning and merging them) while readers mark used bits, and
 * every history must still be linearizable. One more hand-written scenario reads a rank while
 * another rank's store makes the hand cut the first rank's run: the read sees the cut before or
 * after, never in between (a drop published in two steps fails it).
 */
public class BoundedConcurrentCompressedTreeLincheckTest extends ConcurrentRadixTreeLincheckTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.concurrentCompressedTree(2);
  }

  private static Actor op(String name, Object... args) {
    return ConcurrentRadixTreeLincheckTest.op(
        BoundedConcurrentCompressedTreeLincheckTest.class, name, args);
  }

  @Test
  void aReadDuringAnEvictionSeesTheRunBeforeOrAfter() {
    LincheckRuns.modelChecking()
        .addCustomScenario(
            scenario(
                List.of(op("store", 0, 0, 0), op("store", 0, 0, 1)), // (0, 0) holds [11, 12]
                List.of(op("score", 0, 0), op("score", 0, 0)),
                List.of(op("store", 1, 0, 0)))) // a third pair: (0, 0) loses 12
        .iterations(0)
        .invocationsPerIteration(LincheckRuns.MODEL_CHECKING_INVOCATIONS)
        .check(getClass());
  }
}
