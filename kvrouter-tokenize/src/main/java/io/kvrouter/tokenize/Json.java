package io.kvrouter.tokenize;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.util.Set;

/**
 * JSON as plain Java values: objects are {@code LinkedHashMap<String, Object>} (key order kept),
 * arrays {@code ArrayList<Object>}, strings, {@code Long} (or {@code BigInteger} past 64 bits),
 * {@code Double}, {@code Boolean} and {@code null}. The same values the chat templates see.
 *
 * <pre>
 * Implementation notes
 *
 * Parsing streams with jackson-core (no databind) through JsonValues (which the gateway also
 * reads request bodies with); a syntax error becomes an IOException whose
 * message carries jackson's line and column. parse(text, skip) skips the values of the named
 * fields of second-level objects without building them (tokenizer.json's model.vocab and
 * model.merges, which only the Rust core needs; the model's type and dropout are kept). Writing
 * (Python's json.dumps, as transformers' tojson filter prints) is the template runtime's:
 * io.kvrouter.tokenize.jinja.Py.jsonDumps. Stateless; safe from any thread.
 * </pre>
 */
final class Json {
  private static final JsonFactory FACTORY =
      JsonFactory.builder()
          .streamReadConstraints(
              StreamReadConstraints.builder()
                  .maxStringLength(Integer.MAX_VALUE)
                  .maxDocumentLength(-1)
                  .maxNestingDepth(10_000)
                  .build())
          .build();

  /**
   * The deepest a client's JSON value parsed here may nest (a tool call's {@code arguments}): as
   * deep as the gateway's request bodies, so that rendering it (a template's tojson, which
   * recurses) cannot overflow the stack.
   */
  static final int MAX_CLIENT_DEPTH = 200;

  private static final JsonFactory CLIENT_FACTORY =
      JsonFactory.builder()
          .streamReadConstraints(
              StreamReadConstraints.builder().maxNestingDepth(MAX_CLIENT_DEPTH).build())
          .build();

  private Json() {}

  /** Parses a whole JSON document a client sent (nesting at most {@link #MAX_CLIENT_DEPTH}). */
  static Object parseClient(String text) throws IOException {
    return parse(CLIENT_FACTORY, text, Set.of());
  }

  /** Parses a whole JSON document. */
  static Object parse(String text) throws IOException {
    return parse(text, Set.of());
  }

  /**
   * Parses a JSON document, skipping the values of the named fields of the objects one level below
   * the top (in tokenizer.json: the model's vocab and merges), which read as null.
   */
  static Object parse(String text, Set<String> skipSecondLevel) throws IOException {
    return parse(FACTORY, text, skipSecondLevel);
  }

  private static Object parse(JsonFactory factory, String text, Set<String> skipSecondLevel)
      throws IOException {
    try (JsonParser p = factory.createParser(text)) {
      JsonToken t = p.nextToken();
      if (t == null) {
        throw new IOException("empty document");
      }
      Object v = JsonValues.read(p, t, 0, skipSecondLevel, null);
      if (p.nextToken() != null) {
        throw new IOException(
            "trailing content after the JSON value " + where(p.currentLocation()));
      }
      return v;
    } catch (JsonProcessingException e) {
      throw new IOException(e.getOriginalMessage() + " " + where(e.getLocation()), e);
    }
  }

  static String where(JsonLocation loc) {
    return loc == null ? "" : "(line " + loc.getLineNr() + ", column " + loc.getColumnNr() + ")";
  }
}
