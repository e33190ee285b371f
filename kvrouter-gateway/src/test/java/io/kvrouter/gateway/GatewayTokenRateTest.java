package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.post;
import static io.kvrouter.gateway.GatewayMockEngineTest.register;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Per-tenant token-rate limits (docs/gateway.md, "Token-rate limits") end to end against a mock
 * engine, on a clock the test moves (the engine runs in real time, the buckets never see it).
 * Without busy limits: the limits apply whether or not requests ever wait. Prompts are token ids,
 * so a request's cost is known by hand: 8 prompt tokens (no prefix cached: each prompt starts with
 * its own block) plus max_tokens. At 10 tokens per second a token is 100 ms of refill and the
 * bucket holds 10 s of it: 100 tokens.
 */
class GatewayTokenRateTest {
  private static final long MS = 1_000_000L;
  private final List<AutoCloseable> open = new ArrayList<>();
  private final AtomicLong clock = new AtomicLong(1_000 * 1_000 * MS);

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway(TokenRateConfig rates) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .admission(AdmissionConfig.DEFAULTS.withTokenRates(rates))
                .build(),
            null,
            null,
            clock::get);
    open.add(g);
    MockEngineServer e =
        MockEngineServer.start(
            GatewayMockEngineTest.tinyEngine()
                .port(0)
                .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                .build());
    open.add(e);
    register(g, 1, e);
    return g;
  }

  /** A completion of 8 prompt token ids starting at {@code first}, and {@code maxTokens}. */
  private static String completion(int first, int maxTokens) {
    StringBuilder b = new StringBuilder("{\"model\":\"tiny\",\"max_tokens\":");
    b.append(maxTokens).append(",\"prompt\":[");
    for (int i = 0; i < 8; i++) b.append(i == 0 ? "" : ",").append(first + i);
    return b.append("]}").toString();
  }

  private static HttpResponse<String> as(Gateway g, String tenant, String body) throws Exception {
    return post(g.url(), "/v1/completions", body, "x-kvrouter-tenant", tenant);
  }

  private static double limited(Gateway g, String tenant) {
    return g.metrics.admission.rateLimited.labelValues(tenant).get();
  }

  @Test
  void aTenantOverItsRateGets429WithRetryAfterWhileAnotherIsServed() throws Exception {
    Gateway g =
        gateway(new TokenRateConfig(10, Map.of("vip", 1000.0), Duration.ofSeconds(10), 1000));

    HttpResponse<String> a1 = as(g, "a", completion(100, 80)); // 88 of a's 100 tokens
    assertThat(a1.statusCode()).isEqualTo(200);
    // what the engine reports is what was charged: nothing to settle
    assertThat(a1.body()).contains("\"prompt_tokens\":8").contains("\"completion_tokens\":80");

    // 58 more: 12 left, 46 missing, 4.6 s of refill
    HttpResponse<String> a2 = as(g, "a", completion(200, 50));
    assertThat(a2.statusCode()).isEqualTo(429);
    assertThat(a2.headers().firstValue("retry-after")).hasValue("5");
    assertThat(a2.body())
        .contains("\"type\":\"tokens\"")
        .contains("\"code\":\"rate_limit_exceeded\"")
        .contains("tenant 'a'")
        .contains("requested 58")
        .contains("--tenant-token-rate");
    assertThat(limited(g, "a")).isEqualTo(1);

    // b has a bucket of its own
    HttpResponse<String> b1 = as(g, "b", completion(300, 50));
    assertThat(b1.statusCode()).isEqualTo(200);
    assertThat(limited(g, "b")).isZero();

    // 4 s later a has 52 tokens: still 6 short (0.6 s, Retry-After rounds up to 1)
    clock.addAndGet(4_000 * MS);
    HttpResponse<String> a3 = as(g, "a", completion(200, 50));
    assertThat(a3.statusCode()).isEqualTo(429);
    assertThat(a3.headers().firstValue("retry-after")).hasValue("1");
    assertThat(limited(g, "a")).isEqualTo(2);
    clock.addAndGet(600 * MS);
    assertThat(as(g, "a", completion(200, 50)).statusCode()).isEqualTo(200);

    // vip's own rate (--tenant-token-rate vip=1000): a 10,000-token bucket
    for (int i = 0; i < 3; i++) {
      assertThat(as(g, "vip", completion(400 + 10 * i, 80)).statusCode()).isEqualTo(200);
    }
    assertThat(limited(g, "vip")).isZero();
  }

  @Test
  void onlyListedTenantsAreLimitedWithoutADefaultRate() throws Exception {
    Gateway g = gateway(new TokenRateConfig(0, Map.of("a", 10.0), Duration.ofSeconds(10), 1000));
    assertThat(as(g, "a", completion(100, 80)).statusCode()).isEqualTo(200);
    assertThat(as(g, "a", completion(200, 50)).statusCode()).isEqualTo(429);
    for (int i = 0; i < 3; i++) {
      assertThat(as(g, "someone", completion(300 + 10 * i, 80)).statusCode()).isEqualTo(200);
    }
    assertThat(g.rates.bucket("someone")).isNull();
  }
}
