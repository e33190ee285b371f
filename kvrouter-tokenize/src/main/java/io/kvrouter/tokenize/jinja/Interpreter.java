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
import io.kvrouter.tokenize.jinja.Ast.Set;
import io.kvrouter.tokenize.jinja.Ast.Slice;
import io.kvrouter.tokenize.jinja.Ast.Stmt;
import io.kvrouter.tokenize.jinja.Ast.Test;
import io.kvrouter.tokenize.jinja.Ast.Text;
import io.kvrouter.tokenize.jinja.Ast.Unary;
import io.kvrouter.tokenize.jinja.Py.Callable;
import io.kvrouter.tokenize.jinja.Py.TemplateRuntimeException;
import io.kvrouter.tokenize.jinja.Py.Undefined;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Renders a parsed Jinja2 template against a context, with the globals and filters transformers
 * gives chat templates ({@code raise_exception}, {@code strftime_now}, {@code namespace}, its own
 * {@code tojson}) and Jinja2's builtin filters and tests that chat templates use.
 *
 * <pre>
 * Implementation notes
 *
 * One interpreter per render (it holds the output buffer and the scope chain); the parsed tree
 * is shared. Scopes: the context is the root frame; a for loop gets one child frame for its whole
 * run (names set inside it do not leak out, as in Jinja2), a macro call a child frame of the
 * frame it was defined in; if/else blocks share their parent's frame. break and continue unwind
 * as private exceptions caught by the innermost loop. A runtime error is thrown as
 * TemplateException carrying the line of the innermost statement or expression being evaluated,
 * and the message Jinja2 would give where practical.
 * </pre>
 */
final class Interpreter {

  static final class Raised extends TemplateRuntimeException {
    private static final long serialVersionUID = 1L;

    Raised(String message) {
      super(message);
    }
  }

  private static final class BreakSignal extends RuntimeException {
    private static final long serialVersionUID = 1L;

    BreakSignal() {
      super(null, null, false, false);
    }
  }

