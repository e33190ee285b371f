package io.kvrouter.server;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;

/** Small helpers that write response bodies as compact UTF-8 JSON with Jackson's generator. */
final class JsonOut {
  private JsonOut() {}

  /** Writes one document. */
  @FunctionalInterface
  interface Body {
    void write(JsonGenerator g) throws IOException;
  }

  /** The document {@code body} writes, as UTF-8 bytes. */
  static byte[] bytes(Body body) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(256);
    try (JsonGenerator g = JsonBody.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      body.write(g);
    } catch (IOException e) {
      throw new UncheckedIOException(e); // in memory: does not happen
    }
    return out.toByteArray();
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

  /** Writes an unsigned 64-bit value as a JSON number. */
  static void u64(JsonGenerator g, long v) throws IOException {
    if (v >= 0) {
      g.writeNumber(v);
    } else {
      g.writeNumber(Long.toUnsignedString(v));
    }
  }

  /** Writes a field holding an unsigned 64-bit value. */
  static void u64Field(JsonGenerator g, String name, long v) throws IOException {
    g.writeFieldName(name);
    u64(g, v);
  }

  /** Writes a field holding a string or null. */
  static void stringOrNull(JsonGenerator g, String name, String v) throws IOException {
    if (v == null) {
      g.writeNullField(name);
    } else {
      g.writeStringField(name, v);
    }
  }
}
