package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** A server's read deadline stops with it (the deadline itself: http.ReadDeadlineTest). */
class ReadDeadlineSweeperTest {

  @Test
  void aServerStopsItsSweeperThreadWhenItStops() {
    Set<Thread> before = sweepers();
    Set<Thread> mine;
    try (HttpFixture http = new HttpFixture()) {
      assertThat(http.get("/health").status()).isEqualTo(200); // starts the sweeper
      mine = sweepers();
      mine.removeAll(before);
      assertThat(mine).hasSize(1);
    }
    assertThat(mine.iterator().next().isAlive()).isFalse();
  }

  private static Set<Thread> sweepers() {
    Set<Thread> out = new HashSet<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().equals("kvrouter-read-deadline") && t.isAlive()) out.add(t);
    }
    return out;
  }
}
