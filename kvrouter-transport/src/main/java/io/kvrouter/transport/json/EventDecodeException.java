package io.kvrouter.transport.json;

import org.jspecify.annotations.Nullable;

/**
 * Thrown when JSON input is not a well-formed router event: its message names the offending field
 * as a path (e.g. {@code event.data.stored.blocks[1].tokens_hash}, or {@code $} for the whole
 * document) and the position in the input as {@code line L, column C}.
 *
 * <p>Lines and columns are 1-based, as Jackson reports them; for byte input the column counts
 * bytes. A position of {@code -1} means Jackson did not know it.
 */
public final class EventDecodeException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String path;
  private final int line;
  private final int column;

  EventDecodeException(
      String path, String problem, int line, int column, @Nullable Throwable cause) {
    super(path + ": " + problem + " (at line " + line + ", column " + column + ")", cause);
    this.path = path;
    this.line = line;
    this.column = column;
  }

  /** The path of the field at fault, e.g. {@code event.data.stored.blocks[1].tokens_hash}. */
  public String path() {
    return path;
  }

  /** The 1-based input line of the fault, or -1 if unknown. */
  public int line() {
    return line;
  }

  /** The 1-based input column of the fault, or -1 if unknown. */
  public int column() {
    return column;
  }
}
