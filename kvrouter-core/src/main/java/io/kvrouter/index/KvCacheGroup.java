package io.kvrouter.index;

import java.util.Locale;
import java.util.Objects;

/**
 * One KV cache group of a hybrid model (docs/routing.md, "Hybrid models"): the layers of one
 * attention kind, which cache and evict their blocks apart from the other groups', and the rule by
 * which that group can serve a prefix hit that ends after block {@code c - 1} (the cut):
 *
 * <ul>
 *   <li>{@link Kind#FULL full attention} (also MLA and sink-full): every block {@code 0..c-1};
 *   <li>{@link Kind#SLIDING_WINDOW sliding window} of {@code W} tokens: the {@code ceil((W-1)/bs)}
 *       blocks before the cut (all of {@code 0..c-1} when the cut is closer to the start);
 *   <li>{@link Kind#STATE state} (Mamba and other recurrent layers): the block {@code c - 1}, the
 *       state after exactly {@code c} blocks;
 *   <li>{@link Kind#CHUNKED_LOCAL chunked local attention} of {@code C} tokens: the blocks from the
 *       start of the chunk that holds the cut to {@code c - 1}.
 * </ul>
 *
 * <p>The command-line form is {@code full}, {@code sliding:W}, {@code state} (or {@code mamba}) and
 * {@code chunked:C}; {@link #toString()} writes it, {@link #parse} reads it.
 *
 * @param kind the attention kind
 * @param windowTokens the window ({@code SLIDING_WINDOW}) or chunk ({@code CHUNKED_LOCAL}) in
 *     tokens, at least 1; 0 for the other kinds
 */
public record KvCacheGroup(Kind kind, int windowTokens) {

  /** The attention kinds kvrouter scores. */
  public enum Kind {
    /** Full attention (vLLM: full_attention, mla_attention, sink_full_attention). */
    FULL,
    /** Sliding-window attention of {@code windowTokens} (sliding_window, sliding_window_mla). */
    SLIDING_WINDOW,
    /** A recurrent state kept per position (vLLM: mamba). */
    STATE,
    /** Chunked local attention of {@code windowTokens} per chunk (chunked_local_attention). */
    CHUNKED_LOCAL
  }

  public KvCacheGroup {
    Objects.requireNonNull(kind, "kind");
    boolean windowed = kind == Kind.SLIDING_WINDOW || kind == Kind.CHUNKED_LOCAL;
    if (windowed && windowTokens < 1) {
      throw new IllegalArgumentException(
          "a " + name(kind) + " group needs a window of at least 1 token, got " + windowTokens);
    }
    if (!windowed && windowTokens != 0) {
      throw new IllegalArgumentException(
          "a " + name(kind) + " group has no window, got " + windowTokens + " tokens");
    }
  }

  /** A full-attention group. */
  public static KvCacheGroup full() {
    return new KvCacheGroup(Kind.FULL, 0);
  }

  /** A sliding-window group of {@code windowTokens} tokens. */
  public static KvCacheGroup slidingWindow(int windowTokens) {
    return new KvCacheGroup(Kind.SLIDING_WINDOW, windowTokens);
  }

  /** A state (Mamba) group. */
  public static KvCacheGroup state() {
    return new KvCacheGroup(Kind.STATE, 0);
  }

  /** A chunked-local-attention group of {@code chunkTokens} tokens per chunk. */
  public static KvCacheGroup chunkedLocal(int chunkTokens) {
    return new KvCacheGroup(Kind.CHUNKED_LOCAL, chunkTokens);
  }

  /**
   * The group named {@code text}: {@code full}, {@code sliding:W}, {@code state}, {@code mamba} or
   * {@code chunked:C} (case-insensitive, W and C in tokens).
   *
   * @throws IllegalArgumentException naming the accepted forms when {@code text} is none of them
   */
  public static KvCacheGroup parse(String text) {
    Objects.requireNonNull(text, "text");
    String t = text.trim().toLowerCase(Locale.ROOT);
    int colon = t.indexOf(':');
    String name = colon < 0 ? t : t.substring(0, colon);
    String arg = colon < 0 ? null : t.substring(colon + 1).trim();
    switch (name) {
      case "full" -> {
        if (arg == null) return full();
      }
      case "state", "mamba" -> {
        if (arg == null) return state();
      }
      case "sliding", "chunked" -> {
        if (arg != null) {
          int tokens;
          try {
            tokens = Integer.parseInt(arg);
          } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                "KV cache group '" + text + "': the window must be a whole number of tokens");
          }
          if (tokens < 1) {
            throw new IllegalArgumentException(
                "KV cache group '" + text + "': the window must be at least 1 token");
          }
          return name.equals("sliding") ? slidingWindow(tokens) : chunkedLocal(tokens);
        }
      }
      default -> {}
    }
    throw new IllegalArgumentException(
        "unknown KV cache group '"
            + text
            + "'; use full, sliding:<window tokens>, state (or mamba) or chunked:<chunk tokens>");
  }

  /**
   * How many blocks before the cut a sliding window of this group needs: {@code ceil((W - 1) /
   * blockSize)} (vLLM's {@code SlidingWindowManager}: the token being computed is in the window),
   * at least 1 (vLLM's scan takes the last cached block even when the window needs none).
   */
  public int windowBlocks(int blockSize) {
    if (kind != Kind.SLIDING_WINDOW) {
      throw new IllegalStateException("only a sliding-window group has window blocks: " + this);
    }
    return Math.max(1, Math.ceilDiv(windowTokens - 1, blockSize));
  }

  @Override
  public String toString() {
    return switch (kind) {
      case FULL -> "full";
      case STATE -> "state";
      case SLIDING_WINDOW -> "sliding:" + windowTokens;
      case CHUNKED_LOCAL -> "chunked:" + windowTokens;
    };
  }

  private static String name(Kind kind) {
    return kind.name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}
