package io.kvrouter.tokenize.jinja;

import io.kvrouter.tokenize.jinja.Py.TemplateRuntimeException;
import io.kvrouter.tokenize.jinja.Py.Undefined;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Jinja2's builtin filters and tests that chat templates use, plus transformers' {@code tojson}
 * (Python's {@code json.dumps}, no HTML escaping). An unknown filter or test is an error, as in
 * Jinja2 (where it fails at compile time). Stateless.
 */
final class JinjaBuiltins {
  private JinjaBuiltins() {}

  private static Object arg(
      List<Object> args, Map<String, Object> kw, int i, String name, Object dflt) {
    if (i < args.size()) {
      return args.get(i);
    }
    return kw.getOrDefault(name, dflt);
  }

  static Object filter(String name, Object v, List<Object> args, Map<String, Object> kw) {
    switch (name) {
      case "safe", "e", "escape", "forceescape" -> {
        if (name.equals("safe")) {
          return v;
        }
        return Py.str(v)
            .replace("&", "&amp;")
            .replace("<", "&lt;")
            .replace(">", "&gt;")
            .replace("\"", "&#34;")
            .replace("'", "&#39;");
      }
      case "tojson" -> {
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
      case "trim" -> {
        Object chars = arg(args, kw, 0, "chars", null);
        return StrMethods.strip(Py.str(v), (String) chars, true, true);
      }
      case "length", "count" -> {
        return Py.len(v);
      }
      case "string" -> {
        return Py.str(v);
      }
      case "lower" -> {
        return Py.str(v).toLowerCase(java.util.Locale.ROOT);
      }
      case "upper" -> {
        return Py.str(v).toUpperCase(java.util.Locale.ROOT);
      }
      case "capitalize" -> {
        return StrMethods.call(Py.str(v), "capitalize", List.of(), Map.of());
      }
      case "title" -> {
        return StrMethods.call(Py.str(v), "title", List.of(), Map.of());
      }
      case "replace" -> {
        List<Object> a = new ArrayList<>();
        a.add(arg(args, kw, 0, "old", ""));
        a.add(arg(args, kw, 1, "new", ""));
        Object count = arg(args, kw, 2, "count", null);
        if (count != null) {
          a.add(count);
        }
        return StrMethods.call(Py.str(v), "replace", a, Map.of());
      }
      case "default", "d" -> {
        Object dflt = arg(args, kw, 0, "default_value", "");
        boolean bool = Py.truthy(arg(args, kw, 1, "boolean", false));
        if (v instanceof Undefined || (bool && !Py.truthy(v))) {
          return dflt;
        }
        return v;
      }
      case "first" -> {
        List<Object> l = Py.iterate(v);
        return l.isEmpty() ? new Undefined("first item of an empty sequence") : l.get(0);
      }
      case "last" -> {
        List<Object> l = Py.iterate(v);
        return l.isEmpty() ? new Undefined("last item of an empty sequence") : l.get(l.size() - 1);
      }
      case "list" -> {
        return new ArrayList<>(Py.iterate(v));
      }
      case "reverse" -> {
        if (v instanceof String s) {
          return new StringBuilder(s).reverse().toString();
        }
        List<Object> l = new ArrayList<>(Py.iterate(v));
        java.util.Collections.reverse(l);
        return l;
      }
      case "join" -> {
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
      case "int" -> {
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
      case "float" -> {
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
      case "abs" -> {
        if (v instanceof Long l) {
          return Math.abs(l);
        }
        return Math.abs(((Number) v).doubleValue());
      }
      case "round" -> {
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
      case "items" -> {
        if (v instanceof Undefined) {
          return List.of();
        }
        if (!(v instanceof Map<?, ?> m)) {
          throw new TemplateRuntimeException("items filter needs a mapping, got " + Py.typeName(v));
        }
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
      case "dictsort" -> {
        if (!(v instanceof Map<?, ?> m)) {
          throw new TemplateRuntimeException("dictsort needs a mapping, got " + Py.typeName(v));
        }
        boolean byValue = "value".equals(arg(args, kw, 1, "by", "key"));
        boolean reverse = Py.truthy(arg(args, kw, 2, "reverse", false));
        List<Object> r = new ArrayList<>();
        m.forEach(
            (k, x) -> {
              List<Object> p = new ArrayList<>(2);
              p.add(k);
              p.add(x);
              r.add(p);
            });
        r.sort(
            (a, b) -> {
              Object x = ((List<?>) a).get(byValue ? 1 : 0), y = ((List<?>) b).get(byValue ? 1 : 0);
              int c = Py.compare(lowerIfString(x), lowerIfString(y));
              return reverse ? -c : c;
            });
        return r;
      }
      case "sort" -> {
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
      case "unique" -> {
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
      case "map" -> {
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
          out.add(filter(f, o, rest, Map.of()));
        }
        return out;
      }
      case "select", "reject", "selectattr", "rejectattr" -> {
        boolean attrMode = name.endsWith("attr");
        boolean keep = name.startsWith("select");
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
          boolean r = test == null ? Py.truthy(x) : test(test, x, testArgs);
          if (r == keep) {
            out.add(o);
          }
        }
        return out;
      }
      case "attr" -> {
        return Py.getattr(v, Py.str(args.get(0)));
      }
      case "sum" -> {
        Object attr = arg(args, kw, 0, "attribute", null);
        Object total = arg(args, kw, 1, "start", 0L);
        for (Object o : Py.iterate(v)) {
          total = Py.add(total, attr == null ? o : attribute(o, attr));
        }
        return total;
      }
      case "min", "max" -> {
        List<Object> l = Py.iterate(v);
        if (l.isEmpty()) {
          return new Undefined("min/max of an empty sequence");
        }
        Object best = l.get(0);
        for (Object o : l) {
          int c = Py.compare(lowerIfString(o), lowerIfString(best));
          if (name.equals("min") ? c < 0 : c > 0) {
            best = o;
          }
        }
        return best;
      }
      case "indent" -> {
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
      case "center" -> {
        String s = Py.str(v);
        int w = ((Number) arg(args, kw, 0, "width", 80L)).intValue();
        int n = s.codePointCount(0, s.length());
        if (n >= w) {
          return s;
        }
        int left = (w - n) / 2 + ((w - n) % 2 == 1 && w % 2 == 1 ? 1 : 0);
        return " ".repeat(left) + s + " ".repeat(w - n - left);
      }
      case "wordcount" -> {
        return (long) StrMethods.split(Py.str(v), null, -1).size();
      }
      case "batch" -> {
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
      case "truncate" -> {
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
      case "pprint" -> {
        return Py.repr(v);
      }
      case "groupby" -> {
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
      default -> throw new TemplateRuntimeException("no filter named '" + name + "'");
    }
  }

  private static Object lowerIfString(Object o) {
    return o instanceof String s ? s.toLowerCase(java.util.Locale.ROOT) : o;
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

  static boolean test(String name, Object v, List<Object> args) {
    switch (name) {
      case "defined":
        return !(v instanceof Undefined);
      case "undefined":
        return v instanceof Undefined;
      case "none":
        return v == null;
      case "string":
        return v instanceof String;
      case "number":
        return v instanceof Long || v instanceof Double || v instanceof java.math.BigInteger;
      case "integer":
        return v instanceof Long || v instanceof java.math.BigInteger;
      case "float":
        return v instanceof Double;
      case "boolean":
        return v instanceof Boolean;
      case "true":
        return Boolean.TRUE.equals(v);
      case "false":
        return Boolean.FALSE.equals(v);
      case "mapping":
        return v instanceof Map<?, ?>;
      case "iterable":
        return v instanceof List<?>
            || v instanceof Map<?, ?>
            || v instanceof String
            || v instanceof Undefined;
      case "sequence":
        return v instanceof List<?> || v instanceof Map<?, ?> || v instanceof String;
      case "callable":
        return v instanceof Py.Callable;
      case "even":
        return ((Number) v).longValue() % 2 == 0;
      case "odd":
        return ((Number) v).longValue() % 2 != 0;
      case "divisibleby":
        return ((Number) v).longValue() % ((Number) args.get(0)).longValue() == 0;
      case "lower":
        return Py.str(v).equals(Py.str(v).toLowerCase(java.util.Locale.ROOT));
      case "upper":
        return Py.str(v).equals(Py.str(v).toUpperCase(java.util.Locale.ROOT));
      case "eq", "equalto", "==":
        return Py.eq(v, args.get(0));
      case "ne", "!=":
        return !Py.eq(v, args.get(0));
      case "lt", "lessthan", "<":
        return Py.compare(v, args.get(0)) < 0;
      case "le", "<=":
        return Py.compare(v, args.get(0)) <= 0;
      case "gt", "greaterthan", ">":
        return Py.compare(v, args.get(0)) > 0;
      case "ge", ">=":
        return Py.compare(v, args.get(0)) >= 0;
      case "in":
        return Py.contains(args.get(0), v);
      case "sameas":
        {
          Object o = args.get(0);
          if (v == null || o == null || v instanceof Boolean || o instanceof Boolean) {
            return v == o || (v != null && v.equals(o));
          }
          return v == o;
        }
      case "escaped":
        return false;
      default:
        throw new TemplateRuntimeException("no test named '" + name + "'");
    }
  }
}
