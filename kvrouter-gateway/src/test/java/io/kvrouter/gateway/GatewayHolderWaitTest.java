package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.route.RoutingSettings;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
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
 * Grants at a prefill's end and waiting for the prefix holder (docs/routing.md, "Admission"), with
 * engines whose every step the test releases: an engine holds each request in its "prefill" (sends
 * nothing) until the test opens its first gate, then streams one event (the first token) and holds
 * the "decode" until the test opens its second gate. A rank is busy past {@code
 * --busy-prefill-tokens}; nothing here sleeps or reads the clock: every step waits on observable
 * state (arrivals at an engine, the queue's gauges, the router's counts).
 */
class GatewayHolderWaitTest {
  private final List<AutoCloseable> open = new ArrayList<>();
  private final List<GatedEngine> engines = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (GatedEngine e : engines) e.releaseAll();
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  /** One request as the engine holds it. */
  static final class Held {
    final String body;
    final CountDownLatch first = new CountDownLatch(1);
    final CountDownLatch end = new CountDownLatch(1);

    Held(String body) {
      this.body = body;
    }

    void release() {
      first.countDown();
      end.countDown();
    }
  }

  /** An engine whose prefill and decode end when the test says (RawEngine: bytes as written). */
  static final class GatedEngine implements AutoCloseable {
    final BlockingQueue<Held> arrivals = new LinkedBlockingQueue<>();
    final List<Held> all = new ArrayList<>();
    final RawEngine raw;

    GatedEngine() throws IOException {
      raw =
          new RawEngine(
              (head, body, out) -> {
                Held h = new Held(body);
                synchronized (all) {
                  all.add(h);
                }
                arrivals.add(h);
                awaitGate(h.first);
                out.write(
                    ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                            + "data: "
                            + StubEngine.chunk(false, 0)
                            + "\n\n")
                        .getBytes(StandardCharsets.UTF_8));
                out.flush();
                awaitGate(h.end);
                out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
              });
    }

    private static void awaitGate(CountDownLatch l) throws IOException {
      try {
        if (!l.await(2, TimeUnit.MINUTES)) throw new IOException("the test never opened the gate");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException(e);
      }
    }

    /** The next request to arrive (fails the test if none arrives within a generous bound). */
    Held next() throws InterruptedException {
      Held h = arrivals.poll(60, TimeUnit.SECONDS);
      assertThat(h).as("a request arrived at the engine").isNotNull();
      return h;
    }

    void releaseAll() {
      synchronized (all) {
        for (Held h : all) h.release();
      }
    }

    String url() {
      return raw.url();
    }

