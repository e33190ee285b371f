package io.kvrouter.transport;

/**
 * The one check for token ids wherever they come in (DESIGN.md §2: unsigned 32-bit ids kept as Java
 * {@code int} bits): the ZMQ decoder's {@code token_ids} and the HTTP bodies' {@code token_ids}
 * accept exactly {@code 0..2^32-1} and name a rejected value the same way.
 *
 * <p>The check takes the value as the wire gave it, as a {@code long}, before it becomes {@code
 * int} bits: after that, {@code -1} and {@code 4294967295} are the same bits and can no longer be
 * told apart. An unsigned 64-bit wire value of {@code 2^63} or more arrives as a negative bit
 * pattern and is rejected like a negative one.
 */
public final class TokenIds {
  /** The accepted range, for error messages. */
  public static final String RANGE = "0..4294967295";

  private TokenIds() {}

  /** Whether {@code id} (the integer the wire gave) is a token id: {@code 0 <= id <= 2^32-1}. */
  public static boolean isValid(long id) {
    return (id >>> 32) == 0;
  }

  /**
   * The problem with a rejected id, e.g. {@code token id -1 is outside 0..4294967295}.
   *
   * @param id the integer as the input wrote it (decimal; unsigned for a 64-bit unsigned value)
   */
  public static String outOfRange(String id) {
    return "token id " + id + " is outside " + RANGE;
  }
}
