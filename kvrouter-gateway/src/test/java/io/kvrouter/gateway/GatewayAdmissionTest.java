package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static io.kvrouter.gateway.GatewayMockEngineTest.post;
import static io.kvrouter.gateway.GatewayMockEngineTest.register;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouteSpans;
import io.kvrouter.server.RouterModel;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.prometheus.metrics.core.metrics.Counter;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The admission queue (docs/gateway.md, "Admission") against a mock engine at real-time speed: a
 * long streamed answer holds it for seconds, and with {@code --busy-requests 1} one such stream
 * saturates the model; closing it (the client leaves: the gateway's next write fails) frees its
 * place. Nothing here waits on the clock but the queue-time bound itself; every step waits on
 * observable state (queue depth, futures, metrics).
 */
class GatewayAdmissionTest {
  private final List<AutoCloseable> open = new ArrayList<>();
  private final List<InputStream> streams = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (InputStream s : streams) s.close();
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway(AdmissionConfig admission) throws Exception {
    return gateway(admission, null);
  }

  private Gateway gateway(AdmissionConfig admission, OpenTelemetry otel) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                .routing(RoutingSettings.DEFAULTS.withBusyRequests(1))
                .build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .admission(admission)
                .build(),
            null,
            otel);
    open.add(g);
    return g;
  }

  private static AdmissionConfig admission(int depth, Duration time) {
    return new AdmissionConfig(
        depth, time, 0, AdmissionConfig.TenantSource.HEADER, Map.of(), 16, 8);
  }

  /** An engine at real-time speed (20 ms per token): a 5000-token stream lasts 100 s. */
  private MockEngineServer slowEngine() throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .modelDir(GatewayStubTest.tiny())
                .servedModelName("tiny")
                .blockSize(GatewayMockEngineTest.BS)
                .numGpuBlocks(2048)
                .port(0)
                .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                .build());
    open.add(e);
    return e;
  }

  /** A long stream that holds the engine; returned once its first bytes arrived. */
  private InputStream hold(Gateway g, String prompt, String... headers) throws Exception {
    CompletableFuture<HttpResponse<InputStream>> f = streamAsync(g, prompt, headers);
    HttpResponse<InputStream> r = f.get(30, TimeUnit.SECONDS);
    assertThat(r.statusCode()).isEqualTo(200);
    InputStream in = r.body();
    streams.add(in);
    assertThat(new String(in.readNBytes(5), StandardCharsets.UTF_8)).isEqualTo("data:");
    return in;
  }

  private static CompletableFuture<HttpResponse<InputStream>> streamAsync(
      Gateway g, String prompt, String... headers) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
            .header("Content-Type", "application/json")
            .POST(
                HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":5000,\"prompt\":\""
                        + prompt
                        + "\"}"));
    for (int i = 0; i < headers.length; i += 2) b.header(headers[i], headers[i + 1]);
    return GatewayMockEngineTest.HTTP.sendAsync(
        b.build(), HttpResponse.BodyHandlers.ofInputStream());
  }

  private static CompletableFuture<HttpResponse<String>> completionAsync(
      Gateway g, String body, String... headers) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i < headers.length; i += 2) b.header(headers[i], headers[i + 1]);
    return GatewayMockEngineTest.HTTP.sendAsync(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private static String completion(String prompt) {
    return "{\"model\":\"tiny\",\"max_tokens\":3,\"prompt\":\"" + prompt + "\"}";
  }

  private static int depth(Gateway g, RouterModel m) {
    return g.admission.queue(m).size();
  }

  private static double counter(Counter c, String... labels) {
    return c.labelValues(labels).get();
  }

  @Test
  void aRequestWaitsWhileTheModelIsSaturatedAndIsServedOnceAnotherFinishes() throws Exception {
    Gateway g = gateway(admission(8, Duration.ofSeconds(120)));
    RouterModel m = register(g, 1, slowEngine());
    InputStream a = hold(g, "the first request holds the engine");
    assertThat(m.router().inFlight()).isEqualTo(1);

    CompletableFuture<HttpResponse<String>> b =
        completionAsync(g, completion("the second one waits"), "x-kvrouter-tenant", "acme");
    await("b queued", () -> depth(g, m) == 1);
    assertThat(b).isNotDone();
    assertThat(m.router().inFlight()).as("b is not on the engine").isEqualTo(1);

    a.close(); // a's client leaves: its route is freed, b is granted its place
    HttpResponse<String> rb = b.get(30, TimeUnit.SECONDS);
    assertThat(rb.statusCode()).isEqualTo(200);
    assertThat(rb.body()).contains("\"text\"");
    assertThat(depth(g, m)).isZero();
    assertThat(counter(g.metrics.admission.queued, "tiny", "normal", "acme")).isEqualTo(1);
    assertThat(g.metrics.admission.waited.collect().getDataPoints().get(0).getCount()).isEqualTo(1);
    // b's connection was closed after its answer (it was watched while b waited): the client's
    // next request goes on a fresh one and is answered at once
    assertThat(post(g.url(), "/v1/completions", completion("after")).statusCode()).isEqualTo(200);
    assertThat(depth(g, m)).isZero();
  }

  @Test
  void aFullQueueRefusesWith429AndRetryAfter() throws Exception {
    Gateway g = gateway(admission(1, Duration.ofSeconds(120)));
    RouterModel m = register(g, 1, slowEngine());
    InputStream a = hold(g, "holding");
    CompletableFuture<HttpResponse<String>> b = completionAsync(g, completion("waits"));
    await("b queued", () -> depth(g, m) == 1);

    HttpResponse<String> c = post(g.url(), "/v1/completions", completion("no room"));
    assertThat(c.statusCode()).isEqualTo(429);
    assertThat(c.headers().firstValue("retry-after")).hasValue("120");
    assertThat(c.body())
        .contains("\"code\":\"queue_full\"")
        .contains("\"type\":\"requests\"")
        .contains("--max-queue-depth");
    assertThat(counter(g.metrics.admission.rejections, "tiny", "normal", "anonymous", "queue_full"))
        .isEqualTo(1);

    a.close();
    assertThat(b.get(30, TimeUnit.SECONDS).statusCode()).as("nothing lost").isEqualTo(200);
  }

  @Test
  void aWaitPastTheQueueTimeIsRefusedWith429() throws Exception {
    Gateway g = gateway(admission(8, Duration.ofMillis(300)));
    RouterModel m = register(g, 1, slowEngine());
    hold(g, "holding for ever");
    HttpResponse<String> b = post(g.url(), "/v1/completions", completion("waits too long"));
    assertThat(b.statusCode()).isEqualTo(429);
    assertThat(b.headers().firstValue("retry-after")).hasValue("1");
    assertThat(b.body()).contains("\"code\":\"queue_timeout\"").contains("--max-queue-time");
    assertThat(depth(g, m)).isZero();
    assertThat(
            counter(g.metrics.admission.rejections, "tiny", "normal", "anonymous", "queue_timeout"))
        .isEqualTo(1);
  }

  @Test
  void aTracedWaitIsAQueueWaitSpanAfterAnAllBusyRoute() throws Exception {
    InMemorySpanExporter spans = InMemorySpanExporter.create();
    OpenTelemetrySdk otel = GatewayTracingTest.sdk(spans);
    open.add(otel);
    Gateway g = gateway(admission(8, Duration.ofMillis(300)), otel);
    register(g, 1, slowEngine());
    hold(g, "holding for ever");
    HttpResponse<String> b =
        post(g.url(), "/v1/completions", completion("waits too long"), "x-kvrouter-tenant", "acme");
    assertThat(b.statusCode()).isEqualTo(429);
    SpanData wait = GatewayTracingTest.awaitSpan(spans, "kvrouter.queue_wait");
    SpanData server = GatewayTracingTest.awaitSpan(spans, "POST /v1/completions");
    assertThat(wait.getParentSpanId()).isEqualTo(server.getSpanId());
    assertThat(wait.getAttributes().get(AttributeKey.stringKey("kvrouter.queue.outcome")))
        .isEqualTo("rejected");
    assertThat(wait.getAttributes().get(AttributeKey.stringKey("kvrouter.queue.tenant")))
        .isEqualTo("acme");
    assertThat(wait.getAttributes().get(AttributeKey.longKey("kvrouter.queue.band"))).isEqualTo(1L);
    assertThat(server.getAttributes().get(AttributeKey.longKey("http.response.status_code")))
        .isEqualTo(429L);
    assertThat(server.getAttributes().get(AttributeKey.stringKey("error.type")))
        .isEqualTo("queue_timeout");
    // before it waited, its route found every engine busy
    SpanData route =
        spans.getFinishedSpanItems().stream()
            .filter(
                s ->
                    s.getName().equals("kvrouter.route")
                        && s.getParentSpanId().equals(server.getSpanId()))
            .findFirst()
            .orElseThrow();
    assertThat(route.getAttributes().get(RouteSpans.OUTCOME)).isEqualTo("all_busy");
    assertThat(route.getAttributes().get(RouteSpans.BUSY)).isEqualTo(1L);
    assertThat(route.getEndEpochNanos()).isLessThanOrEqualTo(wait.getStartEpochNanos());
  }

  @Test
  void aWaiterWhoseClientLeavesFreesItsPlaceAtOnce() throws Exception {
    Gateway g = gateway(admission(1, Duration.ofSeconds(120)));
    RouterModel m = register(g, 1, slowEngine());
    InputStream a = hold(g, "holding");

    byte[] body = completion("leaves").getBytes(StandardCharsets.UTF_8);
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
      await("the raw client queued", () -> depth(g, m) == 1);
    } // closed: the client left
    await("its place freed", () -> depth(g, m) == 0);
    assertThat(counter(g.metrics.admission.cancelled, "tiny", "normal", "anonymous")).isEqualTo(1);

    // the queue (depth 1) has room again: the next request waits instead of a 429
    CompletableFuture<HttpResponse<String>> c = completionAsync(g, completion("next"));
    await("c queued", () -> depth(g, m) == 1);
    a.close();
    assertThat(c.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void aHighPriorityRequestQueuedAfterLowOnesIsServedFirst() throws Exception {
    Gateway g = gateway(admission(8, Duration.ofSeconds(120)));
    RouterModel m = register(g, 1, slowEngine());
    InputStream a = hold(g, "holding");

    // low priority (the header as vLLM's priority, above 0, then by name), then high; each a long
    // stream, so exactly one holds the engine at a time
    CompletableFuture<HttpResponse<InputStream>> low1 =
        streamAsync(g, "low one", "x-kvrouter-priority", "5");
    await("low1 queued", () -> depth(g, m) == 1);
    CompletableFuture<HttpResponse<InputStream>> low2 =
        streamAsync(g, "low two", "x-kvrouter-priority", "low");
    await("low2 queued", () -> depth(g, m) == 2);
    CompletableFuture<HttpResponse<InputStream>> high =
        streamAsync(g, "high", "x-kvrouter-priority", "high");
    await("high queued", () -> depth(g, m) == 3);

    a.close();
    HttpResponse<InputStream> h = high.get(30, TimeUnit.SECONDS);
    streams.add(h.body());
    assertThat(h.statusCode()).isEqualTo(200);
    assertThat(depth(g, m)).isEqualTo(2);
    assertThat(low1).isNotDone();
    assertThat(low2).isNotDone();

    h.body().close();
    HttpResponse<InputStream> l1 = low1.get(30, TimeUnit.SECONDS);
    streams.add(l1.body());
    assertThat(depth(g, m)).as("low ones leave in their order").isEqualTo(1);
    assertThat(low2).isNotDone();
    l1.body().close();
    streams.add(low2.get(30, TimeUnit.SECONDS).body());
    assertThat(depth(g, m)).isZero();
  }

  @Test
  void tenantsComeFromTheApiKeyAndTheirLabelsAreCapped() throws Exception {
    Gateway g =
        gateway(
            new AdmissionConfig(
                8, Duration.ofSeconds(120), 0, AdmissionConfig.TenantSource.KEY, Map.of(), 16, 1));
    RouterModel m = register(g, 1, slowEngine());
    InputStream a = hold(g, "holding");
    CompletableFuture<HttpResponse<String>> alice =
        completionAsync(g, completion("alice asks"), "Authorization", "Bearer sk-alice");
    await("alice queued", () -> depth(g, m) == 1);
    CompletableFuture<HttpResponse<String>> bob =
        completionAsync(g, completion("bob asks"), "Authorization", "Bearer sk-bob");
    await("bob queued", () -> depth(g, m) == 2);
    // the key's SHA-256, first 6 bytes in hex: no key in a label
    String aliceLabel =
        "key-"
            + HexFormat.of()
                .formatHex(
                    MessageDigest.getInstance("SHA-256")
                        .digest("sk-alice".getBytes(StandardCharsets.UTF_8)),
                    0,
                    6);
    assertThat(counter(g.metrics.admission.queued, "tiny", "normal", aliceLabel)).isEqualTo(1);
    assertThat(counter(g.metrics.admission.queued, "tiny", "normal", "other"))
        .as("one tenant label at most: bob is 'other'")
        .isEqualTo(1);
    a.close();
    assertThat(alice.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    assertThat(bob.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    assertThat(depth(g, m)).isZero();
  }

  @Test
  void aPriorityThatIsNoIntegerIsA400() throws Exception {
    Gateway g = gateway(admission(8, Duration.ofSeconds(120)));
    register(g, 1, slowEngine());
    HttpResponse<String> bad =
        post(g.url(), "/v1/completions", completion("x"), "x-kvrouter-priority", "urgent!");
    assertThat(bad.statusCode()).isEqualTo(400);
    assertThat(bad.body()).contains("invalid_priority").contains("x-kvrouter-priority");
    HttpResponse<String> wrong =
        post(
            g.url(),
            "/v1/completions",
            "{\"model\":\"tiny\",\"priority\":\"high\",\"prompt\":\"x\"}");
    assertThat(wrong.statusCode()).isEqualTo(400);
    assertThat(wrong.body()).contains("'priority' must be an integer");
  }
}
