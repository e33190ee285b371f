package io.kvrouter.route;

import java.util.Locale;

/**
 * What a registered engine does in a disaggregated fleet (docs/routing.md, Disaggregated serving):
 * {@link #PREFILL} computes prompts' KV and hands it over, {@link #DECODE} takes the KV over and
 * generates, {@link #BOTH} (the default) serves whole requests. The wire names are the lower-case
 * ones ({@code "prefill"}, {@code "decode"}, {@code "both"}: {@code POST /register}'s {@code
 * role}).
 */
public enum EngineRole {
  PREFILL,
  DECODE,
  BOTH;

  /** The wire name: {@code "prefill"}, {@code "decode"} or {@code "both"}. */
  public String wireName() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * The role of a wire name.
   *
   * @throws IllegalArgumentException for anything but {@code prefill}, {@code decode} and {@code
   *     both} (the message lists them)
   */
  public static EngineRole parse(String s) {
    return switch (s) {
      case "prefill" -> PREFILL;
      case "decode" -> DECODE;
      case "both" -> BOTH;
      default ->
          throw new IllegalArgumentException(
              "must be \"prefill\", \"decode\" or \"both\", got \"" + s + "\"");
    };
  }

  /** Whether an engine of this role may serve a request whole (no hand-over). */
  public boolean servesWhole() {
    return this != PREFILL;
  }
}
