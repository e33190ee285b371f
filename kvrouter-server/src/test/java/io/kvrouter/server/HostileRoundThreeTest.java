package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

/**
 * The findings of issue 31 on {@code serve}: a query parameter given twice, registrations without
 * bounds (address length, count, hosts), {@code Connection: close} on streamed answers, and clients
 * that reset during {@code /dump}. Each test fails on the code before its fix.
 */
class HostileRoundThreeTest {

  private static String register(long instance, String extra) {
    return "{\"instance_id\":"
        + instance
        + ",\"model_name\":\"m\",\"block_size\":4"
        + (extra.isEmpty() ? "" : "," + extra)
        + "}";
  }

  /** The value of the series that starts {@code prefix} (name and labels), 0 when absent. */
  static double series(String metrics, String prefix) {
    for (String line : metrics.split("\n")) {
      if (line.startsWith(prefix + " ")) return Double.parseDouble(line.substring(prefix.length()));
    }
    return 0;
  }

  @Test
  void aQueryParameterGivenTwiceIsA400NamingIt() {
    try (HttpFixture http = new HttpFixture()) {
      HttpFixture.Reply r = http.get("/workers?model_name=a&model_name=b");
      assertThat(r.status()).as(r.toString()).isEqualTo(400);
      assertThat(r.body()).contains("model_name").contains("2 times");
      HttpFixture.Reply free = http.post("/requests/x/free?routing_group=a&routing_group=a", "");
      assertThat(free.status()).as(free.toString()).isEqualTo(400);
      assertThat(free.body()).contains("routing_group");
    }
  }

  @Test
  void anAddressOrTopicPastTheLimitIsA400ThatDoesNotEchoIt() {
    try (HttpFixture http = new HttpFixture()) {
      String longPath = "x".repeat(Requests.MAX_ADDRESS);
      for (String field :
          List.of(
              "\"base_url\":\"http://10.0.0.5:8000/" + longPath + "\"",
              "\"endpoint\":\"tcp://10.0.0.5:5557/" + longPath + "\"",
              "\"endpoint\":\"tcp://10.0.0.5:5557\",\"topic\":\"" + longPath + "x\"")) {
        HttpFixture.Reply r = http.post("/register", register(1, field));
        assertThat(r.status()).as(field.substring(0, 40) + " -> " + r).isEqualTo(400);
        assertThat(r.body()).contains("at most " + Requests.MAX_ADDRESS).doesNotContain(longPath);
        assertThat(r.body().length()).isLessThan(400);
      }
      assertThat(http.get("/workers").body()).doesNotContain("instance_id");
      // at the limit it is accepted
      String atLimit = "http://10.0.0.5:8000/" + "y".repeat(Requests.MAX_ADDRESS - 22);
      assertThat(atLimit).hasSize(Requests.MAX_ADDRESS - 1);
      assertThat(http.post("/register", register(1, "\"base_url\":\"" + atLimit + "\"")).status())
          .isEqualTo(201);
    }
  }

