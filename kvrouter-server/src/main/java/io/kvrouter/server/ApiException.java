package io.kvrouter.server;

/**
 * A request the service refuses, with the HTTP status to answer and a message that names the
 * problem; rendered as {@code {"error": message}}. Carries no stack trace: it is an answer, not a
 * fault.
 */
final class ApiException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final boolean connectionLost;

  ApiException(int status, String message) {
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
  static ApiException connectionLost(int status, String message) {
    return new ApiException(status, message, true);
  }

  /** Whether the connection is (about to be) gone; see {@link #connectionLost}. */
  boolean connectionLost() {
    return connectionLost;
  }

  /** The HTTP status code. */
  int status() {
    return status;
  }

  static ApiException badRequest(String message) {
    return new ApiException(400, message);
  }

  static ApiException notFound(String message) {
    return new ApiException(404, message);
  }

  static ApiException conflict(String message) {
    return new ApiException(409, message);
  }
}
