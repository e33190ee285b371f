package io.kvrouter.server.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The read deadline is an object of its server: it fires for its own requests and stops with it
 * (the server's side: io.kvrouter.server.ReadDeadlineSweeperTest).
 */
class ReadDeadlineTest {

  @Test
  void aStalledRequestIsInterruptedAndCloseStopsTheSweeper() throws Exception {
    ReadDeadline d = new ReadDeadline(Duration.ofMillis(200));
    ReadDeadline other = new ReadDeadline(Duration.ofMillis(200));
    try {
      assertThat(d.sweeping()).as("no sweeper before the first request line").isFalse();
      CompletableFuture<Boolean> cutOff = new CompletableFuture<>();
      Thread.ofVirtual()
          .start(
              () -> {
                d.prologue(null, null); // a request line, then nothing
                try {
                  new CountDownLatch(1).await(30, TimeUnit.SECONDS);
                  cutOff.complete(false);
                } catch (InterruptedException e) {
                  cutOff.complete(d.timedOut());
                }
              });
      assertThat(cutOff.get(20, TimeUnit.SECONDS)).as("interrupted by its deadline").isTrue();
      assertThat(d.closed()).isEqualTo(1);
      assertThat(d.sweeping()).isTrue();
      assertThat(other.closed()).as("another server's deadline").isZero();
      assertThat(other.sweeping()).isFalse();
    } finally {
      d.close();
      other.close();
    }
    assertThat(d.sweeping()).isFalse();
    // once closed, a late request line starts no sweeper again
    Thread.ofVirtual().start(() -> d.prologue(null, null)).join();
    assertThat(d.sweeping()).isFalse();
  }
}
