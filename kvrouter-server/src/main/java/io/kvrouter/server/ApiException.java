package io.kvrouter.server;

/**
 * A request the service refuses, with the HTTP status to answer and a message that names the
 * problem; rendered as {@code {"error": message}}. Carries no stack trace: it is an answer, not a
 * fault.
 */
final class ApiException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;

  ApiException(int status, String message) {
    super(message, null, false, false);
    this.status = status;
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
