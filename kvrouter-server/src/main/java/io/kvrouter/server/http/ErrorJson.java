package io.kvrouter.server.http;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * The JSON of the error answers the HTTP edge writes itself: the service's {@code {"error":
 * message}} and, for refusals of the gateway's {@code /v1/*} paths, OpenAI's shape.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless: each answer is built in memory with Jackson's generator as compact UTF-8 and ended
 * by a newline, exactly as the service's other answers (io.kvrouter.server.JsonOut) are. Called
 * by HttpPlumbing on the request's thread.
 * </pre>
 */
final class ErrorJson {
  private static final JsonFactory FACTORY = new JsonFactory();

  private ErrorJson() {}

  /** Writes one document. */
  @FunctionalInterface
  private interface Body {
    void write(JsonGenerator g) throws IOException;
  }

  private static byte[] bytes(Body body) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(256);
    try (JsonGenerator g = FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      body.write(g);
      g.writeRaw('\n');
    } catch (IOException e) {
      throw new UncheckedIOException(e); // in memory: does not happen
    }
    return out.toByteArray();
  }

  /**
   * OpenAI's error shape, {@code {"error": {"message", "type", "param": null, "code": null}}}, with
   * type {@code "server_error"} for a 5xx status and {@code "invalid_request_error"} otherwise.
   */
  static byte[] openAi(int status, String message) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeObjectFieldStart("error");
          g.writeStringField("message", message);
          g.writeStringField("type", status >= 500 ? "server_error" : "invalid_request_error");
          g.writeNullField("param");
          g.writeNullField("code");
          g.writeEndObject();
          g.writeEndObject();
        });
  }

  /** {@code {"error": message}}. */
  static byte[] error(String message) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeStringField("error", message);
          g.writeEndObject();
        });
  }
}
