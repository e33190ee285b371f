package io.kvrouter.tokenize.jinja;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Python's value semantics as Jinja2 (and so transformers' chat templates) sees them: truthiness,
 * {@code str()}, equality and ordering, arithmetic, membership, attribute and item lookup, slicing,
 * and the methods of {@code str}, {@code dict} and {@code list} that templates call. Public for the
 * tokenizer: {@link #truthy}, {@link #typeName}, {@link #repr} and {@link #jsonDumps} over JSON
 * values (as {@code io.kvrouter.tokenize.Json} parses them); the rest is the runtime's own.
 *
 * <pre>
 * Implementation notes
 *
 * Values are plain Java objects (JSON's, see io.kvrouter.tokenize.Json): String, Long, Double, Boolean, null (None),
 * List, Map (dicts with String keys), plus the runtime's own Undefined, Namespace, Callable and
 * Loop. Strings are indexed, sliced and measured in code points, as Python does, not UTF-16
 * units. Lists and dicts handed to templates are never mutated: transformers renders in an
 * ImmutableSandboxedEnvironment, so the mutating methods (append, pop, update, ...) raise.
 * Stateless; safe from any thread.
 * </pre>
 */
public final class Py {
  private Py() {}

  /**
   * Python's {@code json.dumps(v, ensure_ascii=False)}.
   *
   * @throws RuntimeException when {@code v} holds a value JSON cannot (its message names the type)
   */
  public static String jsonDumps(Object v) {
    return PyJson.dumps(v);
  }

  /** Jinja2's default Undefined: empty when printed, false, iterates as empty, errors on use. */
  static final class Undefined {
    final String hint;

    Undefined(String hint) {
      this.hint = hint;
    }

    RuntimeException fail() {
      return new TemplateRuntimeException(hint + " is undefined");
    }

    @Override
    public String toString() {
      return "";
    }
  }

  /** Jinja2's {@code namespace(...)}: an object whose attributes {@code set ns.x = ...} assigns. */
  static final class Namespace {
    final Map<String, Object> attrs = new LinkedHashMap<>();
  }

  /** Something a template can call: a global, a bound method, a macro. */
  interface Callable {
    Object call(List<Object> args, Map<String, Object> kwargs);
  }

  /** The {@code loop} variable of a for loop. */
  static final class Loop {
    final List<Object> items;
    int index0;
    final Callable cycle;

    Loop(List<Object> items) {
      this.items = items;
      this.cycle =
          (args, kw) -> {
            if (args.isEmpty()) {
              throw new TemplateRuntimeException("no items for cycling given");
            }
            return args.get(index0 % args.size());
          };
    }

    Object attr(String name) {
      int n = items.size();
      return switch (name) {
        case "index" -> (long) index0 + 1;
        case "index0" -> (long) index0;
        case "revindex" -> (long) (n - index0);
        case "revindex0" -> (long) (n - index0 - 1);
        case "first" -> index0 == 0;
        case "last" -> index0 == n - 1;
        case "length" -> (long) n;
        case "previtem" -> index0 > 0 ? items.get(index0 - 1) : new Undefined("loop.previtem");
        case "nextitem" -> index0 < n - 1 ? items.get(index0 + 1) : new Undefined("loop.nextitem");
        case "cycle" -> cycle;
        case "depth" -> 1L;
        case "depth0" -> 0L;
        default -> new Undefined("loop." + name);
      };
    }
  }

  /** An error raised while rendering (a type error, raise_exception, an undefined value used). */
  static class TemplateRuntimeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TemplateRuntimeException(String message) {
      super(message);
    }
  }

  // ---------------------------------------------------------------- basics

  /** Python's truthiness ({@code bool(v)}); Undefined is false. */
  public static boolean truthy(Object v) {
    if (v == null || v instanceof Undefined) {
      return false;
    }
    if (v instanceof Boolean b) {
      return b;
    }
    if (v instanceof String s) {
      return !s.isEmpty();
    }
    if (v instanceof Long l) {
      return l != 0;
    }
    if (v instanceof Double d) {
      return d != 0.0;
    }
    if (v instanceof BigInteger b) {
      return b.signum() != 0;
    }
    if (v instanceof List<?> l) {
      return !l.isEmpty();
    }
    if (v instanceof Map<?, ?> m) {
      return !m.isEmpty();
    }
    return true;
  }

  /**
   * The name of {@code v}'s Python type, as error messages print it ({@code str}, {@code dict}).
   */
  public static String typeName(Object v) {
    if (v == null) {
      return "NoneType";
    }
    if (v instanceof Undefined) {
      return "Undefined";
    }
    if (v instanceof String) {
      return "str";
    }
    if (v instanceof Boolean) {
      return "bool";
    }
    if (v instanceof Long || v instanceof BigInteger) {
      return "int";
    }
    if (v instanceof Double) {
      return "float";
    }
    if (v instanceof List<?>) {
      return "list";
    }
    if (v instanceof Map<?, ?>) {
      return "dict";
    }
    if (v instanceof Namespace) {
      return "Namespace";
    }
    if (v instanceof Callable) {
      return "function";
    }
    return v.getClass().getSimpleName();
  }

  /** Python's {@code str(v)}, which is what {@code {{ v }}} prints. */
  static String str(Object v) {
    if (v instanceof String s) {
      return s;
    }
    if (v == null) {
      return "None";
    }
    if (v instanceof Undefined) {
      return "";
    }
    if (v instanceof Boolean b) {
      return b ? "True" : "False";
    }
    if (v instanceof Double d) {
      return floatRepr(d);
    }
    if (v instanceof Number n) {
      return n.toString();
    }
    return repr(v);
  }

  /** Python's {@code repr(v)}. */
  public static String repr(Object v) {
    if (v instanceof String s) {
      return reprString(s);
    }
    if (v instanceof List<?> l) {
      StringBuilder sb = new StringBuilder("[");
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) {
          sb.append(", ");
        }
        sb.append(repr(l.get(i)));
      }
      return sb.append(']').toString();
    }
    if (v instanceof Map<?, ?> m) {
      StringBuilder sb = new StringBuilder("{");
      boolean first = true;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        sb.append(repr(e.getKey())).append(": ").append(repr(e.getValue()));
      }
      return sb.append('}').toString();
    }
    if (v instanceof Namespace ns) {
      return "<Namespace " + repr(ns.attrs) + ">";
    }
    if (v instanceof Callable) {
      return "<function>";
    }
    if (v instanceof Undefined) {
      return "Undefined";
    }
    return str(v);
  }

  private static String reprString(String s) {
    char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder sb = new StringBuilder().append(q);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == q || c == '\\') {
        sb.append('\\').append(c);
      } else if (c == '\n') {
        sb.append("\\n");
      } else if (c == '\r') {
        sb.append("\\r");
      } else if (c == '\t') {
        sb.append("\\t");
      } else if (c < 0x20 || c == 0x7f) {
        sb.append(String.format("\\x%02x", (int) c));
      } else {
        sb.append(c);
      }
    }
    return sb.append(q).toString();
  }

  /** Python's {@code repr(float)}: the shortest digits that round-trip, Python's layout. */
  static String floatRepr(double d) {
    if (Double.isNaN(d)) {
      return "nan";
    }
    if (Double.isInfinite(d)) {
      return d > 0 ? "inf" : "-inf";
    }
    if (d == 0) {
      return (1 / d < 0) ? "-0.0" : "0.0";
    }
    BigDecimal bd = new BigDecimal(Double.toString(d)).stripTrailingZeros();
    String digits = bd.unscaledValue().abs().toString();
    int exp = digits.length() - 1 - bd.scale(); // decimal exponent of the first digit
    String sign = d < 0 ? "-" : "";
    if (exp >= -4 && exp < 16) {
      String plain = bd.abs().toPlainString();
      if (plain.indexOf('.') < 0) {
        plain += ".0";
      }
      return sign + plain;
    }
    String mant = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
    return sign
        + mant
        + "e"
        + (exp < 0 ? "-" : "+")
        + (Math.abs(exp) < 10 ? "0" : "")
        + Math.abs(exp);
  }

  // ---------------------------------------------------------------- numbers

  static boolean isNumber(Object v) {
    return v instanceof Long
        || v instanceof Double
        || v instanceof Boolean
        || v instanceof BigInteger;
  }

  private static boolean isInt(Object v) {
    return v instanceof Long || v instanceof Boolean;
  }

  private static long asLong(Object v) {
    return v instanceof Boolean b ? (b ? 1 : 0) : ((Number) v).longValue();
  }

  private static double asDouble(Object v) {
    return v instanceof Boolean b ? (b ? 1 : 0) : ((Number) v).doubleValue();
  }

  static RuntimeException typeError(String op, Object a, Object b) {
    return new TemplateRuntimeException(
        "unsupported operand type(s) for "
            + op
            + ": '"
            + typeName(a)
            + "' and '"
            + typeName(b)
            + "'");
  }

  private static void checkDefined(Object... vs) {
    for (Object v : vs) {
      if (v instanceof Undefined u) {
        throw u.fail();
      }
    }
  }

  static Object add(Object a, Object b) {
    checkDefined(a, b);
    if (a instanceof String x && b instanceof String y) {
      return x + y;
    }
    if (isInt(a) && isInt(b)) {
      return asLong(a) + asLong(b);
    }
    if (isNumber(a) && isNumber(b)) {
      return asDouble(a) + asDouble(b);
    }
    if (a instanceof List<?> x && b instanceof List<?> y) {
      List<Object> r = new ArrayList<>(x);
      r.addAll(y);
      return r;
    }
    if (a instanceof String && !(b instanceof String)) {
      throw new TemplateRuntimeException(
          "can only concatenate str (not \"" + typeName(b) + "\") to str");
    }
    throw typeError("+", a, b);
  }

  static Object arith(String op, Object a, Object b) {
    checkDefined(a, b);
    if (op.equals("*")) {
      if (a instanceof String s && isInt(b)) {
        return s.repeat((int) Math.max(0, asLong(b)));
      }
      if (a instanceof List<?> l && isInt(b)) {
        List<Object> r = new ArrayList<>();
        for (long i = 0; i < asLong(b); i++) {
          r.addAll(l);
        }
        return r;
      }
    }
    if (!isNumber(a) || !isNumber(b)) {
      throw typeError(op, a, b);
    }
    boolean ints = isInt(a) && isInt(b);
    switch (op) {
      case "-":
        return ints ? (Object) (asLong(a) - asLong(b)) : asDouble(a) - asDouble(b);
      case "*":
        return ints ? (Object) (asLong(a) * asLong(b)) : asDouble(a) * asDouble(b);
      case "/":
        if (asDouble(b) == 0) {
          throw new TemplateRuntimeException("division by zero");
        }
        return asDouble(a) / asDouble(b);
      case "//":
        if (asDouble(b) == 0) {
          throw new TemplateRuntimeException("integer division or modulo by zero");
        }
        return ints
            ? (Object) Math.floorDiv(asLong(a), asLong(b))
            : Math.floor(asDouble(a) / asDouble(b));
      case "%":
        if (asDouble(b) == 0) {
          throw new TemplateRuntimeException("integer division or modulo by zero");
        }
        if (ints) {
          return Math.floorMod(asLong(a), asLong(b));
        }
        double x = asDouble(a), y = asDouble(b);
        return x - Math.floor(x / y) * y;
      case "**":
        if (ints && asLong(b) >= 0) {
          return BigInteger.valueOf(asLong(a)).pow((int) asLong(b)).longValue();
        }
        return Math.pow(asDouble(a), asDouble(b));
      default:
        throw new IllegalArgumentException(op);
    }
  }

  static Object negate(Object a) {
    checkDefined(a);
    if (isInt(a)) {
      return -asLong(a);
    }
    if (a instanceof Double d) {
      return -d;
    }
    throw new TemplateRuntimeException("bad operand type for unary -: '" + typeName(a) + "'");
  }

  // ---------------------------------------------------------------- comparison

  static boolean eq(Object a, Object b) {
    if (a == b) {
      return true;
    }
    if (a == null || b == null) {
      return false;
    }
    if (a instanceof Undefined || b instanceof Undefined) {
      return a instanceof Undefined && b instanceof Undefined;
    }
    if (isNumber(a) && isNumber(b)) {
      if (isInt(a) && isInt(b)) {
        return asLong(a) == asLong(b);
      }
      return asDouble(a) == asDouble(b);
    }
    if (a instanceof List<?> x && b instanceof List<?> y) {
      if (x.size() != y.size()) {
        return false;
      }
      for (int i = 0; i < x.size(); i++) {
        if (!eq(x.get(i), y.get(i))) {
          return false;
        }
      }
      return true;
    }
    if (a instanceof Map<?, ?> x && b instanceof Map<?, ?> y) {
      if (x.size() != y.size()) {
        return false;
      }
      for (Map.Entry<?, ?> e : x.entrySet()) {
        if (!y.containsKey(e.getKey()) || !eq(e.getValue(), y.get(e.getKey()))) {
          return false;
        }
      }
      return true;
    }
    return a.equals(b);
  }

  /** Python's ordering for {@code <}, {@code >}, sort: numbers, strings, lists. */
  static int compare(Object a, Object b) {
    checkDefined(a, b);
    if (isNumber(a) && isNumber(b)) {
      return isInt(a) && isInt(b)
          ? Long.compare(asLong(a), asLong(b))
          : Double.compare(asDouble(a), asDouble(b));
    }
    if (a instanceof String x && b instanceof String y) {
      return compareCodePoints(x, y);
    }
    if (a instanceof List<?> x && b instanceof List<?> y) {
      for (int i = 0; i < Math.min(x.size(), y.size()); i++) {
        if (!eq(x.get(i), y.get(i))) {
          return compare(x.get(i), y.get(i));
        }
      }
      return Integer.compare(x.size(), y.size());
    }
    throw new TemplateRuntimeException(
        "'<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
  }

  private static int compareCodePoints(String x, String y) {
    int i = 0, j = 0;
    while (i < x.length() && j < y.length()) {
      int a = x.codePointAt(i), b = y.codePointAt(j);
      if (a != b) {
        return Integer.compare(a, b);
      }
      i += Character.charCount(a);
      j += Character.charCount(b);
    }
    return Integer.compare(x.length() - i, y.length() - j);
  }

  static boolean contains(Object container, Object item) {
    if (container instanceof String s) {
      if (!(item instanceof String t)) {
        throw new TemplateRuntimeException(
            "'in <string>' requires string as left operand, not " + typeName(item));
      }
      return s.contains(t);
    }
    if (container instanceof List<?> l) {
      for (Object o : l) {
        if (eq(o, item)) {
          return true;
        }
      }
      return false;
    }
    if (container instanceof Map<?, ?> m) {
      return m.containsKey(item);
    }
    if (container instanceof Undefined) {
      return false;
    }
    throw new TemplateRuntimeException(
        "argument of type '" + typeName(container) + "' is not iterable");
  }

  // ---------------------------------------------------------------- sequences

  /** The items a for loop or a filter iterates: list items, dict keys, string characters. */
  static List<Object> iterate(Object v) {
    if (v instanceof List<?> l) {
      @SuppressWarnings("unchecked")
      List<Object> r = (List<Object>) l;
      return r;
    }
    if (v instanceof Map<?, ?> m) {
      return new ArrayList<>(m.keySet());
    }
    if (v instanceof String s) {
      List<Object> r = new ArrayList<>();
      s.codePoints().forEach(cp -> r.add(new String(Character.toChars(cp))));
      return r;
    }
    if (v == null || v instanceof Undefined) {
      if (v == null) {
        throw new TemplateRuntimeException("'NoneType' object is not iterable");
      }
      return List.of();
    }
    throw new TemplateRuntimeException("'" + typeName(v) + "' object is not iterable");
  }

  static long len(Object v) {
    if (v instanceof String s) {
      return s.codePointCount(0, s.length());
    }
    if (v instanceof List<?> l) {
      return l.size();
    }
    if (v instanceof Map<?, ?> m) {
      return m.size();
    }
    if (v instanceof Undefined) {
      return 0;
    }
    throw new TemplateRuntimeException("object of type '" + typeName(v) + "' has no len()");
  }

  static Object getitem(Object obj, Object key) {
    if (obj instanceof Undefined u) {
      throw u.fail();
    }
    if (obj instanceof Map<?, ?> m) {
      if (m.containsKey(key)) {
        return m.get(key);
      }
      if (key instanceof String s && DICT_METHODS.contains(s)) {
        return getattr(obj, s);
      }
      return new Undefined("'dict object' has no attribute " + repr(key));
    }
    if ((obj instanceof List<?> || obj instanceof String) && isInt(key)) {
      long n = len(obj);
      long i = asLong(key);
      if (i < 0) {
        i += n;
      }
      if (i < 0 || i >= n) {
        return new Undefined(typeName(obj) + " index " + asLong(key) + " out of range");
      }
      if (obj instanceof List<?> l) {
        return l.get((int) i);
      }
      String s = (String) obj;
      int at = s.offsetByCodePoints(0, (int) i);
      return new String(Character.toChars(s.codePointAt(at)));
    }
    if (key instanceof String s) {
      return getattr(obj, s);
    }
    return new Undefined("'" + typeName(obj) + " object' has no item " + repr(key));
  }

  static Object slice(Object obj, Object start, Object stop, Object step) {
    if (obj instanceof Undefined u) {
      throw u.fail();
    }
    long n = len(obj);
    long st = step == null ? 1 : asLong(step);
    if (st == 0) {
      throw new TemplateRuntimeException("slice step cannot be zero");
    }
    long lo, hi;
    if (st > 0) {
      lo = start == null ? 0 : clampIndex(asLong(start), n, 0, n);
      hi = stop == null ? n : clampIndex(asLong(stop), n, 0, n);
    } else {
      lo = start == null ? n - 1 : clampIndex(asLong(start), n, -1, n - 1);
      hi = stop == null ? -1 : clampIndex(asLong(stop), n, -1, n - 1);
    }
    List<Integer> idx = new ArrayList<>();
    for (long i = lo; st > 0 ? i < hi : i > hi; i += st) {
      idx.add((int) i);
    }
    if (obj instanceof List<?> l) {
      List<Object> r = new ArrayList<>(idx.size());
      for (int i : idx) {
        r.add(l.get(i));
      }
      return r;
    }
    if (obj instanceof String s) {
      int[] cps = s.codePoints().toArray();
      StringBuilder sb = new StringBuilder();
      for (int i : idx) {
        sb.appendCodePoint(cps[i]);
      }
      return sb.toString();
    }
    throw new TemplateRuntimeException("'" + typeName(obj) + "' object is not subscriptable");
  }

  private static long clampIndex(long i, long n, long min, long max) {
    if (i < 0) {
      i += n;
    }
    return Math.max(min, Math.min(max, i));
  }

  // ---------------------------------------------------------------- attributes and methods

  private static final Set<String> DICT_METHODS = Set.of("items", "keys", "values", "get");
  private static final Set<String> MUTATING =
      Set.of(
          "append",
          "extend",
          "insert",
          "pop",
          "remove",
          "clear",
          "sort",
          "reverse",
          "update",
          "setdefault",
          "popitem");

  static Object getattr(Object obj, String name) {
    if (obj instanceof Undefined u) {
      throw u.fail();
    }
    if (obj instanceof Map<?, ?> m) {
      if (DICT_METHODS.contains(name)) {
        return (Callable) (args, kw) -> dictMethod(m, name, args);
      }
      if (MUTATING.contains(name)) {
        return unsafe(obj, name);
      }
      if (m.containsKey(name)) {
        return m.get(name);
      }
      return new Undefined("'dict object' has no attribute '" + name + "'");
    }
    if (obj instanceof String s) {
      if (StrMethods.has(name)) {
        return (Callable) (args, kw) -> StrMethods.call(s, name, args, kw);
      }
      return new Undefined("'str object' has no attribute '" + name + "'");
    }
    if (obj instanceof List<?> l) {
      if (MUTATING.contains(name)) {
        return unsafe(obj, name);
      }
      if (name.equals("index") || name.equals("count")) {
        return (Callable)
            (args, kw) -> {
              long c = 0;
              for (int i = 0; i < l.size(); i++) {
                if (eq(l.get(i), args.get(0))) {
                  if (name.equals("index")) {
                    return (long) i;
                  }
                  c++;
                }
              }
              if (name.equals("index")) {
                throw new TemplateRuntimeException(repr(args.get(0)) + " is not in list");
              }
              return c;
            };
      }
      return new Undefined("'list object' has no attribute '" + name + "'");
    }
    if (obj instanceof Namespace ns) {
      return ns.attrs.containsKey(name)
          ? ns.attrs.get(name)
          : new Undefined("'Namespace object' has no attribute '" + name + "'");
    }
    if (obj instanceof Loop loop) {
      return loop.attr(name);
    }
    return new Undefined("'" + typeName(obj) + " object' has no attribute '" + name + "'");
  }

  private static Callable unsafe(Object obj, String name) {
    return (args, kw) -> {
      throw new TemplateRuntimeException(
          "access to attribute '" + name + "' of '" + typeName(obj) + "' object is unsafe");
    };
  }

  private static Object dictMethod(Map<?, ?> m, String name, List<Object> args) {
    switch (name) {
      case "items" -> {
        List<Object> r = new ArrayList<>(m.size());
        for (Map.Entry<?, ?> e : m.entrySet()) {
          List<Object> pair = new ArrayList<>(2);
          pair.add(e.getKey());
          pair.add(e.getValue());
          r.add(pair);
        }
        return r;
      }
      case "keys" -> {
        return new ArrayList<Object>(m.keySet());
      }
      case "values" -> {
        return new ArrayList<Object>(m.values());
      }
      case "get" -> {
        Object k = args.isEmpty() ? null : args.get(0);
        if (m.containsKey(k)) {
          return m.get(k);
        }
        return args.size() > 1 ? args.get(1) : null;
      }
      default -> throw new IllegalArgumentException(name);
    }
  }

  /** Iterator helper for code that needs to walk a value generically. */
  static Iterator<Object> iterator(Object v) {
    return iterate(v).iterator();
  }
}
