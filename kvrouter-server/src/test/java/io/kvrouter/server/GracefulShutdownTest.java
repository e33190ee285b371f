package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * stop(): {@code /ready} turns 503 at once and stays answerable while a request in flight finishes;
 * other requests get 503 meanwhile; then nothing is accepted.
 *
 * <p>No sleeps: the request announces its body with {@code Expect: 100-continue}, so the server's
 * {@code 100 Continue} says its handler is reading the body; stop() is then known to have begun
 * when {@link KvRouterServer#isReady()} turns false, and it cannot be done while the body is
 * unfinished.
 */
class GracefulShutdownTest {
  private static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(15);

  @Test
  void whileARequestFinishesReadyIs503AndNewRequestsAreRefusedThenTheListenerCloses()
      throws Exception {
    HttpFixture http =
        new HttpFixture(KvRouterServer.Config.builder().shutdownGrace(Duration.ofSeconds(10)));
    http.register(1, 0, "m", 4);
    assertThat(http.get("/ready").status()).isEqualTo(200);
    byte[] body =
        RouterEventJson.writeEvents(List.of(stored(new Worker(1, 0), 0, range(0, 64), 4)))
            .getBytes(StandardCharsets.UTF_8);
    int half = body.length / 2;
    int port = http.server.port();
    CompletableFuture<Void> stopping;
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(15_000);
      OutputStream out = s.getOutputStream();
      InputStream in = s.getInputStream();
      out.write(
          ("POST /events?model_name=m HTTP/1.1\r\nHost: localhost\r\n"
                  + "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: "
                  + body.length
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      // the handler asked for the body: the request is in flight
      assertThat(readHead(in)).startsWith("HTTP/1.1 100");
      out.write(body, 0, half);
      out.flush();
      stopping = CompletableFuture.runAsync(http.server::stop);
      awaitNotReady(http.server, stopping);
      // the listener is still open: the probe answers, with the reason
      HttpFixture.Reply ready = http.get("/ready");
      assertThat(ready.status()).isEqualTo(503);
      assertThat(ready.body())
          .contains("\"ready\":false")
          .contains("shutting down: 1 request(s) in flight finishing");
      assertThat(http.get("/health").status()).isEqualTo(200);
      // a new request is refused while the old one finishes
      HttpFixture.Reply query = http.query("m", range(0, 8));
      assertThat(query.status()).isEqualTo(503);
      assertThat(query.body()).contains("the server is shutting down");
      // and stop() waits for the request whose body is not all there
      assertThat(stopping).isNotDone();
      out.write(body, half, body.length - half);
      out.flush();
      String answer = readAnswer(in);
      assertThat(answer).startsWith("HTTP/1.1 200").endsWith("{\"applied\":1}\n");
      stopping.get(15, TimeUnit.SECONDS);
    }
    assertThatThrownBy(() -> new Socket("127.0.0.1", port).close())
        .isInstanceOf(ConnectException.class);
  }

  @Test
  void aRequestStillRunningAfterTheGracePeriodIsCutOffAndStopReturns() throws Exception {
    HttpFixture http =
        new HttpFixture(
            KvRouterServer.Config.builder()
                .shutdownGrace(Duration.ofSeconds(1))
                // no read deadline to end the request: only the grace period can
                .readTimeout(Duration.ofMinutes(10)));
    http.register(1, 0, "m", 4);
    int port = http.server.port();
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(15_000);
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /events?model_name=m HTTP/1.1\r\nHost: localhost\r\n"
                  + "Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  + "Content-Length: 1000\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      assertThat(readHead(s.getInputStream())).startsWith("HTTP/1.1 100");
      // the body never comes: stop() gives up on it after the grace period (plus the
      // webserver's tail) instead of waiting for the read deadline
      CompletableFuture<Void> stopping = CompletableFuture.runAsync(http.server::stop);
      stopping.get(30, TimeUnit.SECONDS);
    }
    assertThatThrownBy(() -> new Socket("127.0.0.1", port).close())
        .isInstanceOf(ConnectException.class);
  }

  /** Waits until stop() has begun (the server reports itself not ready). */
  private static void awaitNotReady(KvRouterServer server, CompletableFuture<Void> stopping)
      throws InterruptedException {
    long deadline = System.nanoTime() + WAIT_NANOS;
    while (server.isReady()) {
      if (stopping.isDone()) {
        stopping.join(); // a failure of stop() itself
        throw new AssertionError("stop() returned while a request was in flight");
      }
      if (System.nanoTime() > deadline) throw new AssertionError("stop() never began");
      Thread.sleep(2); // the poll interval of this wait for an observable event, not a guess
    }
  }

  /** Reads a status line and headers up to the blank line. */
  private static String readHead(InputStream in) throws IOException {
    StringBuilder sb = new StringBuilder();
    while (!sb.toString().endsWith("\r\n\r\n")) {
      int c = in.read();
      if (c < 0) break;
      sb.append((char) c);
    }
    return sb.toString();
  }

  private static String readAnswer(InputStream in) throws IOException {
    StringBuilder sb = new StringBuilder();
    int contentLength = -1;
    int headerEnd = -1;
    while (true) {
      int c = in.read();
      if (c < 0) break;
      sb.append((char) c);
      if (headerEnd < 0 && sb.length() >= 4 && sb.substring(sb.length() - 4).equals("\r\n\r\n")) {
        headerEnd = sb.length();
        for (String line : sb.toString().split("\r\n")) {
          if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
            contentLength = Integer.parseInt(line.substring(15).trim());
          }
        }
      }
      if (headerEnd >= 0 && contentLength >= 0 && sb.length() - headerEnd >= contentLength) break;
    }
    return sb.toString();
  }
}
