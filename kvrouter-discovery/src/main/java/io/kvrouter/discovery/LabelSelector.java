package io.kvrouter.discovery;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.StringJoiner;
import java.util.TreeMap;

/**
 * A Kubernetes label selector in its string form ({@code app=vllm,tier in (a,b),!canary}), parsed
 * so that a bad one is refused at start with a precise message rather than by the API server on
 * every list, and compared with an InferencePool's new selector.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable: a list of requirements (key, operator, values), all of which must hold. The syntax
 * is the API server's: requirements separated by commas outside parentheses; operators =, ==,
 * !=, in, notin, a bare key (exists) and !key (does not exist). Keys are [prefix/]name, values at
 * most 63 characters of [A-Za-z0-9._-]. toString() gives the canonical form sent to the API
 * server.
 * </pre>
 */
final class LabelSelector {
  private enum Op {
    EQUALS,
    NOT_EQUALS,
    IN,
    NOT_IN,
    EXISTS,
    NOT_EXISTS
  }

  private record Requirement(String key, Op op, Set<String> values) {
    @Override
    public String toString() {
      return switch (op) {
        case EQUALS -> key + "=" + values.iterator().next();
        case NOT_EQUALS -> key + "!=" + values.iterator().next();
        case IN -> key + " in (" + String.join(",", values) + ")";
        case NOT_IN -> key + " notin (" + String.join(",", values) + ")";
        case EXISTS -> key;
        case NOT_EXISTS -> "!" + key;
      };
    }
  }

  private final List<Requirement> requirements;

  private LabelSelector(List<Requirement> requirements) {
    this.requirements = List.copyOf(requirements);
  }

  /** The selector of {@code matchLabels}: every pair must match. */
  static LabelSelector ofMatchLabels(Map<String, String> matchLabels) {
    List<Requirement> rs = new ArrayList<>();
    for (Map.Entry<String, String> e : new TreeMap<>(matchLabels).entrySet()) {
      checkKey(e.getKey());
      checkValue(e.getKey(), e.getValue());
      rs.add(new Requirement(e.getKey(), Op.EQUALS, Set.of(e.getValue())));
    }
    if (rs.isEmpty()) throw new IllegalArgumentException("matchLabels is empty");
    return new LabelSelector(rs);
  }

  /**
   * Parses the string form.
   *
   * @throws IllegalArgumentException naming the part that is wrong; also for an empty selector (it
   *     would select every pod of the namespace)
   */
  static LabelSelector parse(String s) {
    if (s == null || s.isBlank()) {
      throw new IllegalArgumentException(
          "label selector is empty (it would select every pod of the namespace)");
    }
    List<Requirement> rs = new ArrayList<>();
    for (String part : splitTopLevel(s)) {
      rs.add(requirement(part.trim(), s));
    }
    return new LabelSelector(rs);
  }

  private static List<String> splitTopLevel(String s) {
    List<String> parts = new ArrayList<>();
    int depth = 0;
    int start = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '(') depth++;
      else if (c == ')') depth--;
      else if (c == ',' && depth == 0) {
        parts.add(s.substring(start, i));
        start = i + 1;
      }
    }
    parts.add(s.substring(start));
    return parts;
  }

  private static Requirement requirement(String p, String whole) {
    if (p.isEmpty()) {
      throw new IllegalArgumentException("label selector '" + whole + "': empty requirement");
    }
    if (p.startsWith("!") && !p.contains("=")) {
      String key = p.substring(1).trim();
      checkKey(key);
      return new Requirement(key, Op.NOT_EXISTS, Set.of());
    }
    int ne = p.indexOf("!=");
    if (ne > 0) return single(p.substring(0, ne), Op.NOT_EQUALS, p.substring(ne + 2), whole);
    int eqeq = p.indexOf("==");
    if (eqeq > 0) return single(p.substring(0, eqeq), Op.EQUALS, p.substring(eqeq + 2), whole);
    int eq = p.indexOf('=');
    if (eq > 0) return single(p.substring(0, eq), Op.EQUALS, p.substring(eq + 1), whole);
    if (eq == 0) {
      throw new IllegalArgumentException("label selector '" + whole + "': '" + p + "' has no key");
    }
    int paren = p.indexOf('(');
    if (paren > 0) {
      if (!p.endsWith(")")) {
        throw new IllegalArgumentException(
            "label selector '" + whole + "': '" + p + "' does not end with ')'");
      }
      String[] head = p.substring(0, paren).trim().split("\\s+");
      if (head.length != 2 || !(head[1].equals("in") || head[1].equals("notin"))) {
        throw new IllegalArgumentException(
            "label selector '"
                + whole
                + "': '"
                + p
                + "' is not 'key in (...)' or 'key notin (...)'");
      }
      checkKey(head[0]);
      Set<String> values = new LinkedHashSet<>();
      for (String v : p.substring(paren + 1, p.length() - 1).split(",")) {
        String t = v.trim();
        checkValue(head[0], t);
        values.add(t);
      }
      return new Requirement(head[0], head[1].equals("in") ? Op.IN : Op.NOT_IN, values);
    }
    checkKey(p);
    return new Requirement(p, Op.EXISTS, Set.of());
  }

  private static Requirement single(String key, Op op, String value, String whole) {
    String k = key.trim();
    String v = value.trim();
    try {
      checkKey(k);
      checkValue(k, v);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("label selector '" + whole + "': " + e.getMessage(), e);
    }
    return new Requirement(k, op, Set.of(v));
  }

  private static void checkKey(String key) {
    int slash = key.lastIndexOf('/');
    String name = slash < 0 ? key : key.substring(slash + 1);
    if (name.isEmpty() || name.length() > 63 || !validChars(name, false)) {
      throw new IllegalArgumentException("'" + key + "' is not a label key");
    }
    if (slash >= 0) {
      String prefix = key.substring(0, slash);
      if (prefix.isEmpty() || prefix.length() > 253 || !validChars(prefix, false)) {
        throw new IllegalArgumentException("'" + key + "' is not a label key");
      }
    }
  }

  private static void checkValue(String key, String value) {
    if (value.length() > 63 || !validChars(value, true)) {
      throw new IllegalArgumentException(
          "'" + value + "' is not a label value (of key '" + key + "')");
    }
  }

  private static boolean validChars(String s, boolean emptyOk) {
    if (s.isEmpty()) return emptyOk;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean ok =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || c == '.'
              || c == '_'
              || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof LabelSelector other && toString().equals(other.toString());
  }

  @Override
  public int hashCode() {
    return toString().hashCode();
  }

  /** The canonical string form, as sent to the API server. */
  @Override
  public String toString() {
    StringJoiner j = new StringJoiner(",");
    for (Requirement r : requirements) j.add(r.toString());
    return j.toString();
  }
}
