package io.kvrouter.tokenize.jinja;

import java.util.ArrayList;
import java.util.List;

/**
 * Cuts a Jinja2 template into tokens: text between tags, the tags' delimiters, and the names,
 * literals and operators inside them, applying the whitespace rules of the environment transformers
 * renders chat templates in ({@code trim_blocks=True}, {@code lstrip_blocks=True}).
 *
 * <pre>
 * Implementation notes
 *
 * One Lexer per template, used once by Parser (tokens()) on the caller's thread; its fields are
 * the scan's state. pos is the next source index not yet read; line the 1-based line at pos; text
 * collects the text before the next tag (flushed as one TEXT token starting at textLine when a
 * tag opens, so whitespace control can still trim it); stripNextText and trimNewline say what the
 * last tag's end asks of the text after it.
 *
 * Jinja2's whitespace rules, applied where Jinja2's own lexer applies them: "-" on a tag strips
 * all whitespace on that side, lstrip_blocks removes spaces and tabs between a line start and a
 * block or comment tag (not before {{, and not with "+"), trim_blocks drops the first newline after
 * a block or comment tag. {% raw %} ... {% endraw %} is one TEXT token. Inside a tag, brackets are
 * counted so that a "}}" closing a dict literal does not end a {{ ... }} tag. Invariant: the token
 * list ends with exactly one EOF, whose line is the template's last; every token's line is the
 * line it starts on (a string literal spanning lines: the line it ends on).
 * </pre>
 */
final class Lexer {
  /** What a token is. */
  enum Type {
    TEXT,
    BLOCK_BEGIN,
    BLOCK_END,
    VAR_BEGIN,
    VAR_END,
    NAME,
    STRING,
    INT,
    FLOAT,
    OP,
    EOF
  }

  /** One token: its type, its text (a string literal's value, unescaped), its template line. */
  record Token(Type type, String value, int line) {}

  private static final String[] OPS = {
    "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "(", ")", "[", "]",
    "{", "}", ".", ",", ":", "|", "="
  };

  private final String src;
  private final int n;
  private final List<Token> toks = new ArrayList<>();
  private final StringBuilder text = new StringBuilder();
  private int pos;
  private int line = 1;
  private int textLine = 1;
  private boolean stripNextText; // a "-" on the previous tag's end
  private boolean trimNewline; // trim_blocks after a block or comment tag

  private Lexer(String src) {
    this.src = src;
    this.n = src.length();
  }

  /**
   * The tokens of {@code src} (the template without its single trailing newline), ending with EOF.
   *
   * @throws TemplateException for an unterminated tag, comment, raw block or string, or a character
   *     no token starts with
   */
  static List<Token> tokens(String src) {
    Lexer l = new Lexer(src);
    l.run();
    return l.toks;
  }

  private void run() {
    while (pos <= n) {
      int open = nextOpen(pos);
      int end = open < 0 ? n : open;
      appendText(src.substring(pos, end));
      line += count(src, pos, end);
      if (open < 0) {
        break;
      }
      char kind = src.charAt(open + 1);
      int j = openTag(open, kind);
      if (kind == '#') {
        pos = comment(open, j);
      } else if (kind == '%' && src.startsWith("raw", skipWs(j)) && isRawOpen(skipWs(j))) {
        pos = raw(open, j);
      } else {
        pos = tag(kind, j);
      }
      textLine = line;
    }
    if (text.length() > 0) {
      toks.add(new Token(Type.TEXT, text.toString(), textLine));
    }
    toks.add(new Token(Type.EOF, "<end of template>", line));
  }

  /** Adds text before a tag, after the whitespace control the previous tag's end asked for. */
  private void appendText(String chunk) {
    if (trimNewline) {
      if (chunk.startsWith("\r\n")) {
        chunk = chunk.substring(2);
      } else if (chunk.startsWith("\n")) {
        chunk = chunk.substring(1);
      }
      trimNewline = false;
    }
    if (stripNextText) {
      chunk = lstripAll(chunk);
      stripNextText = false;
    }
    text.append(chunk);
  }

  /**
   * Applies the whitespace control of a tag opening at {@code open} to the text before it, flushes
   * that text as a token, and returns the index after the opening delimiter and its modifier.
   */
  private int openTag(int open, char kind) {
    int j = open + 2;
    char mod = j < n ? src.charAt(j) : 0;
    if (mod == '-') {
      rstripAll(text);
      j++;
    } else if (mod == '+') {
      j++;
    } else if (kind != '{' && atLineStart(open)) {
      lstripBlock(text);
    }
    if (text.length() > 0) {
      toks.add(new Token(Type.TEXT, text.toString(), textLine));
      text.setLength(0);
    }
    return j;
  }

