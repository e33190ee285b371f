package io.kvrouter.server.http;

import java.util.Locale;

/**
 * Strict UTF-8 validation of JSON request bodies (RFC 3629, RFC 8259): overlong encodings, UTF-16
 * surrogates encoded as UTF-8 (CESU-8), code points beyond U+10FFFF, stray continuation bytes and
 * truncated sequences are all malformed, and so is a NUL byte, which no JSON text holds raw (it is
 * how a UTF-16 or UTF-32 body shows). Jackson decodes such bytes leniently (an overlong {@code C0
 * AF} is read as {@code /}), so bodies are checked here first.
 *
 * <pre>
 * Implementation notes
 *
 * One pass over the bytes, no allocation unless the body is malformed; runs of ASCII (the common
 * case: JSON keys and digits) cost one comparison per byte. The table of well-formed sequences is
 * RFC 3629 section 4: after the lead bytes E0, ED, F0 and F4 the second byte has a narrower
 * range, which is what excludes overlong forms, surrogates and values past U+10FFFF. Stateless.
 * </pre>
 */
public final class Utf8 {
  private Utf8() {}

  /**
   * Null when {@code b[0..len)} is well-formed UTF-8; else a sentence naming the byte offset of the
   * first malformed sequence and what is wrong with it.
   */
  public static String check(byte[] b, int len) {
    int i = 0;
    while (i < len) {
      if (b[i] > 0) {
        i++;
        continue;
      }
      if (b[i] == 0) {
        // well-formed UTF-8, but never in a JSON text (a control character is written escaped):
        // a UTF-16 or UTF-32 body, which Jackson would otherwise detect and read
        return problem(
            b, i, "is a NUL, which JSON never holds unescaped (a UTF-16 or UTF-32 body?)");
      }
      int c = b[i] & 0xff;
      int need;
      int lo = 0x80;
      int hi = 0xbf;
      if (c < 0xc0) return problem(b, i, "is a continuation byte without a lead byte");
      if (c < 0xc2) return problem(b, i, "starts an overlong encoding");
      if (c < 0xe0) {
        need = 1;
      } else if (c < 0xf0) {
        need = 2;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
      } else if (c < 0xf5) {
        need = 3;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
      } else {
        return problem(b, i, "never appears in UTF-8");
      }
      for (int k = 1; k <= need; k++) {
        if (i + k >= len) return problem(b, i, "starts a sequence the body ends inside");
        int d = b[i + k] & 0xff;
        if (d < 0x80 || d > 0xbf) return problem(b, i, "starts a sequence cut short");
        if (k == 1 && (d < lo || d > hi)) {
          String why =
              c == 0xed
                  ? "starts a UTF-16 surrogate encoded as UTF-8 (CESU-8)"
                  : c == 0xf4
                      ? "starts a code point beyond U+10FFFF"
                      : "starts an overlong encoding";
          return problem(b, i, why);
        }
      }
      i += need + 1;
    }
    return null;
  }

  private static String problem(byte[] b, int at, String why) {
    return String.format(
        Locale.ROOT,
        "the request body is not valid UTF-8: byte 0x%02X at offset %d %s",
        b[at] & 0xff,
        at,
        why);
  }
}
