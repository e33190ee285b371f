package io.kvrouter.transport.kvevents;

import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * Which tiers an engine's field-less {@code AllBlocksCleared} empties, a property of the engine
 * (the event names no tier; see {@code docs/ingestion.md}).
 */
public enum ClearScope {
  /**
   * The device tier only (the default): vLLM's prefix-cache reset keeps the OffloadingConnector's
   * CPU and storage copies, which keep serving hits.
   */
  DEVICE,
  /**
   * Every tier of the rank: SGLang's {@code HiRadixCache.reset()} empties the host pool along with
   * the device cache before it publishes the event. Its storage (L3) copies survive, but no event
   * would ever remove them, so they are cleared too: under-scoring is the safe side.
   */
  ALL_TIERS;

  /** The wire name: {@code "device"} or {@code "all_tiers"}. */
  public String wireName() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * The scope a wire name names, case-insensitively.
   *
   * @throws IllegalArgumentException naming the accepted values, for any other name
   */
  public static ClearScope parse(@Nullable String name) {
    for (ClearScope s : values()) {
      if (s.wireName().equalsIgnoreCase(name)) return s;
    }
    throw new IllegalArgumentException(
        "must be \"device\" or \"all_tiers\", got " + (name == null ? "null" : "\"" + name + "\""));
  }
}
