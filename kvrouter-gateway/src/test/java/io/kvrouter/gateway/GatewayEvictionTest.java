package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.admission.TokenRateConfig;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Eviction of in-flight lower-band work (docs/gateway.md, "Evicting lower-band work in flight"),
 * with an engine whose every step the test releases: it holds each request in its "prefill" (sends
 * nothing, not even its status line) until the test opens its first gate, and notes when the
 * gateway closes the request's connection (an abort). One engine, busy at two requests. Nothing
 * here sleeps or reads the clock: every step waits on observable state (arrivals and aborts at the
 * engine, the queue, the router's counts).
 */
class GatewayEvictionTest {
  private final List<AutoCloseable> open = new ArrayList<>();
  private final List<Held> all = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    synchronized (all) {
      for (Held h : all) h.release();
    }
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  /** One request as the engine holds it. */
  static final class Held {
    final String body;
    final CountDownLatch wake = new CountDownLatch(1); // the first gate, or an abort
    final CountDownLatch end = new CountDownLatch(1);
    final CountDownLatch aborted = new CountDownLatch(1);
    volatile boolean answering;

    Held(String body) {
      this.body = body;
    }

    void first() {
      answering = true;
      wake.countDown();
    }

    void release() {
      first();
      end.countDown();
    }

    boolean startsWith(int token) {
      return body.contains("\"prompt\":[" + token + ",");
    }
  }

  private final BlockingQueue<Held> arrivals = new LinkedBlockingQueue<>();

  private String engine() throws IOException {
    RawEngine raw =
        new RawEngine(
            (head, body, in, out) -> {
              Held h = new Held(body);
              synchronized (all) {
                all.add(h);
              }
              Thread.ofVirtual()
                  .start(
                      () -> {
                        try {
                          while (in.read() >= 0) {
                            // nothing more is sent on a request's connection
                          }
                        } catch (IOException e) {
                          // closed
                        }
                        if (!h.answering) {
                          h.aborted.countDown();
                          h.wake.countDown();
                        }
                      });
              arrivals.add(h);
              gate(h.wake);
              if (!h.answering) return; // aborted by the gateway before its first token
              out.write(
                  ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                          + "data: "
                          + StubEngine.chunk(false, 0)
                          + "\n\n")
                      .getBytes(StandardCharsets.UTF_8));
              out.flush();
              gate(h.end);
              out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
            });
    open.add(raw);
    return raw.url();
  }

  private static void gate(CountDownLatch l) throws IOException {
    try {
      if (!l.await(2, TimeUnit.MINUTES)) throw new IOException("the test never opened the gate");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    }
  }

  private Held next() throws InterruptedException {
    Held h = arrivals.poll(60, TimeUnit.SECONDS);
    assertThat(h).as("a request arrived at the engine").isNotNull();
    return h;
  }

  private Gateway gateway(int maxEvictions) throws Exception {
    return gateway(maxEvictions, Duration.ofMinutes(5));
  }

  private Gateway gateway(int maxEvictions, Duration maxQueueTime) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                .routing(RoutingSettings.DEFAULTS.withBusyRequests(2))
                .build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .admission(
                    new AdmissionConfig(
                            8,
                            maxQueueTime,
                            0,
                            AdmissionConfig.TenantSource.HEADER,
                            Map.of(),
                            16,
                            8,
                            TokenRateConfig.OFF)
                        .withMaxEvictions(maxEvictions))
                .build());
    open.add(g);
    return g;
  }

  private static CompletableFuture<HttpResponse<String>> send(
      Gateway g, int from, String priority) {
    StringBuilder p = new StringBuilder();
    for (int i = 0; i < 16; i++) p.append(i == 0 ? "" : ",").append(from + i);
    HttpRequest r =
        HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
            .header("Content-Type", "application/json")
            .header("x-kvrouter-priority", priority)
            .header("x-kvrouter-tenant", priority.equals("high") ? "interactive" : "batch")
            .POST(
                HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":4,\"prompt\":[" + p + "]}"))
            .build();
    return GatewayMockEngineTest.HTTP.sendAsync(r, HttpResponse.BodyHandlers.ofString());
  }

  private static double evictions(Gateway g, String band, String tenant) {
    return g.metrics.admission.evicted.labelValues("tiny", band, tenant).get();
  }

  private static void answered(CompletableFuture<HttpResponse<String>> f) throws Exception {
    HttpResponse<String> r = f.get(60, TimeUnit.SECONDS);
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).startsWith("data: ").endsWith("data: [DONE]\n\n");
  }

  @Test
  void aHighRequestTakesThePlaceOfTheLastSentNormalOneWhichIsAbortedAndServedLater()
      throws Exception {
    Gateway g = gateway(1);
    RouterModel m = GatewayStubTest.register(g, 1, engine());

    CompletableFuture<HttpResponse<String>> a = send(g, 1000, "normal");
    Held ha = next();
    CompletableFuture<HttpResponse<String>> b = send(g, 2000, "normal");
    Held hb = next();
    assertThat(ha.startsWith(1000) && hb.startsWith(2000)).isTrue();
    assertThat(m.router().inFlight()).isEqualTo(2); // the engine is busy now

    // the high request finds the engine busy: b, sent last and still in its prefill, is aborted
    // upstream and h goes in its place; b waits again at the head of the normal band
    CompletableFuture<HttpResponse<String>> h = send(g, 3000, "high");
    assertThat(hb.aborted.await(60, TimeUnit.SECONDS)).as("b aborted at the engine").isTrue();
    Held hh = next();
    assertThat(hh.startsWith(3000)).isTrue();
    assertThat(ha.aborted.getCount()).as("a, sent first, keeps its place").isEqualTo(1);
    await("b waits again", () -> g.admission.queue(m).size() == 1);
    assertThat(m.router().inFlight()).as("b's route freed once: a and h").isEqualTo(2);
    assertThat(evictions(g, "normal", "batch")).isEqualTo(1);

    // h is answered first; its end gives b its place back
    hh.release();
    answered(h);
    assertThat(b).as("b is not answered before h").isNotDone();
    Held hb2 = next();
    assertThat(hb2.startsWith(2000)).as("b sent again").isTrue();
    assertThat(g.admission.queue(m).size()).isZero();

    // a second high request: b was evicted once already (--max-evictions 1), so a goes
    CompletableFuture<HttpResponse<String>> h2 = send(g, 4000, "high");
    assertThat(ha.aborted.await(60, TimeUnit.SECONDS)).as("a aborted at the engine").isTrue();
    Held hh2 = next();
    assertThat(hh2.startsWith(4000)).isTrue();
    assertThat(hb2.aborted.getCount()).as("b is not evicted twice").isEqualTo(1);
    assertThat(evictions(g, "normal", "batch")).isEqualTo(2);

    hh2.release();
    answered(h2);
    hb2.release();
    answered(b);
    Held ha2 = next();
    assertThat(ha2.startsWith(1000)).as("a sent again").isTrue();
    ha2.release();
    answered(a);

    await("every route freed", () -> m.router().inFlight() == 0);
    assertThat(g.admission.queue(m).size()).isZero();
    assertThat(arrivals).as("the engine saw a, b, h, b, h2, a: nothing more").isEmpty();
    synchronized (all) {
      assertThat(all).hasSize(6);
    }
    assertThat(evictions(g, "normal", "batch")).isEqualTo(2);
    assertThat(evictions(g, "high", "interactive")).isZero();
    // an eviction is no engine failure and no retry
    assertThat(g.metrics.retries.labelValues("tiny").get()).isZero();
    assertThat(
            g.metrics
                .admission
                .rejections
                .labelValues("tiny", "normal", "batch", "queue_timeout")
                .get())
        .isZero();
  }

  /**
   * An evicted request waits again; when nothing frees a place before its bound (--max-queue-time
   * from its arrival, its time on the engine not counted) runs out, it is refused with an
   * OpenAI-shaped 429 and Retry-After, counted once as a timeout of its band and tenant, its route
   * freed once, and never sent again nor answered twice. The bound is the gateway's own timer: the
   * test only waits for the answer. (The high request's grant, which b's freed route gives at once,
   * must come within the same 2 s from its arrival.)
   */
  @Test
  void anEvictedRequestWhoseBoundRunsOutWhileItWaitsAgainIsRefusedOnceWith429() throws Exception {
    Gateway g = gateway(1, Duration.ofSeconds(2));
    RouterModel m = GatewayStubTest.register(g, 1, engine());

    CompletableFuture<HttpResponse<String>> a = send(g, 1000, "normal");
    Held ha = next();
    CompletableFuture<HttpResponse<String>> b = send(g, 2000, "normal");
    Held hb = next();
    assertThat(m.router().inFlight()).isEqualTo(2);
    CompletableFuture<HttpResponse<String>> h = send(g, 3000, "high");
    assertThat(hb.aborted.await(60, TimeUnit.SECONDS)).as("b aborted at the engine").isTrue();
    Held hh = next();
    assertThat(hh.startsWith(3000)).isTrue();

    // a and h hold the engine until the test releases them: b's bound runs out while it waits
    HttpResponse<String> rb = b.get(60, TimeUnit.SECONDS);
    assertThat(rb.statusCode()).isEqualTo(429);
    assertThat(rb.headers().firstValue("retry-after")).hasValue("2");
    assertThat(rb.body())
        .startsWith("{\"error\":")
        .contains("\"code\":\"queue_timeout\"")
        .contains("\"type\":\"requests\"")
        .contains("--max-queue-time")
        .doesNotContain("data: ");
    assertThat(h).as("h is not refused: it is on the engine").isNotDone();
    assertThat(g.admission.queue(m).size()).isZero();
    assertThat(m.router().inFlight()).as("b's route freed once: a and h").isEqualTo(2);
    assertThat(evictions(g, "normal", "batch")).isEqualTo(1);
    assertThat(rejections(g, "normal", "batch", "queue_timeout")).isEqualTo(1);
    assertThat(rejections(g, "normal", "batch", "queue_full")).isZero();
    assertThat(rejections(g, "high", "interactive", "queue_timeout")).isZero();

    // nothing of b is left in the queue's counts (b's connection, watched while it waited, closes
    // after its 429; its end must not take b off the queue a second time): the next request goes
    // to the engine while it has room, the one after waits, and a freed place is granted to it
    hh.release();
    answered(h);
    CompletableFuture<HttpResponse<String>> d = send(g, 4000, "normal");
    Held hd = next();
    assertThat(hd.startsWith(4000)).isTrue();
    CompletableFuture<HttpResponse<String>> e = send(g, 5000, "normal");
    await("e waits", () -> g.admission.queue(m).size() == 1);
    ha.release();
    answered(a);
    Held he = next();
    assertThat(he.startsWith(5000)).as("a's end gives e its place").isTrue();
    hd.release();
    he.release();
    answered(d);
    answered(e);
    await("every route freed", () -> m.router().inFlight() == 0);
    assertThat(g.admission.queue(m).size()).isZero();
    assertThat(arrivals).as("the engine saw a, b, h, d, e: b was not sent again").isEmpty();
    synchronized (all) {
      assertThat(all).hasSize(5);
    }
    assertThat(g.metrics.admission.depth.labelValues("tiny", "normal", "batch").get()).isZero();
    assertThat(g.metrics.admission.cancelled.labelValues("tiny", "normal", "batch").get()).isZero();
    assertThat(rejections(g, "normal", "batch", "queue_timeout")).isEqualTo(1);
    assertThat(evictions(g, "normal", "batch")).isEqualTo(1);
    assertThat(g.metrics.retries.labelValues("tiny").get()).isZero();
  }

  private static double rejections(Gateway g, String band, String tenant, String reason) {
    return g.metrics.admission.rejections.labelValues("tiny", band, tenant, reason).get();
  }

  @Test
  void aRequestWhoseAnswerHasBegunIsNeverEvicted() throws Exception {
    Gateway g = gateway(2);
    RouterModel m = GatewayStubTest.register(g, 1, engine());
    CompletableFuture<HttpResponse<String>> a = send(g, 1000, "normal");
    Held ha = next();
    CompletableFuture<HttpResponse<String>> b = send(g, 2000, "low");
    Held hb = next();
    // both answers begin: their first tokens reach the gateway, which relays them to the clients
    ha.first();
    hb.first();
    await(
        "both first tokens relayed (the router counts no prefill in flight)",
        () -> m.router().loads().get(0).activePrefillTokens() == 0);
    CompletableFuture<HttpResponse<String>> h = send(g, 3000, "high");
    await("h waits", () -> g.admission.queue(m).size() == 1);
    assertThat(arrivals).as("nothing evicted: h is not on the engine").isEmpty();
    assertThat(ha.aborted.getCount() + hb.aborted.getCount()).isEqualTo(2);
    assertThat(evictions(g, "normal", "batch") + evictions(g, "low", "batch")).isZero();
    hb.end.countDown();
    answered(b);
    Held hh = next();
    assertThat(hh.startsWith(3000)).isTrue();
    hh.release();
    ha.end.countDown();
    answered(h);
    answered(a);
    await("every route freed", () -> m.router().inFlight() == 0);
  }

  @Test
  void withoutTheFlagTheHighRequestWaitsForAPlaceAndNothingIsAborted() throws Exception {
    Gateway g = gateway(0);
    RouterModel m = GatewayStubTest.register(g, 1, engine());
    CompletableFuture<HttpResponse<String>> a = send(g, 1000, "normal");
    Held ha = next();
    CompletableFuture<HttpResponse<String>> b = send(g, 2000, "normal");
    Held hb = next();
    CompletableFuture<HttpResponse<String>> h = send(g, 3000, "high");
    await("h waits", () -> g.admission.queue(m).size() == 1);
    assertThat(arrivals).isEmpty();
    assertThat(hb.aborted.getCount()).isEqualTo(1);
    hb.release();
    answered(b);
    Held hh = next();
    assertThat(hh.startsWith(3000)).isTrue();
    hh.release();
    ha.release();
    answered(h);
    answered(a);
    assertThat(evictions(g, "normal", "batch")).isZero();
    await("every route freed", () -> m.router().inFlight() == 0);
  }
}
