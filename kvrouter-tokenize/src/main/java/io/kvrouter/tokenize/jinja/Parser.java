package io.kvrouter.tokenize.jinja;

import io.kvrouter.tokenize.jinja.Ast.BinOp;
import io.kvrouter.tokenize.jinja.Ast.Break;
import io.kvrouter.tokenize.jinja.Ast.Call;
import io.kvrouter.tokenize.jinja.Ast.CallBlock;
import io.kvrouter.tokenize.jinja.Ast.Cond;
import io.kvrouter.tokenize.jinja.Ast.Const;
import io.kvrouter.tokenize.jinja.Ast.Continue;
import io.kvrouter.tokenize.jinja.Ast.DictLit;
import io.kvrouter.tokenize.jinja.Ast.Expr;
import io.kvrouter.tokenize.jinja.Ast.Filter;
import io.kvrouter.tokenize.jinja.Ast.FilterBlock;
import io.kvrouter.tokenize.jinja.Ast.FilterCall;
import io.kvrouter.tokenize.jinja.Ast.For;
import io.kvrouter.tokenize.jinja.Ast.GetAttr;
import io.kvrouter.tokenize.jinja.Ast.GetItem;
import io.kvrouter.tokenize.jinja.Ast.If;
import io.kvrouter.tokenize.jinja.Ast.ListLit;
import io.kvrouter.tokenize.jinja.Ast.Macro;
import io.kvrouter.tokenize.jinja.Ast.Name;
import io.kvrouter.tokenize.jinja.Ast.Output;
import io.kvrouter.tokenize.jinja.Ast.Slice;
import io.kvrouter.tokenize.jinja.Ast.Stmt;
import io.kvrouter.tokenize.jinja.Ast.Test;
import io.kvrouter.tokenize.jinja.Ast.Text;
import io.kvrouter.tokenize.jinja.Ast.Unary;
import io.kvrouter.tokenize.jinja.Lexer.Token;
import io.kvrouter.tokenize.jinja.Lexer.Type;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Reads a Jinja2 template into a tree ({@link Ast}), with the environment transformers renders chat
 * templates in: {@code trim_blocks=True}, {@code lstrip_blocks=True}, a single trailing newline
 * dropped, the {@code loopcontrols} extension ({@code break}, {@code continue}) and transformers'
 * {@code {% generation %}} tag (rendered as its body).
 *
 * <pre>
 * Implementation notes
 *
 * Two passes: Lexer cuts the source into tokens (applying the whitespace rules), then this class
 * descends recursively over Jinja2's grammar and precedence (jinja2/parser.py): condexpr < or <
 * and < not < compare (with in / not in) < + - < ~ < * / // % < ** < unary - + < postfix (.attr,
 * [item], [a:b:c], call, | filter, is test). Data layout: the token list and pos, the index of
 * the next token to read; one Parser per template, used once on the caller's thread. Every node
 * gets the line of the token it started at. A parse is done once per template; the tree is
 * immutable and shared by concurrent renders.
 * </pre>
 */
final class Parser {
  private final List<Token> toks;
  private int pos;

  private Parser(List<Token> toks) {
    this.toks = toks;
  }

  /**
   * Parses a template.
   *
   * @throws TemplateException on a syntax error (its line, and Jinja2's message where practical)
   */
  static List<Stmt> parse(String source) {
    String src = source.endsWith("\n") ? source.substring(0, source.length() - 1) : source;
    Parser p = new Parser(Lexer.tokens(src));
    List<Stmt> body = p.statements(Set.of());
    if (p.peek().type() != Type.EOF) {
      Token t = p.peek();
      throw new TemplateException(t.line(), "unexpected '" + t.value() + "'");
    }
    return body;
  }

  // ------------------------------------------------------------------ parser helpers

  private Token peek() {
    return toks.get(pos);
  }

  private Token peek(int ahead) {
    return toks.get(Math.min(pos + ahead, toks.size() - 1));
  }

  private Token next() {
    return toks.get(pos++);
  }

  private boolean isOp(String op) {
    Token t = peek();
    return t.type() == Type.OP && t.value().equals(op);
  }

  private boolean isName(String name) {
    Token t = peek();
    return t.type() == Type.NAME && t.value().equals(name);
  }

  private Token expectOp(String op) {
    Token t = next();
    if (t.type() != Type.OP || !t.value().equals(op)) {
      throw new TemplateException(t.line(), "expected '" + op + "', got '" + describe(t) + "'");
    }
    return t;
  }

