package io.kvrouter.transport.fuzz;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * Seeded mutations of JSON documents (test support for the decoder fuzz tests): truncation,
 * deletion, insertion of tokens from a dictionary of troublemakers, character changes, type
 * confusion (a value after a colon replaced by one of another type), splicing of two seeds, huge
 * numbers, deep nesting (up to 100,000 brackets), huge arrays, duplicated fields, and raw bytes
 * that are not UTF-8.
 */
public final class JsonMutator {
  /*
   * Implementation notes
   *
   * Text-level on purpose: the decoders must cope with documents a JSON library would never
   * write. A mutation is a pure function of (seeds, Random). The same class is copied in
   * kvrouter-server's tests as io.kvrouter.server.JsonMutator (no test jar between modules); keep the two alike.
   */

  /** Tokens that break types, ranges, nesting or encoding. */
  private static final String[] TOKENS = {
    "null",
    "true",
    "false",
    "-1",
    "0",
    "-0",
    "1.5",
    "1e400",
    "-1e-400",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "[[[[",
    "]]]]",
    "{{",
    "}",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "4294967295",
    "4294967296",
    "99999999999999999999999999999999999999999999",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"\\uZZZZ\"",
    "\u00e9",
    "\u0000",
    "0x10",
    "NaN",
    "Infinity",
    "+1",
    "01",
    "/*c*/",
    "\n",
    "\"cleared\"",
    "\"stored\"",
    "{\"cleared\":null}",
    "\"worker_id\":1,",
    "\"event\":{},"
  };

  private final List<String> seeds;
  private final Random rnd;

  public JsonMutator(List<String> seeds, Random rnd) {
    if (seeds.isEmpty()) throw new IllegalArgumentException("no seeds");
    this.seeds = List.copyOf(seeds);
    this.rnd = rnd;
  }

  public String seed() {
    return seeds.get(rnd.nextInt(seeds.size()));
  }

  /** One to three mutations of a random seed, as UTF-8 bytes (sometimes not valid UTF-8). */
  public byte[] next() {
    String s = seed();
    int n = 1 + rnd.nextInt(3);
    for (int i = 0; i < n; i++) s = mutate(s);
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    if (rnd.nextInt(20) == 0 && b.length > 0) {
      // bytes that are not UTF-8: a lone continuation byte, an overlong form, 0xff
      b = b.clone();
      b[rnd.nextInt(b.length)] = (byte) new int[] {0x80, 0xc0, 0xff, 0xed, 0xf8}[rnd.nextInt(5)];
    }
    return b;
  }

  private static final String[] KINDS = {
    "truncate",
    "delete",
    "insert token",
    "set char",
    "type confusion",
    "splice",
    "huge number",
    "deep nesting",
    "huge array",
    "duplicate field"
  };

  public String mutate(String s) {
    return mutate(s, rnd.nextInt(KINDS.length));
  }

  public String mutate(String s, int kind) {
    StringBuilder sb = new StringBuilder(s);
    int n = sb.length();
    switch (kind) {
      case 0 -> sb.setLength(n == 0 ? 0 : rnd.nextInt(n));
      case 1 -> {
        if (n > 0) {
          int at = rnd.nextInt(n);
          sb.delete(at, Math.min(n, at + 1 + rnd.nextInt(8)));
        }
      }
      case 2 -> sb.insert(rnd.nextInt(n + 1), TOKENS[rnd.nextInt(TOKENS.length)]);
      case 3 -> {
        if (n > 0) sb.setCharAt(rnd.nextInt(n), (char) (32 + rnd.nextInt(95)));
      }
      case 4 -> {
        int colon = n == 0 ? -1 : sb.indexOf(":", rnd.nextInt(n));
        if (colon < 0) colon = sb.indexOf(":");
        if (colon >= 0) {
          int end = valueEnd(sb, colon + 1);
          sb.replace(colon + 1, end, TOKENS[rnd.nextInt(TOKENS.length)]);
        }
      }
      case 5 -> {
        String other = seed();
        int cut = rnd.nextInt(n + 1);
        sb.setLength(cut);
        sb.append(other, rnd.nextInt(other.length() + 1), other.length());
      }
      case 6 -> {
        // a number of 20..2,000 digits in place of a value, or appended to a digit
        char[] digits = new char[20 + rnd.nextInt(1980)];
        Arrays.fill(digits, (char) ('1' + rnd.nextInt(9)));
        int colon = n == 0 ? -1 : sb.indexOf(":", rnd.nextInt(n));
        if (colon >= 0) {
          sb.replace(colon + 1, valueEnd(sb, colon + 1), new String(digits));
        } else {
          sb.insert(rnd.nextInt(n + 1), digits);
        }
      }
      case 7 -> {
        // mostly around Jackson's nesting limit (1,000), sometimes up to 100,000 levels
        int depth = rnd.nextInt(32) == 0 ? 1 + rnd.nextInt(100_000) : 1 + rnd.nextInt(1100);
        String open = rnd.nextBoolean() ? "[" : "{\"a\":";
        int at = rnd.nextInt(n + 1);
        String nest = open.repeat(depth);
        if (rnd.nextBoolean()) {
          String close = open.equals("[") ? "]" : "}";
          sb.insert(at, nest + "1" + close.repeat(depth) + ",");
        } else {
          sb.insert(at, nest);
        }
      }
      case 8 -> {
        // many small integers (or block objects) at the start of an array
        int open = n == 0 ? -1 : sb.indexOf("[", rnd.nextInt(n));
        if (open < 0) open = sb.indexOf("[");
        if (open >= 0) {
          // mostly up to 1,000 elements, sometimes up to 100,000 (a few MB)
          int count = rnd.nextInt(32) == 0 ? 1000 + rnd.nextInt(99_000) : 1 + rnd.nextInt(1000);
          StringBuilder arr = new StringBuilder(count * 4);
          String item = rnd.nextBoolean() ? "7" : "{\"block_hash\":1,\"tokens_hash\":2}";
          for (int i = 0; i < count; i++) arr.append(i == 0 ? "" : ",").append(item);
          sb.insert(open + 1, arr.append(rnd.nextBoolean() ? "," : ""));
        }
      }
      default -> {
        // repeat one "name":value pair right after itself
        int q = n == 0 ? -1 : sb.indexOf("\":", rnd.nextInt(n));
        if (q < 0) q = sb.indexOf("\":");
        if (q >= 0) {
          int start = sb.lastIndexOf("\"", q - 1);
          int end = valueEnd(sb, q + 2);
          if (start >= 0) sb.insert(end, "," + sb.substring(start, end));
        }
      }
    }
    return sb.toString();
  }

  /**
   * The end of the (flat or nested) value starting at {@code from}: the next , } or ] at depth 0.
   */
  private static int valueEnd(StringBuilder sb, int from) {
    int depth = 0;
    boolean inString = false;
    for (int i = from; i < sb.length(); i++) {
      char c = sb.charAt(i);
      if (inString) {
        if (c == '\\') i++;
        else if (c == '"') inString = false;
      } else if (c == '"') {
        inString = true;
      } else if (c == '{' || c == '[') {
        depth++;
      } else if (c == '}' || c == ']') {
        if (depth == 0) return i;
        depth--;
      } else if (c == ',' && depth == 0) {
        return i;
      }
    }
    return sb.length();
  }
}
