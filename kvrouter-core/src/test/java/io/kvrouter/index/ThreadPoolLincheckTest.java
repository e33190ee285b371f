package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.StressOptions;
import org.jetbrains.lincheck.datastructures.Validate;
import org.junit.jupiter.api.Test;

/**
 * Lincheck (stress) on {@code threadPool(concurrentRadixTree(), 2)}: what the thread pool promises
 * is that an event is visible once {@code flush()} returns, so each write operation is {@code
 * apply} followed by {@code flush}; with that, writes and one worker's score are linearizable.
 * Model checking is not used: the pool's own threads are outside Lincheck's control. {@link
 * #closePool()} stops each invocation's threads.
 */
@Param(name = "worker", gen = IntGen.class, conf = "0:1")
@Param(name = "pos", gen = IntGen.class, conf = "0:2")
public class ThreadPoolLincheckTest {
  private static final long[] PATH = ConcurrentRadixTreeLincheckTest.PATH;
  private static final long[] SEQ = ConcurrentRadixTreeLincheckTest.SEQ;

  private final KvIndex index = KvIndexes.threadPool(KvIndexes.concurrentRadixTree(), 2);

  private void applyAndFlush(RouterEvent e) {
    index.apply(e);
    index.flush();
  }

  @Operation
  public void store(@Param(name = "worker") int worker, @Param(name = "pos") int pos) {
    long[] s = {SEQ[pos]};
    long[] l = {PATH[pos]};
    applyAndFlush(
        new RouterEvent(
            Worker.of(worker),
            0,
            pos == 0 ? CacheEvent.storedAtRoot(s, l) : CacheEvent.stored(SEQ[pos - 1], s, l)));
  }

  @Operation
  public void remove(@Param(name = "worker") int worker, @Param(name = "pos") int pos) {
    applyAndFlush(new RouterEvent(Worker.of(worker), 0, CacheEvent.removed(SEQ[pos])));
  }

  @Operation
  public void clearWorker(@Param(name = "worker") int worker) {
    index.clearWorker(worker);
    index.flush();
  }

  @Operation
  public int score(@Param(name = "worker") int worker) {
    return index.findMatches(PATH, false).score(Worker.of(worker));
  }

  @Validate
  public void closePool() {
    index.close();
  }

  @Test
  void stress() {
    new StressOptions()
        .iterations(ConcurrentRadixTreeLincheckTest.ITERATIONS)
        .invocationsPerIteration(200)
        .threads(2)
        .actorsPerThread(3)
        .check(getClass());
  }
}
