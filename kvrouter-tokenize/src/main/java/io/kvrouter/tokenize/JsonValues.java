package io.kvrouter.tokenize;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Reads JSON values from a jackson-core parser as the chat templates take them ({@link
 * ChatRequest}'s messages, tools and template arguments): objects as {@code LinkedHashMap<String,
 * Object>} (key order kept), arrays as {@code ArrayList<Object>}, strings, {@code Long} (or {@code
 * BigInteger} past 64 bits), {@code Double}, {@code Boolean} and {@code null}. Recursive; the
 * parser's factory bounds the nesting depth, and an optional {@link Budget} the values built (an
 * empty object costs some 70 bytes of heap for its 2 bytes of JSON). Stateless; safe from any
 * thread.
 */
public final class JsonValues {
  private JsonValues() {}

  /**
   * The value at the parser's current token, read whole; the parser is left on the value's last
   * token.
   *
   * @throws IOException what the parser throws on malformed input
   */
  public static Object read(JsonParser p) throws IOException {
    return read(p, p.currentToken(), 0, Set.of(), null);
  }

  /**
   * As {@link #read(JsonParser)}, counting every value built (objects, arrays, their members and
   * scalars) against {@code budget}, which the reads of one request share.
   *
   * @throws TooManyValues as soon as the budget's limit is passed (nothing more is built)
   */
  public static Object read(JsonParser p, Budget budget) throws IOException {
    return read(p, p.currentToken(), 0, Set.of(), budget);
  }

  /** The values a request's reads may build: a count and its limit; one per request thread. */
  public static final class Budget {
    private final long limit;
    private long used;

    public Budget(long limit) {
      this.limit = limit;
    }

    public long limit() {
      return limit;
    }

    /** The values built so far. */
    public long used() {
      return used;
    }

    void take(JsonParser p) throws TooManyValues {
      if (++used > limit) throw new TooManyValues(limit, p);
    }
  }

  /** The reads built more values than their {@link Budget} allows. */
  public static final class TooManyValues extends IOException {
    private static final long serialVersionUID = 1L;

    TooManyValues(long limit, JsonParser p) {
      super("more than " + limit + " JSON values " + Json.where(p.currentLocation()));
    }
  }

  /**
   * The value starting at {@code t} (the parser's current token), {@code depth} levels below the
   * top; the values of the fields named in {@code skip} of objects one level below the top are
   * skipped and read as null.
   */
  static Object read(JsonParser p, JsonToken t, int depth, Set<String> skip, Budget budget)
      throws IOException {
    if (budget != null) budget.take(p);
    switch (t) {
      case START_OBJECT -> {
        Map<String, Object> m = new LinkedHashMap<>();
        while ((t = p.nextToken()) != JsonToken.END_OBJECT) {
          String name = p.currentName();
          JsonToken v = p.nextToken();
          if (depth == 1 && skip.contains(name)) {
            p.skipChildren();
            m.put(name, null);
          } else {
            m.put(name, read(p, v, depth + 1, skip, budget));
          }
        }
        return m;
      }
      case START_ARRAY -> {
        List<Object> l = new ArrayList<>();
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
          l.add(read(p, t, depth + 1, skip, budget));
        }
        return l;
      }
      case VALUE_STRING -> {
        return p.getText();
      }
      case VALUE_NUMBER_INT -> {
        return switch (p.getNumberType()) {
          case INT, LONG -> p.getLongValue();
          default -> {
            BigInteger b = p.getBigIntegerValue();
            yield b.bitLength() < 64 ? (Object) b.longValue() : b;
          }
        };
      }
      case VALUE_NUMBER_FLOAT -> {
        return p.getDoubleValue();
      }
      case VALUE_TRUE -> {
        return Boolean.TRUE;
      }
      case VALUE_FALSE -> {
        return Boolean.FALSE;
      }
      case VALUE_NULL -> {
        return null;
      }
      default ->
          throw new IOException("unexpected token " + t + " " + Json.where(p.currentLocation()));
    }
  }
}
