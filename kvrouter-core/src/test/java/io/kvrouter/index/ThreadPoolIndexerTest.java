package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.TestWaits;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The lanes of {@link ThreadPoolIndexer}: batches, order and failures. */
@Timeout(value = TestWaits.HANG_SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ThreadPoolIndexerTest {
  private static final Worker W0 = new Worker(0, 0);
  private static final Worker W1 = new Worker(1, 0);

  private static RouterEvent stored(Worker w, long id, long... locals) {
    return new RouterEvent(
        w, id, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(locals), locals));
  }

  /**
   * The lane is held inside its first event while 2,000 more are queued, so it then takes them in
   * large batches; the event whose application throws in the middle of one is counted and skipped,
   * and every other event of the batch, before and after it, is applied in order.
   */
  @Test
  void aFailingEventInABatchIsSkippedAndTheRestApplied() throws InterruptedException {
    CountDownLatch firstEventRunning = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger changes = new AtomicInteger();
    Runnable hook =
        () -> {
          int n = changes.incrementAndGet();
          if (n == 1) {
            firstEventRunning.countDown();
            try {
              release.await();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          if (n == 1_000) throw new IllegalStateException("injected failure");
        };
    ThreadPoolIndexer pool = new ThreadPoolIndexer(new PositionalIndex(4, hook), 1);
    try {
      pool.apply(stored(W0, 0, 1_000_000L));
      assertThat(firstEventRunning.await(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
      for (int i = 1; i < 2_000; i++) {
        pool.apply(stored(i % 2 == 0 ? W0 : W1, i, 1_000_000L + i));
      }
      // a worker-wide operation between two events of one batch runs between them
      Worker w2 = new Worker(2, 0);
      pool.apply(stored(w2, 0, 7L));
      pool.clearWorker(2);
      pool.apply(stored(w2, 1, 8L));
      release.countDown();
      pool.flush();
      assertThat(pool.findMatches(new long[] {7L}, false).scores()).isEmpty();
      assertThat(pool.findMatches(new long[] {8L}, false).scores()).isEqualTo(Map.of(w2, 1));
      pool.clearWorker(2);
      pool.flush();
      assertThat(pool.failures()).isEqualTo(1);
      // the failing event threw after its one holders change, so its block is held too; every
      // event after it was applied (each stores one block: one holders change per event)
      assertThat(changes.get()).isEqualTo(2_000 + 4); // and worker 2: two stores, two removals
      assertThat(pool.stats().blocksIndexed()).isEqualTo(2_000);
      assertThat(pool.stats().storedEvents()).isEqualTo(1_999 + 2);
      assertThat(pool.findMatches(new long[] {1_001_999L}, false).scores())
          .isEqualTo(Map.of(W1, 1));
      assertThat(pool.findMatches(new long[] {1_001_000L}, false).scores())
          .isEqualTo(Map.of(W0, 1));
      assertThat(pool.findMatches(new long[] {1_000_999L}, false).scores())
          .as("the failing event's block")
          .isEqualTo(Map.of(W1, 1));
    } finally {
      release.countDown();
      pool.close();
    }
  }

  /**
   * An Error (here a failed assertion in a test hook) ends the lane's thread; flush and every later
   * apply then throw, naming the lane and the error, instead of waiting forever for a thread that
   * is gone.
   */
  @Test
  void aLaneStoppedByAnErrorMakesFlushAndApplyThrow() {
    ThreadPoolIndexer pool =
        new ThreadPoolIndexer(
            new PositionalIndex(
                4,
                () -> {
                  throw new AssertionError("injected error");
                }),
            1);
    try {
      pool.apply(stored(W0, 0, 1L));
      assertThatThrownBy(pool::flush)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining(
              "indexer lane 0 stopped on java.lang.AssertionError: injected error");
      assertThatThrownBy(() -> pool.apply(stored(W0, 1, 2L)))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("its events are not applied");
    } finally {
      pool.close();
    }
  }
}