  private Token expect(Type type, String what) {
    Token t = next();
    if (t.type() != type) {
      throw new TemplateException(t.line(), "expected " + what + ", got '" + describe(t) + "'");
    }
    return t;
  }

  private void expectName(String name) {
    Token t = next();
    if (t.type() != Type.NAME || !t.value().equals(name)) {
      throw new TemplateException(t.line(), "expected '" + name + "', got '" + describe(t) + "'");
    }
  }

  private static String describe(Token t) {
    return switch (t.type()) {
      case BLOCK_END -> "%}";
      case VAR_END -> "}}";
      case BLOCK_BEGIN -> "{%";
      case VAR_BEGIN -> "{{";
      case TEXT -> "text";
      default -> t.value();
    };
  }

  // ------------------------------------------------------------------ statements

  /** Parses statements until a block tag whose name is in {@code ends} (not consumed). */
  private List<Stmt> statements(Set<String> ends) {
    List<Stmt> out = new ArrayList<>();
    while (true) {
      Token t = peek();
      switch (t.type()) {
        case EOF -> {
          if (!ends.isEmpty()) {
            throw new TemplateException(
                t.line(),
                "unexpected end of template; expected one of "
                    + String.join(", ", new TreeSet<>(ends)));
          }
          return out;
        }
        case TEXT -> out.add(new Text(next().line(), t.value()));
        case VAR_BEGIN -> {
          next();
          Expr e = expression();
          expect(Type.VAR_END, "'}}'");
          out.add(new Output(t.line(), e));
        }
        case BLOCK_BEGIN -> {
          Token name = peek(1);
          if (name.type() == Type.NAME && ends.contains(name.value())) {
            return out;
          }
          next();
          out.add(statement());
        }
        default -> throw new TemplateException(t.line(), "unexpected '" + describe(t) + "'");
      }
    }
  }

  private Stmt statement() {
    Token t = expect(Type.NAME, "a statement name");
    int line = t.line();
    return switch (t.value()) {
      case "if" -> ifStatement(line);
      case "for" -> forStatement(line);
      case "set" -> setStatement(line);
      case "macro" -> macroStatement(line);
      case "call" -> callStatement(line);
      case "filter" -> filterStatement(line);
      case "generation" -> generationStatement(line);
      case "break" -> {
        expect(Type.BLOCK_END, "'%}'");
        yield new Break(line);
      }
      case "continue" -> {
        expect(Type.BLOCK_END, "'%}'");
        yield new Continue(line);
      }
      default -> throw new TemplateException(line, "unknown tag '" + t.value() + "'");
    };
  }

