package io.kvrouter.tokenize.jinja;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The methods of Python's {@code str} that chat templates call ({@code strip}, {@code split},
 * {@code startswith}, {@code replace}, ...), with Python's semantics: whitespace is what {@code
 * str.isspace()} accepts, {@code split()} without a separator splits on runs of it and drops empty
 * pieces, {@code startswith} takes a tuple. Stateless.
 *
 * <pre>
 * Implementation notes
 *
 * NAMES lists the methods a template may call on a string (Py.getattr hands out a bound method
 * only for those); call() is one switch over the name, the methods with more than an expression
 * of work in helpers of their own. Indexes and lengths (find, count, zfill) are in code points,
 * as Python's are. Errors are Py.TemplateRuntimeException with Python's message.
 * </pre>
 */
final class StrMethods {
  private StrMethods() {}

  private static final Set<String> NAMES =
      Set.of(
          "strip",
          "lstrip",
          "rstrip",
          "startswith",
          "endswith",
          "split",
          "rsplit",
          "splitlines",
          "upper",
          "lower",
          "title",
          "capitalize",
          "replace",
          "find",
          "rfind",
          "index",
          "count",
          "join",
          "isdigit",
          "isalpha",
          "isalnum",
          "isspace",
          "isupper",
          "islower",
          "format",
          "removeprefix",
          "removesuffix",
          "zfill",
          "swapcase",
          "casefold");

  static boolean has(String name) {
    return NAMES.contains(name);
  }

  /** Python's {@code str.isspace()} for one character. */
  static boolean isSpace(int c) {
    return Character.isWhitespace(c) || Character.isSpaceChar(c) || c == 0x85;
  }

  private static String arg(List<Object> args, int i, String method) {
    Object o = i < args.size() ? args.get(i) : null;
    if (o == null) {
      return null;
    }
    if (!(o instanceof String s)) {
      throw new Py.TemplateRuntimeException(
          method + " arg must be None or str, not " + Py.typeName(o));
    }
    return s;
  }

  static String strip(String s, String chars, boolean left, boolean right) {
    int a = 0, b = s.length();
    if (left) {
      while (a < b) {
        int c = s.codePointAt(a);
        if (chars == null ? !isSpace(c) : chars.indexOf(c) < 0) {
          break;
        }
        a += Character.charCount(c);
      }
    }
    if (right) {
      while (b > a) {
        int c = s.codePointBefore(b);
        if (chars == null ? !isSpace(c) : chars.indexOf(c) < 0) {
          break;
        }
        b -= Character.charCount(c);
      }
    }
    return s.substring(a, b);
  }

  static List<Object> split(String s, String sep, long max) {
    List<Object> r = new ArrayList<>();
    if (sep == null) {
      int i = 0, n = s.length();
      while (true) {
        while (i < n && isSpace(s.codePointAt(i))) {
          i += Character.charCount(s.codePointAt(i));
        }
        if (i >= n) {
          break;
        }
        if (max >= 0 && r.size() == max) {
          r.add(strip(s.substring(i), null, false, true));
          break;
        }
        int j = i;
        while (j < n && !isSpace(s.codePointAt(j))) {
          j += Character.charCount(s.codePointAt(j));
        }
        r.add(s.substring(i, j));
        i = j;
      }
      return r;
    }
    if (sep.isEmpty()) {
      throw new Py.TemplateRuntimeException("empty separator");
    }
    int from = 0;
    while (max < 0 || r.size() < max) {
      int at = s.indexOf(sep, from);
      if (at < 0) {
        break;
      }
      r.add(s.substring(from, at));
      from = at + sep.length();
    }
    r.add(s.substring(from));
    return r;
  }

  private static List<Object> rsplit(String s, String sep, long max) {
    if (sep == null || max < 0) {
      return split(s, sep, max);
    }
    List<Object> r = new ArrayList<>();
    int to = s.length();
    while (r.size() < max) {
      int at = s.lastIndexOf(sep, to - sep.length());
      if (at < 0) {
        break;
      }
      r.add(0, s.substring(at + sep.length(), to));
      to = at;
    }
    r.add(0, s.substring(0, to));
    return r;
  }

