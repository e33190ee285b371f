package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.StressOptions;
import org.junit.jupiter.api.Test;

/**
 * Lincheck: single-block stores and removes on a three-block path (holes included), and one
 * worker's score, are linearizable on the concurrent radix tree (docs/concurrency.md). Subclasses
 * run the same scenarios on the other concurrent kinds.
 */
@Param(name = "worker", gen = IntGen.class, conf = "0:0")
@Param(name = "pos", gen = IntGen.class, conf = "0:2")
public class ConcurrentRadixTreeLincheckTest {
  static final long[] PATH = {11, 12, 13};
  static final long[] SEQ = SequenceHasher.sequenceHashes(PATH);
  static final int ITERATIONS = Integer.getInteger("kvrouter.lincheck.iterations", 30);

  private final KvIndex index = newIndex();

  protected KvIndex newIndex() {
    return KvIndexes.concurrentRadixTree();
  }

  @Operation
  public void store(@Param(name = "worker") int worker, @Param(name = "pos") int pos) {
    long[] s = {SEQ[pos]};
    long[] l = {PATH[pos]};
    index.apply(
        new RouterEvent(
            Worker.of(worker),
            0,
            pos == 0 ? CacheEvent.storedAtRoot(s, l) : CacheEvent.stored(SEQ[pos - 1], s, l)));
  }

  @Operation
  public void remove(@Param(name = "worker") int worker, @Param(name = "pos") int pos) {
    index.apply(new RouterEvent(Worker.of(worker), 0, CacheEvent.removed(SEQ[pos])));
  }

  @Operation
  public void clear(@Param(name = "worker") int worker) {
    index.apply(new RouterEvent(Worker.of(worker), 0, CacheEvent.cleared()));
  }

  @Operation
  public int score(@Param(name = "worker") int worker) {
    return index.findMatches(PATH, false).score(Worker.of(worker));
  }

  @Test
  void modelChecking() {
    new ModelCheckingOptions()
        .iterations(ITERATIONS)
        .invocationsPerIteration(500)
        .threads(2)
        .actorsPerThread(3)
        .check(getClass());
  }

  @Test
  void stress() {
    new StressOptions()
        .iterations(ITERATIONS)
        .invocationsPerIteration(500)
        .threads(2)
        .actorsPerThread(3)
        .check(getClass());
  }
}