  @Test
  void registrationsPastTheBoundAreA429CountedInTheMetrics() {
    try (HttpFixture http = new HttpFixture(KvRouterServer.Config.builder().maxRegistrations(3))) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      assertThat(http.register(1, 1, "m", 4).status()).isEqualTo(201);
      assertThat(http.register(2, 0, "other", 4).status()).isEqualTo(201);
      HttpFixture.Reply full = http.register(3, 0, "third", 4);
      assertThat(full.status()).as(full.toString()).isEqualTo(429);
      assertThat(full.body()).contains("--max-registrations 3");
      // a rank registered already is still told so (409), not counted as past the bound
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(409);
      assertThat(http.get("/workers?model_name=third").body()).doesNotContain("instance_id");
      String metrics = http.get("/metrics").body();
      assertThat(series(metrics, "kvrouter_registrations_refused_total{reason=\"limit\"}"))
          .isEqualTo(1.0);
      // room again after an unregister
      assertThat(http.post("/unregister", "{\"instance_id\":2,\"model_name\":\"other\"}").status())
          .isEqualTo(200);
      assertThat(http.register(3, 0, "third", 4).status()).isEqualTo(201);
    }
  }

  @Test
  void aBaseUrlOutsideTheAllowedHostsIsA403() {
    try (HttpFixture http =
        new HttpFixture(
            KvRouterServer.Config.builder().allowedEngineHosts(Set.of("10.0.0.5", "Engine-A")))) {
      HttpFixture.Reply rogue =
          http.post("/register", register(1, "\"base_url\":\"http://10.6.6.6:8000\""));
      assertThat(rogue.status()).as(rogue.toString()).isEqualTo(403);
      assertThat(rogue.body()).contains("10.6.6.6").contains("--allowed-engine-hosts");
      assertThat(http.post("/register", register(1, "\"base_url\":\"http://10.0.0.5:8000\"")))
          .extracting(HttpFixture.Reply::status)
          .isEqualTo(201);
      assertThat(http.post("/register", register(2, "\"base_url\":\"http://engine-a:8000\"")))
          .extracting(HttpFixture.Reply::status)
          .isEqualTo(201);
      String metrics = http.get("/metrics").body();
      assertThat(
              series(metrics, "kvrouter_registrations_refused_total{reason=\"host_not_allowed\"}"))
          .isEqualTo(1.0);
    }
  }

  @Test
  void connectionCloseIsHonouredOnMetricsAndDump() throws Exception {
    try (HttpFixture http = new HttpFixture()) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      for (String path : List.of("/metrics", "/dump")) {
        String req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        // a pipelined second request must not be answered: the server closes after the first
        String all =
            readToClose(http.server.port(), req + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        assertThat(all).as(path).startsWith("HTTP/1.1 200");
        assertThat(all.split("HTTP/1.1 ", -1)).as(path + ": one answer").hasSize(2);
        assertThat(all).as(path).doesNotContain("{\"status\":\"ok\"}");
        // and the answer is whole: its chunked framing ends, or its Content-Length is all there
        int headEnd = all.indexOf("\r\n\r\n") + 4;
        String head = all.substring(0, headEnd).toLowerCase(Locale.ROOT);
        if (head.contains("transfer-encoding: chunked")) {
          assertThat(all).as(path).endsWith("\r\n0\r\n\r\n");
        } else {
          int at = head.indexOf("content-length: ");
          assertThat(at).as(path + ": " + head).isPositive();
          int len = Integer.parseInt(head.substring(at + 16, head.indexOf('\r', at)).trim());
          assertThat(all.length() - headEnd).as(path).isEqualTo(len);
        }
      }
    }
  }

  /**
   * Sends {@code request} and reads until the server closes the connection; fails when it keeps the
   * connection open for 10 s after its last byte (a SocketTimeoutException).
   */
  private static String readToClose(int port, String request) throws Exception {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 5000);
      s.setSoTimeout(10_000);
      s.getOutputStream().write(request.getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
      return new String(s.getInputStream().readAllBytes(), StandardCharsets.ISO_8859_1);
    }
  }

  @Test
  void aClientThatResetsDuringDumpIsOneCountedLineNotA5xx() throws Exception {
    List<LogRecord> logged = new CopyOnWriteArrayList<>();
    Handler capture =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            logged.add(r);
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    try (HttpFixture http =
        new HttpFixture(KvRouterServer.Config.builder().maxBodyBytes(64L << 20))) {
      // a dump larger than the kernel's socket buffers on both sides (4 MiB + the client's), so
      // that the server is still writing it when the client resets
      assertThat(http.register(1, 0, "m", 1).status()).isEqualTo(201);
      for (int i = 0; i < 2; i++) {
        int[] part = HttpFixture.range(1 + i * 1_000_000, 200_000);
        assertThat(
                http.events("m", List.of(HttpFixture.stored(new Worker(1, 0), 1 + i, part, 1)))
                    .status())
            .isEqualTo(200);
      }
      Logger.getLogger("").addHandler(capture);
      try {
        for (int round = 0; round < 3; round++) {
          try (Socket s = new Socket()) {
            s.setReceiveBufferSize(4096);
            s.connect(new InetSocketAddress("127.0.0.1", http.server.port()), 5000);
            s.setSoTimeout(60_000);
            OutputStream out = s.getOutputStream();
            out.write("GET /dump HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            byte[] first = in.readNBytes(12);
            assertThat(new String(first, StandardCharsets.US_ASCII)).isEqualTo("HTTP/1.1 200");
            s.setSoLinger(true, 0); // close with a reset, the answer mostly unread
          }
        }
        String metrics = "";
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (System.nanoTime() < deadline) {
          metrics = http.get("/metrics").body();
          if (series(metrics, "kvrouter_http_client_resets_total{endpoint=\"/dump\"}") >= 3) break;
          Thread.onSpinWait();
        }
        assertThat(series(metrics, "kvrouter_http_client_resets_total{endpoint=\"/dump\"}"))
            .isEqualTo(3.0);
        assertThat(
                series(
                    metrics,
                    "kvrouter_http_requests_total{endpoint=\"/dump\",status_class=\"5xx\"}"))
            .isZero();
      } finally {
        Logger.getLogger("").removeHandler(capture);
      }
      List<String> traces = new ArrayList<>();
      for (LogRecord r : logged) {
        if (r.getThrown() != null) traces.add(r.getMessage() + ": " + r.getThrown());
      }
      assertThat(traces).as("no stack traces are logged for client resets").isEmpty();
      assertThat(
              logged.stream().filter(r -> String.valueOf(r.getMessage()).contains("client left")))
          .hasSize(1);
      // the server still answers
      assertThat(http.get("/health").status()).isEqualTo(200);
    }
  }
}
