package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChatTemplateConfigTest {
  private static final List<?> CHAT =
      List.of(Map.of("role", "user", "content", List.of(Map.of("type", "text", "text", "hi"))));

  /** Prints each message's content as the template sees it, and a kwarg. */
  private static final String SHOW =
      "{% for m in messages %}[{{ m.content }}]{% endfor %}{{ flavour | default('none') }}";

  @Test
  void aChatTemplateValueIsAFileOrTheTemplateItselfAsVllmReadsIt(@TempDir Path dir)
      throws Exception {
    Path f = dir.resolve("t.jinja");
    Files.writeString(f, "{{ 'from file' }}");
    assertThat(ChatTemplateConfig.loadTemplate(f.toString())).isEqualTo("{{ 'from file' }}");
    assertThat(ChatTemplateConfig.loadTemplate("{{ 'literal' }}")).isEqualTo("{{ 'literal' }}");
    assertThat(ChatTemplateConfig.loadTemplate("a\nb")).isEqualTo("a\nb");
    assertThatThrownBy(() -> ChatTemplateConfig.loadTemplate(dir.resolve("nope.jinja").toString()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("looks like a file path, but it cannot be read");
    assertThat(ChatTemplateConfig.defaults().withTemplate(f.toString()).origin())
        .isEqualTo(f.toString());
  }

  @Test
  void flagsParseAsVllmsAndBadValuesAreClearErrors() {
    assertThat(ChatTemplateConfig.ContentFormat.parse("openai"))
        .isEqualTo(ChatTemplateConfig.ContentFormat.OPENAI);
    assertThatThrownBy(() -> ChatTemplateConfig.ContentFormat.parse("OpenAI"))
        .hasMessageContaining("expected auto, string or openai");
    assertThat(ChatTemplateConfig.parseKwargs("{\"enable_thinking\": false}"))
        .containsEntry("enable_thinking", false);
    assertThatThrownBy(() -> ChatTemplateConfig.parseKwargs("[1]"))
        .hasMessageContaining("expected a JSON object");
    assertThatThrownBy(() -> ChatTemplateConfig.parseKwargs("{"))
        .hasMessageContaining("not valid JSON");
  }

  @Test
  void theConfiguredTemplateReplacesTheModelsAndTheContentFormatIsHeld() {
    ChatTemplateConfig c = ChatTemplateConfig.defaults().withTemplate(SHOW);
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny(), 0, c)) {
      assertThat(tok.renderChat(ChatRequest.of(CHAT))).isEqualTo("[hi]none");
    }
    try (Tokenizer tok =
        Tokenizer.load(
            TestModels.tiny(), 0, c.withContentFormat(ChatTemplateConfig.ContentFormat.OPENAI))) {
      assertThat(tok.renderChat(ChatRequest.of(CHAT)))
          .isEqualTo("[[{'type': 'text', 'text': 'hi'}]]none");
    }
  }

  @Test
  void defaultKwargsApplyUnlessTheRequestSetsThem() {
    ChatTemplateConfig c =
        ChatTemplateConfig.defaults()
            .withTemplate(SHOW)
            .withDefaultKwargs(Map.of("flavour", "server"));
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny(), 0, c)) {
      assertThat(tok.renderChat(ChatRequest.of(CHAT))).isEqualTo("[hi]server");
      assertThat(tok.renderChat(ChatRequest.of(CHAT).withTemplateKwargs(Map.of("flavour", "req"))))
          .isEqualTo("[hi]req");
      // vLLM's merge: a request value of "auto" leaves the server's default
      assertThat(tok.renderChat(ChatRequest.of(CHAT).withTemplateKwargs(Map.of("flavour", "auto"))))
          .isEqualTo("[hi]server");
    }
  }

  @Test
  void excludeToolsWhenToolChoiceNoneRendersSuchAChatWithoutItsToolsAsVllmDoes() {
    String show = "{{ tools | tojson if tools is not none else 'no tools' }}";
    List<?> tools = List.of(Map.of("function", Map.of("name", "f")));
    ChatRequest none = ChatRequest.of(CHAT).withTools(tools).withToolChoiceNone(true);
    ChatRequest auto = ChatRequest.of(CHAT).withTools(tools);
    ChatTemplateConfig plain = ChatTemplateConfig.defaults().withTemplate(show);
    ChatTemplateConfig exclude = plain.withExcludeToolsWhenToolChoiceNone(true);
    assertThat(exclude.isDefault()).isFalse();
    String withTools = "[{\"function\": {\"name\": \"f\"}}]";
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny(), 0, exclude)) {
      assertThat(tok.renderChat(none)).isEqualTo("no tools");
      assertThat(tok.renderChat(auto)).isEqualTo(withTools);
    }
    // without the flag (vLLM's default) tool_choice "none" still renders the tools
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny(), 0, plain)) {
      assertThat(tok.renderChat(none)).isEqualTo(withTools);
    }
    assertThat(exclude.applyToolChoice(none).tools()).isNull();
    assertThat(exclude.applyToolChoice(auto)).isSameAs(auto);
    assertThat(plain.applyToolChoice(none)).isSameAs(none);
  }

  @Test
  void requestBodiesSayWhetherToolChoiceIsNone() {
    String tools = "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    String msgs = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
    assertThat(
            ChatRequest.fromJson("{" + msgs + ", " + tools + ", \"tool_choice\": \"none\"}")
                .toolChoiceNone())
        .isTrue();
    assertThat(
            ChatRequest.fromJson("{" + msgs + ", " + tools + ", \"tool_choice\": \"auto\"}")
                .toolChoiceNone())
        .isFalse();
    assertThat(
            ChatRequest.fromJson(
                    "{"
                        + msgs
                        + ", "
                        + tools
                        + ", \"tool_choice\": {\"type\": \"function\", \"function\":"
                        + " {\"name\": \"f\"}}}")
                .toolChoiceNone())
        .isFalse();
    assertThat(ChatRequest.fromJson("{" + msgs + "}").toolChoiceNone()).isFalse();
  }

  @Test
  void aRequestTemplateWinsThenTheConfiguredOneThenTheKwargsOne() {
    ChatRequest r = ChatRequest.of(CHAT).withChatTemplate("{{ 'request' }}");
    assertThat(r.carriesTemplate()).isTrue();
    ChatRequest viaKwargs =
        ChatRequest.of(CHAT).withTemplateKwargs(Map.of("chat_template", "{{ 'kwargs' }}"));
    assertThat(viaKwargs.carriesTemplate()).isTrue();
    assertThat(ChatRequest.of(CHAT).carriesTemplate()).isFalse();
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny(), 0)) {
      assertThat(tok.renderChat(r)).isEqualTo("request");
      assertThat(tok.renderChat(viaKwargs)).isEqualTo("kwargs");
      assertThat(tok.renderChat(ChatRequest.of(CHAT))).startsWith("<bos><|im_start|>user\nhi");
    }
    try (Tokenizer tok =
        Tokenizer.load(TestModels.tiny(), 0, ChatTemplateConfig.defaults().withTemplate(SHOW))) {
      assertThat(tok.renderChat(r)).isEqualTo("request");
      assertThat(tok.renderChat(viaKwargs)).isEqualTo("[hi]none");
      assertThatThrownBy(() -> tok.renderChat(ChatRequest.of(CHAT).withChatTemplate("{% if %}")))
          .isInstanceOf(TokenizerException.class)
          .hasMessageContaining("chat template of tiny (request) does not parse");
    }
  }

  @Test
  void requestBodiesCarryTheirTemplate() {
    ChatRequest r =
        ChatRequest.fromJson(
            "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template\": \"{{ 1 }}\"}");
    assertThat(r.chatTemplate()).isEqualTo("{{ 1 }}");
    assertThatThrownBy(() -> ChatRequest.fromJson("{\"messages\": [], \"chat_template\": 1}"))
        .hasMessageContaining("chat_template: expected a string");
  }
}
