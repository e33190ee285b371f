package io.kvrouter.transport.kvevents;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Helpers for the decoded {@code extra_keys} of a {@code BlockStored}: value equality that looks
 * into {@code byte[]}, a readable form, and the salts and multimodal hashes hidden in them.
 *
 * <pre>
 * Implementation notes
 *
 * vLLM builds each block's extra keys as lora_name + multimodal keys + cache_salt (block 0 of a
 * request only) + prompt-embedding digests, in that order. Multimodal keys are the item's
 * identifier (older releases) or an [identifier, start offset in the block] pair (newer ones);
 * prompt-embedding digests are bytes. Nothing on the wire says which string is what, so the
 * rules below are heuristics, written down in docs/ingestion.md:
 *
 *   multimodal hash: a 64-hex-digit identifier (alone or first in a pair) -> its first 16 hex
 *                    digits as an unsigned 64-bit value (NVIDIA Dynamo's rule)
 *   cache salt:      in block 0 of a chain that starts at the root, the last string that is
 *                    neither the LoRA name nor a 64-hex-digit identifier
 * </pre>
 */
final class ExtraKeys {
  private ExtraKeys() {}

  /** Equality of decoded msgpack values where {@code byte[]} compares by content. */
  static boolean deepEquals(@Nullable Object a, @Nullable Object b) {
    if (a == b) return true;
    if (a == null || b == null) return false;
    if (a instanceof byte[] x && b instanceof byte[] y) return Arrays.equals(x, y);
    if (a instanceof List<?> x && b instanceof List<?> y) {
      if (x.size() != y.size()) return false;
      for (int i = 0; i < x.size(); i++) {
        if (!deepEquals(x.get(i), y.get(i))) return false;
      }
      return true;
    }
    if (a instanceof Map<?, ?> x && b instanceof Map<?, ?> y) {
      if (x.size() != y.size()) return false;
      for (Map.Entry<?, ?> e : x.entrySet()) {
        if (!y.containsKey(e.getKey()) || !deepEquals(e.getValue(), y.get(e.getKey()))) {
          return false;
        }
      }
      return true;
    }
    return Objects.equals(a, b);
  }

  /** A readable form of decoded msgpack values ({@code byte[]} as hex). */
  static String toString(@Nullable Object v) {
    if (v instanceof byte[] b) return "0x" + HexFormat.of().formatHex(b);
    if (v instanceof String s) return '"' + s + '"';
    if (v instanceof List<?> l) {
      StringBuilder sb = new StringBuilder("[");
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) sb.append(", ");
        sb.append(toString(l.get(i)));
      }
      return sb.append(']').toString();
    }
    return String.valueOf(v);
  }

  /**
   * The multimodal hash of one extra key, or {@code null}: a 64-hex-digit string, alone or as the
   * first element of a pair, gives its first 16 hex digits as an unsigned 64-bit value.
   */
  static @Nullable Long mmHash(@Nullable Object key) {
    String id = null;
    if (key instanceof String s) {
      id = s;
    } else if (key instanceof List<?> l && !l.isEmpty() && l.get(0) instanceof String s) {
      id = s;
    }
    if (id == null || !isHexDigest(id)) {
      return null;
    }
    return Long.parseUnsignedLong(id, 0, 16, 16);
  }

  /** The start offset of a multimodal key within its block, or 0 when it has none. */
  static long mmOffset(@Nullable Object key) {
    if (key instanceof List<?> l && l.size() >= 2 && l.get(1) instanceof Long off) {
      return off;
    }
    return 0;
  }

  /**
   * The cache salt in a block's extra keys: the last string that is neither {@code loraName} nor a
   * multimodal identifier; {@code null} when there is none.
   */
  static @Nullable String cacheSalt(
      @Nullable List<@Nullable Object> keys, @Nullable String loraName) {
    if (keys == null) {
      return null;
    }
    String salt = null;
    for (Object k : keys) {
      if (k instanceof String s && !s.isEmpty() && !s.equals(loraName) && !isHexDigest(s)) {
        salt = s;
      }
    }
    return salt;
  }

  static boolean isHexDigest(String s) {
    if (s.length() != 64) {
      return false;
    }
    for (int i = 0; i < 64; i++) {
      char c = s.charAt(i);
      if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
        return false;
      }
    }
    return true;
  }
}
