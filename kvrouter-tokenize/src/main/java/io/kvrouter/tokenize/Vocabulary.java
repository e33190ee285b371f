package io.kvrouter.tokenize;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.text.Normalizer;
import java.util.List;
import java.util.Map;

/**
 * What tokenizer.json says of its vocabulary that the tokenizers library does not expose: its size
 * (the ids a decode may be given) and a bound on the characters one token can stand for (so that a
 * prompt certainly longer than a context can be refused before it is tokenized).
 *
 * <pre>
 * Implementation notes
 *
 * Read once at load from tokenizer.json's text by a streaming pass (model.vocab is skipped by the
 * map Tokenizer parses): size = the largest id of model.vocab (an object of string to id for BPE,
 * WordPiece and WordLevel; an array of [piece, score] for Unigram, whose ids are the indexes) and
 * of added_tokens, plus one. longestChars = the longest vocab string or added-token content, in
 * UTF-16 chars (String.length, as the prompts are measured). Immutable after construction.
 *
 * The bound (maxCharsPerToken, -1 when none is certain): a token never covers more characters of
 * the prompt than its own vocabulary string has, so a prompt of n chars is at least n / L tokens
 * with L = longestChars, when:
 *  - the model is BPE: byte-level strings have one char per byte of UTF-8 (and a byte is at most
 *    one char of the prompt), a byte-fallback piece <0x41> stands for one byte, a Metaspace piece
 *    has one char per char (a space becomes one U+2581); an unknown char is either dropped (not
 *    byte-level, no byte_fallback, no unk_token: then no bound) or one unk token (fuse_unk false;
 *    fuse_unk true folds a run of them into one: no bound). WordPiece ([UNK] for a whole word),
 *    WordLevel and Unigram (fused unknown runs) have no bound;
 *  - the pre-tokenizer drops nothing: ByteLevel, Metaspace, Digits, Punctuation and Split whose
 *    behavior is not Removed, or a Sequence of those (Whitespace, WhitespaceSplit, BertPreTokenizer
 *    and CharDelimiterSplit drop the characters they split on: no bound);
 *  - the normalizer cannot shorten the text: none; Prepend; Replace of a string pattern by a
 *    content at least as long; Lowercase (no lowercase mapping is shorter in UTF-16); a Sequence of
 *    those; and NFC or NFKC (alone or first in a Sequence) only for a text that is already in that
 *    form (java.text.Normalizer's check; a normalized text is left as it is), which normalizer
 *    lists as a condition on the text. Anything else (a Regex Replace, Strip, StripAccents, NFD,
 *    NFKD, BertNormalizer, Precompiled): no bound.
 * </pre>
 */
final class Vocabulary {
  private static final JsonFactory FACTORY =
      JsonFactory.builder()
          .streamReadConstraints(
              StreamReadConstraints.builder()
                  .maxStringLength(Integer.MAX_VALUE)
                  .maxDocumentLength(-1)
                  .maxNestingDepth(10_000)
                  .build())
          .build();

  /** The largest id plus one; -1 when tokenizer.json has no ids. */
  final int size;

  /** The longest vocabulary string or added-token content, in chars. */
  final int longestChars;

  /** See the class notes; -1: no certain bound. */
  final int maxCharsPerToken;

  /** Why there is no bound, or null when there is one. */
  final String noBoundReason;

  /** NFC or NFKC, when the bound holds only for a text already in that form; else null. */
  final Normalizer.Form needsForm;

  private Vocabulary(
      int size,
      int longestChars,
      int maxCharsPerToken,
      String noBoundReason,
      Normalizer.Form needsForm) {
    this.size = size;
    this.longestChars = longestChars;
    this.maxCharsPerToken = maxCharsPerToken;
    this.noBoundReason = noBoundReason;
    this.needsForm = needsForm;
  }

  /**
   * Reads the vocabulary of {@code text} (tokenizer.json), whose parsed map (with model.vocab
   * skipped) is {@code parsed}.
   */
  static Vocabulary of(String text, Map<?, ?> parsed) throws IOException {
    int[] sizeAndLongest = scan(text);
    int size = sizeAndLongest[0];
    int longest = sizeAndLongest[1];
    Map<?, ?> model = parsed.get("model") instanceof Map<?, ?> m ? m : Map.of();
    String why = modelReason(model, parsed.get("pre_tokenizer"));
    if (why == null) why = preTokenizerReason(parsed.get("pre_tokenizer"));
    Normalizer.Form form = null;
    if (why == null) {
      Object n = parsed.get("normalizer");
      List<?> steps =
          n instanceof Map<?, ?> nm
                  && "Sequence".equals(nm.get("type"))
                  && nm.get("normalizers") instanceof List<?> l
              ? l
              : n == null ? List.of() : List.of(n);
      for (int i = 0; i < steps.size() && why == null; i++) {
        Object s = steps.get(i);
        String type = s instanceof Map<?, ?> sm ? String.valueOf(sm.get("type")) : "?";
        if (i == 0 && (type.equals("NFC") || type.equals("NFKC"))) {
          form = type.equals("NFC") ? Normalizer.Form.NFC : Normalizer.Form.NFKC;
        } else if (!(s instanceof Map<?, ?> sm && cannotShorten(sm))) {
          why = "its normalizer " + type + " may shorten the text";
        }
      }
    }
    if (why == null && longest <= 0) why = "its vocabulary is empty";
    return new Vocabulary(
        size, longest, why == null ? longest : -1, why, why == null ? form : null);
  }

