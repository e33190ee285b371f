package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.BS;
import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static io.kvrouter.gateway.GatewayMockEngineTest.chat;
import static io.kvrouter.gateway.GatewayMockEngineTest.number;
import static io.kvrouter.gateway.GatewayMockEngineTest.post;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost.Registration;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The gateway in approximate mode hands each engine's cached-token report to the router
 * (PredictionCheck → KvRouter.observeCachedTokens): an engine too small for what the router
 * predicts makes the router's predictions shrink.
 */
class GatewayApproximateTest {
  private Gateway g;
  private MockEngineServer e;

  @AfterEach
  void close() throws Exception {
    if (g != null) g.close();
    if (e != null) e.close();
  }

  @Test
  void anEngineThatEvictedWhatTheRouterPredictsCorrectsThePredictions() throws Exception {
    g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).approximate(true).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).build());
    e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .port(0)
                .modelDir(GatewayStubTest.tiny())
                .servedModelName("tiny")
                .blockSize(BS)
                .numGpuBlocks(
                    24) // a few prompts' worth: the engine evicts, the router cannot see it
                .enablePromptTokensDetails(true)
                .speedup(20)
                .defaultMaxTokens(2)
                .build());
    // no KV events: registered without endpoints, and with no capacity (the gateway has none)
    RouterModel m = g.host.register(Registration.of("tiny", BS, 1, 0, e.url()));
    Worker w = new Worker(1, 0);
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
