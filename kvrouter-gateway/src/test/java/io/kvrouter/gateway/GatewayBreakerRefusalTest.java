package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayStubTest.completion;
import static io.kvrouter.gateway.GatewayStubTest.holds;
import static io.kvrouter.gateway.GatewayStubTest.post;
import static io.kvrouter.gateway.GatewayStubTest.range;
import static io.kvrouter.gateway.GatewayStubTest.register;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 31: a client's request that every engine answers 500 (vLLM does for some inputs) opened
 * every engine's breaker after a few such requests, and normal clients got 503. A 500 with the
 * engine's own error is counted only when another engine answers the same request otherwise.
 */
class GatewayBreakerRefusalTest {
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).maxBodyBytes(1 << 20).build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .maxAttempts(2)
                .breakerFailures(2)
                .breakerOpen(Duration.ofMinutes(5))
                .build());
    open.add(g);
    return g;
  }

  private StubEngine stub() {
    StubEngine s = new StubEngine();
    open.add(s);
    return s;
  }

  @Test
  void requestsEveryEngineAnswers500DoNotOpenTheBreakers() throws Exception {
    Gateway g = gateway();
    StubEngine a = stub();
    StubEngine b = stub();
    register(g, 1, a.url());
    register(g, 2, b.url());
    a.status.set(500);
    b.status.set(500);
    for (int i = 0; i < 3; i++) {
      HttpResponse<String> r = post(g, "/v1/completions", completion(range(8), false, ""));
      assertThat(r.statusCode()).as(r.body()).isEqualTo(500);
      assertThat(r.body()).contains("stub fails");
    }
    assertThat(a.hits() + b.hits()).isEqualTo(6);
    long now = System.nanoTime();
    assertThat(g.engines.get(a.url()).breaker(now)).isEqualTo(EngineState.Breaker.CLOSED);
    assertThat(g.engines.get(b.url()).breaker(now)).isEqualTo(EngineState.Breaker.CLOSED);
    a.status.set(200);
    b.status.set(200);
    assertThat(post(g, "/v1/completions", completion(range(8), false, "")).statusCode())
        .isEqualTo(200);
  }

  @Test
  void a500ThatAnotherEngineAnswersOtherwiseStillCounts() throws Exception {
    Gateway g = gateway();
    StubEngine bad = stub();
    StubEngine good = stub();
    RouterModel m = register(g, 1, bad.url());
    register(g, 2, good.url());
    bad.status.set(500);
    int[] prompt = range(12);
    holds(m, 1, prompt); // the failing engine holds the prefix: the router tries it first
    for (int i = 0; i < 2; i++) {
      assertThat(post(g, "/v1/completions", completion(prompt, false, "")).statusCode())
          .isEqualTo(200);
    }
    assertThat(bad.hits()).isEqualTo(2);
    assertThat(g.engines.get(bad.url()).breaker(System.nanoTime()))
        .isEqualTo(EngineState.Breaker.OPEN);
    // with one engine, a 500 is counted as before
    good.status.set(500);
    for (int i = 0; i < 2; i++) {
      assertThat(post(g, "/v1/completions", completion(prompt, false, "")).statusCode())
          .isEqualTo(500);
    }
    assertThat(g.engines.get(good.url()).breaker(System.nanoTime()))
        .isEqualTo(EngineState.Breaker.OPEN);
  }
}
