package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.transport.TestWaits;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The replica's {@link Progress} without a server: a waiter is woken by the write that satisfies
 * it, never left waiting for its timeout (a lost wake-up would hang a round for a day; the class
 * timeout catches it), and timeouts, interrupts and stop answer with the condition as it is.
 */
@Timeout(TestWaits.HANG_SECONDS)
class ProgressTest {
  private static final Duration FOREVER = Duration.ofDays(1);
  private static final int ROUNDS = 2_000;

  @Test
  void aWaiterRacingTheWriteThatSatisfiesItIsWoken() throws Exception {
    Progress p = new Progress();
    CyclicBarrier both = new CyclicBarrier(2);
    CompletableFuture<Void> writer =
        CompletableFuture.runAsync(
            () -> {
              for (int i = 1; i <= ROUNDS; i++) {
                await(both);
                p.applied(i);
              }
            },
            ProgressTest::thread);
    for (int i = 1; i <= ROUNDS; i++) {
      await(both);
      assertThat(p.awaitApplied(i, FOREVER)).as("round %d", i).isTrue();
    }
    writer.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS);
  }

  @Test
  void aReadyWaiterRacingReadyIsWoken() throws Exception {
    Progress p = new Progress();
    CyclicBarrier both = new CyclicBarrier(2);
    CyclicBarrier reset = new CyclicBarrier(2);
    CompletableFuture<Void> writer =
        CompletableFuture.runAsync(
            () -> {
              for (int i = 1; i <= ROUNDS; i++) {
                await(both);
                p.ready(true);
                await(reset);
                p.ready(false);
                await(reset);
              }
            },
            ProgressTest::thread);
    for (int i = 1; i <= ROUNDS; i++) {
      await(both);
      assertThat(p.awaitReady(FOREVER)).as("round %d", i).isTrue();
      await(reset);
      await(reset);
      assertThat(p.ready()).isFalse();
    }
    writer.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS);
  }

  @Test
  void aWaiterForALaterSequenceKeepsWaitingThroughEarlierOnes() throws Exception {
    Progress p = new Progress();
    CompletableFuture<Boolean> waiter =
        CompletableFuture.supplyAsync(() -> p.awaitApplied(100, FOREVER), ProgressTest::thread);
    for (int i = 1; i < 100; i++) p.applied(i);
    assertThat(p.awaitApplied(99, FOREVER)).isTrue();
    assertThat(waiter).as("not satisfied by 99").isNotDone();
    p.applied(100);
    assertThat(waiter.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
    assertThat(p.lastApplied()).isEqualTo(100);
  }

  @Test
  void aTimeoutOrAnInterruptAnswersWithTheConditionAsItIs() {
    Progress p = new Progress();
    p.applied(4);
    assertThat(p.awaitApplied(5, Duration.ofMillis(20))).isFalse();
    assertThat(p.awaitReady(Duration.ofMillis(20))).isFalse();
    assertThat(p.awaitApplied(4, Duration.ZERO)).as("already there").isTrue();

    Thread.currentThread().interrupt();
    assertThat(p.awaitApplied(5, FOREVER)).isFalse();
    assertThat(Thread.interrupted()).as("the interrupt is kept").isTrue();
  }

  @Test
  void stopWakesEveryWaiterAndLaterWaitsReturnAtOnce() throws Exception {
    Progress p = new Progress();
    p.applied(3);
    CompletableFuture<Boolean> applied =
        CompletableFuture.supplyAsync(() -> p.awaitApplied(10, FOREVER), ProgressTest::thread);
    CompletableFuture<Boolean> ready =
        CompletableFuture.supplyAsync(() -> p.awaitReady(FOREVER), ProgressTest::thread);
    p.stop();
    assertThat(applied.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS)).isFalse();
    assertThat(ready.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS)).isFalse();
    assertThat(p.awaitApplied(11, FOREVER)).isFalse();
    assertThat(p.awaitApplied(3, FOREVER)).as("what was applied stays applied").isTrue();
  }

  /** Runs a task on a thread of its own (the common pool may have a single thread). */
  private static void thread(Runnable task) {
    Thread t = new Thread(task, "progress-test");
    t.setDaemon(true);
    t.start();
  }

  private static void await(CyclicBarrier b) {
    try {
      b.await(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
