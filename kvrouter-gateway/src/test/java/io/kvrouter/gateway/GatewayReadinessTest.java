package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayStubTest.BS;
import static io.kvrouter.gateway.GatewayStubTest.CHAT;
import static io.kvrouter.gateway.GatewayStubTest.HTTP;
import static io.kvrouter.gateway.GatewayStubTest.tiny;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.route.EngineRole;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import java.io.InputStream;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@code GET /ready} of the gateway tells the truth (503 with the reason until every configured
 * model has an engine that can serve), an engine the gateway registers is checked at once, and a
 * drain takes a rank out without cutting its requests.
 */
class GatewayReadinessTest {
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  /** A gateway of models tiny (and {@code more}), health rounds only when woken. */
  private Gateway gateway(String... more) throws Exception {
    GatewayConfig.Builder b =
        GatewayConfig.builder()
            .model("tiny", tiny())
            // a round every hour: a check comes from registration or from /ready waking it
            .healthInterval(Duration.ofHours(1));
    for (String m : more) b.model(m, tiny());
    Gateway g = Gateway.start(KvRouterServer.Config.builder().port(0).build(), b.build());
    open.add(g);
    return g;
  }

  private StubEngine stub() {
    StubEngine s = new StubEngine();
    open.add(s);
    return s;
  }

  private static HttpResponse<String> get(Gateway g, String path) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(g.url() + path)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static EngineSpec spec(String url, long id, EngineRole role) {
    return new EngineSpec(url, "tiny", BS, id, 0, null, null, null, role);
  }

  private static int closedPort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  @Test
  void readyIs503WithTheReasonUntilEveryModelHasAnEngineThatAnswered() throws Exception {
    Gateway g = gateway("other");
    HttpResponse<String> r = get(g, "/ready");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body())
        .contains("model 'tiny' has no engine registered")
        .contains("and 1 more model(s) without a ready engine");
    // the liveness probe is not the readiness probe
    assertThat(get(g, "/health").statusCode()).isEqualTo(200);

    g.register(spec(stub().url(), 1, EngineRole.BOTH), BS);
    r = get(g, "/ready");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("model 'other' has no engine registered");