  private static boolean affix(String s, Object p, boolean start, String name) {
    if (p instanceof List<?> l) {
      for (Object o : l) {
        if (affix(s, o, start, name)) {
          return true;
        }
      }
      return false;
    }
    if (!(p instanceof String x)) {
      throw new Py.TemplateRuntimeException(
          name + " first arg must be str or a tuple of str, not " + Py.typeName(p));
    }
    return start ? s.startsWith(x) : s.endsWith(x);
  }

  private static long intArg(List<Object> args, int i, long dflt) {
    if (i >= args.size() || args.get(i) == null) {
      return dflt;
    }
    return ((Number) args.get(i)).longValue();
  }

  static Object call(String s, String name, List<Object> args, Map<String, Object> kw) {
    return switch (name) {
      case "strip" -> strip(s, arg(args, 0, name), true, true);
      case "lstrip" -> strip(s, arg(args, 0, name), true, false);
      case "rstrip" -> strip(s, arg(args, 0, name), false, true);
      case "startswith" -> affix(s, args.get(0), true, name);
      case "endswith" -> affix(s, args.get(0), false, name);
      case "split" -> split(s, sepArg(args, kw, name), maxsplitArg(args, kw));
      case "rsplit" -> rsplit(s, sepArg(args, kw, name), maxsplitArg(args, kw));
      case "splitlines" -> splitlines(s);
      case "upper" -> s.toUpperCase(Locale.ROOT);
      case "lower", "casefold" -> s.toLowerCase(Locale.ROOT);
      case "swapcase" -> swapcase(s);
      case "title" -> title(s);
      case "capitalize" -> capitalize(s);
      case "replace" -> replace(s, arg(args, 0, name), arg(args, 1, name), intArg(args, 2, -1));
      case "find", "index" -> find(s, arg(args, 0, name), name.equals("index"));
      case "rfind" -> {
        int at = s.lastIndexOf(arg(args, 0, name));
        yield at < 0 ? -1L : (long) s.codePointCount(0, at);
      }
      case "count" -> count(s, arg(args, 0, name));
      case "join" -> join(s, args.get(0));
      case "isdigit" -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
      case "isalpha" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
      case "isalnum" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
      case "isspace" -> !s.isEmpty() && s.codePoints().allMatch(StrMethods::isSpace);
      case "isupper" ->
          s.codePoints().anyMatch(Character::isUpperCase)
              && s.codePoints().noneMatch(Character::isLowerCase);
      case "islower" ->
          s.codePoints().anyMatch(Character::isLowerCase)
              && s.codePoints().noneMatch(Character::isUpperCase);
      case "removeprefix" -> {
        String p = arg(args, 0, name);
        yield s.startsWith(p) ? s.substring(p.length()) : s;
      }
      case "removesuffix" -> {
        String p = arg(args, 0, name);
        yield !p.isEmpty() && s.endsWith(p) ? s.substring(0, s.length() - p.length()) : s;
      }
      case "zfill" -> zfill(s, intArg(args, 0, 0));
      case "format" -> format(s, args, kw);
      default -> throw new IllegalArgumentException(name);
    };
  }

  /** split's and rsplit's separator: {@code sep=} or the first argument (null: whitespace). */
  private static String sepArg(List<Object> args, Map<String, Object> kw, String name) {
    return kw.containsKey("sep") ? (String) kw.get("sep") : arg(args, 0, name);
  }

  /** split's and rsplit's {@code maxsplit=} or second argument (-1: no limit). */
  private static long maxsplitArg(List<Object> args, Map<String, Object> kw) {
    return kw.containsKey("maxsplit")
        ? ((Number) kw.get("maxsplit")).longValue()
        : intArg(args, 1, -1);
  }

  private static List<Object> splitlines(String s) {
    List<Object> r = new ArrayList<>();
    for (String line : s.split("\r\n|[\n\r\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029]", -1)) {
      r.add(line);
    }
    if (!r.isEmpty() && ((String) r.get(r.size() - 1)).isEmpty()) {
      r.remove(r.size() - 1);
    }
    return r;
  }

  private static String swapcase(String s) {
    StringBuilder sb = new StringBuilder();
    s.codePoints()
        .forEach(
            c ->
                sb.appendCodePoint(
                    Character.isUpperCase(c)
                        ? Character.toLowerCase(c)
                        : Character.toUpperCase(c)));
    return sb.toString();
  }

