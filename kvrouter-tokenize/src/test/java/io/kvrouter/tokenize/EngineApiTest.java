package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The dialect probe ({@link EngineApi#probe}) against engines that answer in vLLM's, SGLang's and
 * llama.cpp's shapes (as recorded in engines/llama-cpp/README.md and vLLM's and SGLang's APIs), and
 * {@link EngineTokenizer} speaking each, refusing an empty answer to a non-empty input.
 */
class EngineApiTest {
  private HttpServer server;
  private final Map<String, String> answers = new ConcurrentHashMap<>();
  private final List<String> bodies = new CopyOnWriteArrayList<>();

  private URI start() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/",
        x -> {
          String key = x.getRequestMethod() + " " + x.getRequestURI().getPath();
          String body = new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
          if (!body.isEmpty()) bodies.add(key + " " + body);
          String a = answers.get(key);
          byte[] out =
              (a == null ? "{\"detail\":\"Not Found\"}" : a).getBytes(StandardCharsets.UTF_8);
          if ("LOADING".equals(a)) { // llama.cpp while it loads its model
            a = "{\"error\":{\"message\":\"Loading model\",\"code\":503}}";
            out = a.getBytes(StandardCharsets.UTF_8);
            x.sendResponseHeaders(503, out.length);
          } else {
            x.sendResponseHeaders(a == null ? 404 : 200, out.length);
          }
          try (OutputStream o = x.getResponseBody()) {
            o.write(out);
          }
        });
    server.start();
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort());
  }

  @AfterEach
  void stop() {
    if (server != null) server.stop(0);
  }

  private static final Duration T = Duration.ofSeconds(5);

  /** A message with its keys in a client's order (a Map.of iterates in no fixed order). */
  static Map<String, Object> msg(String role, String content) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("role", role);
    m.put("content", content);
    return m;
  }

  @Test
  void llamaCppIsKnownByItsPropsAndTokenizesItsWay() throws Exception {
    answers.put(
        "GET /props",
        "{\"default_generation_settings\":{\"params\":{},\"n_ctx\":2048},\"total_slots\":2}");
    answers.put(
        "GET /v1/models",
        "{\"object\":\"list\",\"data\":[{\"id\":\"tiny\",\"owned_by\":\"llamacpp\","
            + "\"meta\":{\"n_ctx\":2048,\"n_ctx_train\":8192}}]}");
    answers.put("POST /apply-template", "{\"prompt\":\"<|im_start|>user\\nHi<|im_end|>\\n\"}");
    answers.put("POST /tokenize", "{\"tokens\":[151644,872,198,13048,151645,198]}");
    URI u = start();
    EngineApi a = EngineApi.probe(u, T, null);
    assertThat(a).isEqualTo(new EngineApi(EngineDialect.LLAMA_CPP, "tiny", 2048, 4096, 1));
    assertThat(a.kvBlocks(16)).isEqualTo(256);
    EngineTokenizer t = new EngineTokenizer(u, "tiny", T, null, a);
    EngineTokenizer.Result r = t.tokenizeChat(ChatRequest.of(List.of(msg("user", "Hi"))));
    assertThat(r.tokens()).containsExactly(151644, 872, 198, 13048, 151645, 198);
    assertThat(r.maxModelLen()).isEqualTo(2048);
    assertThat(bodies)
        .containsExactly(
            "POST /apply-template {\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],"
                + " \"add_generation_prompt\": true}",
            "POST /tokenize {\"content\": \"<|im_start|>user\\nHi<|im_end|>\\n\","
                + " \"add_special\": false, \"parse_special\": true}");
    // the vLLM shape llama.cpp would answer with no tokens is never sent; an empty answer fails
    answers.put("POST /tokenize", "{\"tokens\":[]}");
    assertThatThrownBy(() -> t.tokenizePrompt("Hello world", true))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining(u + "/tokenize (llama.cpp dialect)")
        .hasMessageContaining("no tokens for a non-empty input");
  }

  @Test
  void vllmIsKnownByItsModelsAndMetrics() throws Exception {
    answers.put(
        "GET /v1/models",
        "{\"object\":\"list\",\"data\":[{\"id\":\"qwen3\",\"object\":\"model\","
            + "\"owned_by\":\"vllm\",\"max_model_len\":8192}]}");
    answers.put(
        "GET /metrics",
        "# TYPE vllm:cache_config_info gauge\n"
            + "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",engine=\"0\","
            + "num_gpu_blocks=\"2048\",prefix_caching_hash_algo=\"sha256\"} 1.0\n");
    answers.put("POST /tokenize", "{\"count\":2,\"max_model_len\":8192,\"tokens\":[9707,1879]}");
    URI u = start();
    EngineApi a = EngineApi.probe(u, T, null);
    assertThat(a).isEqualTo(new EngineApi(EngineDialect.VLLM, "qwen3", 8192, 32768, 16));
    EngineTokenizer t = new EngineTokenizer(u, "qwen3", T);
    assertThat(t.tokenizePrompt("Hello world", true).tokens()).containsExactly(9707, 1879);
    assertThat(bodies)
        .containsExactly(
            "POST /tokenize {\"model\": \"qwen3\", \"prompt\": \"Hello world\","
                + " \"add_special_tokens\": true}");
  }

  @Test
  void sglangIsKnownByItsModelsAndServerInfo() throws Exception {
    answers.put(
        "GET /v1/models",
        "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"owned_by\":\"sglang\","
            + "\"max_model_len\":4096}]}");
    answers.put("GET /get_server_info", "{\"max_total_num_tokens\":100000,\"page_size\":1}");
    EngineApi a = EngineApi.probe(start(), T, null);
    assertThat(a).isEqualTo(new EngineApi(EngineDialect.SGLANG, "m", 4096, 100000, 1));
  }

  @Test
  void anEngineNothingNamesIsVllmShapedOnlyIfItsTokenizeSaysSo() throws Exception {
    URI u = start();
    answers.put("POST /tokenize", "{\"tokens\":[]}");
    EngineApi unknown = EngineApi.probe(u, T, null);
    assertThat(unknown).isEqualTo(new EngineApi(EngineDialect.UNKNOWN, null, -1, -1, 0));
    assertThatThrownBy(
            () ->
                new EngineTokenizer(u, "m", T, null, unknown)
                    .tokenizeChat(ChatRequest.of(List.of(msg("user", "x")))))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("engine " + u + "/tokenize (unknown dialect)")
        .hasMessageContaining("will not route an empty prompt");
    answers.put("POST /tokenize", "{\"count\":1,\"max_model_len\":0,\"tokens\":[9707]}");
    assertThat(EngineApi.probe(u, T, null).dialect()).isEqualTo(EngineDialect.VLLM);
    answers.put("POST /tokenize", "{\"ids\":[9707]}");
    assertThatThrownBy(
            () -> new EngineTokenizer(u, "m", T, null, unknown).tokenizePrompt("Hello", true))
        .hasMessageContaining("in a shape the gateway does not know");
  }

  @Test
  void anEngineThatIsNotThereOrStillLoadingIsUnreachableNotUnknown() throws Exception {
    URI u = start();
    answers.put("GET /props", "LOADING");
    assertThatThrownBy(() -> EngineApi.probe(u, T, null))
        .isInstanceOf(EngineTokenizer.UnreachableException.class)
        .hasMessageContaining("503");
    server.stop(0);
    server = null;
    assertThatThrownBy(() -> EngineApi.probe(u, T, null))
        .isInstanceOf(EngineTokenizer.UnreachableException.class);
  }

  @Test
  void llamaCppContinuesATrailingAssistantMessage() {
    ChatRequest plain = ChatRequest.of(List.of(msg("user", "Hi")));
    assertThat(EngineDialect.LLAMA_CPP.asRendered(plain)).isSameAs(plain);
    ChatRequest prefill = ChatRequest.of(List.of(msg("user", "Hi"), msg("assistant", "Hel")));
    ChatRequest r = EngineDialect.LLAMA_CPP.asRendered(prefill);
    assertThat(r.continueFinalMessage()).isTrue();
    assertThat(r.addGenerationPrompt()).isFalse();
    assertThat(EngineDialect.VLLM.asRendered(prefill)).isSameAs(prefill);
  }
}
