package io.kvrouter.tokenize.jinja;

import io.kvrouter.tokenize.jinja.Py.TemplateRuntimeException;
import io.kvrouter.tokenize.jinja.Py.Undefined;
import java.math.BigInteger;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Jinja2's builtin tests ({@code x is defined}, {@code x is string}, {@code n is divisibleby(3)},
 * ...) that chat templates use. An unknown test is an error, as in Jinja2 (where it fails at
 * compile time).
 *
 * <pre>
 * Implementation notes
 *
 * One switch over the test's name; values are the runtime's (see Py). Called by Interpreter for
 * "is" expressions and by Filters for select, reject, selectattr and rejectattr. Stateless; safe
 * from any thread.
 * </pre>
 */
final class Predicates {
  private Predicates() {}

  /** Whether {@code v} passes the test {@code name} with {@code args}. */
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
        return v instanceof Long || v instanceof Double || v instanceof BigInteger;
      case "integer":
        return v instanceof Long || v instanceof BigInteger;
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
        return Py.str(v).equals(Py.str(v).toLowerCase(Locale.ROOT));
      case "upper":
        return Py.str(v).equals(Py.str(v).toUpperCase(Locale.ROOT));
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