  private static String capitalize(String s) {
    return s.isEmpty()
        ? s
        : s.substring(0, s.offsetByCodePoints(0, 1)).toUpperCase(Locale.ROOT)
            + s.substring(s.offsetByCodePoints(0, 1)).toLowerCase(Locale.ROOT);
  }

  /** {@code s.replace(old, rep, count)}; a negative count replaces every occurrence. */
  private static String replace(String s, String old, String rep, long count) {
    if (count < 0) {
      return s.replace(old, rep);
    }
    StringBuilder sb = new StringBuilder();
    int from = 0;
    for (long i = 0; i < count; i++) {
      int at = s.indexOf(old, from);
      if (at < 0) {
        break;
      }
      sb.append(s, from, at).append(rep);
      from = at + old.length();
      if (old.isEmpty()) {
        if (from < s.length()) {
          sb.append(s.charAt(from));
        }
        from++;
      }
    }
    if (from <= s.length()) {
      sb.append(s.substring(Math.min(from, s.length())));
    }
    return sb.toString();
  }

  /** {@code s.find(sub)} (-1 when absent) or, with {@code raise}, {@code s.index(sub)}. */
  private static long find(String s, String sub, boolean raise) {
    int at = s.indexOf(sub);
    if (at < 0 && raise) {
      throw new Py.TemplateRuntimeException("substring not found");
    }
    return at < 0 ? -1L : (long) s.codePointCount(0, at);
  }

  private static long count(String s, String sub) {
    if (sub.isEmpty()) {
      return (long) s.codePointCount(0, s.length()) + 1;
    }
    long c = 0;
    for (int at = s.indexOf(sub); at >= 0; at = s.indexOf(sub, at + sub.length())) {
      c++;
    }
    return c;
  }

  /** {@code sep.join(items)}: every item must be a str. */
  private static String join(String sep, Object items) {
    StringBuilder sb = new StringBuilder();
    boolean first = true;
    for (Object o : Py.iterate(items)) {
      if (!(o instanceof String x)) {
        throw new Py.TemplateRuntimeException(
            "sequence item: expected str instance, " + Py.typeName(o) + " found");
      }
      if (!first) {
        sb.append(sep);
      }
      first = false;
      sb.append(x);
    }
    return sb.toString();
  }

  private static String zfill(String s, long w) {
    long n = s.codePointCount(0, s.length());
    if (n >= w) {
      return s;
    }
    String pad = "0".repeat((int) (w - n));
    if (!s.isEmpty() && (s.charAt(0) == '-' || s.charAt(0) == '+')) {
      return s.charAt(0) + pad + s.substring(1);
    }
    return pad + s;
  }

  private static String title(String s) {
    StringBuilder sb = new StringBuilder();
    boolean prevCased = false;
    for (int i = 0; i < s.length(); ) {
      int c = s.codePointAt(i);
      i += Character.charCount(c);
      boolean cased =
          Character.isUpperCase(c) || Character.isLowerCase(c) || Character.isTitleCase(c);
      sb.appendCodePoint(prevCased ? Character.toLowerCase(c) : Character.toTitleCase(c));
      prevCased = cased;
    }
    return sb.toString();
  }

  private static String format(String s, List<Object> args, Map<String, Object> kw) {
    StringBuilder sb = new StringBuilder();
    int auto = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '{') {
        if (i + 1 < s.length() && s.charAt(i + 1) == '{') {
          sb.append('{');
          i++;
          continue;
        }
        int end = s.indexOf('}', i);
        if (end < 0) {
          throw new Py.TemplateRuntimeException("Single '{' encountered in format string");
        }
        String field = s.substring(i + 1, end);
        if (field.contains(":") || field.contains("!")) {
          throw new Py.TemplateRuntimeException(
              "str.format: format specs are not supported ('" + field + "')");
        }
        Object v;
        if (field.isEmpty()) {
          v = args.get(auto++);
        } else if (field.chars().allMatch(Character::isDigit)) {
          v = args.get(Integer.parseInt(field));
        } else {
          v = kw.get(field);
        }
        sb.append(Py.str(v));
        i = end;
      } else if (c == '}') {
        if (i + 1 < s.length() && s.charAt(i + 1) == '}') {
          i++;
        }
        sb.append('}');
      } else {
        sb.append(c);
      }
    }
    return sb.toString();
  }
}