    g.register(new EngineSpec(stub().url(), "other", BS, 2, 0, null, null, null), BS);
    assertThat(get(g, "/ready").statusCode()).isEqualTo(200);
  }

  @Test
  void anEngineRegisteredByPostRegisterCountsOnceItAnsweredAHealthCheck() throws Exception {
    Gateway g = gateway();
    StubEngine e = stub();
    // POST /register: the gateway does not check it on the way; the first /ready wakes the
    // health round (every hour otherwise)
    HttpResponse<String> reg =
        GatewayStubTest.post(
            g,
            "/register",
            "{\"instance_id\":1,\"model_name\":\"tiny\",\"block_size\":4,\"base_url\":\""
                + e.url()
                + "\"}");
    assertThat(reg.statusCode()).isEqualTo(201);
    // no health round ran yet (the first one is an hour away): the engine was never checked
    HttpResponse<String> r = get(g, "/ready");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("1 not answering GET /health yet");
    GatewayMockEngineTest.await("ready after the woken health round", () -> ready(g));
    assertThat(e.health.get()).isPositive();
  }

  private static boolean ready(Gateway g) {
    try {
      return get(g, "/ready").statusCode() == 200;
    } catch (Exception x) {
      throw new AssertionError(x);
    }
  }

  @Test
  void aStaticEngineThatCannotBeReachedIsRegisteredUnhealthyAndNamedInAWarning() throws Exception {
    Gateway g = gateway();
    String dead = "http://127.0.0.1:" + closedPort();
    try (LogCapture log = new LogCapture(Gateway.LOG)) {
      g.register(EngineSpec.parse(dead), BS);
      assertThat(log.messages())
          .anySatisfy(
              m ->
                  assertThat(m)
                      .contains("engine " + dead + " (model tiny) is registered but does not")
                      .contains("GET /health failed"));
    }
    assertThat(g.answersHealthChecks(dead)).isFalse();
    assertThat(g.host.model("tiny", null).ranks())
        .extracting(RouterModel.Rank::baseUrl)
        .containsExactly(dead);
    HttpResponse<String> r = get(g, "/ready");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("1 failing its health checks");
    // and requests are not sent to it
    HttpResponse<String> chat = GatewayStubTest.post(g, "/v1/chat/completions", CHAT);
    assertThat(chat.statusCode()).isEqualTo(503);
    assertThat(chat.body()).contains("all_unhealthy");

    StubEngine live = stub();
    g.register(EngineSpec.parse(live.url()), BS);
    assertThat(g.answersHealthChecks(live.url())).isTrue();
    assertThat(get(g, "/ready").statusCode()).isEqualTo(200);
  }

  @Test
  void prefillEnginesAloneAreNotReady() throws Exception {
    Gateway g = gateway();
    g.register(spec(stub().url(), 1, EngineRole.PREFILL), BS);
    HttpResponse<String> r = get(g, "/ready");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("1 prefill-only (a decode or both engine is needed)");
    g.register(spec(stub().url(), 2, EngineRole.DECODE), BS);
    assertThat(get(g, "/ready").statusCode()).isEqualTo(200);
  }

  @Test
  void aDrainStopsNewRequestsLetsTheOneInFlightFinishThenUnregisters() throws Exception {
    Gateway g = gateway();
    StubEngine a = stub();
    StubEngine b = stub();
    g.register(spec(a.url(), 1, EngineRole.BOTH), BS);
    CountDownLatch hold = new CountDownLatch(1);
    a.holdAfterFirst = hold;
    // a stream on engine 1 (the only one yet), held after its first chunk
    HttpResponse<InputStream> stream =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/v1/chat/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(CHAT))
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    assertThat(stream.statusCode()).isEqualTo(200);
    assertThat(a.arrived.await(10, TimeUnit.SECONDS)).isTrue();
    g.register(spec(b.url(), 2, EngineRole.BOTH), BS);

    CompletableFuture<Integer> drained =
        g.drain("tiny", 1, 0, Duration.ofMinutes(5)).toCompletableFuture();
    // new requests go to engine 2 only
    for (int i = 0; i < 4; i++) {
      HttpResponse<String> r = GatewayStubTest.post(g, "/v1/chat/completions", CHAT);
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvrouter-worker")).hasValue("2");
    }
    assertThat(a.hits()).isEqualTo(1);
    // the stream on engine 1 is still in flight: the rank stays registered
    assertThat(drained).isNotDone();
    assertThat(g.host.model("tiny", null).ranks()).hasSize(2);

    hold.countDown();
    String body;
    try (InputStream in = stream.body()) {
      body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    assertThat(body).endsWith("data: [DONE]\n\n");
    assertThat(drained.get(30, TimeUnit.SECONDS)).isZero();
    assertThat(g.host.model("tiny", null).ranks())
        .extracting(RouterModel.Rank::worker)
        .containsExactly(new Worker(2, 0));
    // engine 2 still serves
    assertThat(GatewayStubTest.post(g, "/v1/chat/completions", CHAT).statusCode()).isEqualTo(200);
  }

  @Test
  void aDrainUnregistersAfterItsBoundWhenARequestDoesNotFinish() throws Exception {
    Gateway g = gateway();
    StubEngine a = stub();
    g.register(spec(a.url(), 1, EngineRole.BOTH), BS);
    CountDownLatch hold = new CountDownLatch(1);
    a.holdAfterFirst = hold;
    HttpResponse<InputStream> stream =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/v1/chat/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(CHAT))
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    assertThat(a.arrived.await(10, TimeUnit.SECONDS)).isTrue();
    try (LogCapture log = new LogCapture(Gateway.LOG)) {
      int left = g.drain("tiny", 1, 0, Duration.ofMillis(200)).toCompletableFuture().get();
      assertThat(left).isEqualTo(1);
      assertThat(log.messages())
          .anySatisfy(m -> assertThat(m).contains("1 request(s) still in flight after 200 ms"));
    }
    assertThat(g.host.model("tiny", null)).isNull();
    HttpResponse<String> r = get(g, "/ready");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("model 'tiny' has no engine registered");
    // the stream in flight was not cut: it ends when the engine ends it
    hold.countDown();
    try (InputStream in = stream.body()) {
      assertThat(new String(in.readAllBytes(), StandardCharsets.UTF_8))
          .endsWith("data: [DONE]\n\n");
    }
    // a rank not registered drains at once
    assertThat(g.drain("tiny", 9, 0, Duration.ofMinutes(1)).toCompletableFuture().get()).isZero();
  }
}