  /**
   * Skips a comment {@code {# ... #}} whose body starts at {@code j}; returns the index after it.
   */
  private int comment(int open, int j) {
    int end = src.indexOf("#}", j);
    if (end < 0) {
      throw new TemplateException(line, "missing end of comment tag");
    }
    line += count(src, open, end + 2);
    boolean dash = end > j && src.charAt(end - 1) == '-';
    boolean plus = end > j && src.charAt(end - 1) == '+';
    stripNextText = dash;
    trimNewline = !dash && !plus;
    return end + 2;
  }

  /** {@code {% raw %} ... {% endraw %}} as one text token; returns the index after the end tag. */
  private int raw(int open, int j) {
    int afterOpen = src.indexOf("%}", j) + 2;
    boolean openDash = src.charAt(afterOpen - 3) == '-';
    int endTag = findEndRaw(afterOpen);
    if (endTag < 0) {
      throw new TemplateException(line, "missing {% endraw %}");
    }
    String raw = src.substring(afterOpen, endTag);
    int endTagClose = src.indexOf("%}", endTag) + 2;
    boolean endOpenDash = src.charAt(endTag + 2) == '-';
    boolean endCloseDash = src.charAt(endTagClose - 3) == '-';
    if (openDash) {
      raw = lstripAll(raw);
    } else if (raw.startsWith("\n")) {
      raw = raw.substring(1);
    }
    StringBuilder rb = new StringBuilder(raw);
    if (endOpenDash) {
      rstripAll(rb);
    } else if (atLineStart(endTag)) {
      lstripBlock(rb);
    }
    if (rb.length() > 0) {
      toks.add(new Token(Type.TEXT, rb.toString(), line));
    }
    line += count(src, open, endTagClose);
    stripNextText = endCloseDash;
    trimNewline = !endCloseDash;
    return endTagClose;
  }

  /**
   * The tokens of a {@code {% ... %}} or {@code {{ ... }}} tag whose content starts at {@code j},
   * its delimiters included; returns the index after its end.
   */
  private int tag(char kind, int j) {
    toks.add(new Token(kind == '%' ? Type.BLOCK_BEGIN : Type.VAR_BEGIN, "", line));
    String close = kind == '%' ? "%}" : "}}";
    int depth = 0;
    while (true) {
      while (j < n && Character.isWhitespace(src.charAt(j))) {
        if (src.charAt(j) == '\n') {
          line++;
        }
        j++;
      }
      if (j >= n) {
        throw new TemplateException(line, "unexpected end of template, expected '" + close + "'");
      }
      if (depth == 0
          && (src.startsWith(close, j)
              || ((src.charAt(j) == '-' || src.charAt(j) == '+')
                  && src.startsWith(close, j + 1)))) {
        boolean dash = src.charAt(j) == '-';
        boolean plus = src.charAt(j) == '+';
        toks.add(new Token(kind == '%' ? Type.BLOCK_END : Type.VAR_END, "", line));
        stripNextText = dash;
        trimNewline = kind == '%' && !dash && !plus;
        return j + ((dash || plus) ? 3 : 2);
      }
      char c = src.charAt(j);
      if (c == '\'' || c == '"') {
        j = string(j, c);
      } else if (Character.isDigit(c)) {
        j = number(j);
      } else if (Character.isLetter(c) || c == '_') {
        j = name(j);
      } else {
        String op = op(j, c);
        if (op.equals("{") || op.equals("[") || op.equals("(")) {
          depth++;
        } else if (op.equals("}") || op.equals("]") || op.equals(")")) {
          depth = Math.max(0, depth - 1);
        }
        j += op.length();
      }
    }
  }

  /** A string literal quoted with {@code q} starting at {@code j}; returns the index after it. */
  private int string(int j, char q) {
    int k = j + 1;
    StringBuilder sb = new StringBuilder();
    while (k < n && src.charAt(k) != q) {
      char d = src.charAt(k);
      if (d == '\\' && k + 1 < n) {
        k = unescape(k, sb);
        continue;
      }
      if (d == '\n') {
        line++;
      }
      sb.append(d);
      k++;
    }
    if (k >= n) {
      throw new TemplateException(line, "unterminated string");
    }
    toks.add(new Token(Type.STRING, sb.toString(), line));
    return k + 1;
  }

  /** An integer or float literal ({@code _} separators, exponents) at {@code j}. */
  private int number(int j) {
    int k = j;
    while (k < n && (Character.isDigit(src.charAt(k)) || src.charAt(k) == '_')) {
      k++;
    }
    boolean isFloat = false;
    if (k + 1 < n && src.charAt(k) == '.' && Character.isDigit(src.charAt(k + 1))) {
      isFloat = true;
      k++;
      while (k < n && Character.isDigit(src.charAt(k))) {
        k++;
      }
    }
    if (k < n && (src.charAt(k) == 'e' || src.charAt(k) == 'E')) {
      int e = k + 1;
      if (e < n && (src.charAt(e) == '+' || src.charAt(e) == '-')) {
        e++;
      }
      if (e < n && Character.isDigit(src.charAt(e))) {
        isFloat = true;
        k = e;
        while (k < n && Character.isDigit(src.charAt(k))) {
          k++;
        }
      }
    }
    toks.add(
        new Token(isFloat ? Type.FLOAT : Type.INT, src.substring(j, k).replace("_", ""), line));
    return k;
  }

