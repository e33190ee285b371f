package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.tokenize.ChatTemplateConfig;
import io.kvrouter.tokenize.JsonValues;
import io.kvrouter.tokenize.Tokenizer;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * vLLM's chat-template flags through the gateway and the mock engine: request templates refused
 * with vLLM's 400 unless trusted, used for tokenizing (and forwarded) when trusted, and
 * --chat-template / --default-chat-template-kwargs rendering on both sides alike.
 */
class GatewayChatTemplateTest {
  private static final String VLLM_MESSAGE =
      "Chat template is passed with request, but --trust-request-chat-template is not set."
          + " Refused request with untrusted chat template.";
  private static final String REQUEST_TEMPLATE =
      "{% for m in messages %}<|im_start|>{{ m.role }}={{ m.content }}<|im_end|>{% endfor %}"
          + "{{ flavour | default('plain') }}";
  private static final String CHAT =
      "{\"model\":\"tiny\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hello"
          + " there\"}]";
  private static final JsonFactory JSON = new JsonFactory();

  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway(GatewayConfig.Chat chat) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).chat(chat).build());
    open.add(g);
    return g;
  }

  private MockEngineServer engine(Gateway g, ChatTemplateConfig c, boolean trust) throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            GatewayMockEngineTest.tinyEngine()
                .chatTemplate(c)
                .trustRequestChatTemplate(trust)
                .build());
    open.add(e);
    g.host.register(Registration.of("tiny", GatewayMockEngineTest.BS, 1, 0, e.url()));
    return e;
  }

  private static Map<?, ?> json(String body) throws Exception {
    try (JsonParser p = JSON.createParser(body)) {
      p.nextToken();
      return (Map<?, ?>) JsonValues.read(p);
    }
  }

  private static List<?> tokens(HttpResponse<String> r) throws Exception {
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return (List<?>) json(r.body()).get("tokens");
  }

  @Test
  void requestTemplatesAreRefusedWithVllmsAnswerUnlessTrusted() throws Exception {
    Gateway g = gateway(GatewayConfig.Chat.defaults());
    MockEngineServer e = engine(g, ChatTemplateConfig.defaults(), false);
    String withTemplate = CHAT + ",\"chat_template\":\"{{ 'x' }}\"}";
    String viaKwargs = CHAT + ",\"chat_template_kwargs\":{\"chat_template\":\"{{ 'x' }}\"}}";
    for (String body : List.of(withTemplate, viaKwargs)) {
      for (String path : List.of("/tokenize", "/v1/chat/completions")) {
        HttpResponse<String> r = GatewayMockEngineTest.post(g.url(), path, body);
        assertThat(r.statusCode()).as(path).isEqualTo(400);
        Map<?, ?> err = (Map<?, ?>) json(r.body()).get("error");
        assertThat(err.get("message")).isEqualTo(VLLM_MESSAGE);
        assertThat(err.get("type")).isEqualTo("BadRequestError");
        assertThat(err.get("code")).isEqualTo(400L);
        HttpResponse<String> direct = GatewayMockEngineTest.post(e.url(), path, body);
        assertThat(direct.statusCode()).as(path).isEqualTo(400);
        assertThat(json(direct.body()).get("message")).isEqualTo(VLLM_MESSAGE);
      }
    }
    // a null chat_template is no template
    assertThat(
            tokens(
                GatewayMockEngineTest.post(
                    g.url(), "/tokenize", CHAT + ",\"chat_template\":null}")))
        .isNotEmpty();
  }

  @Test
  void trustedRequestTemplatesTokenizeAndRouteAndAreForwarded() throws Exception {
    Gateway g = gateway(new GatewayConfig.Chat(null, null, true));
    MockEngineServer e = engine(g, ChatTemplateConfig.defaults(), true);
    String body =
        CHAT
            + ",\"chat_template\":"
            + quote(REQUEST_TEMPLATE)
            + ",\"chat_template_kwargs\":{\"flavour\":\"mint\"}}";
    List<?> viaGateway = tokens(GatewayMockEngineTest.post(g.url(), "/tokenize", body));
    List<?> viaEngine = tokens(GatewayMockEngineTest.post(e.url(), "/tokenize", body));
    try (Tokenizer tok = Tokenizer.load(GatewayStubTest.tiny())) {
      int[] want = tok.encodeUncached("<|im_start|>user=hello there<|im_end|>mint", false);
      assertThat(viaGateway).hasSize(want.length);
      for (int i = 0; i < want.length; i++) {
        assertThat(((Number) viaGateway.get(i)).intValue()).isEqualTo(want[i]);
      }
    }
    assertThat(viaEngine).isEqualTo(viaGateway);
    // the chat completion is forwarded with its template: the engine counts the same prompt
    HttpResponse<String> c = GatewayMockEngineTest.post(g.url(), "/v1/chat/completions", body);
    assertThat(c.statusCode()).as(c.body()).isEqualTo(200);
    Map<?, ?> usage = (Map<?, ?>) json(c.body()).get("usage");
    assertThat(((Number) usage.get("prompt_tokens")).intValue()).isEqualTo(viaGateway.size());
  }

  @Test
  void theServersTemplateAndDefaultKwargsRenderAlikeOnBothSides() throws Exception {
    ChatTemplateConfig c =
        ChatTemplateConfig.defaults()
            .withTemplate(REQUEST_TEMPLATE)
            .withDefaultKwargs(Map.of("flavour", "server"));
    Gateway plain = gateway(GatewayConfig.Chat.defaults());
    List<?> modelOwn = tokens(GatewayMockEngineTest.post(plain.url(), "/tokenize", CHAT + "}"));
    Gateway g = gateway(new GatewayConfig.Chat(c, null, false));
    MockEngineServer e = engine(g, c, false);
    for (String body :
        List.of(CHAT + "}", CHAT + ",\"chat_template_kwargs\":{\"flavour\":\"request\"}}")) {
      List<?> viaGateway = tokens(GatewayMockEngineTest.post(g.url(), "/tokenize", body));
      assertThat(tokens(GatewayMockEngineTest.post(e.url(), "/tokenize", body)))
          .isEqualTo(viaGateway);
      assertThat(viaGateway).isNotEqualTo(modelOwn);
    }
    try (Tokenizer tok = Tokenizer.load(GatewayStubTest.tiny())) {
      int[] want = tok.encodeUncached("<|im_start|>user=hello there<|im_end|>server", false);
      List<?> got = tokens(GatewayMockEngineTest.post(g.url(), "/tokenize", CHAT + "}"));
      assertThat(got).hasSize(want.length);
      for (int i = 0; i < want.length; i++) {
        assertThat(((Number) got.get(i)).intValue()).isEqualTo(want[i]);
      }
    }
  }

  @Test
  void toolChoiceNoneRendersWithoutToolsOnBothSidesWhenTheFlagIsGiven() throws Exception {
    String template =
        "{{ tools | tojson if tools else 'plain' }}"
            + "{% for m in messages %}<|im_start|>{{ m.role }}={{ m.content }}<|im_end|>{% endfor %}";
    String messages =
        "\"messages\":[{\"role\":\"user\",\"content\":\"tell me a long story about the"
            + " sea, the ships and the lighthouse keepers of the northern coast\"}]";
    String tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
    String withTools =
        "{\"model\":\"tiny\",\"max_tokens\":2,"
            + messages
            + ","
            + tools
            + ",\"tool_choice\":\"none\"}";
    String plainChat = "{\"model\":\"tiny\",\"max_tokens\":2," + messages + "}";
    for (boolean exclude : new boolean[] {true, false}) {
      ChatTemplateConfig c =
          ChatTemplateConfig.defaults()
              .withTemplate(template)
              .withExcludeToolsWhenToolChoiceNone(exclude);
      Gateway g = gateway(new GatewayConfig.Chat(c, null, false));
      engine(g, c, false);
      HttpResponse<String> first =
          GatewayMockEngineTest.post(g.url(), "/v1/chat/completions", withTools);
      assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
      HttpResponse<String> second =
          GatewayMockEngineTest.post(g.url(), "/v1/chat/completions", plainChat);
      assertThat(second.statusCode()).as(second.body()).isEqualTo(200);
      long overlap =
          Long.parseLong(second.headers().firstValue("x-kvrouter-overlap-tokens").orElseThrow());
      Map<?, ?> usage = (Map<?, ?>) json(second.body()).get("usage");
      Map<?, ?> details = (Map<?, ?>) usage.get("prompt_tokens_details");
      long cached = details == null ? 0 : ((Number) details.get("cached_tokens")).longValue();
      if (exclude) {
        // the tool-less rendering of the first chat is the second's: both sides see it cached
        assertThat(overlap).as("gateway's predicted overlap: " + second.body()).isGreaterThan(0);
        assertThat(cached).as("engine's cached tokens").isEqualTo(overlap);
      } else {
        // vLLM's default: the tools render, the prompts differ from the first token
        assertThat(overlap).isZero();
        assertThat(cached).isZero();
      }
      // vLLM's /tokenize has no tool_choice: the tools render there with or without the flag
      assertThat(tokens(GatewayMockEngineTest.post(g.url(), "/tokenize", withTools)))
          .isNotEqualTo(tokens(GatewayMockEngineTest.post(g.url(), "/tokenize", plainChat)));
    }
  }

  @Test
  void aPerModelTemplateMustNameAModelWithATokenizer() {
    GatewayConfig.Chat perModel =
        new GatewayConfig.Chat(
            null, Map.of("other", ChatTemplateConfig.defaults().withTemplate("{{ 1 }}")), false);
    assertThatThrownBy(
            () ->
                GatewayConfig.builder()
                    .model("tiny", GatewayStubTest.tiny())
                    .chat(perModel)
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no --model other");
  }

  @Test
  void anEngineThatDoesNotServeTheRegisteredNameIsTakenOutWithAClearError() throws Exception {
    Gateway g = gateway(GatewayConfig.Chat.defaults());
    MockEngineServer wrong =
        MockEngineServer.start(
            GatewayMockEngineTest.tinyEngine().servedModelName("Qwen/Qwen3-8B").build());
    open.add(wrong);
    g.host.register(Registration.of("tiny", GatewayMockEngineTest.BS, 7, 0, wrong.url()));
    GatewayMockEngineTest.await("the served-name check", () -> g.host.model("tiny", null) == null);
    HttpResponse<String> r =
        GatewayMockEngineTest.post(g.url(), "/v1/chat/completions", CHAT + "}");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat((String) ((Map<?, ?>) json(r.body()).get("error")).get("message"))
        .contains("registered for model 'tiny'")
        .contains("serves 'Qwen/Qwen3-8B'")
        .contains("--served-model-name tiny");
    // a static --engine is refused at once
    assertThatThrownBy(() -> g.register(EngineSpec.parse(wrong.url() + ";model=tiny"), 4))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("--served-model-name tiny");
    // the right engine is taken, with its context length
    engine(g, ChatTemplateConfig.defaults(), false);
    assertThat(tokens(GatewayMockEngineTest.post(g.url(), "/tokenize", CHAT + "}"))).isNotEmpty();
    HttpResponse<String> ok =
        GatewayMockEngineTest.post(g.url(), "/v1/chat/completions", CHAT + "}");
    assertThat(ok.statusCode()).as(ok.body()).isEqualTo(200);
    GatewayMockEngineTest.await(
        "the engine's max_model_len", () -> g.engines.maxModelLen(g.host, "tiny") == 2048);
  }

  private static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
  }
}
