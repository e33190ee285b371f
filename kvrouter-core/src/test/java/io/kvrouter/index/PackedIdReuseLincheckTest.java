package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.List;
import org.jetbrains.kotlinx.lincheck.Actor;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.junit.jupiter.api.Test;

/**
 * Lincheck: the packed positional index hands the id of a pruned block to the next new block at
 * once (reuse batch 1), and a reader racing that never scores a worker by the holders of the block
 * that took the id (PackedPositionalIndex, "Id reuse").
 *
 * <pre>
 * Implementation notes
 *
 * Two three-block paths (A and B) and two workers. The hand-written scenario is the race: worker
 * 0 holds A0 A1, worker 1 holds A0 A1 A2; a reader scores worker 0 on A (2 throughout) while the
 * writer removes worker 1's A2 (its id is freed) and stores B0 for worker 0 (B0 takes that id,
 * held by worker 0). A reader that matched A2's key before the reuse and loaded the id's holders
 * after it would score worker 0 at 3 on A, a score it never had. Without the version bump before
 * a reuse the model checker finds that interleaving; random scenarios of the same operations
 * and a stress run cover the rest. Budgets as ConcurrentRadixTreeLincheckTest's (LincheckRuns).
 * </pre>
 */
@Param(name = "worker", gen = IntGen.class, conf = "0:1")
@Param(name = "path", gen = IntGen.class, conf = "0:1")
@Param(name = "pos", gen = IntGen.class, conf = "0:2")
public class PackedIdReuseLincheckTest {
  private static final long[][] PATHS = {{11, 12, 13}, {21, 22, 23}};
  private static final long[][] SEQS = {
    SequenceHasher.sequenceHashes(PATHS[0]), SequenceHasher.sequenceHashes(PATHS[1])
  };

  private final KvIndex index = new PackedPositionalIndex(2, null, 1);

  @Operation
  public void store(
      @Param(name = "worker") int worker,
      @Param(name = "path") int path,
      @Param(name = "pos") int pos) {
    long[] s = {SEQS[path][pos]};
    long[] l = {PATHS[path][pos]};
    index.apply(
        new RouterEvent(
            new Worker(worker, 0),
            0,
            pos == 0
                ? CacheEvent.storedAtRoot(s, l)
                : CacheEvent.stored(SEQS[path][pos - 1], s, l)));
  }

  @Operation
  public void remove(
      @Param(name = "worker") int worker,
      @Param(name = "path") int path,
      @Param(name = "pos") int pos) {
    index.apply(new RouterEvent(new Worker(worker, 0), 0, CacheEvent.removed(SEQS[path][pos])));
  }

  @Operation
  public int score(@Param(name = "worker") int worker, @Param(name = "path") int path) {
    return index.findMatches(PATHS[path], false).score(new Worker(worker, 0));
  }

  private static Actor op(String name, Object... args) {
    return ConcurrentRadixTreeLincheckTest.op(PackedIdReuseLincheckTest.class, name, args);
  }

  @Test
  void modelChecking() {
    LincheckRuns.modelChecking()
        .addCustomScenario(
            ConcurrentRadixTreeLincheckTest.scenario(
                List.of(
                    op("store", 0, 0, 0),
                    op("store", 0, 0, 1),
                    op("store", 1, 0, 0),
                    op("store", 1, 0, 1),
                    op("store", 1, 0, 2)),
                List.of(op("score", 0, 0)),
                List.of(op("remove", 1, 0, 2), op("store", 0, 1, 0))))
        .iterations(LincheckRuns.MODEL_CHECKING_ITERATIONS)
        .invocationsPerIteration(LincheckRuns.MODEL_CHECKING_INVOCATIONS)
        .threads(2)
        .actorsPerThread(3)
        .check(getClass());
  }

  @Test
  void stress() {
    LincheckRuns.stress()
        .iterations(LincheckRuns.STRESS_ITERATIONS)
        .invocationsPerIteration(200)
        .threads(2)
        .actorsPerThread(5)
        .check(getClass());
  }
}