  /** A name (identifier or keyword) at {@code j}. */
  private int name(int j) {
    int k = j;
    while (k < n && (Character.isLetterOrDigit(src.charAt(k)) || src.charAt(k) == '_')) {
      k++;
    }
    toks.add(new Token(Type.NAME, src.substring(j, k), line));
    return k;
  }

  /** The operator at {@code j} (the longest of OPS), added as a token. */
  private String op(int j, char c) {
    for (String o : OPS) {
      if (src.startsWith(o, j)) {
        toks.add(new Token(Type.OP, o, line));
        return o;
      }
    }
    throw new TemplateException(line, "unexpected character '" + c + "'");
  }

  private boolean isRawOpen(int k) {
    int after = k + 3;
    int close = src.indexOf("%}", after);
    if (close < 0) {
      return false;
    }
    String between = src.substring(after, close).strip();
    return between.isEmpty() || between.equals("-") || between.equals("+");
  }

  private int findEndRaw(int from) {
    int k = from;
    while (true) {
      int o = src.indexOf("{%", k);
      if (o < 0) {
        return -1;
      }
      int m = o + 2;
      if (m < n && (src.charAt(m) == '-' || src.charAt(m) == '+')) {
        m++;
      }
      m = skipWs(m);
      if (src.startsWith("endraw", m)) {
        return o;
      }
      k = o + 2;
    }
  }

  private int skipWs(int k) {
    while (k < n && Character.isWhitespace(src.charAt(k))) {
      k++;
    }
    return k;
  }

  private int unescape(int k, StringBuilder sb) {
    char e = src.charAt(k + 1);
    switch (e) {
      case 'n' -> sb.append('\n');
      case 't' -> sb.append('\t');
      case 'r' -> sb.append('\r');
      case 'b' -> sb.append('\b');
      case 'f' -> sb.append('\f');
      case 'v' -> sb.append('\u000b');
      case 'a' -> sb.append('\u0007');
      case '0' -> sb.append('\0');
      case '\\' -> sb.append('\\');
      case '\'' -> sb.append('\'');
      case '"' -> sb.append('"');
      case '\n' -> {}
      case 'x', 'u', 'U' -> {
        int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        String hex = src.substring(k + 2, Math.min(n, k + 2 + len));
        if (hex.length() == len && hex.chars().allMatch(ch -> Character.digit(ch, 16) >= 0)) {
          sb.appendCodePoint(Integer.parseInt(hex, 16));
          return k + 2 + len;
        }
        sb.append('\\').append(e);
      }
      default -> sb.append('\\').append(e); // Python keeps unknown escapes as written
    }
    return k + 2;
  }

  private static int count(String s, int from, int to) {
    int c = 0;
    for (int k = from; k < to; k++) {
      if (s.charAt(k) == '\n') {
        c++;
      }
    }
    return c;
  }

  private int nextOpen(int from) {
    int k = from;
    while (true) {
      int o = src.indexOf('{', k);
      if (o < 0 || o + 1 >= n) {
        return -1;
      }
      char c = src.charAt(o + 1);
      if (c == '{' || c == '%' || c == '#') {
        return o;
      }
      k = o + 1;
    }
  }

  private static String lstripAll(String s) {
    int a = 0;
    while (a < s.length() && Character.isWhitespace(s.charAt(a))) {
      a++;
    }
    return s.substring(a);
  }

  private static void rstripAll(StringBuilder sb) {
    int b = sb.length();
    while (b > 0 && Character.isWhitespace(sb.charAt(b - 1))) {
      b--;
    }
    sb.setLength(b);
  }

  /** Whether only spaces and tabs stand between the last line start of the source and i. */
  private boolean atLineStart(int i) {
    int p = i;
    while (p > 0 && (src.charAt(p - 1) == ' ' || src.charAt(p - 1) == '\t')) {
      p--;
    }
    return p == 0 || src.charAt(p - 1) == '\n' || src.charAt(p - 1) == '\r';
  }

  /** lstrip_blocks: drops spaces and tabs between the last line start and the tag. */
  private static void lstripBlock(StringBuilder sb) {
    int b = sb.length();
    while (b > 0 && (sb.charAt(b - 1) == ' ' || sb.charAt(b - 1) == '\t')) {
      b--;
    }
    sb.setLength(b);
  }
}
