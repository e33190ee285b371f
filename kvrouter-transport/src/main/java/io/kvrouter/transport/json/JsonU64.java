package io.kvrouter.transport.json;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;

/**
 * Reads a JSON integer token as a u64 in kvrouter's wire convention (DESIGN.md §2): non-negative
 * values up to 2^64-1 are taken as unsigned, negative values down to -2^63 as signed, and either
 * way the result is the 64-bit pattern ({@code -1} and {@code 18446744073709551615} give the same
 * bits). Used by the event codec and by the server's request bodies, so both accept exactly the
 * same numbers.
 */
public final class JsonU64 {
  /*
   * Implementation notes
   *
   * Parses the token's characters in place (getTextCharacters: no String, no BigInteger), which
   * Jackson guarantees to be "-"? followed by decimal digits for a VALUE_NUMBER_INT token (no
   * leading "+", no leading zeros, with the default parser features). Overflow is detected per
   * digit: for the unsigned path by comparing against (2^64-1)/10 and checking that adding the
   * digit did not wrap; for the signed path by staying >= Long.MIN_VALUE while accumulating
   * negatively. The caller turns OUT_OF_RANGE into its own error type and message.
   */

  /** The accepted range, as error messages print it. */
  public static final String RANGE = "[-9223372036854775808, 18446744073709551615]";

  private static final long U64_MAX_DIV_10 = Long.divideUnsigned(-1L, 10);

  private JsonU64() {}

  /** Thrown by {@link #read} for an integer outside {@link #RANGE}; carries no stack trace. */
  public static final class OutOfRangeException extends Exception {
    private static final long serialVersionUID = 1L;

    private OutOfRangeException() {
      super("integer outside the 64-bit range " + RANGE, null, false, false);
    }
  }

  @SuppressWarnings("StaticAssignmentOfThrowable") // stackless and shared: no allocation per value
  private static final OutOfRangeException OUT_OF_RANGE = new OutOfRangeException();

  /**
   * The 64-bit pattern of the integer token the parser stands on.
   *
   * @throws IllegalStateException when the current token is not {@link JsonToken#VALUE_NUMBER_INT}
   *     (callers check the type first, to name what they expected)
   * @throws OutOfRangeException when the value is below -2^63 or above 2^64-1
   */
  public static long read(JsonParser p) throws IOException, OutOfRangeException {
    if (p.currentToken() != JsonToken.VALUE_NUMBER_INT) {
      throw new IllegalStateException("not on an integer token: " + p.currentToken());
    }
    final char[] cs = p.getTextCharacters();
    int i = p.getTextOffset();
    final int end = i + p.getTextLength();
    long v = 0;
    if (cs[i] == '-') {
      for (i++; i < end; i++) {
        int d = cs[i] - '0';
        if (v < Long.MIN_VALUE / 10 || (v *= 10) < Long.MIN_VALUE + d) {
          throw OUT_OF_RANGE;
        }
        v -= d;
      }
    } else {
      for (; i < end; i++) {
        int d = cs[i] - '0';
        if (Long.compareUnsigned(v, U64_MAX_DIV_10) > 0) {
          throw OUT_OF_RANGE;
        }
        long next = v * 10 + d;
        if (Long.compareUnsigned(next, v * 10) < 0) {
          throw OUT_OF_RANGE;
        }
        v = next;
      }
    }
    return v;
  }
}