    @Override
    public void close() throws IOException {
      raw.close();
    }
  }

  private GatedEngine engine() throws IOException {
    GatedEngine e = new GatedEngine();
    engines.add(e);
    open.add(e);
    return e;
  }

  private Gateway gateway(long busyPrefillTokens) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                .routing(RoutingSettings.DEFAULTS.withBusyPrefillTokens(busyPrefillTokens))
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

  /** Token ids {@code from, from+1, ...}, {@code n} of them. */
  private static int[] ids(int from, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) t[i] = from + i;
    return t;
  }

  private static int[] concat(int[] a, int[] b) {
    int[] t = new int[a.length + b.length];
    System.arraycopy(a, 0, t, 0, a.length);
    System.arraycopy(b, 0, t, a.length, b.length);
    return t;
  }

  private static CompletableFuture<HttpResponse<String>> stream(Gateway g, int[] prompt) {
    return GatewayMockEngineTest.HTTP.sendAsync(
        request(g, prompt), HttpResponse.BodyHandlers.ofString());
  }

  private static HttpRequest request(Gateway g, int[] prompt) {
    StringBuilder p = new StringBuilder();
    for (int i = 0; i < prompt.length; i++) p.append(i == 0 ? "" : ",").append(prompt[i]);
    HttpRequest r =
        HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
            .header("Content-Type", "application/json")
            .POST(
                HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":4,\"prompt\":[" + p + "]}"))
            .build();
    return r;
  }

  /** A request that will wait: its stream read as text, to the end of its body. */
  private static CompletableFuture<HttpResponse<InputStream>> waiter(Gateway g, int[] prompt) {
    return GatewayMockEngineTest.HTTP.sendAsync(
        request(g, prompt), HttpResponse.BodyHandlers.ofInputStream());
  }

  /**
   * The whole body: its connection is closed after it (it was watched while the request waited),
   * and the read fails if the close came before the chunked body's end
   * (GatewayQueuedAnswerEndTest).
   */
  private static String toEnd(InputStream in) throws IOException {
    try (in) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private static boolean startsWith(Held h, int firstToken) {
    return h.body.contains("\"prompt\":[" + firstToken + ",");
  }

  private static double grants(Gateway g, String trigger) {
    return g.metrics.admission.grants.labelValues("tiny", trigger).get();
  }

  @Test
  void aWaiterIsGrantedWhenTheEnginesFirstTokenArrivesNotOnlyWhenTheAnswerEnds() throws Exception {
    Gateway g = gateway(0); // busy while any prefill is in flight
    GatedEngine e = engine();
    RouterModel m = GatewayStubTest.register(g, 1, e.url());

    CompletableFuture<HttpResponse<String>> a = stream(g, ids(1000, 16));
    Held ha = e.next();
    assertThat(startsWith(ha, 1000)).isTrue();
    CompletableFuture<HttpResponse<InputStream>> b = waiter(g, ids(2000, 16));
    await("b queued behind a's prefill", () -> g.admission.queue(m).size() == 1);
    assertThat(e.arrivals).as("b is not on the engine while a's prefill runs").isEmpty();

    ha.first.countDown(); // a's first token: its prefill is over, its decode goes on
    Held hb = e.next();
    assertThat(startsWith(hb, 2000)).as("b granted and sent").isTrue();
    assertThat(a).as("a's answer has not ended").isNotDone();
    assertThat(m.router().inFlight()).isEqualTo(2);
    assertThat(grants(g, Admission.PREFILL_END)).isEqualTo(1);
    assertThat(grants(g, Admission.REQUEST_END)).isZero();

    ha.end.countDown();
    hb.release();
    assertThat(a.get(60, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    HttpResponse<InputStream> rb = b.get(60, TimeUnit.SECONDS);
    assertThat(rb.statusCode()).isEqualTo(200);
    assertThat(toEnd(rb.body())).endsWith("data: [DONE]\n\n");
    assertThat(g.admission.queue(m).size()).isZero();
    await("both freed", () -> m.router().inFlight() == 0);
  }

  /**
   * Engine 1 holds a 64-token prefix and is busy with another request's 40-token prefill; engine 2
   * is idle. A 68-token prompt on that prefix costs 68 prefill tokens on engine 2 now, and 40 + 4
   * on engine 1 once its prefill ends: it waits for engine 1, and goes there when a's first token
   * is out.
   */
  @Test
  void aRequestWaitsForItsPrefixHolderWhenThatCostsFewerPrefillTokens() throws Exception {
    Gateway g = gateway(16);
    GatedEngine holder = engine();
    GatedEngine other = engine();
    int[] prefix = ids(10, 64);
    RouterModel m = GatewayStubTest.register(g, 1, holder.url());
    GatewayStubTest.holds(m, 1, prefix);

    CompletableFuture<HttpResponse<String>> a = stream(g, ids(1000, 40)); // only engine 1 yet
    Held ha = holder.next();
    GatewayStubTest.register(g, 2, other.url());

    CompletableFuture<HttpResponse<InputStream>> b = waiter(g, concat(prefix, ids(5000, 4)));
    await("b waits for its holder", () -> g.admission.queue(m).parked() == 1);
    assertThat(g.metrics.admission.holderWaiting.labelValues("tiny").get()).isEqualTo(1);
    assertThat(g.metrics.admission.holderWaits.labelValues("tiny").get()).isEqualTo(1);
    assertThat(m.router().inFlight()).as("b's route on engine 2 was freed").isEqualTo(1);
    assertThat(other.arrivals).isEmpty();

    ha.first.countDown(); // engine 1's prefill ends: b goes there
    Held hb = holder.next();
    assertThat(startsWith(hb, 10)).isTrue();
    assertThat(g.admission.queue(m).parked()).isZero();
    assertThat(g.metrics.admission.holderWaiting.labelValues("tiny").get()).isZero();
    assertThat(grants(g, Admission.PREFILL_END)).isEqualTo(1);
    ha.end.countDown();
    hb.release();
    HttpResponse<InputStream> rb = b.get(60, TimeUnit.SECONDS);
    assertThat(rb.statusCode()).isEqualTo(200);
    assertThat(toEnd(rb.body())).endsWith("data: [DONE]\n\n");
    assertThat(rb.headers().firstValue("x-kvrouter-worker")).hasValue("1");
    assertThat(rb.headers().firstValue("x-kvrouter-overlap-tokens")).hasValue("64");
    assertThat(a.get(60, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    assertThat(other.all).as("engine 2 never got a request").isEmpty();
  }

  /**
   * The same, but engine 1's backlog is a 100-token prefill: waiting would cost 100 + 4 prefill
   * tokens against 68 now on engine 2, so b starts on engine 2 at once.
   */
  @Test
  void aRequestStartsElsewhereWhenWaitingForItsHolderCostsMore() throws Exception {
    Gateway g = gateway(16);
    GatedEngine holder = engine();
    GatedEngine other = engine();
    int[] prefix = ids(10, 64);
    RouterModel m = GatewayStubTest.register(g, 1, holder.url());
    GatewayStubTest.holds(m, 1, prefix);

    CompletableFuture<HttpResponse<String>> a = stream(g, ids(1000, 100));
    holder.next();
    GatewayStubTest.register(g, 2, other.url());

    CompletableFuture<HttpResponse<String>> b = stream(g, concat(prefix, ids(5000, 4)));
    Held hb = other.next(); // while engine 1's prefill still runs
    assertThat(startsWith(hb, 10)).isTrue();
    assertThat(g.metrics.admission.holderWaits.labelValues("tiny").get()).isZero();
    assertThat(g.admission.queue(m).parked()).isZero();
    hb.release();
    HttpResponse<String> rb = b.get(60, TimeUnit.SECONDS);
    assertThat(rb.statusCode()).isEqualTo(200);
    assertThat(rb.headers().firstValue("x-kvrouter-worker")).hasValue("2");
    assertThat(a).as("engine 1's request still in its prefill").isNotDone();
  }

  /** A client that leaves while its request waits for its holder leaves at once, counted. */
  @Test
  void aClientThatLeavesWhileWaitingForItsHolderLeavesAtOnce() throws Exception {
    Gateway g = gateway(16);
    GatedEngine holder = engine();
    GatedEngine other = engine();
    int[] prefix = ids(10, 64);
    RouterModel m = GatewayStubTest.register(g, 1, holder.url());
    GatewayStubTest.holds(m, 1, prefix);
    CompletableFuture<HttpResponse<String>> a = stream(g, ids(1000, 40));
    Held ha = holder.next();
    GatewayStubTest.register(g, 2, other.url());

    int[] prompt = concat(prefix, ids(5000, 4));
    StringBuilder p = new StringBuilder();
    for (int i = 0; i < prompt.length; i++) p.append(i == 0 ? "" : ",").append(prompt[i]);
    byte[] body =
        ("{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":4,\"prompt\":[" + p + "]}")
            .getBytes(StandardCharsets.UTF_8);
    URI u = URI.create(g.url());
    try (Socket s = new Socket(u.getHost(), u.getPort())) {
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + "Content-Length: "
                  + body.length
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
      await("the raw client waits for its holder", () -> g.admission.queue(m).parked() == 1);
    } // closed: the client left
    await("it left at once", () -> g.admission.queue(m).parked() == 0);
    assertThat(g.metrics.admission.holderWaiting.labelValues("tiny").get()).isZero();
    assertThat(g.metrics.admission.cancelled.labelValues("tiny", "normal", "anonymous").get())
        .isEqualTo(1);
    assertThat(g.admission.queue(m).busy()).as("nothing waits any more").isFalse();

    ha.first.countDown(); // engine 1's prefill ends: nothing was waiting for it
    ha.end.countDown();
    assertThat(a.get(60, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    assertThat(holder.all).as("only a reached engine 1").hasSize(1);
    assertThat(other.all).isEmpty();
    assertThat(grants(g, Admission.PREFILL_END)).isZero();
  }
}
