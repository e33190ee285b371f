package io.kvrouter.sim.trace;

/**
 * A trace that cannot be replayed: unreadable, or a line that is not a request of the Mooncake
 * format. The message names the source, the line and (when one is at fault) the field.
 */
public final class TraceFormatException extends RuntimeException {
  private final int line;
  private final String field;

  public TraceFormatException(String source, int line, String field, String problem) {
    super(
        source
            + (line > 0 ? ", line " + line : "")
            + (field != null ? ", field '" + field + "'" : "")
            + ": "
            + problem);
    this.line = line;
    this.field = field;
  }

  public TraceFormatException(String message, Throwable cause) {
    super(message, cause);
    this.line = 0;
    this.field = null;
  }

  /** The 1-based line at fault, 0 when the problem is not a line's. */
  public int line() {
    return line;
  }

  /** The field at fault, or null. */
  public String field() {
    return field;
  }
}
