package io.kvrouter.tokenize.jinja;

/**
 * A template that does not parse, or fails or raises while rendering, at a template line.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable: the line (1-based, the line of the innermost statement or expression being read or
 * evaluated) and whether the template raised it itself (raise_exception) are set by the lexer,
 * the parser or the interpreter that throws it; the tokenizer's ChatTemplate reads them to name
 * the model and quote the line.
 * </pre>
 */
public final class TemplateException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int line;
  private final boolean raised;

  TemplateException(int line, String message) {
    this(line, message, false);
  }

  TemplateException(int line, String message, boolean raised) {
    super(message);
    this.line = line;
    this.raised = raised;
  }

  /** The template line (1-based). */
  public int line() {
    return line;
  }

  /** Whether the template raised it ({@code raise_exception(...)}) rather than failing. */
  public boolean raised() {
    return raised;
  }
}
