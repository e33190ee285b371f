package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.TestWaits;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link LaneQueue}: order per producer, nothing lost or doubled, back-pressure, a dead consumer.
 */
@Timeout(value = TestWaits.HANG_SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class LaneQueueTest {
  private static final int PRODUCERS = 4;
  private static final int PER_PRODUCER = 20_000;

  /**
   * Four producers push 20,000 numbered items each through a ring of 8 slots (so they wait for room
   * thousands of times, and the ring wraps around thousands of times) while one consumer, started
   * once they have filled the ring, drains in batches of up to 5 and parks when it finds nothing:
   * every item arrives once, and each producer's items arrive in the order it put them.
   */
  @Test
  void everyItemArrivesOnceInEachProducersOrder() throws InterruptedException {
    everyItemArrivesOnce(8, 5, PER_PRODUCER);
  }

  /**
   * The same at the size the lanes use ({@link ThreadPoolIndexer#QUEUE_CAPACITY} slots, batches of
   * {@link ThreadPoolIndexer#BATCH}), where waiting producers are woken at RESUME_MAX free slots
   * rather than at a quarter of the ring: 4 × 3 rings' worth of items, so the ring (full before the
   * consumer starts) wraps around and wakes its waiting producers many times.
   */
  @Test
  void everyItemArrivesOnceAtTheLanesRingSize() throws InterruptedException {
    everyItemArrivesOnce(
        ThreadPoolIndexer.QUEUE_CAPACITY,
        ThreadPoolIndexer.BATCH,
        3 * ThreadPoolIndexer.QUEUE_CAPACITY);
  }

  private static void everyItemArrivesOnce(int capacity, int batchSize, int perProducer)
      throws InterruptedException {
    LaneQueue q = new LaneQueue(capacity);
    long[] next = new long[PRODUCERS]; // the next number expected from each producer
    AtomicReference<String> problem = new AtomicReference<>();
    CountDownLatch consumed = new CountDownLatch(1);
    Thread consumer =
        new Thread(
            () -> {
              Object[] batch = new Object[batchSize];
              long seen = 0;
              while (seen < (long) PRODUCERS * perProducer) {
                int n = q.drain(batch, batch.length);
                if (n == 0) {
                  q.awaitItem();
                  continue;
                }
                for (int i = 0; i < n; i++) {
                  long[] item = (long[]) batch[i];
                  int p = (int) item[0];
                  if (item[1] != next[p] && problem.get() == null) {
                    problem.set("producer " + p + ": got " + item[1] + ", expected " + next[p]);
                  }
                  next[p] = item[1] + 1;
                  seen++;
                }
              }
              consumed.countDown();
            });
    q.consumer(consumer);
    List<Thread> producers = new ArrayList<>();
    for (int p = 0; p < PRODUCERS; p++) {
      final int id = p;
      producers.add(
          Thread.ofPlatform()
              .start(
                  () -> {
                    for (long i = 0; i < perProducer; i++) {
                      try {
                        q.put(new long[] {id, i}, () -> false);
                      } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                      }
                    }
                  }));
    }
    // the consumer starts once the producers have filled the ring, so that they wait for room
    while (q.size() < capacity) Thread.onSpinWait();
    consumer.start();
    for (Thread t : producers) t.join();
    assertThat(consumed.await(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
    assertThat(problem.get()).isNull();
    assertThat(next).containsOnly(perProducer);
    assertThat(q.size()).isZero();
  }

  /**
   * A producer facing a full ring whose consumer has stopped gives up (put returns false) instead
   * of waiting forever, and queues nothing: the ring still holds exactly the first four items.
   */
  @Test
  void aFullRingWithAStoppedConsumerRefusesInsteadOfWaiting() throws InterruptedException {
    LaneQueue q = new LaneQueue(4);
    for (int i = 0; i < 4; i++) assertThat(q.put(i, () -> false)).isTrue();
    assertThat(q.put(99, () -> true)).isFalse();
    Object[] batch = new Object[8];
    assertThat(q.drain(batch, batch.length)).isEqualTo(4);
    assertThat(batch).startsWith(0, 1, 2, 3);
    assertThat(q.drain(batch, batch.length)).isZero();
  }

  /** A ring's capacity must be a power of two of at least 4. */
  @Test
  void capacityMustBeAPowerOfTwo() {
    assertThatThrownBy(() -> new LaneQueue(6))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("capacity must be a power of two >= 4, got 6");
    assertThatThrownBy(() -> new LaneQueue(2)).isInstanceOf(IllegalArgumentException.class);
  }
}
