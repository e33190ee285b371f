package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ChatMessagesTest {

  static Map<String, Object> msg(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  @Test
  void normalisesAsVllmDoes() {
    List<Object> in =
        List.of(
            msg(
                "role",
                "user",
                "content",
                List.of(
                    Map.of("type", "text", "text", "a"),
                    "b",
                    Map.of("type", "input_text", "text", "c")),
                "extra",
                1),
            msg(
                "role",
                "assistant",
                "content",
                null,
                "tool_calls",
                List.of(
                    msg(
                        "id",
                        "1",
                        "type",
                        "function",
                        "function",
                        msg("name", "f", "arguments", "{\"x\": [1, 2]}")),
                    msg(
                        "id",
                        "2",
                        "type",
                        "function",
                        "function",
                        msg("name", "g", "arguments", "")))),
            msg(
                "role",
                "assistant",
                "content",
                "ok",
                "tool_calls",
                List.of(),
                "reasoning_content",
                "hm"),
            msg("role", "tool", "content", "42", "tool_call_id", "1", "name", "f"));
    List<Object> out = ChatMessages.normalize(in, false);
    assertThat(out.get(0)).isEqualTo(msg("role", "user", "content", "a\nb\nc"));
    assertThat(out.get(1))
        .isEqualTo(
            msg(
                "role",
                "assistant",
                "content",
                "",
                "tool_calls",
                List.of(
                    msg(
                        "id",
                        "1",
                        "type",
                        "function",
                        "function",
                        msg("name", "f", "arguments", msg("x", List.of(1L, 2L)))),
                    msg(
                        "id",
                        "2",
                        "type",
                        "function",
                        "function",
                        msg("name", "g", "arguments", msg())))));
    assertThat(out.get(2))
        .isEqualTo(
            msg(
                "role",
                "assistant",
                "content",
                "ok",
                "reasoning",
                "hm",
                "reasoning_content",
                "hm"));
    assertThat(out.get(3))
        .isEqualTo(msg("role", "tool", "content", "42", "tool_call_id", "1", "name", "f"));
    assertThat(ChatMessages.normalize(List.of(msg("role", "user", "content", "x")), true).get(0))
        .isEqualTo(msg("role", "user", "content", List.of(msg("type", "text", "text", "x"))));
  }

  @Test
  void messagesOfTheWrongShapeAreClearErrors() {
    Object[][] bad = {
      {List.of("hi"), "messages[0]: expected an object with role and content, got str"},
      {List.of(msg("content", "x")), "messages[0].role: expected a string"},
      {List.of(msg("role", 3, "content", "x")), "messages[0].role: expected a string"},
      {
        List.of(msg("role", "user", "content", 5L)),
        "messages[0].content: expected a string, a list of parts or null, got int"
      },
      {
        List.of(msg("role", "user", "content", List.of(7L))),
        "messages[0].content[0]: expected a content part object"
      },
      {
        List.of(
            msg(
                "role",
                "user",
                "content",
                List.of(msg("type", "image_url", "image_url", msg("url", "x"))))),
        "messages[0].content[0]: content parts of type \"image_url\" are not supported"
      },
      {
        List.of(msg("role", "user", "content", List.of(msg("type", "text")))),
        "messages[0].content[0].text: expected a string"
      },
      {
        List.of(msg("role", "assistant", "content", "x", "tool_calls", "f")),
        "messages[0].tool_calls: expected a list"
      },
      {
        List.of(msg("role", "assistant", "content", "x", "tool_calls", List.of(msg("id", "1")))),
        "messages[0].tool_calls[0].function: expected an object"
      },
    };
    for (Object[] b : bad) {
      assertThatThrownBy(() -> ChatMessages.normalize((List<?>) b[0], false))
          .as(Arrays.toString(b))
          .isInstanceOf(TokenizerException.class)
          .hasMessageContaining((String) b[1]);
    }
  }

  @Test
  void toolCallArgumentsAreNormalisedAsVllmDoes() {
    // vLLM's _postprocess_messages: a JSON string is parsed, a string that is not JSON becomes {},
    // so does null or a number; an object or a list stays as it is
    Object[][] cases = {
      {"{oops", msg()},
      {"  ", msg()},
      {"[1, \"a\"]", List.of(1L, "a")},
      {"7", 7L},
      {null, msg()},
      {5L, msg()},
      {List.of(), List.of()},
      {msg("k", "v"), msg("k", "v")},
    };
    for (Object[] c : cases) {
      Map<String, Object> fn = new LinkedHashMap<>();
      fn.put("name", "f");
      fn.put("arguments", c[0]);
      List<?> out =
          ChatMessages.normalize(
              List.of(msg("role", "assistant", "tool_calls", List.of(msg("function", fn)))), false);
      Object args =
          ((Map<?, ?>)
                  ((Map<?, ?>) ((List<?>) ((Map<?, ?>) out.get(0)).get("tool_calls")).get(0))
                      .get("function"))
              .get("arguments");
      assertThat(args).as(String.valueOf(c[0])).isEqualTo(c[1]);
    }
  }

  @Test
  void toolResultsStayOneStringInTheOpenaiContentFormat() {
    List<?> out =
        ChatMessages.normalize(
            List.of(
                msg("role", "user", "content", "q"),
                msg(
                    "role",
                    "tool",
                    "tool_call_id",
                    "c1",
                    "content",
                    List.of(msg("type", "text", "text", "a"), msg("type", "text", "text", "b")))),
            true);
    assertThat(((Map<?, ?>) out.get(0)).get("content"))
        .isEqualTo(List.of(msg("type", "text", "text", "q")));
    assertThat(((Map<?, ?>) out.get(1)).get("content")).isEqualTo("a\nb");
  }

  @Test
  void requestBodiesOfTheWrongShapeAreClearErrors() {
    assertThatThrownBy(() -> ChatRequest.fromJson("{\"messages\": "))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("not valid JSON");
    assertThatThrownBy(() -> ChatRequest.fromJson("[]"))
        .hasMessageContaining("expected a JSON object");
    assertThatThrownBy(() -> ChatRequest.fromJson("{\"messages\": {}}"))
        .hasMessageContaining("messages: expected a list");
    assertThatThrownBy(() -> ChatRequest.fromJson("{\"messages\": [], \"tools\": 1}"))
        .hasMessageContaining("tools: expected a list");
    assertThatThrownBy(
            () -> ChatRequest.fromJson("{\"messages\": [], \"add_generation_prompt\": \"yes\"}"))
        .hasMessageContaining("add_generation_prompt: expected true or false");
    assertThatThrownBy(
            () -> ChatRequest.fromJson("{\"messages\": [], \"continue_final_message\": true}"))
        .hasMessageContaining("cannot both be true");
    ChatRequest r =
        ChatRequest.fromJson(
            "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"chat_template_kwargs\": {\"enable_thinking\": false}}");
    assertThat(r.addGenerationPrompt()).isTrue();
    assertThat(r.addSpecialTokens()).isFalse();
    assertThat(r.templateKwargs()).containsEntry("enable_thinking", false);
    assertThat(new ArrayList<>(r.messages())).hasSize(1);
  }
}
