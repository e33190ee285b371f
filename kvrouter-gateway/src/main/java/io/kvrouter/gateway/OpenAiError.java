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

  /** The most characters of a client's string (a model name) an error message repeats. */
  static final int ECHO_CHARS = 256;

  /**
   * {@code s} as an error message may repeat it: whole up to {@link #ECHO_CHARS} characters, else
   * its first ones followed by {@code …(N bytes)}, N its length in UTF-8, so that a huge name in a
   * request never makes a huge answer.
   */
  static String echo(String s) {
    if (s == null || s.length() <= ECHO_CHARS) return s;
    int cut = ECHO_CHARS;
    if (Character.isHighSurrogate(s.charAt(cut - 1))) cut--;
    return s.substring(0, cut) + "…(" + utf8Length(s) + " bytes)";
  }

  /** The length of {@code s} in UTF-8 (a surrogate pair is 4 bytes), without encoding it. */
  private static long utf8Length(String s) {
    long n = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < 0x80) {
        n += 1;
      } else if (c < 0x800) {
        n += 2;
      } else if (Character.isHighSurrogate(c) && i + 1 < s.length()) {
        n += 4;
        i++;
      } else {
        n += 3;
      }
    }
    return n;
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
