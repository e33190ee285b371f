package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * kvrouter's chat rendering against Python's Jinja2 (parity/jinja2_reference.py, the renderer
 * transformers and vLLM run) on generated tool-calling conversations ({@link ToolChats}): for each
 * of vLLM's tool-calling prompt formats (src/test/resources/tool-templates, README.md there) and
 * the model templates the Node parity suite tests (Qwen3, Llama 3.1, DeepSeek V3, Gemma 3, from
 * parity/node_modules), the same text, and the same ids from the tiny model's tokenizer, or both
 * refusing the conversation. Content format auto, and string / openai forced on some cases.
 *
 * <p>{@code -Dkvrouter.templates.dir=DIR} adds every {@code tool_chat_template_*.jinja} of DIR
 * (vLLM's examples/). Without python3 and Jinja2 the test fails (Jinja2Reference); the model
 * templates need parity/install.sh's npm packages as TokenizerParityTest does (the test fails
 * without them; {@code -Dkvrouter.parity.skip=true} leaves the model templates out on purpose).
 */
class Jinja2ParityTest {
  private static final int CASES = 60;

  static String format(int i) {
    return i % 10 == 0 ? "string" : i % 10 == 1 ? "openai" : "auto";
  }

  @Test
  void toolCallingChatsRenderAndTokenizeAsJinja2Does() throws Exception {
    Map<String, String> templates = Jinja2Reference.templates();
    List<Jinja2Reference.Case> cases = new ArrayList<>();
    List<String> names = new ArrayList<>();
    List<ToolChats.Chat> chats = new ArrayList<>();
    long seed = Long.getLong("kvrouter.seed", 33);
    for (Map.Entry<String, String> t : templates.entrySet()) {
      List<ToolChats.Chat> gen =
          ToolChats.generate(
              seed ^ t.getKey().hashCode(), CASES, Jinja2Reference.maxParallel(t.getKey()));
      for (int i = 0; i < gen.size(); i++) {
        ToolChats.Chat c = gen.get(i);
        names.add(t.getKey());
        chats.add(c);
        cases.add(
            new Jinja2Reference.Case(
                t.getValue(),
                c.messages(),
                c.tools(),
                Map.of(),
                c.addGenerationPrompt(),
                Jinja2Reference.tinySpecials(),
                format(i)));
      }
    }
    List<Jinja2Reference.Result> ref = Jinja2Reference.render(cases);
    assertThat(ref).hasSize(cases.size());
    Map<String, Tokenizer> toks = new HashMap<>();
    Map<String, int[]> perTemplate = new LinkedHashMap<>(); // rendered, both refused, differ
    List<String> failures = new ArrayList<>();
    try {
      for (int i = 0; i < cases.size(); i++) {
        String name = names.get(i);
        Jinja2Reference.Case c = cases.get(i);
        String key = name + "\u0000" + c.contentFormat();
        Tokenizer tok =
            toks.computeIfAbsent(
                key,
                k ->
                    Tokenizer.load(
                        TestModels.tiny(),
                        Tokenizer.DEFAULT_CACHE_BYTES,
                        new ChatTemplateConfig(
                            c.template(),
                            name,
                            ChatTemplateConfig.ContentFormat.parse(c.contentFormat()),
                            Map.of())));
        int[] counts = perTemplate.computeIfAbsent(name, k -> new int[3]);
        Tokenizer.Prompt mine = null;
        String myError = null;
        try {
          mine = tok.applyChatTemplate(chats.get(i).request());
        } catch (TokenizerException e) {
          myError = e.getMessage();
        }
        Jinja2Reference.Result want = ref.get(i);
        String what = name + " case " + (i % CASES) + " (" + c.contentFormat() + ")";
        if (want.error() != null || myError != null) {
          if (want.error() != null && myError != null) {
            counts[1]++;
          } else {
            counts[2]++;
            failures.add(
                what
                    + ": "
                    + (want.error() != null
                        ? "Jinja2 refused (" + want.error() + ") but kvrouter rendered"
                        : "kvrouter refused (" + myError + ") but Jinja2 rendered"));
          }
          continue;
        }
        if (!mine.text().equals(want.text())) {
          counts[2]++;
          failures.add(what + ": text differs " + firstDifference(mine.text(), want.text()));
          continue;
        }
        int[] ids = tok.encodeUncached(want.text(), false);
        if (!Arrays.equals(ids, mine.ids())) {
          counts[2]++;
          failures.add(what + ": ids differ");
          continue;
        }
        counts[0]++;
      }
    } finally {
      for (Tokenizer t : toks.values()) t.close();
    }
    StringBuilder summary = new StringBuilder();
    perTemplate.forEach(
        (n, k) ->
            summary.append(
                String.format(
                    "%-40s %3d same, %3d refused by both, %3d differ%n", n, k[0], k[1], k[2])));
    System.out.print(summary);
    assertThat(failures)
        .as(summary + String.join("\n", failures.subList(0, Math.min(8, failures.size()))))
        .isEmpty();
    // the check must have something to check: a good share of each template's conversations render
    // (Gemma 3's template refuses tool roles, so most of its conversations are refused by both)
    perTemplate.forEach(
        (n, k) ->
            assertThat(k[0])
                .as(n + " rendered conversations\n" + summary)
                .isGreaterThan(CASES / 4));
  }

  @Test
  void theFormatFilterIsPythonsPercentFormatting() throws Exception {
    // vLLM's Llama 3.2 pythonic template writes arguments with "%s" | format(value)
    String[] templates = {
      "{{ '%s|%r|%d|%i|%5.2f|%-4s|%03d|%+d|%%|%.3s' | format('a', 'b', 7, -8, 3.14159, 'x', 5, 9,"
          + " 'abcdef') }}",
      "{{ '%s %s %s %s' | format([1, 'x', none], {'k': true}, 2.5, 1e20) }}",
      "{{ '%(a)s and %(b)r' | format(a=[1, 'é'], b='q') }}",
      "{{ '%s' | format('🙂 ünï') }}{{ '%d' | format(true) }}{{ '%f' | format(2) }}",
      "{{ '%s %s' | format(1) }}",
      "{{ '%s' | format(1, 2) }}",
      "{{ '%d' | format('x') }}",
    };
    List<Jinja2Reference.Case> cases = new ArrayList<>();
    for (String t : templates) {
      cases.add(new Jinja2Reference.Case(t, List.of(), null, Map.of(), false, Map.of(), "string"));
    }
    List<Jinja2Reference.Result> ref = Jinja2Reference.render(cases);
    for (int i = 0; i < templates.length; i++) {
      String mine;
      try {
        mine =
            ChatTemplate.compile("t", templates[i])
                .render(new HashMap<>(Map.of("messages", List.of())));
      } catch (TokenizerException e) {
        mine = null;
      }
      assertThat(mine).as(templates[i] + " -> Jinja2 " + ref.get(i)).isEqualTo(ref.get(i).text());
    }
    assertThat(ref.get(0).text()).isEqualTo("a|'b'|7|-8| 3.14|x   |005|+9|%|abc");
  }

  static String firstDifference(String a, String b) {
    int i = 0;
    while (i < a.length() && i < b.length() && a.charAt(i) == b.charAt(i)) i++;
    int from = Math.max(0, i - 40);
    return "at char "
        + i
        + ": kvrouter …"
        + a.substring(from, Math.min(a.length(), i + 40)).replace("\n", "\\n")
        + "… Jinja2 …"
        + b.substring(from, Math.min(b.length(), i + 40)).replace("\n", "\\n")
        + "…";
  }
}
