package io.kvrouter.tokenize.jinja;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a Jinja2 template into a tree, with the environment transformers renders chat templates in:
 * {@code trim_blocks=True}, {@code lstrip_blocks=True}, a single trailing newline dropped, the
 * {@code loopcontrols} extension ({@code break}, {@code continue}) and transformers' {@code {%
 * generation %}} tag (rendered as its body).
 *
 * <pre>
 * Implementation notes
 *
 * Two passes. lex() cuts the source into text and tag tokens, applying Jinja2's whitespace
 * rules where Jinja2's own lexer applies them: "-" on a tag strips all whitespace on that side,
 * lstrip_blocks removes spaces and tabs between a line start and a block or comment tag (not
 * before {{, and not with "+"), trim_blocks drops the first newline after a block or comment tag.
 * parse() is recursive descent over Jinja2's grammar and precedence (jinja2/parser.py): condexpr
 * < or < and < not < compare (with in / not in) < + - < ~ < * / // % < ** < unary - + < postfix
 * (.attr, [item], [a:b:c], call, | filter, is test). Every node carries the template line it
 * started on, which errors print. A parse is done once per template; the tree is immutable and
 * shared by concurrent renders.
 * </pre>
 */
final class JinjaParser {

  // ------------------------------------------------------------------ tree

  sealed interface Node permits Stmt, Expr {
    int line();
  }

  sealed interface Stmt extends Node {}

  record Text(int line, String text) implements Stmt {}

  record Output(int line, Expr expr) implements Stmt {}

  record If(int line, Expr test, List<Stmt> body, List<Stmt> orelse) implements Stmt {}

  record For(
      int line, List<String> targets, Expr iter, Expr filter, List<Stmt> body, List<Stmt> orelse)
      implements Stmt {}

  /** {@code set}: one name, several names (tuple unpacking) or {@code ns.attr}; or a block set. */
  record Set(
      int line,
      List<String> names,
      String nsAttr,
      Expr value,
      List<Stmt> body,
      List<FilterCall> filters)
      implements Stmt {}

  record Macro(int line, String name, List<String> params, List<Expr> defaults, List<Stmt> body)
      implements Stmt {}

  record CallBlock(int line, Expr call, List<String> params, List<Expr> defaults, List<Stmt> body)
      implements Stmt {}

  record FilterBlock(int line, List<FilterCall> filters, List<Stmt> body) implements Stmt {}

  record Break(int line) implements Stmt {}

  record Continue(int line) implements Stmt {}

  sealed interface Expr extends Node {}

  record Const(int line, Object value) implements Expr {}

  record Name(int line, String name) implements Expr {}

  record GetAttr(int line, Expr obj, String attr) implements Expr {}

  record GetItem(int line, Expr obj, Expr key) implements Expr {}

  record Slice(int line, Expr obj, Expr start, Expr stop, Expr step) implements Expr {}

  record Call(int line, Expr fn, List<Expr> args, Map<String, Expr> kwargs) implements Expr {}

  record FilterCall(int line, String name, List<Expr> args, Map<String, Expr> kwargs) {}

  record Filter(int line, Expr value, FilterCall filter) implements Expr {}

  record Test(int line, Expr value, String name, List<Expr> args, boolean negate) implements Expr {}

  record BinOp(int line, String op, Expr left, Expr right) implements Expr {}

  record Unary(int line, String op, Expr operand) implements Expr {}

  record Cond(int line, Expr test, Expr then, Expr orelse) implements Expr {}

  record ListLit(int line, List<Expr> items) implements Expr {}

  record DictLit(int line, List<Expr> keys, List<Expr> values) implements Expr {}

  // ------------------------------------------------------------------ lexer

  private enum T {
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

  private record Tok(T type, String value, int line) {}

  private static final String[] OPS = {
    "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "(", ")", "[", "]",
    "{", "}", ".", ",", ":", "|", "="
  };

  private final String src;
  private final List<Tok> toks = new ArrayList<>();
  private int pos;

  private JinjaParser(String source) {
    this.src = source.endsWith("\n") ? source.substring(0, source.length() - 1) : source;
  }

  /** Parses a template. */
  static List<Stmt> parse(String source) {
    JinjaParser p = new JinjaParser(source);
    p.lex();
    List<Stmt> body = p.statements(java.util.Set.of());
    if (p.peek().type != T.EOF) {
      Tok t = p.peek();
      throw new TemplateException(t.line, "unexpected '" + t.value + "'");
    }
    return body;
  }

  private int lineAt(int i) {
    int line = 1;
    for (int k = 0; k < i && k < src.length(); k++) {
      if (src.charAt(k) == '\n') {
        line++;
      }
    }
    return line;
  }

  private void lex() {
    int i = 0;
    int n = src.length();
    int line = 1;
    boolean stripNextText = false; // a "-" on the previous tag's end
    boolean trimNewline = false; // trim_blocks after a block or comment tag
    StringBuilder text = new StringBuilder();
    int textLine = 1;
    while (i <= n) {
      int open = nextOpen(i);
      String chunk = src.substring(i, open < 0 ? n : open);
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
      line += count(src, i, open < 0 ? n : open);
      if (open < 0) {
        break;
      }
      char kind = src.charAt(open + 1);
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
        toks.add(new Tok(T.TEXT, text.toString(), textLine));
        text.setLength(0);
      }
      if (kind == '#') {
        int end = src.indexOf("#}", j);
        if (end < 0) {
          throw new TemplateException(line, "missing end of comment tag");
        }
        line += count(src, open, end + 2);
        boolean dash = end > j && src.charAt(end - 1) == '-';
        boolean plus = end > j && src.charAt(end - 1) == '+';
        i = end + 2;
        stripNextText = dash;
        trimNewline = !dash && !plus;
        textLine = line;
        continue;
      }
      // raw block: {% raw %} ... {% endraw %}
      if (kind == '%' && src.startsWith("raw", skipWs(j)) && isRawOpen(skipWs(j))) {
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
          toks.add(new Tok(T.TEXT, rb.toString(), line));
        }
        line += count(src, open, endTagClose);
        i = endTagClose;
        stripNextText = endCloseDash;
        trimNewline = !endCloseDash;
        textLine = line;
        continue;
      }
      toks.add(new Tok(kind == '%' ? T.BLOCK_BEGIN : T.VAR_BEGIN, "", line));
      String close = kind == '%' ? "%}" : "}}";
      // expression tokens
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
          j += (dash || plus) ? 3 : 2;
          toks.add(new Tok(kind == '%' ? T.BLOCK_END : T.VAR_END, "", line));
          stripNextText = dash;
          trimNewline = kind == '%' && !dash && !plus;
          break;
        }
        char c = src.charAt(j);
        if (c == '\'' || c == '"') {
          int k = j + 1;
          StringBuilder sb = new StringBuilder();
          while (k < n && src.charAt(k) != c) {
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
          toks.add(new Tok(T.STRING, sb.toString(), line));
          j = k + 1;
          continue;
        }
        if (Character.isDigit(c)) {
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
          toks.add(new Tok(isFloat ? T.FLOAT : T.INT, src.substring(j, k).replace("_", ""), line));
          j = k;
          continue;
        }
        if (Character.isLetter(c) || c == '_') {
          int k = j;
          while (k < n && (Character.isLetterOrDigit(src.charAt(k)) || src.charAt(k) == '_')) {
            k++;
          }
          toks.add(new Tok(T.NAME, src.substring(j, k), line));
          j = k;
          continue;
        }
        String op = null;
        for (String o : OPS) {
          if (src.startsWith(o, j)) {
            op = o;
            break;
          }
        }
        if (op == null) {
          throw new TemplateException(line, "unexpected character '" + c + "'");
        }
        if (op.equals("{") || op.equals("[") || op.equals("(")) {
          depth++;
        } else if (op.equals("}") || op.equals("]") || op.equals(")")) {
          depth = Math.max(0, depth - 1);
        }
        toks.add(new Tok(T.OP, op, line));
        j += op.length();
      }
      i = j;
      textLine = line;
    }
    if (text.length() > 0) {
      toks.add(new Tok(T.TEXT, text.toString(), textLine));
    }
    toks.add(new Tok(T.EOF, "<end of template>", line));
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
      if (m < src.length() && (src.charAt(m) == '-' || src.charAt(m) == '+')) {
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
    while (k < src.length() && Character.isWhitespace(src.charAt(k))) {
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
        String hex = src.substring(k + 2, Math.min(src.length(), k + 2 + len));
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
      if (o < 0 || o + 1 >= src.length()) {
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

  // ------------------------------------------------------------------ parser helpers

  private Tok peek() {
    return toks.get(pos);
  }

  private Tok peek(int ahead) {
    return toks.get(Math.min(pos + ahead, toks.size() - 1));
  }

  private Tok next() {
    return toks.get(pos++);
  }

  private boolean isOp(String op) {
    Tok t = peek();
    return t.type == T.OP && t.value.equals(op);
  }

  private boolean isName(String name) {
    Tok t = peek();
    return t.type == T.NAME && t.value.equals(name);
  }

  private Tok expectOp(String op) {
    Tok t = next();
    if (t.type != T.OP || !t.value.equals(op)) {
      throw new TemplateException(t.line, "expected '" + op + "', got '" + describe(t) + "'");
    }
    return t;
  }

  private Tok expect(T type, String what) {
    Tok t = next();
    if (t.type != type) {
      throw new TemplateException(t.line, "expected " + what + ", got '" + describe(t) + "'");
    }
    return t;
  }

  private void expectName(String name) {
    Tok t = next();
    if (t.type != T.NAME || !t.value.equals(name)) {
      throw new TemplateException(t.line, "expected '" + name + "', got '" + describe(t) + "'");
    }
  }

  private static String describe(Tok t) {
    return switch (t.type) {
      case BLOCK_END -> "%}";
      case VAR_END -> "}}";
      case BLOCK_BEGIN -> "{%";
      case VAR_BEGIN -> "{{";
      case TEXT -> "text";
      default -> t.value;
    };
  }

  // ------------------------------------------------------------------ statements

  /** Parses statements until a block tag whose name is in {@code ends} (not consumed). */
  private List<Stmt> statements(java.util.Set<String> ends) {
    List<Stmt> out = new ArrayList<>();
    while (true) {
      Tok t = peek();
      switch (t.type) {
        case EOF -> {
          if (!ends.isEmpty()) {
            throw new TemplateException(
                t.line,
                "unexpected end of template; expected one of "
                    + String.join(", ", new java.util.TreeSet<>(ends)));
          }
          return out;
        }
        case TEXT -> out.add(new Text(next().line, t.value));
        case VAR_BEGIN -> {
          next();
          Expr e = expression();
          expect(T.VAR_END, "'}}'");
          out.add(new Output(t.line, e));
        }
        case BLOCK_BEGIN -> {
          Tok name = peek(1);
          if (name.type == T.NAME && ends.contains(name.value)) {
            return out;
          }
          next();
          out.add(statement(name));
        }
        default -> throw new TemplateException(t.line, "unexpected '" + describe(t) + "'");
      }
    }
  }

  private Stmt statement(Tok nameTok) {
    Tok t = expect(T.NAME, "a statement name");
    int line = t.line;
    switch (t.value) {
      case "if" -> {
        return ifStatement(line);
      }
      case "for" -> {
        List<String> targets = new ArrayList<>();
        targets.add(expect(T.NAME, "a loop variable").value);
        while (isOp(",")) {
          next();
          targets.add(expect(T.NAME, "a loop variable").value);
        }
        expectName("in");
        Expr iter = condless();
        Expr filter = null;
        if (isName("if")) {
          next();
          filter = condless();
        }
        if (isName("recursive")) {
          throw new TemplateException(line, "recursive for loops are not supported");
        }
        expect(T.BLOCK_END, "'%}'");
        List<Stmt> body = statements(java.util.Set.of("endfor", "else"));
        List<Stmt> orelse = List.of();
        if (endTag("else")) {
          orelse = statements(java.util.Set.of("endfor"));
        }
        endTag("endfor");
        return new For(line, targets, iter, filter, body, orelse);
      }
      case "set" -> {
        List<String> names = new ArrayList<>();
        String first = expect(T.NAME, "a variable name").value;
        String nsAttr = null;
        if (isOp(".")) {
          next();
          nsAttr = expect(T.NAME, "an attribute name").value;
        }
        names.add(first);
        while (isOp(",")) {
          next();
          names.add(expect(T.NAME, "a variable name").value);
        }
        if (isOp("=")) {
          next();
          Expr value = tupleOrExpression();
          expect(T.BLOCK_END, "'%}'");
          return new Set(line, names, nsAttr, value, null, List.of());
        }
        List<FilterCall> filters = new ArrayList<>();
        while (isOp("|")) {
          next();
          filters.add(filterCall());
        }
        expect(T.BLOCK_END, "'%}'");
        List<Stmt> body = statements(java.util.Set.of("endset"));
        endTag("endset");
        return new Set(line, names, nsAttr, null, body, filters);
      }
      case "macro" -> {
        String name = expect(T.NAME, "a macro name").value;
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        signature(params, defaults);
        expect(T.BLOCK_END, "'%}'");
        List<Stmt> body = statements(java.util.Set.of("endmacro"));
        endTag("endmacro");
        return new Macro(line, name, params, defaults, body);
      }
      case "call" -> {
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        if (isOp("(")) {
          signature(params, defaults);
        }
        Expr call = expression();
        if (!(call instanceof Call)) {
          throw new TemplateException(line, "expected a call after {% call %}");
        }
        expect(T.BLOCK_END, "'%}'");
        List<Stmt> body = statements(java.util.Set.of("endcall"));
        endTag("endcall");
        return new CallBlock(line, call, params, defaults, body);
      }
      case "filter" -> {
        List<FilterCall> filters = new ArrayList<>();
        filters.add(filterCall());
        while (isOp("|")) {
          next();
          filters.add(filterCall());
        }
        expect(T.BLOCK_END, "'%}'");
        List<Stmt> body = statements(java.util.Set.of("endfilter"));
        endTag("endfilter");
        return new FilterBlock(line, filters, body);
      }
      case "generation" -> {
        expect(T.BLOCK_END, "'%}'");
        List<Stmt> body = statements(java.util.Set.of("endgeneration"));
        endTag("endgeneration");
        return new If(line, new Const(line, true), body, List.of());
      }
      case "break" -> {
        expect(T.BLOCK_END, "'%}'");
        return new Break(line);
      }
      case "continue" -> {
        expect(T.BLOCK_END, "'%}'");
        return new Continue(line);
      }
      default -> throw new TemplateException(line, "unknown tag '" + t.value + "'");
    }
  }

  private Stmt ifStatement(int line) {
    Expr test = tupleOrExpression();
    expect(T.BLOCK_END, "'%}'");
    List<Stmt> body = statements(java.util.Set.of("elif", "else", "endif"));
    Tok at = peek(1);
    if (endTag("elif")) {
      Stmt nested = ifStatementNoEnd(at.line);
      return new If(line, test, body, List.of(nested));
    }
    List<Stmt> orelse = List.of();
    if (endTag("else")) {
      orelse = statements(java.util.Set.of("endif"));
    }
    endTag("endif");
    return new If(line, test, body, orelse);
  }

  /** An elif chain: like ifStatement, and the final endif is consumed by the innermost. */
  private Stmt ifStatementNoEnd(int line) {
    return ifStatement(line);
  }

  /** Consumes {@code {% name %}} if it is next (name and '%}'); returns whether it did. */
  private boolean endTag(String name) {
    if (peek().type == T.BLOCK_BEGIN && peek(1).type == T.NAME && peek(1).value.equals(name)) {
      next();
      next();
      if (!name.equals("elif")) {
        if (peek().type == T.NAME && (name.startsWith("end"))) {
          next(); // Jinja2 allows a name after endblock/endmacro; ignore it
        }
        expect(T.BLOCK_END, "'%}'");
      }
      return true;
    }
    if (name.startsWith("end")) {
      Tok t = peek();
      throw new TemplateException(t.line, "expected {% " + name + " %}, got '" + describe(t) + "'");
    }
    return false;
  }

  private void signature(List<String> params, List<Expr> defaults) {
    expectOp("(");
    while (!isOp(")")) {
      params.add(expect(T.NAME, "a parameter name").value);
      if (isOp("=")) {
        next();
        defaults.add(expression());
      } else {
        if (!defaults.isEmpty()) {
          throw new TemplateException(peek().line, "non-default argument follows default argument");
        }
      }
      if (!isOp(")")) {
        expectOp(",");
      }
    }
    next();
  }

  private FilterCall filterCall() {
    Tok name = expect(T.NAME, "a filter name");
    StringBuilder full = new StringBuilder(name.value);
    while (isOp(".")) {
      next();
      full.append('.').append(expect(T.NAME, "a filter name").value);
    }
    List<Expr> args = new ArrayList<>();
    Map<String, Expr> kwargs = new LinkedHashMap<>();
    if (isOp("(")) {
      callArgs(args, kwargs);
    }
    return new FilterCall(name.line, full.toString(), args, kwargs);
  }

  // ------------------------------------------------------------------ expressions

  private Expr tupleOrExpression() {
    Expr first = expression();
    if (!isOp(",")) {
      return first;
    }
    List<Expr> items = new ArrayList<>();
    items.add(first);
    while (isOp(",")) {
      next();
      if (peek().type == T.BLOCK_END || isOp(")")) {
        break;
      }
      items.add(expression());
    }
    return new ListLit(first.line(), items);
  }

  private Expr expression() {
    Expr e = or();
    while (isName("if")) {
      int line = next().line;
      Expr test = or();
      Expr orelse = null;
      if (isName("else")) {
        next();
        orelse = expression();
      }
      e = new Cond(line, test, e, orelse);
    }
    return e;
  }

  /** An expression without a trailing inline if (for-loop iterables and filters). */
  private Expr condless() {
    return or();
  }

  private Expr or() {
    Expr l = and();
    while (isName("or")) {
      int line = next().line;
      l = new BinOp(line, "or", l, and());
    }
    return l;
  }

  private Expr and() {
    Expr l = not();
    while (isName("and")) {
      int line = next().line;
      l = new BinOp(line, "and", l, not());
    }
    return l;
  }

  private Expr not() {
    if (isName("not")) {
      int line = next().line;
      return new Unary(line, "not", not());
    }
    return compare();
  }

  private Expr compare() {
    Expr l = math1();
    while (true) {
      Tok t = peek();
      if (t.type == T.OP
          && (t.value.equals("==")
              || t.value.equals("!=")
              || t.value.equals("<")
              || t.value.equals(">")
              || t.value.equals("<=")
              || t.value.equals(">="))) {
        next();
        l = new BinOp(t.line, t.value, l, math1());
      } else if (isName("in")) {
        next();
        l = new BinOp(t.line, "in", l, math1());
      } else if (isName("not") && peek(1).type == T.NAME && peek(1).value.equals("in")) {
        next();
        next();
        l = new BinOp(t.line, "not in", l, math1());
      } else {
        return l;
      }
    }
  }

  private Expr math1() {
    Expr l = concat();
    while (isOp("+") || isOp("-")) {
      Tok t = next();
      l = new BinOp(t.line, t.value, l, concat());
    }
    return l;
  }

  private Expr concat() {
    Expr l = math2();
    while (isOp("~")) {
      Tok t = next();
      l = new BinOp(t.line, "~", l, math2());
    }
    return l;
  }

  private Expr math2() {
    Expr l = pow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      Tok t = next();
      l = new BinOp(t.line, t.value, l, pow());
    }
    return l;
  }

  private Expr pow() {
    Expr l = unary(true);
    while (isOp("**")) {
      Tok t = next();
      l = new BinOp(t.line, "**", l, unary(true));
    }
    return l;
  }

  private Expr unary(boolean withFilter) {
    Expr node;
    if (isOp("-") || isOp("+")) {
      Tok t = next();
      node = new Unary(t.line, t.value, unary(false));
    } else {
      node = primary();
    }
    node = postfix(node);
    if (withFilter) {
      node = filterExpr(node);
    }
    return node;
  }

  private Expr primary() {
    Tok t = next();
    switch (t.type) {
      case NAME -> {
        return switch (t.value) {
          case "true", "True" -> new Const(t.line, Boolean.TRUE);
          case "false", "False" -> new Const(t.line, Boolean.FALSE);
          case "none", "None" -> new Const(t.line, null);
          default -> new Name(t.line, t.value);
        };
      }
      case STRING -> {
        StringBuilder sb = new StringBuilder(t.value);
        while (peek().type == T.STRING) {
          sb.append(next().value);
        }
        return new Const(t.line, sb.toString());
      }
      case INT -> {
        return new Const(t.line, Long.parseLong(t.value));
      }
      case FLOAT -> {
        return new Const(t.line, Double.parseDouble(t.value));
      }
      case OP -> {
        switch (t.value) {
          case "(" -> {
            if (isOp(")")) {
              next();
              return new ListLit(t.line, List.of());
            }
            Expr e = expression();
            if (isOp(",")) {
              List<Expr> items = new ArrayList<>();
              items.add(e);
              while (isOp(",")) {
                next();
                if (isOp(")")) {
                  break;
                }
                items.add(expression());
              }
              e = new ListLit(t.line, items);
            }
            expectOp(")");
            return e;
          }
          case "[" -> {
            List<Expr> items = new ArrayList<>();
            while (!isOp("]")) {
              items.add(expression());
              if (!isOp("]")) {
                expectOp(",");
              }
            }
            next();
            return new ListLit(t.line, items);
          }
          case "{" -> {
            List<Expr> keys = new ArrayList<>();
            List<Expr> values = new ArrayList<>();
            while (!isOp("}")) {
              keys.add(expression());
              expectOp(":");
              values.add(expression());
              if (!isOp("}")) {
                expectOp(",");
              }
            }
            next();
            return new DictLit(t.line, keys, values);
          }
          default -> {}
        }
      }
      default -> {}
    }
    throw new TemplateException(t.line, "unexpected '" + describe(t) + "'");
  }

  private Expr postfix(Expr node) {
    while (true) {
      if (isOp(".")) {
        Tok dot = next();
        Tok name = next();
        if (name.type == T.NAME) {
          node = new GetAttr(dot.line, node, name.value);
        } else if (name.type == T.INT) {
          node = new GetItem(dot.line, node, new Const(name.line, Long.parseLong(name.value)));
        } else {
          throw new TemplateException(name.line, "expected an attribute name after '.'");
        }
      } else if (isOp("[")) {
        Tok open = next();
        node = subscript(open.line, node);
      } else if (isOp("(")) {
        int line = peek().line;
        List<Expr> args = new ArrayList<>();
        Map<String, Expr> kwargs = new LinkedHashMap<>();
        callArgs(args, kwargs);
        node = new Call(line, node, args, kwargs);
      } else {
        return node;
      }
    }
  }

  private Expr subscript(int line, Expr obj) {
    Expr[] parts = new Expr[3];
    int idx = 0;
    boolean isSlice = false;
    while (!isOp("]")) {
      if (isOp(":")) {
        next();
        isSlice = true;
        idx++;
        if (idx > 2) {
          throw new TemplateException(line, "too many ':' in a slice");
        }
        continue;
      }
      parts[idx] = expression();
      if (!isSlice && isOp(",")) {
        throw new TemplateException(line, "tuple subscripts are not supported");
      }
    }
    next();
    if (!isSlice) {
      if (parts[0] == null) {
        throw new TemplateException(line, "expected a subscript");
      }
      return new GetItem(line, obj, parts[0]);
    }
    return new Slice(line, obj, parts[0], parts[1], parts[2]);
  }

  private void callArgs(List<Expr> args, Map<String, Expr> kwargs) {
    expectOp("(");
    while (!isOp(")")) {
      if (peek().type == T.NAME && peek(1).type == T.OP && peek(1).value.equals("=")) {
        String k = next().value;
        next();
        kwargs.put(k, expression());
      } else {
        if (!kwargs.isEmpty()) {
          throw new TemplateException(peek().line, "positional argument follows keyword argument");
        }
        args.add(expression());
      }
      if (!isOp(")")) {
        expectOp(",");
      }
    }
    next();
  }

  private Expr filterExpr(Expr node) {
    while (true) {
      if (isOp("|")) {
        next();
        FilterCall f = filterCall();
        node = new Filter(f.line(), node, f);
      } else if (isName("is")) {
        int line = next().line;
        boolean negate = false;
        if (isName("not")) {
          next();
          negate = true;
        }
        Tok name = next();
        String testName;
        if (name.type == T.NAME) {
          testName = name.value;
        } else if (name.type == T.OP
            && (name.value.equals("==")
                || name.value.equals("!=")
                || name.value.equals("<")
                || name.value.equals(">")
                || name.value.equals("<=")
                || name.value.equals(">="))) {
          testName = name.value;
        } else {
          throw new TemplateException(name.line, "expected a test name after 'is'");
        }
        if (testName.equals("none") || testName.equals("None")) {
          testName = "none";
        } else if (testName.equals("true") || testName.equals("True")) {
          testName = "true";
        } else if (testName.equals("false") || testName.equals("False")) {
          testName = "false";
        }
        List<Expr> args = new ArrayList<>();
        if (isOp("(")) {
          Map<String, Expr> kw = new LinkedHashMap<>();
          callArgs(args, kw);
        } else if (startsPrimary(peek())) {
          args.add(unary(false));
        }
        node = new Test(line, node, testName, args, negate);
      } else if (isOp("(")) {
        int line = peek().line;
        List<Expr> args = new ArrayList<>();
        Map<String, Expr> kwargs = new LinkedHashMap<>();
        callArgs(args, kwargs);
        node = new Call(line, node, args, kwargs);
      } else {
        return node;
      }
    }
  }

  /** Jinja2 takes a test's single argument without parentheses when a primary follows. */
  private static boolean startsPrimary(Tok t) {
    return switch (t.type) {
      case STRING, INT, FLOAT -> true;
      case NAME ->
          !(t.value.equals("else")
              || t.value.equals("or")
              || t.value.equals("and")
              || t.value.equals("is")
              || t.value.equals("in")
              || t.value.equals("if")
              || t.value.equals("not"));
      case OP -> t.value.equals("[") || t.value.equals("{");
      default -> false;
    };
  }
}
