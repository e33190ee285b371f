package io.kvrouter.server.http;

/**
 * A request the service refuses, with the HTTP status to answer and a message that names the
 * problem; rendered as {@code {"error": message}}. Carries no stack trace: it is an answer, not a
 * fault.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable: status, message and connectionLost are set by whoever refuses (the endpoints and
 * the server's request parsing in io.kvrouter.server, the body reader here) and read by
 * HttpPlumbing, which answers it (and closes the connection when connectionLost).
 * </pre>
 */
public final class ApiException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final boolean connectionLost;

  /** A refusal answered with {@code status} and {@code {"error": message}}. */
  public ApiException(int status, String message) {
    this(status, message, false);
  }

  private ApiException(int status, String message, boolean connectionLost) {
    super(message, null, false, false);
    this.status = status;
    this.connectionLost = connectionLost;
  }

  /**
   * The client went away or was cut off while sending its body: the answer is counted under {@code
   * status} but may not reach it, and the connection is closed.
   */
  public static ApiException connectionLost(int status, String message) {
    return new ApiException(status, message, true);
  }

  /** Whether the connection is (about to be) gone; see {@link #connectionLost}. */
  public boolean connectionLost() {
    return connectionLost;
  }

  /** The HTTP status code. */
  public int status() {
    return status;
  }

  /** A 400. */
  public static ApiException badRequest(String message) {
    return new ApiException(400, message);
  }

  /** A 404. */
  public static ApiException notFound(String message) {
    return new ApiException(404, message);
  }

  /** A 409. */
  public static ApiException conflict(String message) {
    return new ApiException(409, message);
  }
}
