package io.kvrouter.tokenize.jinja;

import static java.util.Map.entry;

import io.kvrouter.tokenize.jinja.Py.TemplateRuntimeException;
import io.kvrouter.tokenize.jinja.Py.Undefined;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Jinja2's builtin filters that chat templates use, plus transformers' {@code tojson} (Python's
 * {@code json.dumps}, no HTML escaping). An unknown filter is an error, as in Jinja2 (where it
 * fails at compile time).
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: FILTERS maps each filter name (aliases included: e, escape, forceescape; d; count)
 * to its function, built once when the class loads and never changed (an immutable Map.ofEntries,
 * so a null name is a NullPointerException, as a switch over it was). A filter takes the value,
 * its positional arguments and its keyword arguments (arg() reads one by position or name, with a
 * default); values are the runtime's (see Py). Who calls: Interpreter.applyFilter on a render's
 * thread, and the map filter for its named filter. Stateless; safe from any thread.
 * </pre>
 */
final class Filters {
  private Filters() {}

  /** One filter: the value, positional and keyword arguments, to the result. */
  @FunctionalInterface
  private interface Fn {
    Object apply(Object v, List<Object> args, Map<String, Object> kw);
  }

  private static final Map<String, Fn> FILTERS =
      Map.ofEntries(
          entry("safe", (v, a, k) -> v),
          entry("e", Filters::escape),
          entry("escape", Filters::escape),
          entry("forceescape", Filters::escape),
          entry("tojson", Filters::tojson),
          entry(
              "trim",
              (v, a, k) ->
                  StrMethods.strip(Py.str(v), (String) arg(a, k, 0, "chars", null), true, true)),
          entry("length", (v, a, k) -> Py.len(v)),
          entry("count", (v, a, k) -> Py.len(v)),
          entry("string", (v, a, k) -> Py.str(v)),
          entry("lower", (v, a, k) -> Py.str(v).toLowerCase(Locale.ROOT)),
          entry("upper", (v, a, k) -> Py.str(v).toUpperCase(Locale.ROOT)),
          entry(
              "capitalize",
              (v, a, k) -> StrMethods.call(Py.str(v), "capitalize", List.of(), Map.of())),
          entry("title", (v, a, k) -> StrMethods.call(Py.str(v), "title", List.of(), Map.of())),
          entry("replace", Filters::replace),
          entry("default", Filters::defaultValue),
          entry("d", Filters::defaultValue),
          entry("first", Filters::first),
          entry("last", Filters::last),
          entry("list", (v, a, k) -> new ArrayList<>(Py.iterate(v))),
          entry("reverse", Filters::reverse),
          entry("join", Filters::join),
          entry("int", Filters::toInt),
          entry("float", Filters::toFloat),
          entry("abs", Filters::abs),
          entry("round", Filters::round),
          entry("items", Filters::items),
          entry("dictsort", Filters::dictsort),
          entry("sort", Filters::sort),
          entry("unique", Filters::unique),
          entry("map", Filters::map),
          entry("select", (v, a, k) -> select(v, a, false, true)),
          entry("reject", (v, a, k) -> select(v, a, false, false)),
          entry("selectattr", (v, a, k) -> select(v, a, true, true)),
          entry("rejectattr", (v, a, k) -> select(v, a, true, false)),
          entry("attr", (v, a, k) -> Py.getattr(v, Py.str(a.get(0)))),
          entry("sum", Filters::sum),
          entry("min", (v, a, k) -> extreme(v, true)),
          entry("max", (v, a, k) -> extreme(v, false)),
          entry("indent", Filters::indent),
          entry("center", Filters::center),
          entry("wordcount", (v, a, k) -> (long) StrMethods.split(Py.str(v), null, -1).size()),
          entry("batch", Filters::batch),
          entry("truncate", Filters::truncate),
          entry("pprint", (v, a, k) -> Py.repr(v)),
          entry("format", Filters::percentFormat),
          entry("groupby", Filters::groupby));

