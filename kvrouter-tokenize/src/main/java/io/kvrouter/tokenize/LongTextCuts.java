package io.kvrouter.tokenize;

import java.util.List;
import java.util.Map;

/**
 * Where a long piece of text (one segment between added tokens) may be cut so that the Rust core's
 * ids of the parts, concatenated, are its ids of the whole: the Rust core's cost per token grows
 * with the length of one call (about 0.85 M tokens/s on 5k-character calls, 0.57 M on
 * 300k-character ones with Qwen3's tokenizer on this machine), so long segments are encoded in
 * parts of about {@link #PART_CHARS} characters.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable, built once per tokenizer from its tokenizer.json; read by any thread. forConfig
 * returns null (no cuts, every segment is one call) unless the whole pipeline is one this class
 * knows to be local at a cut:
 *   - normalizer: none, an empty Sequence, or NFC;
 *   - pre-tokenizer: exactly ByteLevel {add_prefix_space false, use_regex true} (GPT-2's regex),
 *     or exactly Sequence [Split {one of KNOWN_SPLITS, behavior Isolated, invert false},
 *     ByteLevel {add_prefix_space false, use_regex false}] (Qwen2/2.5/3's and Llama 3's regex);
 *   - model: BPE without dropout.
 * A cut is a position p with text[p-1] == '\n' and text[p] an ASCII letter; under GPT-2's regex
 * text[p-2] must also be a printable, non-space ASCII character. Why the ids do not change there:
 *   - NFC: text[p] is an ASCII letter (canonical class 0, composes with nothing before it), so
 *     NFC(A + B) = NFC(A) + NFC(B).
 *   - The regexes have no look-behind and no anchors, and nothing that can consume '\n' (a
 *     [\r\n]* tail, \s*[\r\n]+, \s+, \s+(?!\S)) can consume a letter, so a match ends at p in A + B
 *     as at the end of A alone, and matching from p sees only B. What remains is that the matches
 *     before p are the same: under the Qwen/Llama regex the whitespace run holding text[p-1] is
 *     taken whole by \s*[\r\n]+ (tried before \s+(?!\S)), with or without B; a punctuation run
 *     before it takes its newlines by ` ?[^\s\p{L}\p{N}]+[\r\n]*` either way. GPT-2's regex has no
 *     \s*[\r\n]+: a run "  \n" before a letter splits as "  " + "\n" (\s+(?!\S) backs off one
 *     character) but stays whole at the end of A, hence its stricter rule: with a non-space before
 *     it, the run is the lone "\n", one piece either way.
 *   - ByteLevel without add_prefix_space maps bytes one to one; BPE merges never cross a
 *     pre-token boundary.
 * The randomized test (LongTextCutsTest) checks this on long random texts against one call for
 * each tokenizer the rule admits, and that a cut elsewhere does change ids (the check can fail).
 * </pre>
 */
final class LongTextCuts {

  /** Segments longer than this are encoded in parts. */
  static final int MIN_CUT_CHARS = 8192;

  /** A part is cut at the first cut at or after this many characters. */
  static final int PART_CHARS = 4096;

  /** Qwen2/2.5/3's and Llama 3's pre-tokenizer regexes, exactly as their tokenizer.json says. */
  static final List<String> KNOWN_SPLITS =
      List.of(
          "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
              + " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
          "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
              + " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");

  /** The Qwen/Llama rule (any text before the newline) and GPT-2's (a non-space before it). */
  private static final LongTextCuts SPLIT_REGEX = new LongTextCuts(false);

  private static final LongTextCuts GPT2 = new LongTextCuts(true);

  private final boolean nonSpaceBefore;

  private LongTextCuts(boolean nonSpaceBefore) {
    this.nonSpaceBefore = nonSpaceBefore;
  }

  /** The cuts for a tokenizer.json (parsed), or null when its pipeline is not one known here. */
  static LongTextCuts forConfig(Map<?, ?> tokenizerJson) {
    if (!normalizerOk(tokenizerJson.get("normalizer"))) {
      return null;
    }
    if (!(tokenizerJson.get("model") instanceof Map<?, ?> model)
        || !"BPE".equals(model.get("type"))
        || model.get("dropout") != null) {
      return null;
    }
    Object p = tokenizerJson.get("pre_tokenizer");
    if (p instanceof Map<?, ?> m && byteLevel(m, true)) {
      return GPT2;
    }
    return splitThenByteLevel(p) ? SPLIT_REGEX : null;
  }

  private static boolean normalizerOk(Object n) {
    if (n == null) {
      return true;
    }
    if (!(n instanceof Map<?, ?> m)) {
      return false;
    }
    if ("NFC".equals(m.get("type")) && m.size() == 1) {
      return true;
    }
    return "Sequence".equals(m.get("type"))
        && m.get("normalizers") instanceof List<?> l
        && (l.isEmpty()
            || (l.size() == 1
                && l.get(0) instanceof Map<?, ?> e
                && "NFC".equals(e.get("type"))
                && e.size() == 1));
  }

  private static boolean splitThenByteLevel(Object p) {
    if (!(p instanceof Map<?, ?> m)
        || !"Sequence".equals(m.get("type"))
        || !(m.get("pretokenizers") instanceof List<?> l)
        || l.size() != 2
        || !(l.get(0) instanceof Map<?, ?> split)
        || !(l.get(1) instanceof Map<?, ?> bl)) {
      return false;
    }
    return "Split".equals(split.get("type"))
        && "Isolated".equals(split.get("behavior"))
        && Boolean.FALSE.equals(split.get("invert"))
        && split.get("pattern") instanceof Map<?, ?> pattern
        && pattern.size() == 1
        && pattern.get("Regex") instanceof String regex
        && KNOWN_SPLITS.contains(regex)
        && byteLevel(bl, false);
  }

  private static boolean byteLevel(Map<?, ?> m, boolean useRegex) {
    // use_regex defaults to true in the Rust core when absent
    Object ur = m.get("use_regex");
    boolean regex = ur == null || Boolean.TRUE.equals(ur);
    return "ByteLevel".equals(m.get("type"))
        && Boolean.FALSE.equals(m.get("add_prefix_space"))
        && regex == useRegex;
  }

  /** Whether {@code p} is a cut of {@code s} (see the class notes). */
  boolean isCut(CharSequence s, int p) {
    if (p < 2 || p >= s.length() || s.charAt(p - 1) != '\n') {
      return false;
    }
    char c = s.charAt(p);
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
      return false;
    }
    char before = s.charAt(p - 2);
    return !nonSpaceBefore || (before > ' ' && before < 0x7f);
  }

  /** Whether this is GPT-2's stricter rule (for tests). */
  boolean nonSpaceBefore() {
    return nonSpaceBefore;
  }

  /**
   * The next cut of {@code s} at or after {@code from}, or {@code s.length()} when there is none.
   */
  int nextCut(String s, int from) {
    int p = Math.max(from, 2);
    while (true) {
      int nl = s.indexOf('\n', p - 1);
      if (nl < 0 || nl + 1 >= s.length()) {
        return s.length();
      }
      if (isCut(s, nl + 1)) {
        return nl + 1;
      }
      p = nl + 2;
    }
  }
}