  /** A for loop: {@code for x[, y] in iter [if filter]}, its body, an optional else, endfor. */
  private Stmt forStatement(int line) {
    List<String> targets = new ArrayList<>();
    targets.add(expect(Type.NAME, "a loop variable").value());
    while (isOp(",")) {
      next();
      targets.add(expect(Type.NAME, "a loop variable").value());
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
    expect(Type.BLOCK_END, "'%}'");
    List<Stmt> body = statements(Set.of("endfor", "else"));
    List<Stmt> orelse = List.of();
    if (endTag("else")) {
      orelse = statements(Set.of("endfor"));
    }
    endTag("endfor");
    return new For(line, targets, iter, filter, body, orelse);
  }

  /** {@code set names = value}, {@code set ns.attr = value}, or a block set with filters. */
  private Stmt setStatement(int line) {
    List<String> names = new ArrayList<>();
    String first = expect(Type.NAME, "a variable name").value();
    String nsAttr = null;
    if (isOp(".")) {
      next();
      nsAttr = expect(Type.NAME, "an attribute name").value();
    }
    names.add(first);
    while (isOp(",")) {
      next();
      names.add(expect(Type.NAME, "a variable name").value());
    }
    if (isOp("=")) {
      next();
      Expr value = tupleOrExpression();
      expect(Type.BLOCK_END, "'%}'");
      return new Ast.Set(line, names, nsAttr, value, null, List.of());
    }
    List<FilterCall> filters = new ArrayList<>();
    while (isOp("|")) {
      next();
      filters.add(filterCall());
    }
    expect(Type.BLOCK_END, "'%}'");
    List<Stmt> body = statements(Set.of("endset"));
    endTag("endset");
    return new Ast.Set(line, names, nsAttr, null, body, filters);
  }

  /** A macro: {@code macro name(params)}, its body, endmacro. */
  private Stmt macroStatement(int line) {
    String name = expect(Type.NAME, "a macro name").value();
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    signature(params, defaults);
    expect(Type.BLOCK_END, "'%}'");
    List<Stmt> body = statements(Set.of("endmacro"));
    endTag("endmacro");
    return new Macro(line, name, params, defaults, body);
  }

  /** A call block: {@code call[(params)] macro(args)}, its body (the {@code caller}), endcall. */
  private Stmt callStatement(int line) {
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    if (isOp("(")) {
      signature(params, defaults);
    }
    Expr call = expression();
    if (!(call instanceof Call)) {
      throw new TemplateException(line, "expected a call after {% call %}");
    }
    expect(Type.BLOCK_END, "'%}'");
    List<Stmt> body = statements(Set.of("endcall"));
    endTag("endcall");
    return new CallBlock(line, call, params, defaults, body);
  }

  /** A filter block: {@code filter f | g}, its body (whose output the filters take), endfilter. */
  private Stmt filterStatement(int line) {
    List<FilterCall> filters = new ArrayList<>();
    filters.add(filterCall());
    while (isOp("|")) {
      next();
      filters.add(filterCall());
    }
    expect(Type.BLOCK_END, "'%}'");
    List<Stmt> body = statements(Set.of("endfilter"));
    endTag("endfilter");
    return new FilterBlock(line, filters, body);
  }

  /** transformers' generation block: rendered as its body. */
  private Stmt generationStatement(int line) {
    expect(Type.BLOCK_END, "'%}'");
    List<Stmt> body = statements(Set.of("endgeneration"));
    endTag("endgeneration");
    return new If(line, new Const(line, true), body, List.of());
  }

  private Stmt ifStatement(int line) {
    Expr test = tupleOrExpression();
    expect(Type.BLOCK_END, "'%}'");
    List<Stmt> body = statements(Set.of("elif", "else", "endif"));
    Token at = peek(1);
    if (endTag("elif")) {
      Stmt nested = ifStatementNoEnd(at.line());
      return new If(line, test, body, List.of(nested));
    }
    List<Stmt> orelse = List.of();
    if (endTag("else")) {
      orelse = statements(Set.of("endif"));
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
    if (peek().type() == Type.BLOCK_BEGIN
        && peek(1).type() == Type.NAME
        && peek(1).value().equals(name)) {
      next();
      next();
      if (!name.equals("elif")) {
        if (peek().type() == Type.NAME && (name.startsWith("end"))) {
          next(); // Jinja2 allows a name after endblock/endmacro; ignore it
        }
        expect(Type.BLOCK_END, "'%}'");
      }
      return true;
    }
    if (name.startsWith("end")) {
      Token t = peek();
      throw new TemplateException(
          t.line(), "expected {% " + name + " %}, got '" + describe(t) + "'");
    }
    return false;
  }

  private void signature(List<String> params, List<Expr> defaults) {
    expectOp("(");
    while (!isOp(")")) {
      params.add(expect(Type.NAME, "a parameter name").value());
      if (isOp("=")) {
        next();
        defaults.add(expression());
      } else {
        if (!defaults.isEmpty()) {
          throw new TemplateException(
              peek().line(), "non-default argument follows default argument");
        }
      }
      if (!isOp(")")) {
        expectOp(",");
      }
    }
    next();
  }

  private FilterCall filterCall() {
    Token name = expect(Type.NAME, "a filter name");
    StringBuilder full = new StringBuilder(name.value());
    while (isOp(".")) {
      next();
      full.append('.').append(expect(Type.NAME, "a filter name").value());
    }
    List<Expr> args = new ArrayList<>();
    Map<String, Expr> kwargs = new LinkedHashMap<>();
    if (isOp("(")) {
      callArgs(args, kwargs);
    }
    return new FilterCall(name.line(), full.toString(), args, kwargs);
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
      if (peek().type() == Type.BLOCK_END || isOp(")")) {
        break;
      }
      items.add(expression());
    }
    return new ListLit(first.line(), items);
  }

  private Expr expression() {
    Expr e = or();
    while (isName("if")) {
      int line = next().line();
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
      int line = next().line();
      l = new BinOp(line, "or", l, and());
    }
    return l;
  }

  private Expr and() {
    Expr l = not();
    while (isName("and")) {
      int line = next().line();
      l = new BinOp(line, "and", l, not());
    }
    return l;
  }

  private Expr not() {
    if (isName("not")) {
      int line = next().line();
      return new Unary(line, "not", not());
    }
    return compare();
  }

  private Expr compare() {
    Expr l = math1();
    while (true) {
      Token t = peek();
      if (t.type() == Type.OP
          && (t.value().equals("==")
              || t.value().equals("!=")
              || t.value().equals("<")
              || t.value().equals(">")
              || t.value().equals("<=")
              || t.value().equals(">="))) {
        next();
        l = new BinOp(t.line(), t.value(), l, math1());
      } else if (isName("in")) {
        next();
        l = new BinOp(t.line(), "in", l, math1());
      } else if (isName("not") && peek(1).type() == Type.NAME && peek(1).value().equals("in")) {
        next();
        next();
        l = new BinOp(t.line(), "not in", l, math1());
      } else {
        return l;
      }
    }
  }

  private Expr math1() {
    Expr l = concat();
    while (isOp("+") || isOp("-")) {
      Token t = next();
      l = new BinOp(t.line(), t.value(), l, concat());
    }
    return l;
  }

  private Expr concat() {
    Expr l = math2();
    while (isOp("~")) {
      Token t = next();
      l = new BinOp(t.line(), "~", l, math2());
    }
    return l;
  }

  private Expr math2() {
    Expr l = pow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      Token t = next();
      l = new BinOp(t.line(), t.value(), l, pow());
    }
    return l;
  }

