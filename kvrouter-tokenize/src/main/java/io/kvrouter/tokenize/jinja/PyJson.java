package io.kvrouter.tokenize.jinja;

import io.kvrouter.tokenize.jinja.Py.Namespace;
import io.kvrouter.tokenize.jinja.Py.TemplateRuntimeException;
import io.kvrouter.tokenize.jinja.Py.Undefined;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Python's {@code json.dumps} over the template runtime's values: what transformers' {@code tojson}
 * filter prints, and (through {@link Py#jsonDumps}) the bodies the tokenizer sends to an engine.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: none; values are the runtime's plain Java objects (see Py), plus Undefined (written
 * as null) and Namespace (written as its attributes, an object). Written recursively into one
 * StringBuilder, following json.dumps with ensure_ascii=False by default: separators ", " and
 * ": " (or "," and ": " with an indent), control characters as \\uXXXX, floats as Python's repr
 * prints them, NaN and Infinity as Python writes them. A value JSON cannot hold is a
 * TemplateRuntimeException naming its Python type. Who calls: the tojson filter on a render's
 * thread, and Py.jsonDumps; stateless, so safe from any thread.
 * </pre>
 */
final class PyJson {
  private PyJson() {}

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
    if (v == null || v instanceof Undefined) {
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
    } else if (v instanceof Map<?, ?> || v instanceof Namespace) {
      Map<Object, Object> m =
          v instanceof Namespace ns
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
      throw new TemplateRuntimeException(
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
