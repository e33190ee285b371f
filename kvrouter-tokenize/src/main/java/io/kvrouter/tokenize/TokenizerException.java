package io.kvrouter.tokenize;

/**
 * Why a model directory, a chat template, a request's messages or an engine's answer could not be
 * used. The message names the model (or file) and, for templates, the template line.
 */
public class TokenizerException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public TokenizerException(String message) {
    super(message);
  }

  public TokenizerException(String message, Throwable cause) {
    super(message, cause);
  }
}