  private Expr pow() {
    Expr l = unary(true);
    while (isOp("**")) {
      Token t = next();
      l = new BinOp(t.line(), "**", l, unary(true));
    }
    return l;
  }

  private Expr unary(boolean withFilter) {
    Expr node;
    if (isOp("-") || isOp("+")) {
      Token t = next();
      node = new Unary(t.line(), t.value(), unary(false));
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
    Token t = next();
    switch (t.type()) {
      case NAME -> {
        return switch (t.value()) {
          case "true", "True" -> new Const(t.line(), Boolean.TRUE);
          case "false", "False" -> new Const(t.line(), Boolean.FALSE);
          case "none", "None" -> new Const(t.line(), null);
          default -> new Name(t.line(), t.value());
        };
      }
      case STRING -> {
        StringBuilder sb = new StringBuilder(t.value());
        while (peek().type() == Type.STRING) {
          sb.append(next().value());
        }
        return new Const(t.line(), sb.toString());
      }
      case INT -> {
        return new Const(t.line(), Long.parseLong(t.value()));
      }
      case FLOAT -> {
        return new Const(t.line(), Double.parseDouble(t.value()));
      }
      case OP -> {
        switch (t.value()) {
          case "(" -> {
            if (isOp(")")) {
              next();
              return new ListLit(t.line(), List.of());
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
              e = new ListLit(t.line(), items);
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
            return new ListLit(t.line(), items);
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
            return new DictLit(t.line(), keys, values);
          }
          default -> {}
        }
      }
      default -> {}
    }
    throw new TemplateException(t.line(), "unexpected '" + describe(t) + "'");
  }

  private Expr postfix(Expr node) {
    while (true) {
      if (isOp(".")) {
        Token dot = next();
        Token name = next();
        if (name.type() == Type.NAME) {
          node = new GetAttr(dot.line(), node, name.value());
        } else if (name.type() == Type.INT) {
          node =
              new GetItem(dot.line(), node, new Const(name.line(), Long.parseLong(name.value())));
        } else {
          throw new TemplateException(name.line(), "expected an attribute name after '.'");
        }
      } else if (isOp("[")) {
        Token open = next();
        node = subscript(open.line(), node);
      } else if (isOp("(")) {
        int line = peek().line();
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
      if (peek().type() == Type.NAME && peek(1).type() == Type.OP && peek(1).value().equals("=")) {
        String k = next().value();
        next();
        kwargs.put(k, expression());
      } else {
        if (!kwargs.isEmpty()) {
          throw new TemplateException(
              peek().line(), "positional argument follows keyword argument");
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
        int line = next().line();
        boolean negate = false;
        if (isName("not")) {
          next();
          negate = true;
        }
        Token name = next();
        String testName;
        if (name.type() == Type.NAME) {
          testName = name.value();
        } else if (name.type() == Type.OP
            && (name.value().equals("==")
                || name.value().equals("!=")
                || name.value().equals("<")
                || name.value().equals(">")
                || name.value().equals("<=")
                || name.value().equals(">="))) {
          testName = name.value();
        } else {
          throw new TemplateException(name.line(), "expected a test name after 'is'");
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
        int line = peek().line();
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
  private static boolean startsPrimary(Token t) {
    return switch (t.type()) {
      case STRING, INT, FLOAT -> true;
      case NAME ->
          !(t.value().equals("else")
              || t.value().equals("or")
              || t.value().equals("and")
              || t.value().equals("is")
              || t.value().equals("in")
              || t.value().equals("if")
              || t.value().equals("not"));
      case OP -> t.value().equals("[") || t.value().equals("{");
      default -> false;
    };
  }
}
