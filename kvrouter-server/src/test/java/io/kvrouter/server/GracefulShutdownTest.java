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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** stop(): a request in flight when it starts still gets its answer; then nothing is accepted. */
class GracefulShutdownTest {

  @Test
  void aRequestInFlightFinishesAndNewConnectionsAreRefused() throws Exception {
    HttpFixture http =
        new HttpFixture(KvRouterServer.Config.builder().shutdownGrace(Duration.ofSeconds(10)));
    http.register(1, 0, "m", 4);
    byte[] body =
        RouterEventJson.writeEvents(List.of(stored(new Worker(1, 0), 0, range(0, 64), 4)))
            .getBytes(StandardCharsets.UTF_8);
    int half = body.length / 2;
    int port = http.server.port();
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(15_000);
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /events?model_name=m HTTP/1.1\r\nHost: localhost\r\n"
                  + "Content-Type: application/json\r\nContent-Length: "
                  + body.length
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.write(body, 0, half);
      out.flush();
      Thread.sleep(1000); // the handler is now reading the body (generous: CI machines are shared)
      CompletableFuture<Void> stopping = CompletableFuture.runAsync(http.server::stop);
      Thread.sleep(500);
      assertThat(stopping).isNotDone(); // waiting for the request in flight
      assertThat(http.server.isReady()).isFalse();
      out.write(body, half, body.length - half);
      out.flush();
      String answer = readAnswer(s.getInputStream());
      assertThat(answer).startsWith("HTTP/1.1 200").endsWith("{\"applied\":1}");
      stopping.get(15, TimeUnit.SECONDS);
    }
    assertThatThrownBy(() -> new Socket("127.0.0.1", port).close())
        .isInstanceOf(ConnectException.class);
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
          if (line.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
            contentLength = Integer.parseInt(line.substring(15).trim());
          }
        }
      }
      if (headerEnd >= 0 && contentLength >= 0 && sb.length() - headerEnd >= contentLength) break;
    }
    return sb.toString();
  }
}
