package io.kvrouter.server;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.TokenIds;
import io.kvrouter.transport.json.JsonTokens;
import io.kvrouter.transport.json.JsonU64;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * A reader of one JSON request body that is a flat object: the caller loops over its fields with
 * {@link #nextField()} and reads each value with a typed method; anything that does not fit is an
 * {@link ApiException} with status 400 whose message names the field and the line and column.
 *
 * <pre>
 * Implementation notes
 *
 * One instance per request, on the request's thread, over Jackson's streaming parser (no tree, no
 * databind). After nextField() returns true the parser stands on the field's value token; every
 * read method consumes exactly that value (skip() skips it whatever its shape). The top-level
 * token must be an object; after its END_OBJECT, end() checks that nothing follows. A known field
 * given twice is an error (the caller cannot tell which one the client meant).
 *
 * Numbers: u64 values accept 0..2^64-1 (kept as their 64-bit pattern) and negative values down
 * to -2^63 (signed bits), read by the event codec's JsonU64 so both accept the same numbers. Token
 * ids accept 0..2^32-1 (Jackson's INT or LONG token types) and are kept as int bits (DESIGN.md
 * §2). Floats, strings and anything beyond range are errors, never silently truncated.
 *
 * Jackson's own syntax errors (truncated input, bad tokens, nesting beyond the limit) surface as
 * JacksonException from any call; parse() turns them into the same 400 with the location.
 *
 * Fast path: Jackson spends most of a /query in token_ids (a 1,024-token prompt is ~6 KB of
 * digits: per number a text buffer copy, a type check and a conversion). prescanTokenIds reads a
 * well-formed top-level token_ids array straight from the bytes; Jackson then parses a copy of
 * the body with the array cut out to "[]". The scanner only accepts arrays Jackson would read as
 * the same values and gives up on anything else; and if the cut body fails in any way, the whole
 * body is parsed the ordinary way, so every error message and location is the ordinary one.
 * JsonBodyTest checks both paths against each other on random and adversarial bodies.
 * </pre>
 */
final class JsonBody {
  static final JsonFactory FACTORY =
      JsonFactory.builder()
          .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(64).build())
          .build();

  /** Reads a whole body into a value. */
  @FunctionalInterface
  interface Reader<T> {
    T read(JsonBody body) throws IOException;
  }

  private static final byte[] TOKEN_IDS = "token_ids".getBytes(StandardCharsets.US_ASCII);

  private final JsonParser p;
  private final Set<String> seen = new HashSet<>(8);
  private String field;
  private int @Nullable [] prescannedTokenIds; // token_ids read by prescanTokenIds, or null

  private JsonBody(JsonParser p) {
    this.p = p;
  }

  /**
   * Parses {@code body} with {@code reader}; every malformed or ill-typed input becomes a 400
   * {@link ApiException}.
   */
  static <T> T parse(byte[] body, Reader<T> reader) {
    return parse(body, false, reader);
  }

  /**
   * Like {@link #parse(byte[], Reader)}; with {@code tokenIds}, a top-level {@code token_ids} array
   * of plain decimal token ids is read by a fast scanner ({@link #prescanTokenIds}) and Jackson
   * parses the rest of the body with that array cut out. If that fails, the whole body is parsed
   * again the ordinary way, so that errors are exactly the ordinary ones: {@code reader} may run
   * twice and must have no side effects.
   */
  static <T> T parse(byte[] body, boolean tokenIds, Reader<T> reader) {
    if (body.length == 0) {
      throw ApiException.badRequest("the request body is empty; expected a JSON object");
    }
    Prescan pre = tokenIds ? prescanTokenIds(body) : null;
    if (pre != null) {
      int tail = body.length - pre.close() - 1;
      byte[] rest = new byte[pre.open() + 2 + tail];
      System.arraycopy(body, 0, rest, 0, pre.open());
      rest[pre.open()] = '[';
      rest[pre.open() + 1] = ']';
      System.arraycopy(body, pre.close() + 1, rest, pre.open() + 2, tail);
      try {
        return parse(rest, pre.values(), reader);
      } catch (ApiException e) {
        // fall through: the ordinary path gives the error with the body's own locations
      }
    }
    return parse(body, null, reader);
  }

  private static <T> T parse(byte[] body, int[] prescanned, Reader<T> reader) {
    try (JsonParser p = FACTORY.createParser(body)) {
      JsonBody b = new JsonBody(p);
      b.prescannedTokenIds = prescanned;
      try {
        JsonToken t = p.nextToken();
        if (t != JsonToken.START_OBJECT) {
          throw b.error("$", "expected a JSON object, found " + b.describe(t));
        }
        T value = reader.read(b);
        b.end();
        return value;
      } catch (JacksonException e) {
        JsonLocation at = e.getLocation() != null ? e.getLocation() : p.currentLocation();
        String what = e.getOriginalMessage();
        int cut = what == null ? -1 : what.indexOf('\n');
        if (cut >= 0) what = what.substring(0, cut);
        throw ApiException.badRequest(
            "malformed JSON: "
                + what
                + " (at line "
                + at.getLineNr()
                + ", column "
                + at.getColumnNr()
                + ")");
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e); // close() of an in-memory parser
    }
  }

  /**
   * Moves to the next field of the top-level object; returns false at its end. When true, the
   * parser stands on the field's value: read it or {@link #skip()} it.
   */
  boolean nextField() throws IOException {
    JsonToken t = p.nextToken();
    if (t == JsonToken.END_OBJECT) return false;
    // inside an object Jackson only yields FIELD_NAME or END_OBJECT (or throws)
    field = p.currentName();
    p.nextToken();
    return true;
  }

  /** The current field's name. */
  String name() {
    return field;
  }

  /** Marks the current (known) field as read; a second occurrence is an error. */
  private void once() {
    if (!seen.add(field)) {
      throw error(field, "duplicate field");
    }
  }

  /** Skips the current field's value, whatever its shape (unknown fields are ignored). */
  void skip() throws IOException {
    p.skipChildren();
  }

  /** A non-empty string. */
  String string() throws IOException {
    once();
    JsonToken t = p.currentToken();
    if (t != JsonToken.VALUE_STRING) {
      throw error(field, "expected a string, found " + describe(t));
    }
    String s = p.getText();
    if (s.isEmpty()) throw error(field, "must not be empty");
    return s;
  }

  /** A string, or null for JSON null. */
  String optString() throws IOException {
    if (p.currentToken() == JsonToken.VALUE_NULL) {
      once();
      return null;
    }
    return string();
  }

  /** A string that may be empty (a ZMQ topic: "" subscribes to every topic), or null. */
  String optStringOrEmpty() throws IOException {
    once();
    JsonToken t = p.currentToken();
    if (t == JsonToken.VALUE_NULL) return null;
    if (t != JsonToken.VALUE_STRING) {
      throw error(field, "expected a string, found " + describe(t));
    }
    return p.getText();
  }

  /** An unsigned 64-bit value (or a negative signed one) as its 64-bit pattern. */
  long u64() throws IOException {
    once();
    return u64Value(field);
  }

  /** An integer in {@code min..max}. */
  long integer(long min, long max) throws IOException {
    once();
    JsonToken t = p.currentToken();
    if (t != JsonToken.VALUE_NUMBER_INT || p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
      throw error(field, "expected an integer in " + min + ".." + max + ", found " + describe(t));
    }
    long v = p.getLongValue();
    if (v < min || v > max) {
      throw error(field, "expected an integer in " + min + ".." + max + ", found " + v);
    }
    return v;
  }

  /** An integer in {@code min..max}, or {@code absent} for JSON null. */
  long optInteger(long min, long max, long absent) throws IOException {
    if (p.currentToken() == JsonToken.VALUE_NULL) {
      once();
      return absent;
    }
    return integer(min, max);
  }

  /** An array of token ids in {@code 0..2^32-1}, as int bits. */
  int[] tokenIds() throws IOException {
    once();
    JsonToken t = p.currentToken();
    if (t != JsonToken.START_ARRAY) {
      throw error(field, "expected an array of token ids, found " + describe(t));
    }
    int[] pre = prescannedTokenIds;
    if (pre != null && field.equals("token_ids")) {
      prescannedTokenIds = null;
      if (p.nextToken() != JsonToken.END_ARRAY) {
        throw new IllegalStateException("token_ids was prescanned but is not cut out");
      }
      return pre;
    }
    int[] out = new int[256];
    int n = 0;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      long v;
      if (t == JsonToken.VALUE_NUMBER_INT) {
        JsonParser.NumberType nt = p.getNumberType();
        if (nt == JsonParser.NumberType.INT) {
          v = p.getIntValue();
        } else if (nt == JsonParser.NumberType.LONG) {
          v = p.getLongValue();
        } else {
          v = -1;
        }
        if (!TokenIds.isValid(v)) {
          throw error(
              field + "[" + n + "]", TokenIds.outOfRange(JsonTokens.abbreviate(p.getText())));
        }
      } else {
        throw error(
            field + "[" + n + "]", "expected a token id in 0..4294967295, found " + describe(t));
      }
      if (n == out.length) out = Arrays.copyOf(out, n * 2);
      out[n++] = (int) v;
    }
    return Arrays.copyOf(out, n);
  }

  /** A token_ids array read by {@link #prescanTokenIds}: its values and its brackets' offsets. */
  record Prescan(int[] values, int open, int close) {}

  /**
   * The fast path for the one large field of {@code /query} and {@code /route}: finds the top-level
   * field {@code "token_ids"} by a byte scan that follows strings (with escapes) and nesting, and
   * if its value is an array of plain decimal integers in {@code 0..2^32-1} (no sign, fraction,
   * exponent or leading zero) separated by commas and JSON whitespace, returns them with the
   * offsets of its brackets. Anything else (no such field, another shape, a value out of range,
   * malformed JSON) returns null. Never changes {@code b}.
   */
  static Prescan prescanTokenIds(byte[] b) {
    final int n = b.length;
    int i = skipWs(b, 0);
    if (i >= n || b[i] != '{') return null;
    int depth = 0;
    while (i < n) {
      byte c = b[i];
      if (c == '"') {
        int start = ++i;
        boolean escaped = false;
        while (i < n && b[i] != '"') {
          if (b[i] == '\\') {
            escaped = true;
            i++;
          }
          i++;
        }
        if (i >= n) return null;
        int end = i++;
        if (depth != 1) continue;
        int j = skipWs(b, i);
        if (j >= n || b[j] != ':') continue; // a value, not a key
        if (escaped || !Arrays.equals(b, start, end, TOKEN_IDS, 0, TOKEN_IDS.length)) {
          i = j + 1;
          continue;
        }
        j = skipWs(b, j + 1);
        return j < n && b[j] == '[' ? prescanArray(b, j) : null;
      } else if (c == '{' || c == '[') {
        depth++;
        i++;
      } else if (c == '}' || c == ']') {
        depth--;
        i++;
      } else {
        i++;
      }
    }
    return null;
  }

  /** Reads the u32 array whose '[' is at {@code open}; see {@link #prescanTokenIds}. */
  private static Prescan prescanArray(byte[] b, int open) {
    final int n = b.length;
    // the number of values if the array is well-formed: one more than its commas (sized exactly,
    // since a prompt's token array is most of a request's allocation)
    int commas = 0;
    int close = open + 1;
    while (close < n && b[close] != ']') {
      if (b[close] == ',') commas++;
      close++;
    }
    int[] out = new int[commas + 1];
    int count = 0;
    int i = skipWs(b, open + 1);
    if (i < n && b[i] == ']') return new Prescan(new int[0], open, i);
    while (true) {
      if (i >= n) return null;
      int d = b[i] - '0';
      if (d < 0 || d > 9) return null;
      long v = d;
      int digits = 1;
      i++;
      if (d == 0 && i < n && b[i] >= '0' && b[i] <= '9') return null; // leading zero
      while (i < n && (d = b[i] - '0') >= 0 && d <= 9) {
        if (++digits > 10) return null;
        v = v * 10 + d;
        i++;
      }
      if (!TokenIds.isValid(v) || count == out.length) return null;
      out[count++] = (int) v;
      i = skipWs(b, i);
      if (i >= n) return null;
      if (b[i] == ']') {
        return new Prescan(count == out.length ? out : Arrays.copyOf(out, count), open, i);
      }
      if (b[i] != ',') return null;
      i = skipWs(b, i + 1);
    }
  }

  private static int skipWs(byte[] b, int i) {
    while (i < b.length && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) i++;
    return i;
  }

  /** An array of u64 values (unsigned, or negative signed), as 64-bit patterns. */
  long[] u64Array() throws IOException {
    once();
    JsonToken t = p.currentToken();
    if (t != JsonToken.START_ARRAY) {
      throw error(field, "expected an array of unsigned 64-bit integers, found " + describe(t));
    }
    long[] out = new long[64];
    int n = 0;
    while (p.nextToken() != JsonToken.END_ARRAY) {
      long v = u64Value(field + "[" + n + "]");
      if (n == out.length) out = Arrays.copyOf(out, n * 2);
      out[n++] = v;
    }
    return Arrays.copyOf(out, n);
  }

  private long u64Value(String path) throws IOException {
    JsonToken t = p.currentToken();
    if (t != JsonToken.VALUE_NUMBER_INT) {
      throw error(path, "expected an unsigned 64-bit integer, found " + describe(t));
    }
    try {
      return JsonU64.read(p);
    } catch (JsonU64.OutOfRangeException e) {
      throw error(
          path,
          "integer "
              + JsonTokens.abbreviate(p.getText())
              + " is outside the 64-bit range "
              + JsonU64.RANGE);
    }
  }

  /** Checks that the top-level object is followed by nothing. */
  private void end() throws IOException {
    JsonToken t = p.nextToken();
    if (t != null) {
      throw error("$", "expected the end of the input after the object, found " + describe(t));
    }
  }

  /** The value of a required field, or a 400 naming it. */
  static <T> T require(T value, String name) {
    if (value == null) {
      throw ApiException.badRequest(name + ": missing required field");
    }
    return value;
  }

  ApiException error(String path, String problem) {
    JsonLocation at = p.currentTokenLocation();
    return ApiException.badRequest(
        path
            + ": "
            + problem
            + " (at line "
            + at.getLineNr()
            + ", column "
            + at.getColumnNr()
            + ")");
  }

  private String describe(JsonToken t) throws IOException {
    return t == null ? "the end of the input" : JsonTokens.describe(p, t);
  }
}
