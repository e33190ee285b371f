package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 31: a client that stops reading its answer from the gateway. With a short write timeout,
 * its connection is closed once a write to it makes no progress, counted in
 * kvrouter_http_write_timeouts_total{endpoint}, and a stream's engine request is aborted and its
 * route freed, as for a client that leaves; a reading client of a stream whose engine pauses longer
 * than the write timeout between tokens is not cut. No wall-clock thresholds: the waits below poll
 * a condition, with generous safety limits.
 */
class GatewayWriteTimeoutTest {
  private static final Duration WRITE_TIMEOUT = Duration.ofMillis(200);
  private static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private static final String SERIES = "kvrouter_http_write_timeouts_total{endpoint=\"";

  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).writeTimeout(WRITE_TIMEOUT).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).build());
    open.add(g);
    return g;
  }

  private MockEngineServer engine(MockEngineServer.Builder b) throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            b.kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")).build());
    open.add(e);
    return e;
  }

  private Socket socket(Gateway g) throws IOException {
    Socket s = new Socket();
    open.add(s);
    s.setReceiveBufferSize(4096); // before connecting: the window the gateway's writes fill
    s.connect(new InetSocketAddress("127.0.0.1", g.port()), 5000);
    return s;
  }

  @Test
  @Timeout(value = 10, unit = TimeUnit.MINUTES)
  void aStreamingClientThatStopsReadingIsClosedCountedAndItsEngineRequestAborted()
      throws Exception {
    Gateway g = gateway();
    // an engine whose stream does not end: it writes until its writes block, and goes on as the
    // gateway reads; only the gateway closing its connection ends it (StubEngine.aborted)
    StubEngine e = new StubEngine();
    open.add(e);
    e.chunks.set(Integer.MAX_VALUE);
    RouterModel m = GatewayStubTest.register(g, 1, e.url());
    byte[] body = GatewayStubTest.CHAT.getBytes(StandardCharsets.UTF_8);
    Socket s = socket(g);
    OutputStream out = s.getOutputStream();
    out.write(
        ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Content-Length: "
                + body.length
                + "\r\n\r\n")
            .getBytes(StandardCharsets.US_ASCII));
    out.write(body);
    out.flush();
    // nothing is read: the gateway's write blocks once the socket buffers are full (megabytes on
    // loopback), until the write timeout closes the connection
    await("the write timeout counted", () -> series(g, "/v1/chat/completions") >= 1);
    assertThat(e.aborted.await(3, TimeUnit.MINUTES)).as("the engine's request aborted").isTrue();
    await("the router freed the request", () -> m.router().inFlight() == 0);
    // the connection ends after what the gateway had written: a stream cut short
    String got = readToEnd(s);
    assertThat(got).startsWith("HTTP/1.1 200").contains("data: {").doesNotContain("[DONE]");
    assertThat(series(g, "/v1/chat/completions")).isEqualTo(1);
    assertThat(clientResets(g)).as("a write timeout is not a client reset").isZero();
    // the gateway serves on
    HttpResponse<String> health =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/health")).build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(health.statusCode()).isEqualTo(200);
  }

  @Test
  @Timeout(value = 10, unit = TimeUnit.MINUTES)
  void aClientThatPipelinesModelsAndNeverReadsIsClosedAndCounted() throws Exception {
    Gateway g = gateway();
    byte[] pipelined =
        "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
            .repeat(20_000)
            .getBytes(StandardCharsets.US_ASCII);
    Socket s = socket(g);
    // the write blocks once the gateway stops reading: on a thread of its own
    Thread writer =
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    s.getOutputStream().write(pipelined);
                    s.getOutputStream().flush();
                  } catch (IOException closed) {
                    // the gateway closed the connection
                  }
                });
    await("the write timeout counted", () -> series(g, "/v1/models") >= 1);
    assertThat(readToEnd(s)).startsWith("HTTP/1.1 200");
    writer.join();
    assertThat(series(g, "/v1/models")).isEqualTo(1);
  }

  @Test
  @Timeout(value = 10, unit = TimeUnit.MINUTES)
  void aReadingClientIsNotCutWhileTheEnginePausesLongerThanTheWriteTimeout() throws Exception {
    Gateway g = gateway();
    // 800 ms between tokens, four times the write timeout: only the waits for the engine are long
    MockEngineServer e =
        engine(GatewayMockEngineTest.tinyEngine().speedup(1).decodeMsPerToken(800));
    GatewayMockEngineTest.register(g, 1, e);
    HttpResponse<String> r =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/v1/chat/completions"))
                .header("Content-Type", "application/json")
                .POST(
                    HttpRequest.BodyPublishers.ofString(
                        "{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":4,"
                            + "\"messages\":[{\"role\":\"user\",\"content\":\"slow\"}]}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).contains("\"finish_reason\":\"length\"").endsWith("data: [DONE]\n\n");
    assertThat(series(g, "/v1/chat/completions")).isZero();
  }

  /** Reads a socket to its end (EOF, or a reset: what came before it); 60 s: a safety net. */
  private static String readToEnd(Socket s) throws IOException {
    s.setSoTimeout(60_000);
    InputStream in = s.getInputStream();
    StringBuilder got = new StringBuilder();
    byte[] buf = new byte[1 << 16];
    try {
      int n;
      while ((n = in.read(buf)) >= 0) got.append(new String(buf, 0, n, StandardCharsets.UTF_8));
    } catch (SocketException reset) {
      // the gateway closed the connection with bytes unread: as good as an end
    }
    return got.toString();
  }

  /** The write timeouts counted for {@code endpoint}, as GET /metrics shows them. */
  private static double series(Gateway g, String endpoint) {
    return value(metrics(g), SERIES + endpoint + "\"}");
  }

  private static double clientResets(Gateway g) {
    return value(
        metrics(g), "kvrouter_http_client_resets_total{endpoint=\"/v1/chat/completions\"}");
  }

  private static String metrics(Gateway g) {
    try {
      return HTTP.send(
              HttpRequest.newBuilder(URI.create(g.url() + "/metrics")).build(),
              HttpResponse.BodyHandlers.ofString())
          .body();
    } catch (IOException e) {
      throw new AssertionError("GET /metrics: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static double value(String text, String name) {
    for (String line : text.split("\n", -1)) {
      if (line.startsWith(name + " ")) return Double.parseDouble(line.substring(name.length() + 1));
    }
    return 0;
  }

  /** Polls {@code cond} every 20 ms until it holds; 3 minutes is a safety net, not a threshold. */
  private static void await(String what, BooleanSupplier cond) {
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(3);
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) throw new AssertionError("timed out waiting: " + what);
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
    }
  }
}