  /** Why the model can map more characters to a token than its string has, or null. */
  private static String modelReason(Map<?, ?> model, Object preTokenizer) {
    Object type = model.get("type");
    if (type == null && model.containsKey("merges")) type = "BPE"; // older files have no type
    if (!"BPE".equals(type)) return "its model is " + type + ", not BPE";
    boolean byteLevel = mentionsType(preTokenizer, "ByteLevel");
    boolean byteFallback = Boolean.TRUE.equals(model.get("byte_fallback"));
    Object unk = model.get("unk_token");
    if (!byteLevel && !byteFallback) {
      if (unk == null) return "unknown characters are dropped (no byte fallback, no unk_token)";
      if (Boolean.TRUE.equals(model.get("fuse_unk"))) {
        return "a run of unknown characters is one token (fuse_unk)";
      }
    }
    return null;
  }

  /** Why the pre-tokenizer may drop characters, or null. */
  private static String preTokenizerReason(Object p) {
    if (p == null) return null;
    if (!(p instanceof Map<?, ?> m)) return "its pre_tokenizer is not an object";
    String type = String.valueOf(m.get("type"));
    switch (type) {
      case "Sequence" -> {
        if (!(m.get("pretokenizers") instanceof List<?> l)) return "a Sequence without a list";
        for (Object o : l) {
          String r = preTokenizerReason(o);
          if (r != null) return r;
        }
        return null;
      }
      case "ByteLevel", "Metaspace", "Digits" -> {
        return null;
      }
      case "Split", "Punctuation" -> {
        return "Removed".equals(m.get("behavior"))
            ? "its pre_tokenizer " + type + " removes what it splits on"
            : null;
      }
      default -> {
        return "its pre_tokenizer " + type + " may drop characters";
      }
    }
  }

  /** Whether a normalizer step never makes a text shorter (see the class notes). */
  private static boolean cannotShorten(Map<?, ?> step) {
    String type = String.valueOf(step.get("type"));
    return switch (type) {
      case "Prepend", "Lowercase" -> true;
      case "Replace" ->
          step.get("pattern") instanceof Map<?, ?> pat
              && pat.get("String") instanceof String from
              && !from.isEmpty()
              && step.get("content") instanceof String to
              && to.length() >= from.length();
      case "Sequence" ->
          step.get("normalizers") instanceof List<?> l
              && l.stream().allMatch(o -> o instanceof Map<?, ?> m && cannotShorten(m));
      default -> false;
    };
  }

  private static boolean mentionsType(Object node, String type) {
    if (node instanceof Map<?, ?> m) {
      if (type.equals(m.get("type"))) return true;
      for (Object v : m.values()) if (mentionsType(v, type)) return true;
    } else if (node instanceof List<?> l) {
      for (Object v : l) if (mentionsType(v, type)) return true;
    }
    return false;
  }

  /** {largest id + 1, longest string} over model.vocab and added_tokens. */
  private static int[] scan(String text) throws IOException {
    long maxId = -1;
    int longest = 0;
    try (JsonParser p = FACTORY.createParser(text)) {
      if (p.nextToken() != JsonToken.START_OBJECT) throw new IOException("not an object");
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String f = p.currentName();
        JsonToken t = p.nextToken();
        if (f.equals("model") && t == JsonToken.START_OBJECT) {
          while (p.nextToken() == JsonToken.FIELD_NAME) {
            String g = p.currentName();
            JsonToken v = p.nextToken();
            if (g.equals("vocab") && v == JsonToken.START_OBJECT) {
              while (p.nextToken() == JsonToken.FIELD_NAME) {
                longest = Math.max(longest, p.currentName().length());
                if (p.nextToken() == JsonToken.VALUE_NUMBER_INT) {
                  maxId = Math.max(maxId, p.getLongValue());
                } else {
                  p.skipChildren();
                }
              }
            } else if (g.equals("vocab") && v == JsonToken.START_ARRAY) {
              long index = 0;
              while (p.nextToken() != JsonToken.END_ARRAY) { // each entry: [piece, score]
                if (p.currentToken() == JsonToken.START_ARRAY) {
                  JsonToken e = p.nextToken();
                  if (e == JsonToken.VALUE_STRING)
                    longest = Math.max(longest, p.getText().length());
                  while (e != JsonToken.END_ARRAY) {
                    p.skipChildren();
                    e = p.nextToken();
                  }
                } else {
                  p.skipChildren();
                }
                maxId = Math.max(maxId, index++);
              }
            } else {
              p.skipChildren();
            }
          }
        } else if (f.equals("added_tokens") && t == JsonToken.START_ARRAY) {
          while (p.nextToken() == JsonToken.START_OBJECT) {
            while (p.nextToken() == JsonToken.FIELD_NAME) {
              String g = p.currentName();
              JsonToken v = p.nextToken();
              if (g.equals("id") && v == JsonToken.VALUE_NUMBER_INT) {
                maxId = Math.max(maxId, p.getLongValue());
              } else if (g.equals("content") && v == JsonToken.VALUE_STRING) {
                longest = Math.max(longest, p.getText().length());
              } else {
                p.skipChildren();
              }
            }
          }
        } else {
          p.skipChildren();
        }
      }
    }
    return new int[] {maxId < 0 || maxId >= Integer.MAX_VALUE ? -1 : (int) (maxId + 1), longest};
  }

  /**
   * Whether {@code text} certainly encodes to more than {@code tokens} tokens (false when no bound
   * holds for it).
   */
  boolean certainlyMoreTokensThan(String text, long tokens) {
    if (maxCharsPerToken <= 0 || tokens <= 0) return false;
    if ((long) text.length() <= tokens * maxCharsPerToken) return false;
    return needsForm == null || Normalizer.isNormalized(text, needsForm);
  }
}
