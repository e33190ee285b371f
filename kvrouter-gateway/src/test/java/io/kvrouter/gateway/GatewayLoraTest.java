package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.LoraCost;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.ServerHost.Registration;
import java.io.ByteArrayInputStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * LoRA placement end to end (docs/gateway.md, "LoRA adapters"): three mock engines with {@code
 * --enable-lora --max-loras 2} that load adapters on demand, a gateway with {@code --lora-placement
 * --lora-load-first}. A request for an adapter one engine has resident goes there; a request for an
 * adapter none has is loaded (by the gateway's load call) on the engine chosen, and the later
 * requests for it stick to that engine.
 */
class GatewayLoraTest {
  private static final long LOAD_MS = 400;
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private MockEngineServer engine() throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            GatewayMockEngineTest.tinyEngine().maxLoras(2).loraLoadMs(LOAD_MS).build());
    open.add(e);
    return e;
  }

  private static String chat(String model, String text) {
    return "{\"model\":\""
        + model
        + "\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\""
        + text
        + "\"}]}";
  }

  private static String send(Gateway g, String model, String text) throws Exception {
    HttpResponse<String> r =
        GatewayMockEngineTest.post(g.server().url(), "/v1/chat/completions", chat(model, text));
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return r.headers().firstValue("x-kvrouter-worker").orElseThrow();
  }

  /** The adapters the engine's /v1/models lists (cards with a parent). */
  private static List<String> resident(MockEngineServer e) throws Exception {
    HttpResponse<String> r =
        GatewayMockEngineTest.HTTP.send(
            HttpRequest.newBuilder(URI.create(e.url() + "/v1/models")).GET().build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(200);
    return LoraPlacement.parseAdapters(
        new ByteArrayInputStream(r.body().getBytes(StandardCharsets.UTF_8)));
  }

  @Test
  void adapterRequestsGoWhereTheAdapterIsAndANewOneIsLoadedOnceThenSticks() throws Exception {
    MockEngineServer[] engines = {engine(), engine(), engine()};
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .lora("sql", "tiny")
                .lora("poet", "tiny")
                .loraPlacement(
                    new LoraPlacementConfig(
                        true, 2, LoraCost.defaults(), true, Map.of("sql", "/adapters/sql")))
                .build());
    open.add(g);
    for (int i = 0; i < engines.length; i++) {
      g.host.register(
          Registration.of("tiny", GatewayMockEngineTest.BS, i + 1, 0, engines[i].url()));
    }
    // engine 2 has "sql" resident (loaded by an operator); a health round reads its /v1/models
    assertThat(
            GatewayMockEngineTest.post(
                    engines[1].url(),
                    "/v1/load_lora_adapter",
                    "{\"lora_name\":\"sql\",\"lora_path\":\"/adapters/sql\"}")
                .statusCode())
        .isEqualTo(200);
    g.checkAll();
    assertThat(g.lora.residency().resident(2)).containsExactly("sql");
    assertThat(g.lora.residency().resident(1)).isEmpty();

    for (int i = 0; i < 4; i++) {
      assertThat(send(g, "sql", "select row " + i + " from the table")).isEqualTo("2");
    }
    assertThat(engines[0].recentRequests()).isEmpty();
    assertThat(engines[2].recentRequests()).isEmpty();

    // nobody has "poet": the gateway loads it on the engine it picks, then sends the request
    String first = send(g, "poet", "a poem about caches");
    int w = Integer.parseInt(first) - 1;
    assertThat(resident(engines[w])).contains("poet");
    List<MockEngineServer.RequestTiming> t = engines[w].recentRequests();
    assertThat(t.get(t.size() - 1).modelPrefillNanos())
        .as("loaded by the gateway's call, not by the request")
        .isLessThan(LOAD_MS * 1_000_000L);
    for (int i = 0; i < 4; i++) {
      assertThat(send(g, "poet", "another poem, number " + i)).isEqualTo(first);
    }
    // after a poll the table still agrees with the engines
    g.checkAll();
    for (int i = 0; i < engines.length; i++) {
      assertThat(g.lora.residency().resident(i + 1))
          .as("engine %d", i + 1)
          .containsExactlyInAnyOrderElementsOf(resident(engines[i]));
    }
  }

  @Test
  void theModelListOfAnEngineNamesItsAdaptersByParent() {
    List<String> ids =
        LoraPlacement.parseAdapters(
            new ByteArrayInputStream(
                ("{\"object\":\"list\",\"data\":[{\"id\":\"tiny\",\"parent\":null,\"max_model_len\":9},"
                        + "{\"id\":\"sql\",\"root\":\"/a\",\"parent\":\"tiny\",\"permission\":[{}]},"
                        + "{\"id\":\"x\",\"parent\":\"tiny\"}]}")
                    .getBytes(StandardCharsets.UTF_8)));
    assertThat(ids).containsExactly("sql", "x");
  }
}
