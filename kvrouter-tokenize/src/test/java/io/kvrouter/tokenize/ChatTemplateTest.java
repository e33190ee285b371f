package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.tokenize.jinja.Py;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ChatTemplateTest {
  static final ZonedDateTime CLOCK = ZonedDateTime.of(2026, 7, 4, 9, 5, 3, 0, ZoneOffset.UTC);

  static String render(String template, Map<String, Object> ctx) {
    return ChatTemplate.compile("test-model", template, () -> CLOCK).render(ctx);
  }

  /**
   * The expected outputs and errors in jinja2-cases.json were produced by Python's Jinja2 3.1.6 in
   * transformers' environment (jinja2-cases.py beside it: ImmutableSandboxedEnvironment,
   * trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson, raise_exception, strftime_now
   * at 2026-07-04 09:05:03).
   */
  @Test
  void rendersAsPythonJinja2() throws IOException {
    List<?> cases;
    try (InputStream in = ChatTemplateTest.class.getResourceAsStream("/jinja2-cases.json")) {
      cases = (List<?>) Json.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
    }
    List<String> wrong = new ArrayList<>();
    for (Object o : cases) {
      Map<?, ?> c = (Map<?, ?>) o;
      String t = (String) c.get("t");
      Map<String, Object> ctx = new LinkedHashMap<>();
      ((Map<?, ?>) c.get("ctx")).forEach((k, v) -> ctx.put((String) k, v));
      if (c.containsKey("out")) {
        try {
          String got = render(t, ctx);
          if (!got.equals(c.get("out"))) {
            wrong.add(
                Py.repr(t) + "\n  want " + Py.repr(c.get("out")) + "\n  got  " + Py.repr(got));
          }
        } catch (TokenizerException e) {
          wrong.add(
              Py.repr(t) + "\n  want " + Py.repr(c.get("out")) + "\n  threw " + e.getMessage());
        }
      } else {
        String err = (String) c.get("err");
        String key = err.substring(err.indexOf(": ") + 2).replaceAll("\\.$", "");
        try {
          String got = render(t, ctx);
          wrong.add(Py.repr(t) + "\n  want error " + err + "\n  got  " + Py.repr(got));
        } catch (TokenizerException e) {
          if (!e.getMessage().contains(key)) {
            wrong.add(
                Py.repr(t)
                    + "\n  want error containing "
                    + Py.repr(key)
                    + "\n  got  "
                    + e.getMessage());
          }
        }
      }
    }
    assertThat(cases).hasSizeGreaterThan(20);
    assertThat(wrong).as(String.join("\n", wrong)).isEmpty();
  }

  @Test
  void aTemplateThatRaisesNamesTheModelAndTheLine() {
    String t =
        "{% for m in messages %}\n{% if m.role == 'tool' %}\n{{ raise_exception('no tools') }}\n{% endif %}\n{% endfor %}";
    assertThatThrownBy(
            () -> render(t, Map.of("messages", List.of(Map.of("role", "tool", "content", "x")))))
        .isInstanceOf(TokenizerException.class)
        .hasMessage(
            "chat template of test-model raised an error, line 3: no tools [{{ raise_exception('no tools') }}]");
  }

  @Test
  void aSyntaxErrorNamesTheModelAndTheLine() {
    assertThatThrownBy(() -> ChatTemplate.compile("m1", "ok\n{% for x in %}{% endfor %}"))
        .isInstanceOf(TokenizerException.class)
        .hasMessageStartingWith("chat template of m1 does not parse, line 2:");
    assertThatThrownBy(() -> ChatTemplate.compile("m1", "{% if x %}\nno end"))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("line 2")
        .hasMessageContaining("endif");
    assertThatThrownBy(() -> ChatTemplate.compile("m1", "{{ x | }}"))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("line 1");
    assertThatThrownBy(() -> ChatTemplate.compile("m1", "{% frobnicate %}"))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("unknown tag 'frobnicate'");
  }

  @Test
  void aRuntimeErrorNamesTheLine() {
    assertThatThrownBy(() -> render("a\nb\n{{ 'x' + 1 }}", Map.of()))
        .isInstanceOf(TokenizerException.class)
        .hasMessageStartingWith(
            "chat template of test-model failed, line 3: can only concatenate str");
    assertThatThrownBy(() -> render("{{ x | nosuchfilter }}", Map.of("x", 1)))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("no filter named 'nosuchfilter'");
  }

  @Test
  void aRoleTheTemplateRejectsIsAnErrorNotAFallback() {
    String gemmaLike =
        "{%- for message in messages -%}\n"
            + "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
            + "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
            + "{%- endif -%}{{ message['content'] }}{%- endfor -%}";
    Map<String, Object> ok =
        Map.of(
            "messages",
            List.of(
                Map.of("role", "user", "content", "a"),
                Map.of("role", "assistant", "content", "b")));
    assertThat(render(gemmaLike, ok)).isEqualTo("ab");
    assertThatThrownBy(
            () ->
                render(
                    gemmaLike,
                    Map.of(
                        "messages",
                        List.of(
                            Map.of("role", "user", "content", "a"),
                            Map.of("role", "user", "content", "b")))))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("raised an error, line 3: Conversation roles must alternate");
  }

  @Test
  void detectsTemplatesThatLoopOverContentParts() {
    assertThat(
            ChatTemplate.compile(
                    "g",
                    "{% for m in messages %}{% for item in m['content'] %}{% endfor %}{% endfor %}")
                .wantsContentParts())
        .isTrue();
    assertThat(
            ChatTemplate.compile("q", "{% for m in messages %}{{ m.content }}{% endfor %}")
                .wantsContentParts())
        .isFalse();
  }
}
