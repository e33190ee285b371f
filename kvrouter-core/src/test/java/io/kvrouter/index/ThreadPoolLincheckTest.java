package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.Validate;
import org.junit.jupiter.api.Test;

/**
 * Lincheck (stress) on {@code threadPool(concurrentRadixTree(), 2)}: what the thread pool promises
 * is that an event is visible once {@code flush()} returns, so each write operation is {@code
 * apply} followed by {@code flush}; with that, writes and one worker's score are linearizable.
 * Model checking is not used: the pool's own threads are outside Lincheck's control. {@link
 * #closePool()} stops each invocation's threads.
 *
 * <p>Two worker ids with dp ranks 0 and 1: the ranks of one worker share a lane, and the two ids (0
 * and 3) go to the two lanes, whose threads apply concurrently, taking turns on the inner index's
 * writers' lock. Clears are the per-rank {@code Cleared} event: {@code clearWorker} clears a
 * worker's ranks one step each, so two reads of different ranks may see one cleared and not the
 * other, which no sequential order of an atomic {@code clearWorker} explains (its ordering on the
 * lane is checked by ThreadPoolIndexerTest).
 *
 * <p>Budget: LincheckRuns.STRESS_ITERATIONS random scenarios (10; 100 under -Pthorough) of 2
 * threads x 5 operations, 50 invocations each (each invocation starts and closes a pool); with
 * {@code apply} not followed by {@code flush} the test fails at this budget.
 */
@Param(name = "worker", gen = IntGen.class, conf = "0:1")
@Param(name = "rank", gen = IntGen.class, conf = "0:1")
@Param(name = "pos", gen = IntGen.class, conf = "0:2")
@SuppressWarnings("this-escape") // newIndex() in a field initializer: Sequential picks a kind
public class ThreadPoolLincheckTest {
  private static final long[] PATH = ConcurrentRadixTreeLincheckTest.PATH;
  private static final long[] SEQ = ConcurrentRadixTreeLincheckTest.SEQ;

  /** Worker ids by the worker parameter: 0 and 3 go to lanes 0 and 1 (ThreadPoolIndexer.laneOf). */
  private static final long[] IDS = {0, 3};

  private final KvIndex index = newIndex();

  KvIndex newIndex() {
    return KvIndexes.threadPool(KvIndexes.concurrentRadixTree(), 2);
  }

  /**
   * The sequential specification: the same operations on the inner kind alone. Lincheck's verifier
   * makes instances of it to replay histories and never validates them, so they must not start
   * threads (with the test class itself as the specification, every replay left a pool's two lane
   * threads and 512 KiB of queues behind: out of memory at 100 iterations).
   */
  public static final class Sequential extends ThreadPoolLincheckTest {
    @Override
    KvIndex newIndex() {
      return KvIndexes.concurrentRadixTree();
    }

    /** Not a test (overriding drops the inherited {@code @Test}): only the specification. */
    @Override
    void stress() {}
  }

  private void applyAndFlush(RouterEvent e) {
    index.apply(e);
    index.flush();
  }

  @Operation
  public void store(
      @Param(name = "worker") int worker,
      @Param(name = "rank") int rank,
      @Param(name = "pos") int pos) {
    long[] q = {SEQ[pos]};
    long[] l = {PATH[pos]};
    applyAndFlush(
        new RouterEvent(
            new Worker(IDS[worker], rank),
            0,
            pos == 0 ? CacheEvent.storedAtRoot(q, l) : CacheEvent.stored(SEQ[pos - 1], q, l)));
  }

  @Operation
  public void remove(
      @Param(name = "worker") int worker,
      @Param(name = "rank") int rank,
      @Param(name = "pos") int pos) {
    applyAndFlush(new RouterEvent(new Worker(IDS[worker], rank), 0, CacheEvent.removed(SEQ[pos])));
  }

  @Operation
  public void clear(@Param(name = "worker") int worker, @Param(name = "rank") int rank) {
    applyAndFlush(new RouterEvent(new Worker(IDS[worker], rank), 0, CacheEvent.cleared()));
  }

  @Operation
  public int score(@Param(name = "worker") int worker, @Param(name = "rank") int rank) {
    return index.findMatches(PATH, false).score(new Worker(IDS[worker], rank));
  }

  @Validate
  public void closePool() {
    index.close();
  }

  @Test
  void stress() {
    LincheckRuns.stress()
        .iterations(LincheckRuns.STRESS_ITERATIONS)
        .invocationsPerIteration(50)
        .threads(2)
        .actorsPerThread(5)
        .sequentialSpecification(Sequential.class)
        .check(getClass());
  }
}
