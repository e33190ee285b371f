package io.kvrouter.tokenize.jinja;

import java.time.ZonedDateTime;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * A Jinja2 template, parsed once, rendered as transformers renders chat templates (its environment
 * and globals: see {@link #parse} and {@link #render}). Safe to render from many threads at once.
 *
 * <pre>
 * Implementation notes
 *
 * Holds the parsed tree (the statements Parser makes, see Ast), immutable and shared by every render; each
 * render makes its own interpreter (output buffer, scopes). Written once by parse(), read by
 * render() on any thread.
 * </pre>
 */
public final class Template {
  private final List<Ast.Stmt> body;

  private Template(List<Ast.Stmt> body) {
    this.body = body;
  }

  /**
   * Parses a template in transformers' environment: {@code trim_blocks}, {@code lstrip_blocks}, a
   * single trailing newline dropped, {@code break} and {@code continue}, {@code {% generation %}}.
   *
   * @throws TemplateException when it does not parse (the line, and Jinja2's message)
   */
  public static Template parse(String source) {
    return new Template(Parser.parse(source));
  }

  /**
   * Renders the template with {@code context} as its variables (for chat templates: messages,
   * add_generation_prompt, tools, special tokens ...), with the globals transformers gives chat
   * templates ({@code raise_exception}, {@code strftime_now} reading {@code clock}, {@code
   * namespace}, {@code range}, {@code dict}). Context values are JSON values (see {@link Py}).
   *
   * @throws TemplateException when the template fails or raises (the line, and the message)
   */
  public String render(Map<String, Object> context, Supplier<ZonedDateTime> clock) {
    return Interpreter.render(body, context, clock);
  }
}
