package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.transport.TestWaits;
import io.nats.client.Connection;
import java.net.ServerSocket;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import org.junit.jupiter.api.Test;

class NatsConnectionsTest {

  @Test
  void acceptsNatsAndTlsUrlsAloneOrSeparatedByCommas() {
    assertThat(NatsConnections.checkUrl("events", " nats://127.0.0.1:4222 "))
        .isEqualTo("nats://127.0.0.1:4222");
    assertThat(NatsConnections.checkUrl("events", "nats://a:4222, tls://b:4223"))
        .isEqualTo("nats://a:4222, tls://b:4223");
  }

  @Test
  void refusesAnythingElseNamingTheOptionAndTheValue() {
    for (String bad :
        new String[] {"127.0.0.1:4222", "http://a:1", "nats://", "nats://a:1,x", ""}) {
      assertThatThrownBy(() -> NatsConnections.checkUrl("--events", bad))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage(
              "--events: '"
                  + bad
                  + "' is not a NATS server URL; expected nats://host:port (e.g."
                  + " nats://127.0.0.1:4222)");
    }
  }

  @Test
  void aServerThatIsNotThereIsAClearError() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort(); // free once closed: nobody listens there
    }
    String url = "nats://127.0.0.1:" + port;
    List<LogRecord> logged;
    try (LogCapture log = new LogCapture()) {
      assertThatThrownBy(() -> NatsConnections.connect("events", url, "test"))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith("events: cannot connect to NATS at " + url + ": ")
          .hasMessageEndingWith("(is nats-server running there with JetStream, -js?)");
      logged = log.records();
    }
    // the exception is the one line: jnats's default listener logged a SEVERE line before it
    assertThat(logged).extracting(LogRecord::getMessage).isEmpty();
  }

  @Test
  void aLostConnectionIsOneWarningAndItsReturnOneInfoLine() throws Exception {
    try (NatsServer nats = NatsServer.start();
        LogCapture log = new LogCapture()) {
      Connection c = NatsConnections.connect("events", nats.url(), "kvrouter-test");
      try {
        nats.restart();
        assertThat(log.await("reconnected", TestWaits.WAIT.toSeconds())).as(log.text()).isTrue();
      } finally {
        c.close();
      }
      List<LogRecord> records = log.records();
      String text = log.text();
      assertThat(text)
          .contains("WARNING NATS kvrouter-test: disconnected from " + nats.url())
          .contains("INFO NATS kvrouter-test: reconnected to " + nats.url());
      for (LogRecord r : records) {
        assertThat(r.getLevel().intValue()).as(text).isLessThan(Level.SEVERE.intValue());
        assertThat(r.getThrown()).as(text).isNull();
      }
      // one line when it went, one when it came back: nothing for the socket errors in between
      assertThat(records).as(text).hasSize(2);
    }
  }

  @Test
  void aWaitCancelledByACloseOrAReconnectionIsNotLoggedButOtherExceptionsAreOnce()
      throws Exception {
    NatsLogListener l = new NatsLogListener("kvrouter-test");
    l.connected(null);
    try (LogCapture log = new LogCapture()) {
      // what jnats reported in a CI run when a reconnection's PING wait was cancelled
      l.exceptionOccurred(
          null, new TimeoutException("java.util.concurrent.CancellationException: get"));
      l.exceptionOccurred(null, new CancellationException("get"));
      l.exceptionOccurred(null, new RuntimeException(new CancellationException()));
      assertThat(log.records()).as(log.text()).isEmpty();
      l.exceptionOccurred(null, new TimeoutException("no PONG"));
      l.exceptionOccurred(null, new IllegalStateException("second"));
      assertThat(log.text()).isEqualTo("WARNING NATS kvrouter-test: TimeoutException: no PONG\n");
    }
  }

  /** Records what reaches the root logger while open. */
  private static final class LogCapture extends Handler implements AutoCloseable {
    private final List<LogRecord> records = new CopyOnWriteArrayList<>();
    private final Logger root = Logger.getLogger("");

    LogCapture() {
      root.addHandler(this);
    }

    @Override
    public synchronized void publish(LogRecord r) {
      records.add(r);
      notifyAll();
    }

    /** Waits until a record's message contains {@code fragment}; false after {@code seconds}. */
    synchronized boolean await(String fragment, long seconds) throws InterruptedException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
      while (!text().contains(fragment)) {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        if (left <= 0) return false;
        wait(left);
      }
      return true;
    }

    List<LogRecord> records() {
      return List.copyOf(records);
    }

    String text() {
      StringBuilder sb = new StringBuilder();
      for (LogRecord r : records) {
        sb.append(r.getLevel()).append(' ').append(new SimpleFormatter().formatMessage(r));
        sb.append('\n');
      }
      return sb.toString();
    }

    @Override
    public void flush() {}

    @Override
    public void close() {
      root.removeHandler(this);
    }
  }
}