  /**
   * Applies the filter {@code name} to {@code v}.
   *
   * @throws TemplateRuntimeException when there is no such filter, or it fails
   */
  static Object apply(String name, Object v, List<Object> args, Map<String, Object> kw) {
    Fn f = FILTERS.get(name);
    if (f == null) {
      throw new TemplateRuntimeException("no filter named '" + name + "'");
    }
    return f.apply(v, args, kw);
  }

  private static Object arg(
      List<Object> args, Map<String, Object> kw, int i, String name, Object dflt) {
    if (i < args.size()) {
      return args.get(i);
    }
    return kw.getOrDefault(name, dflt);
  }

  private static Object escape(Object v, List<Object> args, Map<String, Object> kw) {
    return Py.str(v)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\"", "&#34;")
        .replace("'", "&#39;");
  }

  private static Object tojson(Object v, List<Object> args, Map<String, Object> kw) {
    Object indent = arg(args, kw, 0, "indent", null);
    Object seps = kw.get("separators");
    String is = null, ks = null;
    if (seps instanceof List<?> l && l.size() == 2) {
      is = (String) l.get(0);
      ks = (String) l.get(1);
    }
    return PyJson.dumps(
        v,
        indent == null ? -1 : ((Number) indent).intValue(),
        Py.truthy(kw.getOrDefault("ensure_ascii", false)),
        Py.truthy(kw.getOrDefault("sort_keys", false)),
        is,
        ks);
  }

  private static Object replace(Object v, List<Object> args, Map<String, Object> kw) {
    List<Object> a = new ArrayList<>();
    a.add(arg(args, kw, 0, "old", ""));
    a.add(arg(args, kw, 1, "new", ""));
    Object count = arg(args, kw, 2, "count", null);
    if (count != null) {
      a.add(count);
    }
    return StrMethods.call(Py.str(v), "replace", a, Map.of());
  }

  private static Object defaultValue(Object v, List<Object> args, Map<String, Object> kw) {
    Object dflt = arg(args, kw, 0, "default_value", "");
    boolean bool = Py.truthy(arg(args, kw, 1, "boolean", false));
    if (v instanceof Undefined || (bool && !Py.truthy(v))) {
      return dflt;
    }
    return v;
  }

  private static Object first(Object v, List<Object> args, Map<String, Object> kw) {
    List<Object> l = Py.iterate(v);
    return l.isEmpty() ? new Undefined("first item of an empty sequence") : l.get(0);
  }

  private static Object last(Object v, List<Object> args, Map<String, Object> kw) {
    List<Object> l = Py.iterate(v);
    return l.isEmpty() ? new Undefined("last item of an empty sequence") : l.get(l.size() - 1);
  }

  private static Object reverse(Object v, List<Object> args, Map<String, Object> kw) {
    if (v instanceof String s) {
      return new StringBuilder(s).reverse().toString();
    }
    List<Object> l = new ArrayList<>(Py.iterate(v));
    Collections.reverse(l);
    return l;
  }

  private static Object join(Object v, List<Object> args, Map<String, Object> kw) {
    String sep = Py.str(arg(args, kw, 0, "d", ""));
    Object attr = arg(args, kw, 1, "attribute", null);
    StringBuilder sb = new StringBuilder();
    boolean first = true;
    for (Object o : Py.iterate(v)) {
      if (!first) {
        sb.append(sep);
      }
      first = false;
      sb.append(Py.str(attr == null ? o : attribute(o, attr)));
    }
    return sb.toString();
  }

  private static Object toInt(Object v, List<Object> args, Map<String, Object> kw) {
    Object dflt = arg(args, kw, 0, "default", 0L);
    if (v instanceof Long || v instanceof Boolean) {
      return v instanceof Boolean b ? (b ? 1L : 0L) : v;
    }
    if (v instanceof Double d) {
      return (long) (double) d;
    }
    try {
      return Long.parseLong(Py.str(v).strip());
    } catch (NumberFormatException ex) {
      try {
        return (long) Double.parseDouble(Py.str(v).strip());
      } catch (NumberFormatException ex2) {
        return dflt;
      }
    }
  }

  private static Object toFloat(Object v, List<Object> args, Map<String, Object> kw) {
    Object dflt = arg(args, kw, 0, "default", 0.0);
    if (v instanceof Number n) {
      return n.doubleValue();
    }
    try {
      return Double.parseDouble(Py.str(v).strip());
    } catch (NumberFormatException ex) {
      return dflt;
    }
  }

  private static Object abs(Object v, List<Object> args, Map<String, Object> kw) {
    if (v instanceof Long l) {
      return Math.abs(l);
    }
    return Math.abs(((Number) v).doubleValue());
  }

  private static Object round(Object v, List<Object> args, Map<String, Object> kw) {
    long precision = ((Number) arg(args, kw, 0, "precision", 0L)).longValue();
    String method = (String) arg(args, kw, 1, "method", "common");
    double x = ((Number) v).doubleValue() * Math.pow(10, precision);
    double r =
        switch (method) {
          case "ceil" -> Math.ceil(x);
          case "floor" -> Math.floor(x);
          default -> Math.signum(x) * Math.floor(Math.abs(x) + 0.5);
        };
    return r / Math.pow(10, precision);
  }

  /** A mapping's (key, value) pairs as two-item lists, in its order. */
  private static List<Object> pairs(Map<?, ?> m) {
    List<Object> r = new ArrayList<>();
    m.forEach(
        (k, x) -> {
          List<Object> p = new ArrayList<>(2);
          p.add(k);
          p.add(x);
          r.add(p);
        });
    return r;
  }

  private static Object items(Object v, List<Object> args, Map<String, Object> kw) {
    if (v instanceof Undefined) {
      return List.of();
    }
    if (!(v instanceof Map<?, ?> m)) {
      throw new TemplateRuntimeException("items filter needs a mapping, got " + Py.typeName(v));
    }
    return pairs(m);
  }

  private static Object dictsort(Object v, List<Object> args, Map<String, Object> kw) {
    if (!(v instanceof Map<?, ?> m)) {
      throw new TemplateRuntimeException("dictsort needs a mapping, got " + Py.typeName(v));
    }
    boolean byValue = "value".equals(arg(args, kw, 1, "by", "key"));
    boolean reverse = Py.truthy(arg(args, kw, 2, "reverse", false));
    List<Object> r = pairs(m);
    r.sort(
        (a, b) -> {
          Object x = ((List<?>) a).get(byValue ? 1 : 0), y = ((List<?>) b).get(byValue ? 1 : 0);
          int c = Py.compare(lowerIfString(x), lowerIfString(y));
          return reverse ? -c : c;
        });
    return r;
  }

  private static Object sort(Object v, List<Object> args, Map<String, Object> kw) {
    boolean reverse = Py.truthy(arg(args, kw, 0, "reverse", false));
    boolean caseSensitive = Py.truthy(arg(args, kw, 1, "case_sensitive", false));
    Object attr = arg(args, kw, 2, "attribute", null);
    List<Object> l = new ArrayList<>(Py.iterate(v));
    l.sort(
        (a, b) -> {
          Object x = attr == null ? a : attribute(a, attr),
              y = attr == null ? b : attribute(b, attr);
          if (!caseSensitive) {
            x = lowerIfString(x);
            y = lowerIfString(y);
          }
          int c = Py.compare(x, y);
          return reverse ? -c : c;
        });
    return l;
  }

  private static Object unique(Object v, List<Object> args, Map<String, Object> kw) {
    List<Object> out = new ArrayList<>();
    for (Object o : Py.iterate(v)) {
      boolean seen = false;
      for (Object x : out) {
        if (Py.eq(lowerIfString(x), lowerIfString(o))) {
          seen = true;
          break;
        }
      }
      if (!seen) {
        out.add(o);
      }
    }
    return out;
  }

  private static Object map(Object v, List<Object> args, Map<String, Object> kw) {
    List<Object> out = new ArrayList<>();
    Object attr = kw.get("attribute");
    if (attr != null) {
      Object dflt = kw.get("default");
      for (Object o : Py.iterate(v)) {
        Object x = attribute(o, attr);
        out.add(x instanceof Undefined && dflt != null ? dflt : x);
      }
      return out;
    }
    if (args.isEmpty()) {
      throw new TemplateRuntimeException("map needs a filter name or attribute=");
    }
    String f = (String) args.get(0);
    List<Object> rest = args.subList(1, args.size());
    for (Object o : Py.iterate(v)) {
      out.add(apply(f, o, rest, Map.of()));
    }
    return out;
  }

  /**
   * select ({@code keep}) and reject, and with {@code attrMode} selectattr and rejectattr (whose
   * first argument names the attribute): the items whose value passes the test (or is true).
   */
  private static Object select(Object v, List<Object> args, boolean attrMode, boolean keep) {
    List<Object> out = new ArrayList<>();
    int i = 0;
    Object attr = null;
    if (attrMode) {
      attr = args.get(0);
      i = 1;
    }
    String test = i < args.size() ? (String) args.get(i) : null;
    List<Object> testArgs = i + 1 < args.size() ? args.subList(i + 1, args.size()) : List.of();
    for (Object o : Py.iterate(v)) {
      Object x = attrMode ? attribute(o, attr) : o;
      boolean r = test == null ? Py.truthy(x) : Predicates.test(test, x, testArgs);
      if (r == keep) {
        out.add(o);
      }
    }
    return out;
  }

  private static Object sum(Object v, List<Object> args, Map<String, Object> kw) {
    Object attr = arg(args, kw, 0, "attribute", null);
    Object total = arg(args, kw, 1, "start", 0L);
    for (Object o : Py.iterate(v)) {
      total = Py.add(total, attr == null ? o : attribute(o, attr));
    }
    return total;
  }

  /** min ({@code min} true) or max, comparing strings case-insensitively. */
  private static Object extreme(Object v, boolean min) {
    List<Object> l = Py.iterate(v);
    if (l.isEmpty()) {
      return new Undefined("min/max of an empty sequence");
    }
    Object best = l.get(0);
    for (Object o : l) {
      int c = Py.compare(lowerIfString(o), lowerIfString(best));
      if (min ? c < 0 : c > 0) {
        best = o;
      }
    }
    return best;
  }

  private static Object indent(Object v, List<Object> args, Map<String, Object> kw) {
    Object width = arg(args, kw, 0, "width", 4L);
    boolean first = Py.truthy(arg(args, kw, 1, "first", false));
    boolean blank = Py.truthy(arg(args, kw, 2, "blank", false));
    String pad = width instanceof String s ? s : " ".repeat(((Number) width).intValue());
    String s = Py.str(v);
    String[] lines = s.split("\n", -1);
    StringBuilder sb = new StringBuilder();
    for (int k = 0; k < lines.length; k++) {
      if (k > 0) {
        sb.append('\n');
      }
      boolean indentThis = (k > 0 || first) && (blank || !lines[k].isEmpty());
      if (indentThis) {
        sb.append(pad);
      }
      sb.append(lines[k]);
    }
    return sb.toString();
  }

  /**
   * Jinja2's {@code format} filter: Python's {@code value % args} (or {@code % kwargs}), with the
   * conversions chat templates use: {@code %s}, {@code %r}, {@code %d}/{@code %i}, {@code %f},
   * {@code %%}, with flags {@code -0+ }, a width and a precision, and {@code %(name)s} keys.
   */
  private static Object percentFormat(Object v, List<Object> args, Map<String, Object> kw) {
    String f = Py.str(v);
    StringBuilder out = new StringBuilder(f.length() + 16);
    int next = 0;
    for (int i = 0; i < f.length(); i++) {
      char c = f.charAt(i);
      if (c != '%') {
        out.append(c);
        continue;
      }
      if (++i >= f.length()) throw new Py.TemplateRuntimeException("incomplete format");
      Object arg = null;
      boolean keyed = false;
      if (f.charAt(i) == '(') {
        int close = f.indexOf(')', i);
        if (close < 0) throw new Py.TemplateRuntimeException("incomplete format key");
        String key = f.substring(i + 1, close);
        if (!kw.containsKey(key)) throw new Py.TemplateRuntimeException("KeyError: '" + key + "'");
        arg = kw.get(key);
        keyed = true;
        i = close + 1;
      }
      int flagsStart = i;
      while (i < f.length() && "-+ 0#".indexOf(f.charAt(i)) >= 0) i++;
      String flags = f.substring(flagsStart, i);
      int ws = i;
      while (i < f.length() && Character.isDigit(f.charAt(i))) i++;
      int width = i > ws ? Integer.parseInt(f.substring(ws, i)) : 0;
      int precision = -1;
      if (i < f.length() && f.charAt(i) == '.') {
        int ps = ++i;
        while (i < f.length() && Character.isDigit(f.charAt(i))) i++;
        precision = i > ps ? Integer.parseInt(f.substring(ps, i)) : 0;
      }
      if (i >= f.length()) throw new Py.TemplateRuntimeException("incomplete format");
      char type = f.charAt(i);
      if (type == '%') {
        out.append('%');
        continue;
      }
      if (!keyed) {
        if (next >= args.size()) {
          throw new Py.TemplateRuntimeException("not enough arguments for format string");
        }
        arg = args.get(next++);
      }
      String body =
          switch (type) {
            case 's' -> precisionCut(Py.str(arg), precision);
            case 'r', 'a' -> precisionCut(Py.repr(arg), precision);
            case 'd', 'i' -> {
              if (!(arg instanceof Number || arg instanceof Boolean)) {
                throw new Py.TemplateRuntimeException(
                    "%" + type + " format: a real number is required, not " + Py.typeName(arg));
              }
              long n = arg instanceof Boolean b ? (b ? 1 : 0) : (long) ((Number) arg).doubleValue();
              if (arg instanceof Long l) n = l;
              yield (n >= 0 && flags.contains("+") ? "+" : n >= 0 && flags.contains(" ") ? " " : "")
                  + n;
            }
            case 'f', 'F' -> {
              if (!(arg instanceof Number || arg instanceof Boolean)) {
                throw new Py.TemplateRuntimeException(
                    "must be real number, not " + Py.typeName(arg));
              }
              double d = arg instanceof Boolean b ? (b ? 1 : 0) : ((Number) arg).doubleValue();
              String r =
                  new BigDecimal(d)
                      .setScale(precision < 0 ? 6 : precision, RoundingMode.HALF_EVEN)
                      .toPlainString();
              yield (d >= 0 && flags.contains("+") ? "+" : d >= 0 && flags.contains(" ") ? " " : "")
                  + r;
            }
            default ->
                throw new Py.TemplateRuntimeException(
                    "unsupported format character '" + type + "'");
          };
      int pad = width - body.codePointCount(0, body.length());
      if (pad > 0) {
        if (flags.contains("-")) body = body + " ".repeat(pad);
        else if (flags.contains("0") && "dif".indexOf(Character.toLowerCase(type)) >= 0) {
          boolean sign = body.startsWith("-") || body.startsWith("+") || body.startsWith(" ");
          body =
              sign ? body.charAt(0) + "0".repeat(pad) + body.substring(1) : "0".repeat(pad) + body;
        } else body = " ".repeat(pad) + body;
      }
      out.append(body);
    }
    if (next < args.size() && kw.isEmpty()) {
      throw new Py.TemplateRuntimeException("not all arguments converted during string formatting");
    }
    return out.toString();
  }

  private static String precisionCut(String s, int precision) {
    if (precision < 0 || s.codePointCount(0, s.length()) <= precision) return s;
    return s.substring(0, s.offsetByCodePoints(0, precision));
  }

  private static Object center(Object v, List<Object> args, Map<String, Object> kw) {
    String s = Py.str(v);
    int w = ((Number) arg(args, kw, 0, "width", 80L)).intValue();
    int n = s.codePointCount(0, s.length());
    if (n >= w) {
      return s;
    }
    int left = (w - n) / 2 + ((w - n) % 2 == 1 && w % 2 == 1 ? 1 : 0);
    return " ".repeat(left) + s + " ".repeat(w - n - left);
  }

  private static Object batch(Object v, List<Object> args, Map<String, Object> kw) {
    int size = ((Number) args.get(0)).intValue();
    List<Object> out = new ArrayList<>();
    List<Object> cur = new ArrayList<>();
    for (Object o : Py.iterate(v)) {
      cur.add(o);
      if (cur.size() == size) {
        out.add(cur);
        cur = new ArrayList<>();
      }
    }
    if (!cur.isEmpty()) {
      if (args.size() > 1) {
        while (cur.size() < size) {
          cur.add(args.get(1));
        }
      }
      out.add(cur);
    }
    return out;
  }

  private static Object truncate(Object v, List<Object> args, Map<String, Object> kw) {
    String s = Py.str(v);
    int length = ((Number) arg(args, kw, 0, "length", 255L)).intValue();
    boolean killwords = Py.truthy(arg(args, kw, 1, "killwords", false));
    String end = (String) arg(args, kw, 2, "end", "...");
    int leeway = ((Number) arg(args, kw, 3, "leeway", 5L)).intValue();
    if (s.length() <= length + leeway) {
      return s;
    }
    if (killwords) {
      return s.substring(0, Math.max(0, length - end.length())) + end;
    }
    String cut = s.substring(0, Math.max(0, length - end.length()));
    int sp = cut.lastIndexOf(' ');
    return (sp >= 0 ? cut.substring(0, sp) : cut) + end;
  }

  private static Object groupby(Object v, List<Object> args, Map<String, Object> kw) {
    Object attr = args.get(0);
    Map<Object, List<Object>> groups = new LinkedHashMap<>();
    List<Object> items = new ArrayList<>(Py.iterate(v));
    items.sort((a, b) -> Py.compare(attribute(a, attr), attribute(b, attr)));
    for (Object o : items) {
      groups.computeIfAbsent(attribute(o, attr), k -> new ArrayList<>()).add(o);
    }
    List<Object> out = new ArrayList<>();
    groups.forEach(
        (k, l) -> {
          List<Object> p = new ArrayList<>(2);
          p.add(k);
          p.add(l);
          out.add(p);
        });
    return out;
  }

  private static Object lowerIfString(Object o) {
    return o instanceof String s ? s.toLowerCase(Locale.ROOT) : o;
  }

  /** Jinja2's attribute lookup for filters: dotted paths, integer parts index. */
  private static Object attribute(Object o, Object attr) {
    if (attr instanceof Long l) {
      return Py.getitem(o, l);
    }
    Object cur = o;
    for (String part : Py.str(attr).split("\\.")) {
      if (cur instanceof Undefined) {
        return cur;
      }
      Object next =
          part.chars().allMatch(Character::isDigit) && !part.isEmpty()
              ? Py.getitem(cur, Long.parseLong(part))
              : Py.getitem(cur, part);
      cur = next;
    }
    return cur;
  }
}
