package io.kvrouter.tokenize.jinja;

import java.util.List;
import java.util.Map;

/**
 * The tree of a parsed Jinja2 template: statements ({@link Stmt}) and expressions ({@link Expr}),
 * one record per construct of the Jinja2 subset chat templates use.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: immutable records; lists hold children in source order, null stands for an absent
 * optional part (a for loop's filter, a slice bound, an inline if's else, a set's value in its
 * block form). Every node carries the 1-based template line it started on, which errors print.
 * Who writes: Parser, once per template. Who reads: Interpreter, from any number of renders at
 * once; nothing mutates a tree after parse. Constants (Const) hold the runtime's values: String,
 * Long, Double, Boolean or null.
 * </pre>
 */
final class Ast {
  private Ast() {}

  /** A node of the tree: a statement or an expression, with the template line it started on. */
  sealed interface Node permits Stmt, Expr {
    int line();
  }

  /** A statement: text, an output {{ ... }} or a block tag. */
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

  /** An expression. */
  sealed interface Expr extends Node {}

  record Const(int line, Object value) implements Expr {}

  record Name(int line, String name) implements Expr {}

  record GetAttr(int line, Expr obj, String attr) implements Expr {}

  record GetItem(int line, Expr obj, Expr key) implements Expr {}

  record Slice(int line, Expr obj, Expr start, Expr stop, Expr step) implements Expr {}

  record Call(int line, Expr fn, List<Expr> args, Map<String, Expr> kwargs) implements Expr {}

  /** A filter application {@code | name(args)}: part of a Filter, a filter block or a block set. */
  record FilterCall(int line, String name, List<Expr> args, Map<String, Expr> kwargs) {}

  record Filter(int line, Expr value, FilterCall filter) implements Expr {}

  record Test(int line, Expr value, String name, List<Expr> args, boolean negate) implements Expr {}

  record BinOp(int line, String op, Expr left, Expr right) implements Expr {}

  record Unary(int line, String op, Expr operand) implements Expr {}

  record Cond(int line, Expr test, Expr then, Expr orelse) implements Expr {}

  record ListLit(int line, List<Expr> items) implements Expr {}

  record DictLit(int line, List<Expr> keys, List<Expr> values) implements Expr {}
}
