package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The vocabulary's size and the characters-per-token bound read from tokenizer.json, and the
 * conservative rule of when the bound holds (Vocabulary's class notes).
 */
class VocabularyTest {
  private static Vocabulary of(String model, String pre, String normalizer) throws Exception {
    String text =
        "{\"added_tokens\":[{\"id\":40,\"content\":\"<|longest_added|>\"}],"
            + "\"normalizer\":"
            + normalizer
            + ",\"pre_tokenizer\":"
            + pre
            + ",\"model\":"
            + model
            + "}";
    return Vocabulary.of(text, (Map<?, ?>) Json.parse(text, Set.of("vocab", "merges")));
  }

  private static final String BPE =
      "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"abcdefghijklmnopqrstuvwxyz0123\":7,\"b\":3},"
          + "\"merges\":[]}";
  private static final String BYTE_LEVEL = "{\"type\":\"ByteLevel\"}";

  @Test
  void sizeIsTheLargestIdOfVocabAndAddedTokensPlusOne() throws Exception {
    Vocabulary v = of(BPE, BYTE_LEVEL, "null");
    assertThat(v.size).isEqualTo(41);
    assertThat(v.longestChars).isEqualTo(30);
    String unigram =
        "{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0.0],[\"\u2581hello\",-1.5],"
            + "[\"x\",-2.0]]}";
    Vocabulary u = of(unigram, "null", "null");
    assertThat(u.size).as("the added token's id 40 is the largest").isEqualTo(41);
    assertThat(u.longestChars).isEqualTo("<|longest_added|>".length());
  }

  @Test
  void aByteLevelBpeWithoutNormalizerIsBoundedByItsLongestEntry() throws Exception {
    Vocabulary v = of(BPE, BYTE_LEVEL, "null");
    assertThat(v.maxCharsPerToken).isEqualTo(30);
    assertThat(v.noBoundReason).isNull();
    assertThat(v.certainlyMoreTokensThan("x".repeat(300), 10)).isFalse(); // 300 = 10 x 30
    assertThat(v.certainlyMoreTokensThan("x".repeat(301), 10)).isTrue();
  }

  @Test
  void normalizersThatCannotShortenKeepTheBound() throws Exception {
    String sentencePiece =
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\u2581\"},"
            + "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\u2581\"}]}";
    String fallback = BPE.replace("\"merges\"", "\"byte_fallback\":true,\"merges\"");
    assertThat(of(fallback, "null", sentencePiece).maxCharsPerToken).isEqualTo(30);
    assertThat(of(BPE, BYTE_LEVEL, "{\"type\":\"Lowercase\"}").maxCharsPerToken).isEqualTo(30);
  }

  @Test
  void nfcHoldsOnlyForTextAlreadyInNfc() throws Exception {
    Vocabulary v = of(BPE, BYTE_LEVEL, "{\"type\":\"NFC\"}");
    assertThat(v.maxCharsPerToken).isEqualTo(30);
    assertThat(v.certainlyMoreTokensThan("\u00e9".repeat(301), 10)).isTrue();
    // e + combining acute: NFC makes it one char, so 602 chars may be 301 after normalizing
    assertThat(v.certainlyMoreTokensThan("e\u0301".repeat(301), 10)).isFalse();
  }

  @Test
  void whatMayShortenOrDropTextHasNoBound() throws Exception {
    assertThat(of(BPE, BYTE_LEVEL, "{\"type\":\"NFD\"}").noBoundReason).contains("NFD");
    assertThat(
            of(
                    BPE,
                    BYTE_LEVEL,
                    "{\"type\":\"Replace\",\"pattern\":{\"String\":\"  \"},\"content\":\" \"}")
                .maxCharsPerToken)
        .isEqualTo(-1);
    assertThat(
            of(
                    BPE,
                    BYTE_LEVEL,
                    "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"content\":\" \"}")
                .maxCharsPerToken)
        .isEqualTo(-1);
    String fallback = BPE.replace("\"merges\"", "\"byte_fallback\":true,\"merges\"");
    assertThat(of(fallback, "null", "null").maxCharsPerToken).isEqualTo(30);
    assertThat(of(fallback, "{\"type\":\"Whitespace\"}", "null").noBoundReason)
        .contains("Whitespace");
    assertThat(of(fallback, "{\"type\":\"Split\",\"behavior\":\"Removed\"}", "null").noBoundReason)
        .contains("removes");
    assertThat(of(BPE, "null", "null").noBoundReason).contains("dropped");
    String fused =
        BPE.replace("\"merges\"", "\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"merges\"");
    assertThat(of(fused, "null", "null").noBoundReason).contains("fuse_unk");
    String wordPiece = "{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0}}";
    assertThat(of(wordPiece, "null", "null").noBoundReason).contains("WordPiece");
    assertThat(of(wordPiece, "null", "null").certainlyMoreTokensThan("x".repeat(10_000), 1))
        .isFalse();
  }

  /**
   * The real tokenizers of the parity packages: their bound (the longest entry, in UTF-16 chars,
   * which is 128 for the byte-level ones: runs of spaces or dashes) and their size; and for texts
   * made to need few tokens (long runs the vocabulary has whole, repeated words, CJK, emoji) the
   * Rust core never gives fewer tokens than the bound promises.
   */
  @Test
  void theBoundHoldsForRealTokenizers() {
    record Expected(String family, int size, int maxChars) {}
    List<String> texts =
        List.of(
            " ".repeat(5000),
            "-".repeat(5000),
            "=".repeat(4000) + "\n".repeat(300),
            "\t".repeat(3000),
            "the quick brown fox jumps over the lazy dog. ".repeat(100),
            "0123456789".repeat(300),
            "\u4f60\u597d\u4e16\u754c".repeat(500),
            "\ud83d\ude00\ud83d\udc4d".repeat(400),
            "<|im_start|><|im_end|>".repeat(100),
            "\u2581\u2581\u2581\u2581 ".repeat(500));
    for (Expected e :
        List.of(
            new Expected("llama3_1", 128256, 128),
            new Expected("qwen3", 151669, 128),
            new Expected("deepseek_v3", 128815, 128),
            new Expected("gemma3", 262145, 31))) {
      try (Tokenizer t = Tokenizer.load(LongTextCutsTest.parityModel(e.family()))) {
        assertThat(t.vocabSize()).as(e.family()).isEqualTo(e.size());
        assertThat(t.maxCharsPerToken()).as(e.family()).isEqualTo(e.maxChars());
        for (String text : texts) {
          int n = t.encodeUncached(text, false).length;
          assertThat((long) n * t.maxCharsPerToken())
              .as(e.family() + ": " + n + " tokens for " + text.length() + " chars")
              .isGreaterThanOrEqualTo(text.length());
          assertThat(t.certainlyMoreTokensThan(text, n)).as(e.family()).isFalse();
        }
      }
    }
  }

  /** The tiny test model: byte-level BPE, ids 0..304, longest entry {@code <|im_start|>}. */
  @Test
  void theTinyModelsTokenizer() {
    try (Tokenizer t = Tokenizer.load(TestModels.tiny())) {
      assertThat(t.vocabSize()).isEqualTo(305);
      assertThat(t.maxCharsPerToken()).isEqualTo("<|im_start|>".length());
      assertThat(t.noLengthBoundReason()).isNull();
    }
  }
}
