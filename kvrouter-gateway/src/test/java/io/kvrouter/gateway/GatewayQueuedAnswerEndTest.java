package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.route.RoutingSettings;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The answer to a request that waited in the admission queue arrives whole, read to its end by
 * java.net.http: a streamed one with its chunked body's last chunk, a whole one with all its bytes,
 * although its connection (watched while it waited) is closed after it. The engine holds each
 * request until the test releases it; nothing here sleeps or reads the clock.
 */
class GatewayQueuedAnswerEndTest {
  private final List<AutoCloseable> open = new ArrayList<>();
  private final List<CountDownLatch> gates = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    synchronized (gates) {
      for (CountDownLatch l : gates) l.countDown();
    }
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private final BlockingQueue<CountDownLatch> arrivals = new LinkedBlockingQueue<>();

  /**
   * An engine that sends nothing until the test opens the request's gate (its "prefill"), then the
   * whole answer: three SSE events and [DONE] for a streamed request (framed by the close), a JSON
   * completion with Content-Length for another.
   */
  private RawEngine engine() throws IOException {
    RawEngine e =
        new RawEngine(
            (head, body, out) -> {
              CountDownLatch gate = new CountDownLatch(1);
              synchronized (gates) {
                gates.add(gate);
              }
              arrivals.add(gate);
              try {
                if (!gate.await(2, TimeUnit.MINUTES)) throw new IOException("never released");
              } catch (InterruptedException x) {
                Thread.currentThread().interrupt();
                throw new IOException(x);
              }
              if (body.contains("\"stream\":true")) {
                StringBuilder b =
                    new StringBuilder(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                            + "Connection: close\r\n\r\n");
                for (int i = 0; i < 3; i++) {
                  b.append("data: ").append(StubEngine.chunk(false, i)).append("\n\n");
                }
                b.append("data: [DONE]\n\n");
                out.write(b.toString().getBytes(StandardCharsets.UTF_8));
              } else {
                byte[] json =
                    ("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,"
                            + "\"model\":\"tiny\",\"choices\":[{\"index\":0,\"text\":\"whole answer\","
                            + "\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":"
                            + "{\"prompt_tokens\":16,\"total_tokens\":19,\"completion_tokens\":3}}")
                        .getBytes(StandardCharsets.UTF_8);
                out.write(
                    ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                            + json.length
                            + "\r\n\r\n")
                        .getBytes(StandardCharsets.UTF_8));
                out.write(json);
              }
            });
    open.add(e);
    return e;
  }

  /** The next request's gate (fails the test if none arrives within a generous bound). */
  private CountDownLatch next() throws InterruptedException {
    CountDownLatch l = arrivals.poll(60, TimeUnit.SECONDS);
    assertThat(l).as("a request arrived at the engine").isNotNull();
    return l;
  }

  private Gateway gateway() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                // busy while any prefill is in flight: a second request waits behind the first
                .routing(RoutingSettings.DEFAULTS.withBusyPrefillTokens(0))
                .build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .admission(
                    new AdmissionConfig(
                        8,
                        Duration.ofMinutes(5),
                        0,
                        AdmissionConfig.TenantSource.HEADER,
                        Map.of(),
                        16,
                        8))
                .build());
    open.add(g);
    return g;
  }

  private static HttpRequest request(Gateway g, int first, boolean stream) {
    StringBuilder p = new StringBuilder();
    for (int i = 0; i < 16; i++) p.append(i == 0 ? "" : ",").append(first + i);
    return HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
        .header("Content-Type", "application/json")
        .POST(
            HttpRequest.BodyPublishers.ofString(
                "{\"model\":\"tiny\",\"stream\":"
                    + stream
                    + ",\"max_tokens\":3,\"prompt\":["
                    + p
                    + "]}"))
        .build();
  }

  /**
   * Starts a request that holds the engine, then {@code waiter}, which queues behind it; releases
   * both in turn and returns the waiter's answer, whose connection was watched while it waited.
   */
  private <T> HttpResponse<T> queuedAnswer(boolean stream, HttpResponse.BodyHandler<T> handler)
      throws Exception {
    Gateway g = gateway();
    RouterModel m = GatewayStubTest.register(g, 1, engine().url());
    CompletableFuture<HttpResponse<String>> a =
        GatewayMockEngineTest.HTTP.sendAsync(
            request(g, 1000, true), HttpResponse.BodyHandlers.ofString());
    CountDownLatch ga = next();
    CompletableFuture<HttpResponse<T>> b =
        GatewayMockEngineTest.HTTP.sendAsync(request(g, 2000, stream), handler);
    await("b queued behind a", () -> g.admission.queue(m).size() == 1);
    assertThat(arrivals).as("b is not on the engine while it waits").isEmpty();

    ga.countDown(); // a's whole answer: b is granted
    assertThat(a.get(60, TimeUnit.SECONDS).body()).endsWith("data: [DONE]\n\n");
    next().countDown();
    HttpResponse<T> rb = b.get(60, TimeUnit.SECONDS);
    assertThat(rb.statusCode()).isEqualTo(200);
    assertThat(rb.headers().firstValue("connection")).hasValue("close");
    assertThat(g.metrics.admission.waited.collect().getDataPoints().get(0).getCount())
        .as("b waited")
        .isEqualTo(1);
    return rb;
  }

  @Test
  void aStreamedAnswerToAQueuedRequestEndsWithItsLastChunk() throws Exception {
    HttpResponse<Stream<String>> rb = queuedAnswer(true, HttpResponse.BodyHandlers.ofLines());
    List<String> lines;
    // read to the end of the body: a missing last chunk fails here (EOF at the chunk length)
    try (Stream<String> s = rb.body()) {
      lines = s.filter(l -> !l.isEmpty()).toList();
    }
    assertThat(lines).hasSize(4);
    assertThat(lines.get(0)).startsWith("data: {").contains("\"text\":\"t0\"");
    assertThat(lines.get(2)).contains("\"text\":\"t2\"");
    assertThat(lines.get(3)).isEqualTo("data: [DONE]");
  }

  @Test
  void aWholeAnswerToAQueuedRequestArrivesWhole() throws Exception {
    HttpResponse<String> rb = queuedAnswer(false, HttpResponse.BodyHandlers.ofString());
    assertThat(rb.body()).contains("\"text\":\"whole answer\"").endsWith("}");
  }
}
