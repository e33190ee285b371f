package io.kvrouter.tokenize;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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
 * model.merges, which only the Rust core needs; the model's type and dropout are kept). Writing follows Python's json.dumps with
 * ensure_ascii=False: separators ", " and ": " (or "," and ": " with an indent), control
 * characters as \\uXXXX, floats as Python's repr prints them; that is what transformers' tojson
 * filter prints. Stateless; safe from any thread.
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

  private Json() {}

  /** Parses a whole JSON document. */
  static Object parse(String text) throws IOException {
    return parse(text, Set.of());
  }

  /**
   * Parses a JSON document, skipping the values of the named fields of the objects one level below
   * the top (in tokenizer.json: the model's vocab and merges), which read as null.
   */
  static Object parse(String text, Set<String> skipSecondLevel) throws IOException {
    try (JsonParser p = FACTORY.createParser(text)) {
      JsonToken t = p.nextToken();
      if (t == null) {
        throw new IOException("empty document");
      }
      Object v = JsonValues.read(p, t, 0, skipSecondLevel);
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

  /** Writes a value as Python's {@code json.dumps(v, ensure_ascii=False)} would. */
  static String dumps(Object v) {
    StringBuilder sb = new StringBuilder();
    write(sb, v, -1, 0, false, ", ", ": ", false);
    return sb.toString();
  }

  /**
   * Python's {@code json.dumps} with the options transformers' {@code tojson} filter passes
   * through: {@code indent} (negative for none), {@code ensure_ascii}, {@code sort_keys} and {@code
   * separators} (null for the defaults).
   */
  static String dumps(
      Object v, int indent, boolean ensureAscii, boolean sortKeys, String itemSep, String keySep) {
    String is = itemSep != null ? itemSep : (indent >= 0 ? "," : ", ");
    String ks = keySep != null ? keySep : ": ";
    StringBuilder sb = new StringBuilder();
    write(sb, v, indent, 0, ensureAscii, is, ks, sortKeys);
    return sb.toString();
  }

  @SuppressWarnings("unchecked")
  private static void write(
      StringBuilder sb,
      Object v,
      int indent,
      int depth,
      boolean ascii,
      String itemSep,
      String keySep,
      boolean sortKeys) {
    if (v == null || v instanceof Py.Undefined) {
      sb.append("null");
    } else if (v instanceof String s) {
      quote(sb, s, ascii);
    } else if (v instanceof Boolean b) {
      sb.append(b ? "true" : "false");
    } else if (v instanceof Double d) {
      if (d.isNaN()) {
        sb.append("NaN");
      } else if (d.isInfinite()) {
        sb.append(d > 0 ? "Infinity" : "-Infinity");
      } else {
        sb.append(Py.floatRepr(d));
      }
    } else if (v instanceof Number n) {
      sb.append(n.toString());
    } else if (v instanceof List<?> l) {
      if (l.isEmpty()) {
        sb.append("[]");
        return;
      }
      sb.append('[');
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) {
          sb.append(itemSep);
        }
        newline(sb, indent, depth + 1);
        write(sb, l.get(i), indent, depth + 1, ascii, itemSep, keySep, sortKeys);
      }
      newline(sb, indent, depth);
      sb.append(']');
    } else if (v instanceof Map<?, ?> || v instanceof Py.Namespace) {
      Map<Object, Object> m =
          v instanceof Py.Namespace ns
              ? (Map<Object, Object>) (Map<?, ?>) ns.attrs
              : (Map<Object, Object>) v;
      if (m.isEmpty()) {
        sb.append("{}");
        return;
      }
      List<Object> keys = new ArrayList<>(m.keySet());
      if (sortKeys) {
        keys.sort((a, b) -> Py.compare(a, b));
      }
      sb.append('{');
      boolean first = true;
      for (Object k : keys) {
        if (!first) {
          sb.append(itemSep);
        }
        first = false;
        newline(sb, indent, depth + 1);
        quote(sb, k instanceof String s ? s : Py.str(k), ascii);
        sb.append(keySep);
        write(sb, m.get(k), indent, depth + 1, ascii, itemSep, keySep, sortKeys);
      }
      newline(sb, indent, depth);
      sb.append('}');
    } else {
      throw new Py.TemplateRuntimeException(
          "Object of type " + Py.typeName(v) + " is not JSON serializable");
    }
  }

  private static void newline(StringBuilder sb, int indent, int depth) {
    if (indent >= 0) {
      sb.append('\n');
      sb.append(" ".repeat(indent * depth));
    }
  }

  /** Appends a JSON string literal, escaped as Python's json module escapes. */
  static void quote(StringBuilder sb, String s, boolean ascii) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        case '\b' -> sb.append("\\b");
        case '\f' -> sb.append("\\f");
        default -> {
          if (c < 0x20 || (ascii && c > 0x7f)) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    sb.append('"');
  }
}
