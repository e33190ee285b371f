package io.kvrouter.transport.nats;

import org.jspecify.annotations.Nullable;

/** NATS subject rules the transport needs: validation, wildcard matching and overlap. */
final class Subjects {
  /** JetStream API error code: stream not found. */
  static final int STREAM_NOT_FOUND = 10059;

  /** JetStream API error code: consumer not found. */
  static final int CONSUMER_NOT_FOUND = 10014;

  private Subjects() {}

  /**
   * Why {@code subject} is not a valid subject (or pattern, with {@code wildcards}), or null when
   * it is: tokens separated by {@code .}, none empty, no whitespace; {@code *} and {@code >} only
   * as whole tokens, {@code >} only last.
   */
  static @Nullable String problem(String subject, boolean wildcards) {
    if (subject.isEmpty()) return "empty";
    String[] tokens = subject.split("\\.", -1);
    for (int i = 0; i < tokens.length; i++) {
      String t = tokens[i];
      if (t.isEmpty()) return "empty token at position " + i;
      for (int j = 0; j < t.length(); j++) {
        char c = t.charAt(j);
        if (c <= ' ' || c == 127) return "whitespace or control character in token \"" + t + "\"";
        if ((c == '*' || c == '>') && t.length() > 1) {
          return "'" + c + "' inside token \"" + t + "\"";
        }
      }
      if (t.equals("*") || t.equals(">")) {
        if (!wildcards) return "wildcard '" + t + "' where a concrete subject is needed";
        if (t.equals(">") && i != tokens.length - 1) return "'>' must be the last token";
      }
    }
    return null;
  }

  /** Whether the concrete {@code subject} is matched by {@code pattern}. */
  static boolean matches(String pattern, String subject) {
    String[] p = pattern.split("\\.", -1);
    String[] s = subject.split("\\.", -1);
    for (int i = 0; i < p.length; i++) {
      if (p[i].equals(">")) return s.length > i;
      if (i >= s.length) return false;
      if (!p[i].equals("*") && !p[i].equals(s[i])) return false;
    }
    return p.length == s.length;
  }

  /**
   * Whether some concrete subject matches both patterns; an empty or null pattern (a consumer
   * without filter) matches everything.
   */
  static boolean overlap(@Nullable String a, @Nullable String b) {
    if (a == null || a.isEmpty() || b == null || b.isEmpty()) return true;
    String[] x = a.split("\\.", -1);
    String[] y = b.split("\\.", -1);
    for (int i = 0; ; i++) {
      boolean xEnd = i >= x.length;
      boolean yEnd = i >= y.length;
      if (xEnd || yEnd) return xEnd && yEnd;
      if (x[i].equals(">") || y[i].equals(">")) return true;
      if (!x[i].equals("*") && !y[i].equals("*") && !x[i].equals(y[i])) return false;
    }
  }
}
