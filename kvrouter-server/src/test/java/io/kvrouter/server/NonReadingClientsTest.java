package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 31, #7: clients that pipeline {@code GET /metrics} and never read. Each fills the server's
 * socket buffers until the server's write of its answer blocks; more such clients than carrier
 * threads must not keep {@code /health} from being answered, and with a write timeout their
 * connections are closed and counted. No wall-clock thresholds: the timeouts below are safety nets.
 */
class NonReadingClientsTest {
  /** The virtual-thread carriers of this JVM. */
  private static final int CARRIERS =
      Integer.getInteger(
          "jdk.virtualThreadScheduler.parallelism", Runtime.getRuntime().availableProcessors());

  /** More non-reading clients than carriers. */
  private static final int STUCK = 2 * CARRIERS + 2;

  private static final byte[] PIPELINED =
      "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20_000).getBytes(StandardCharsets.US_ASCII);

  @Test
  @Timeout(value = 10, unit = TimeUnit.MINUTES)
  void healthIsAnsweredWhileMoreNonReadingClientsThanCarriersAreStuckInWrites() throws Exception {
    // a write timeout far beyond the test, so that every stuck write stays stuck while /health runs
    try (HttpFixture http =
            new HttpFixture(KvRouterServer.Config.builder().writeTimeout(Duration.ofHours(1)));
        Stuck stuck = new Stuck(http.server.port())) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      stuck.open(STUCK);
      // every non-reading client's answer is blocked in its write (armed, never disarmed)
      while (http.server.writesTimed() < STUCK) Thread.onSpinWait();
      for (int i = 0; i < 20; i++) {
        HttpFixture.Reply health = http.get("/health");
        assertThat(health.status()).isEqualTo(200);
        assertThat(health.body()).contains("\"ok\"");
      }
      // and a scrape from a reading client still comes whole
      HttpFixture.Reply metrics = http.get("/metrics");
      assertThat(metrics.status()).isEqualTo(200);
      assertThat(metrics.body()).contains("kvrouter_http_requests_total{endpoint=\"/health\"");
      assertThat(http.server.writesTimed()).as("still stuck meanwhile").isEqualTo(STUCK);
    }
  }

  @Test
  @Timeout(value = 10, unit = TimeUnit.MINUTES)
  void withAShortWriteTimeoutTheNonReadingConnectionsAreClosedAndCounted() throws Exception {
    try (HttpFixture http =
            new HttpFixture(KvRouterServer.Config.builder().writeTimeout(Duration.ofMillis(200)));
        Stuck stuck = new Stuck(http.server.port())) {
      stuck.open(STUCK);
      // nobody reads: every connection's write blocks until the write deadline closes it
      String body = "";
      double counted = 0;
      while (counted < STUCK) {
        body = http.get("/metrics").body();
        counted = series(body, "kvrouter_http_write_timeouts_total{endpoint=\"/metrics\"}");
      }
      // each connection has ended: the server closed it (EOF after what it had written) or reset
      // it with requests unread
      ExecutorService readers = Executors.newVirtualThreadPerTaskExecutor();
      try {
        List<Future<String>> ends = new ArrayList<>();
        for (Socket s : stuck.sockets) ends.add(readers.submit(readToEnd(s)));
        for (Future<String> end : ends) assertThat(end.get()).isIn("eof", "reset");
      } finally {
        readers.shutdownNow();
      }
      assertThat(counted).isEqualTo(STUCK);
      assertThat(series(body, "kvrouter_http_client_resets_total{endpoint=\"/metrics\"}"))
          .as("a write timeout is not counted as a client reset")
          .isZero();
      assertThat(http.get("/health").status()).isEqualTo(200);
    }
  }

  /** Reads a socket to its end: "eof" or "reset"; the socket's read timeout is a safety net. */
  private static Callable<String> readToEnd(Socket s) {
    return () -> {
      s.setSoTimeout(300_000);
      InputStream in = s.getInputStream();
      byte[] buf = new byte[1 << 16];
      try {
        while (in.read(buf) >= 0) {
          // the answers the server wrote before it gave up
        }
        return "eof";
      } catch (SocketException e) {
        return "reset";
      }
    };
  }

  /** The value of the series {@code name} (with its labels) in a Prometheus text, or 0. */
  private static double series(String text, String name) {
    for (String line : text.split("\n", -1)) {
      if (line.startsWith(name + " ")) return Double.parseDouble(line.substring(name.length() + 1));
    }
    return 0;
  }

  /** Non-reading clients: each pipelines many GET /metrics on its own socket and never reads. */
  private static final class Stuck implements AutoCloseable {
    private final int port;
    final List<Socket> sockets = new ArrayList<>();

    Stuck(int port) {
      this.port = port;
    }

    void open(int n) throws IOException {
      for (int i = 0; i < n; i++) {
        Socket s = new Socket();
        s.setReceiveBufferSize(4096);
        s.connect(new InetSocketAddress("127.0.0.1", port), 5000);
        sockets.add(s);
        // the writes block once the server stops reading: each on its own thread
        Thread.ofVirtual()
            .name("non-reading-client")
            .start(
                () -> {
                  try {
                    OutputStream out = s.getOutputStream();
                    out.write(PIPELINED);
                    out.flush();
                  } catch (IOException closed) {
                    // the server closed the connection (the write timeout) or the test ended
                  }
                });
      }
    }

    @Override
    public void close() {
      for (Socket s : sockets) {
        try {
          s.close();
        } catch (IOException e) {
          fail("close: " + e);
        }
      }
    }
  }
}
