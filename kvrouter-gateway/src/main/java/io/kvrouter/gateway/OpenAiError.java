package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * An answer the gateway gives itself (never an engine's), in OpenAI's error shape: {@code {"error":
 * {"message", "type", "param", "code"}}}, with its HTTP status. Carries no stack trace. A refusal
 * that repeats vLLM's own ({@link #vllm}) has vLLM's type and its status as a numeric code.
 */
final class OpenAiError extends RuntimeException {
  private static final long serialVersionUID = 1L;

  final int status;
  final String type;
  final String param;
  final String code;

  OpenAiError(int status, String type, String code, String param, String message) {
    super(message, null, false, false);
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = param;
  }

  /** A refusal as vLLM words it: its error type and the status as the code (a number). */
  static OpenAiError vllm(int status, String type, String message) {
    return new OpenAiError(status, type, NUMERIC + status, null, message);
  }

  /** Marks a code written as a number (vLLM's ErrorInfo.code is the HTTP status). */
  private static final String NUMERIC = "#";

  static OpenAiError invalid(String code, String param, String message) {
    return new OpenAiError(400, "invalid_request_error", code, param, message);
  }

  static OpenAiError unavailable(String code, String message) {
    return new OpenAiError(503, "server_error", code, null, message);
  }

  /** The body: {@code {"error": {...}}} and a newline. */
  byte[] body() {
    return body(getMessage(), type, param, code);
  }

  static byte[] body(String message, String type, String param, String code) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(192);
    try (JsonGenerator g = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.writeStartObject();
      g.writeObjectFieldStart("error");
      g.writeStringField("message", message);
      g.writeStringField("type", type);
      if (param == null) g.writeNullField("param");
      else g.writeStringField("param", param);
      if (code == null) g.writeNullField("code");
      else if (code.startsWith(NUMERIC))
        g.writeNumberField("code", Integer.parseInt(code, 1, code.length(), 10));
      else g.writeStringField("code", code);
      g.writeEndObject();
      g.writeEndObject();
      g.writeRaw('\n');
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }
}
