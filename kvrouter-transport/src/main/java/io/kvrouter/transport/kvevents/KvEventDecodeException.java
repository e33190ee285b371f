package io.kvrouter.transport.kvevents;

import org.jspecify.annotations.Nullable;

/**
 * Thrown when a payload is not a well-formed {@code KVEventBatch}: its message names the offending
 * field as a path (e.g. {@code events[1].block_hashes[0]}, or {@code $} for the whole payload), the
 * problem, and the byte offset into the payload where decoding stopped, e.g. {@code
 * events[0].block_hashes: expected an array of block hashes, found the string "oops" (at byte 30)}.
 */
public final class KvEventDecodeException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String path;
  private final long offset;

  KvEventDecodeException(String path, String problem, long offset, @Nullable Throwable cause) {
    super(path + ": " + problem + " (at byte " + offset + ")", cause);
    this.path = path;
    this.offset = offset;
  }

  /** The path of the field at fault, e.g. {@code events[1].block_hashes[0]}. */
  public String path() {
    return path;
  }

  /** How many bytes of the payload had been read when the problem was found. */
  public long offset() {
    return offset;
  }
}
