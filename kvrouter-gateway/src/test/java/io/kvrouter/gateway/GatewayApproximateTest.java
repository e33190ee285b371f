package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.BS;
import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static io.kvrouter.gateway.GatewayMockEngineTest.chat;
import static io.kvrouter.gateway.GatewayMockEngineTest.number;
import static io.kvrouter.gateway.GatewayMockEngineTest.post;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.KvSource;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost.Registration;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Engines without KV events are tracked by predictions: the gateway reads each engine's KV capacity
 * from the engine (vLLM's {@code vllm:cache_config_info}, which the mock engine publishes too) and
 * hands each engine's cached-token report to the router (PredictionCheck →
 * KvRouter.observeCachedTokens): an engine smaller than its registration says makes the router's
 * predictions shrink.
 */
class GatewayApproximateTest {
  private Gateway g;
  private MockEngineServer e;

  @AfterEach
  void close() throws Exception {
    if (g != null) g.close();
    if (e != null) e.close();
  }

  private static MockEngineServer engine(int gpuBlocks) throws Exception {
    return MockEngineServer.start(
        MockEngineServer.Config.builder()
            .port(0)
            .modelDir(GatewayStubTest.tiny())
            .servedModelName("tiny")
            .blockSize(BS)
            .numGpuBlocks(gpuBlocks)
            .enablePromptTokensDetails(true)
            .speedup(20)
            .defaultMaxTokens(2)
            .build());
  }

  @Test
  void anEngineRegisteredWithoutEventsIsPredictedWithTheCapacityItReports() throws Exception {
    g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).build());
    e = engine(24);
    // a base URL and no event source: predicted, with no further flag
    RouterModel m = g.host.register(Registration.of("tiny", BS, 1, 0, e.url()));
    Worker w = new Worker(1, 0);
    assertThat(m.router().isApproximate()).isFalse();
    assertThat(m.router().kvSource(w)).isEqualTo(KvSource.PREDICTED);
    await("the engine's capacity", () -> m.router().kvBlocks(w) == 24);
    for (int i = 0; i < 6; i++) {
      HttpResponse<String> o = post(g.url(), "/v1/chat/completions", chat("Topic " + i + "."));
      assertThat(o.statusCode()).as(o.body()).isEqualTo(200);
    }
    assertThat(m.router().index().blockCount(w))
        .as("predictions bounded by the 24 blocks the engine has")
        .isPositive()
        .isLessThanOrEqualTo(24);
    String workers =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(URI.create(g.url() + "/workers")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    assertThat(workers).contains("\"kv_source\":\"predicted\",\"kv_capacity_blocks\":24");
  }

  @Test
  void anEngineThatEvictedWhatTheRouterPredictsCorrectsThePredictions() throws Exception {
    g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                .routing(RoutingSettings.DEFAULTS.withApproximate(true))
                .build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).build());
    // a few prompts' worth: the engine evicts, the router cannot see it
    e = engine(24);
    RouterModel m = g.host.register(Registration.of("tiny", BS, 1, 0, e.url()));
    Worker w = new Worker(1, 0);
    // as an engine that does not say its capacity: the router then learns one from its reports
    await("the engine's capacity", () -> m.router().kvBlocks(w) == 24);
    m.router().setKvBlocks(w, 0);
    assertThat(m.router().isApproximate()).isTrue();
    String first = chat("Radix trees?");
    HttpResponse<String> a = post(g.url(), "/v1/chat/completions", first);
    assertThat(a.statusCode()).as(a.body()).isEqualTo(200);
    for (int i = 0; i < 4; i++) {
      String other = chat("Topic " + (char) ('a' + i) + ", then.");
      HttpResponse<String> o = post(g.url(), "/v1/chat/completions", other);
      assertThat(o.statusCode()).as(o.body()).isEqualTo(200);
    }
    long predictedBefore = m.router().index().blockCount(w);
    long prompt = number(a.body(), "prompt_tokens");
    assertThat(predictedBefore)
        .as("the router predicts every prompt it sent, more than the engine holds")
        .isGreaterThan(24);
    HttpResponse<String> again = post(g.url(), "/v1/chat/completions", first);
    assertThat(again.statusCode()).isEqualTo(200);
    long overlap =
        Long.parseLong(again.headers().firstValue("x-kvrouter-overlap-tokens").orElseThrow());
    assertThat(overlap).as("predicted: all of it").isGreaterThanOrEqualTo(prompt / BS * BS - BS);
    assertThat(number(again.body(), "cached_tokens"))
        .as("the engine evicted it")
        .isLessThan(PredictionCheck.expected(overlap, prompt, BS));
    // the report reaches the router once the gateway finished the answer
    await(
        "the router's predictions to shrink",
        () -> m.router().index().blockCount(w) < predictedBefore);
  }
}