  private static final class ContinueSignal extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ContinueSignal() {
      super(null, null, false, false);
    }
  }

  private static final class Frame {
    final Map<String, Object> vars = new HashMap<>();
    final Frame parent;

    Frame(Frame parent) {
      this.parent = parent;
    }
  }

  private final Supplier<ZonedDateTime> clock;
  private int line;

  private Interpreter(Supplier<ZonedDateTime> clock) {
    this.clock = clock;
  }

  /** Renders {@code body} with {@code context} as its variables. */
  static String render(
      List<Stmt> body, Map<String, Object> context, Supplier<ZonedDateTime> clock) {
    Interpreter in = new Interpreter(clock);
    Frame root = new Frame(null);
    root.vars.putAll(in.globals());
    root.vars.putAll(context);
    StringBuilder out = new StringBuilder();
    try {
      in.exec(body, root, out);
    } catch (BreakSignal | ContinueSignal e) {
      throw new TemplateException(in.line, "break or continue outside a loop", false);
    } catch (Raised e) {
      throw new TemplateException(in.line, e.getMessage(), true);
    } catch (TemplateRuntimeException | ClassCastException | IndexOutOfBoundsException e) {
      throw new TemplateException(in.line, message(e), false);
    }
    return out.toString();
  }

  private static String message(RuntimeException e) {
    if (e instanceof ClassCastException) {
      return "wrong type of value: " + e.getMessage();
    }
    if (e instanceof IndexOutOfBoundsException) {
      return "missing argument: " + e.getMessage();
    }
    return e.getMessage();
  }

  private Map<String, Object> globals() {
    Map<String, Object> g = new HashMap<>();
    g.put(
        "raise_exception",
        (Callable)
            (args, kw) -> {
              throw new Raised(args.isEmpty() ? "raise_exception called" : Py.str(args.get(0)));
            });
    g.put(
        "strftime_now",
        (Callable) (args, kw) -> Strftime.format(clock.get(), (String) args.get(0)));
    g.put(
        "namespace",
        (Callable)
            (args, kw) -> {
              Py.Namespace ns = new Py.Namespace();
              for (Object a : args) {
                if (a instanceof Map<?, ?> m) {
                  m.forEach((k, v) -> ns.attrs.put(Py.str(k), v));
                }
              }
              ns.attrs.putAll(kw);
              return ns;
            });
    g.put(
        "range",
        (Callable)
            (args, kw) -> {
              long start = 0, stop, step = 1;
              if (args.size() == 1) {
                stop = num(args.get(0));
              } else {
                start = num(args.get(0));
                stop = num(args.get(1));
                if (args.size() > 2) {
                  step = num(args.get(2));
                }
              }
              if (step == 0) {
                throw new TemplateRuntimeException("range() arg 3 must not be zero");
              }
              List<Object> r = new ArrayList<>();
              for (long i = start; step > 0 ? i < stop : i > stop; i += step) {
                r.add(i);
                if (r.size() > 1_000_000) {
                  throw new TemplateRuntimeException("range too big");
                }
              }
              return r;
            });
    g.put(
        "dict",
        (Callable)
            (args, kw) -> {
              Map<String, Object> m = new LinkedHashMap<>();
              for (Object a : args) {
                if (a instanceof Map<?, ?> x) {
                  x.forEach((k, v) -> m.put(Py.str(k), v));
                }
              }
              m.putAll(kw);
              return m;
            });
    return g;
  }

  private static long num(Object o) {
    if (o instanceof Long l) {
      return l;
    }
    if (o instanceof Boolean b) {
      return b ? 1 : 0;
    }
    throw new TemplateRuntimeException(
        "'" + Py.typeName(o) + "' object cannot be interpreted as an integer");
  }

  // ------------------------------------------------------------------ statements

  private void exec(List<Stmt> body, Frame f, StringBuilder out) {
    for (Stmt s : body) {
      exec(s, f, out);
    }
  }

  private void exec(Stmt s, Frame f, StringBuilder out) {
    line = s.line();
    switch (s) {
      case Text t -> out.append(t.text());
      case Output o -> out.append(Py.str(eval(o.expr(), f)));
      case If i -> {
        if (Py.truthy(eval(i.test(), f))) {
          exec(i.body(), f, out);
        } else {
          exec(i.orelse(), f, out);
        }
      }
      case For fo -> execFor(fo, f, out);
      case Set st -> execSet(st, f);
      case Macro m -> f.vars.put(m.name(), macro(m.name(), m.params(), m.defaults(), m.body(), f));
      case CallBlock cb -> {
        Callable caller = macro("caller", cb.params(), cb.defaults(), cb.body(), f);
        Call call = (Call) cb.call();
        Object fn = eval(call.fn(), f);
        List<Object> args = new ArrayList<>();
        for (Expr a : call.args()) {
          args.add(eval(a, f));
        }
        Map<String, Object> kw = new LinkedHashMap<>();
        call.kwargs().forEach((k, v) -> kw.put(k, eval(v, f)));
        kw.put("caller", caller);
        out.append(Py.str(invoke(fn, args, kw)));
      }
      case FilterBlock fb -> {
        StringBuilder inner = new StringBuilder();
        exec(fb.body(), f, inner);
        Object v = inner.toString();
        for (FilterCall fc : fb.filters()) {
          v = applyFilter(fc, v, f);
        }
        out.append(Py.str(v));
      }
      case Break b -> throw new BreakSignal();
      case Continue c -> throw new ContinueSignal();
    }
  }

  private void execFor(For fo, Frame f, StringBuilder out) {
    Object iterable = eval(fo.iter(), f);
    List<Object> all = Py.iterate(iterable);
    Frame loopFrame = new Frame(f);
    List<Object> items;
    if (fo.filter() != null) {
      items = new ArrayList<>();
      for (Object item : all) {
        bindTargets(fo.targets(), item, loopFrame);
        if (Py.truthy(eval(fo.filter(), loopFrame))) {
          items.add(item);
        }
      }
    } else {
      items = all;
    }
    if (items.isEmpty()) {
      exec(fo.orelse(), f, out);
      return;
    }
    Py.Loop loop = new Py.Loop(items);
    loopFrame.vars.put("loop", loop);
    for (int i = 0; i < items.size(); i++) {
      loop.index0 = i;
      bindTargets(fo.targets(), items.get(i), loopFrame);
      try {
        exec(fo.body(), loopFrame, out);
      } catch (ContinueSignal c) {
        // next item
      } catch (BreakSignal b) {
        break;
      }
    }
  }

  private static void bindTargets(List<String> targets, Object item, Frame f) {
    if (targets.size() == 1) {
      f.vars.put(targets.get(0), item);
      return;
    }
    List<Object> parts = Py.iterate(item);
    if (parts.size() != targets.size()) {
      throw new TemplateRuntimeException(
          (parts.size() < targets.size() ? "not enough" : "too many")
              + " values to unpack (expected "
              + targets.size()
              + ", got "
              + parts.size()
              + ")");
    }
    for (int i = 0; i < targets.size(); i++) {
      f.vars.put(targets.get(i), parts.get(i));
    }
  }

  private void execSet(Set st, Frame f) {
    Object value;
    if (st.value() != null) {
      value = eval(st.value(), f);
    } else {
      StringBuilder inner = new StringBuilder();
      exec(st.body(), f, inner);
      value = inner.toString();
      for (FilterCall fc : st.filters()) {
        value = applyFilter(fc, value, f);
      }
    }
    if (st.nsAttr() != null) {
      Object ns = lookup(st.names().get(0), f);
      if (!(ns instanceof Py.Namespace n)) {
        throw new TemplateRuntimeException("cannot assign attribute on non-namespace object");
      }
      n.attrs.put(st.nsAttr(), value);
      return;
    }
    bindTargets(st.names(), value, f);
  }

  private Callable macro(
      String name, List<String> params, List<Expr> defaults, List<Stmt> body, Frame definedIn) {
    return (args, kw) -> {
      Frame mf = new Frame(definedIn);
      int firstDefault = params.size() - defaults.size();
      for (int i = 0; i < params.size(); i++) {
        String p = params.get(i);
        Object v;
        if (i < args.size()) {
          v = args.get(i);
        } else if (kw.containsKey(p)) {
          v = kw.get(p);
        } else if (i >= firstDefault) {
          v = eval(defaults.get(i - firstDefault), mf);
        } else {
          v = new Undefined("parameter '" + p + "' of macro '" + name + "'");
        }
        mf.vars.put(p, v);
      }
      if (kw.containsKey("caller")) {
        mf.vars.put("caller", kw.get("caller"));
      }
      mf.vars.put(
          "varargs",
          args.size() > params.size() ? args.subList(params.size(), args.size()) : List.of());
      int saved = line;
      StringBuilder out = new StringBuilder();
      exec(body, mf, out);
      line = saved;
      return out.toString();
    };
  }

  // ------------------------------------------------------------------ expressions

  private static Object lookup(String name, Frame f) {
    for (Frame x = f; x != null; x = x.parent) {
      Object v = x.vars.get(name);
      if (v != null || x.vars.containsKey(name)) {
        return v;
      }
    }
    return new Undefined("'" + name + "'");
  }

  private Object eval(Expr e, Frame f) {
    return switch (e) {
      case Const c -> c.value();
      case Name n -> lookup(n.name(), f);
      case GetAttr g -> {
        Object obj = eval(g.obj(), f);
        line = g.line();
        yield Py.getattr(obj, g.attr());
      }
      case GetItem g -> {
        Object obj = eval(g.obj(), f);
        Object key = eval(g.key(), f);
        line = g.line();
        yield Py.getitem(obj, key);
      }
      case Slice s -> slice(s, f);
      case Call c -> call(c, f);
      case Filter fl -> applyFilter(fl.filter(), eval(fl.value(), f), f);
      case Test t -> test(t, f);
      case BinOp b -> binop(b, f);
      case Unary u -> unary(u, f);
      case Cond c -> {
        if (Py.truthy(eval(c.test(), f))) {
          yield eval(c.then(), f);
        }
        yield c.orelse() == null
            ? new Undefined("the else branch of an inline if")
            : eval(c.orelse(), f);
      }
      case ListLit l -> evalAll(l.items(), f);
      case DictLit d -> {
        Map<Object, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < d.keys().size(); i++) {
          m.put(eval(d.keys().get(i), f), eval(d.values().get(i), f));
        }
        yield m;
      }
    };
  }

  /** The values of {@code exprs}, in order. */
  private List<Object> evalAll(List<Expr> exprs, Frame f) {
    List<Object> r = new ArrayList<>(exprs.size());
    for (Expr x : exprs) {
      r.add(eval(x, f));
    }
    return r;
  }

  private Object slice(Slice s, Frame f) {
    Object obj = eval(s.obj(), f);
    Object a = s.start() == null ? null : eval(s.start(), f);
    Object b = s.stop() == null ? null : eval(s.stop(), f);
    Object c = s.step() == null ? null : eval(s.step(), f);
    line = s.line();
    return Py.slice(obj, a, b, c);
  }

  private Object call(Call c, Frame f) {
    Object fn = eval(c.fn(), f);
    List<Object> args = evalAll(c.args(), f);
    Map<String, Object> kw = new LinkedHashMap<>();
    c.kwargs().forEach((k, v) -> kw.put(k, eval(v, f)));
    line = c.line();
    return invoke(fn, args, kw);
  }

  private Object test(Test t, Frame f) {
    Object v = eval(t.value(), f);
    List<Object> args = evalAll(t.args(), f);
    line = t.line();
    boolean r = Predicates.test(t.name(), v, args);
    return t.negate() != r;
  }

  private Object unary(Unary u, Frame f) {
    Object v = eval(u.operand(), f);
    line = u.line();
    return switch (u.op()) {
      case "not" -> !Py.truthy(v);
      case "-" -> Py.negate(v);
      default -> v;
    };
  }

  private Object binop(BinOp b, Frame f) {
    switch (b.op()) {
      case "and" -> {
        Object l = eval(b.left(), f);
        return Py.truthy(l) ? eval(b.right(), f) : l;
      }
      case "or" -> {
        Object l = eval(b.left(), f);
        return Py.truthy(l) ? l : eval(b.right(), f);
      }
      default -> {}
    }
    Object l = eval(b.left(), f);
    Object r = eval(b.right(), f);
    line = b.line();
    return switch (b.op()) {
      case "+" -> Py.add(l, r);
      case "-", "*", "/", "//", "%", "**" -> Py.arith(b.op(), l, r);
      case "~" -> Py.str(l) + Py.str(r);
      case "==" -> Py.eq(l, r);
      case "!=" -> !Py.eq(l, r);
      case "<" -> Py.compare(l, r) < 0;
      case ">" -> Py.compare(l, r) > 0;
      case "<=" -> Py.compare(l, r) <= 0;
      case ">=" -> Py.compare(l, r) >= 0;
      case "in" -> Py.contains(r, l);
      case "not in" -> !Py.contains(r, l);
      default -> throw new TemplateRuntimeException("unknown operator " + b.op());
    };
  }

  private static Object invoke(Object fn, List<Object> args, Map<String, Object> kw) {
    if (fn instanceof Callable c) {
      return c.call(args, kw);
    }
    if (fn instanceof Undefined u) {
      throw new TemplateRuntimeException(u.hint + " is undefined and cannot be called");
    }
    throw new TemplateRuntimeException("'" + Py.typeName(fn) + "' object is not callable");
  }

  private Object applyFilter(FilterCall fc, Object v, Frame f) {
    List<Object> args = new ArrayList<>(fc.args().size());
    for (Expr a : fc.args()) {
      args.add(eval(a, f));
    }
    Map<String, Object> kw = new LinkedHashMap<>();
    fc.kwargs().forEach((k, x) -> kw.put(k, eval(x, f)));
    line = fc.line();
    return Filters.apply(fc.name(), v, args, kw);
  }
}
