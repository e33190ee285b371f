package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The mock engine's LoRA adapters (docs/mock-engine.md, "LoRA adapters"): vLLM's --max-loras as an
 * LRU of resident adapters, loads on demand that take --lora-load-ms of the request's prefill,
 * /v1/models cards with the base model as parent, and vLLM's load and unload endpoints.
 */
class MockEngineLoraTest {
  private static final long LOAD_NANOS = 300_000_000L;

  private static MockEngineServer start() {
    return MockEngineServer.start(
        MockEngineServer.Config.builder()
            .servedModelName("base")
            .maxLoras(2)
            .loraLoadMs(300)
            .prefillBaseMs(10)
            .prefillMsPer1kTokens(1000)
            .decodeMsPerToken(1)
            .speedup(1)
            .build());
  }

  private static EngineHttp.Reply complete(MockEngineServer e, String model, int from) {
    return EngineHttp.post(
        e.url() + "/v1/completions",
        "{\"model\":\""
            + model
            + "\",\"prompt\":"
            + MockEngineBehaviourTest.ids(20, from)
            + ",\"max_tokens\":1}");
  }

  /** The ids of /v1/models' cards whose parent is "base" (the resident adapters), in order. */
  private static List<String> resident(MockEngineServer e) {
    JsonNode data = EngineHttp.get(e.url() + "/v1/models").json().get("data");
    List<String> out = new ArrayList<>();
    assertThat(data.get(0).get("id").textValue()).isEqualTo("base");
    assertThat(data.get(0).get("parent").isNull()).isTrue();
    for (int i = 1; i < data.size(); i++) {
      assertThat(data.get(i).get("parent").textValue()).isEqualTo("base");
      out.add(data.get(i).get("id").textValue());
    }
    return out;
  }

  @Test
  void onDemandLoadsPayTheLoadTimeAndEvictTheLeastRecentlyUsed() {
    try (MockEngineServer e = start()) {
      assertThat(resident(e)).isEmpty();
      assertThat(complete(e, "a", 1000).status()).isEqualTo(200); // loads a
      assertThat(complete(e, "a", 2000).status()).isEqualTo(200); // resident
      assertThat(complete(e, "b", 3000).status()).isEqualTo(200); // loads b
      assertThat(resident(e)).containsExactly("a", "b");
      assertThat(complete(e, "a", 4000).status()).isEqualTo(200); // a most recent again
      assertThat(complete(e, "c", 5000).status()).isEqualTo(200); // loads c, evicts b
      assertThat(resident(e)).containsExactly("a", "c");
      assertThat(complete(e, "base", 6000).status()).isEqualTo(200); // the base: no adapter
      List<MockEngineServer.RequestTiming> t = e.recentRequests();
      assertThat(t).hasSize(6);
      long prefill = 10_000_000L + 20_000_000L; // base + 20 uncached tokens at 1 ms
      boolean[] loaded = {true, false, true, false, true, false};
      for (int i = 0; i < loaded.length; i++) {
        assertThat(t.get(i).modelPrefillNanos())
            .as("request %d", i)
            .isEqualTo(prefill + (loaded[i] ? LOAD_NANOS : 0));
      }
    }
  }

  @Test
  void loadAndUnloadAnswerAsVllm() {
    try (MockEngineServer e = start()) {
      String url = e.url();
      EngineHttp.Reply ok =
          EngineHttp.post(
              url + "/v1/load_lora_adapter", "{\"lora_name\":\"x\",\"lora_path\":\"/ad/x\"}");
      assertThat(ok.status()).isEqualTo(200);
      assertThat(ok.body()).isEqualTo("Success: LoRA adapter 'x' added successfully.");
      EngineHttp.Reply again =
          EngineHttp.post(
              url + "/v1/load_lora_adapter", "{\"lora_name\":\"x\",\"lora_path\":\"/ad/x\"}");
      assertThat(again.status()).isEqualTo(400);
      assertThat(again.json().get("message").textValue())
          .isEqualTo("The lora adapter 'x' has already been loaded.");
      assertThat(EngineHttp.post(url + "/v1/load_lora_adapter", "{\"lora_name\":\"y\"}").status())
          .isEqualTo(400);
      JsonNode card = EngineHttp.get(url + "/v1/models").json().get("data").get(1);
      assertThat(card.get("id").textValue()).isEqualTo("x");
      assertThat(card.get("root").textValue()).isEqualTo("/ad/x");
      // loaded by the call: the request pays no load
      assertThat(complete(e, "x", 1000).status()).isEqualTo(200);
      assertThat(e.recentRequests().get(0).modelPrefillNanos()).isEqualTo(30_000_000L);
      // a third adapter evicts the least recently used of two
      EngineHttp.post(url + "/v1/load_lora_adapter", "{\"lora_name\":\"y\",\"lora_path\":\"p\"}");
      EngineHttp.post(url + "/v1/load_lora_adapter", "{\"lora_name\":\"z\",\"lora_path\":\"p\"}");
      assertThat(resident(e)).containsExactly("y", "z");
      EngineHttp.Reply gone =
          EngineHttp.post(url + "/v1/unload_lora_adapter", "{\"lora_name\":\"y\"}");
      assertThat(gone.status()).isEqualTo(200);
      assertThat(gone.body()).isEqualTo("Success: LoRA adapter 'y' removed successfully.");
      EngineHttp.Reply missing =
          EngineHttp.post(url + "/v1/unload_lora_adapter", "{\"lora_name\":\"y\"}");
      assertThat(missing.status()).isEqualTo(404);
      assertThat(missing.json().get("message").textValue())
          .isEqualTo("The lora adapter 'y' cannot be found.");
      assertThat(resident(e)).containsExactly("z");
    }
  }

  @Test
  void withoutLoraOtherModelsAre404AndTheEndpointsAbsent() {
    try (MockEngineServer e =
        MockEngineServer.start(MockEngineServer.Config.builder().servedModelName("base").build())) {
      assertThat(complete(e, "a", 1).status()).isEqualTo(404);
      assertThat(
              EngineHttp.post(
                      e.url() + "/v1/load_lora_adapter",
                      "{\"lora_name\":\"x\",\"lora_path\":\"p\"}")
                  .status())
          .isEqualTo(404);
      assertThat(EngineHttp.get(e.url() + "/v1/models").json().get("data").size()).isEqualTo(1);
    }
  }
}
