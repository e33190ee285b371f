package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Set;

/**
 * The bodies of the prefill/decode hand-over, as vLLM's disaggregated serving proxy for the
 * NixlConnector writes them (docs/gateway.md, Disaggregated serving).
 *
 * <pre>
 * Implementation notes
 *
 * Stateless, static. Each body is one pass of Jackson's streaming parser over the client's
 * (already validated) JSON object, copying every top-level field but the ones replaced, then
 * appending the replacements: the prefill request gets kv_transfer_params {do_remote_decode:
 * true, do_remote_prefill: false, remote_engine_id, remote_block_ids, remote_host, remote_port:
 * null}, stream false, max_tokens 1 (and max_completion_tokens 1 when the client gave it), and
 * loses stream_options, min_tokens and min_completion_tokens (vLLM's proxy: "not supported for
 * P"); the decode request is the client's body with the prefill answer's kv_transfer_params
 * value, byte for byte, in place of any the client sent. Field order changes; JSON meaning does
 * not.
 * </pre>
 */
final class Handover {
  private Handover() {}

  private static final byte[] PREFILL_PARAMS =
      ("{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null,"
              + "\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}")
          .getBytes(StandardCharsets.UTF_8);

  private static final Set<String> PREFILL_DROPPED =
      Set.of(
          "kv_transfer_params",
          "stream",
          "max_tokens",
          "stream_options",
          "min_tokens",
          "min_completion_tokens");

  /** The prefill engine's request made of the client's body. */
  static byte[] prefillBody(byte[] client) {
    return rewrite(
        client,
        PREFILL_DROPPED,
        (g, name, p) -> {
          if (name.equals("max_completion_tokens")) {
            p.skipChildren();
            g.writeNumberField(name, 1);
            return true;
          }
          return false;
        },
        g -> {
          g.writeFieldName("kv_transfer_params");
          g.writeRawValue(new String(PREFILL_PARAMS, StandardCharsets.UTF_8));
          g.writeBooleanField("stream", false);
          g.writeNumberField("max_tokens", 1);
        });
  }

  /**
   * The decode engine's request: the client's body with {@code kvTransferParams} (a JSON value) as
   * its {@code kv_transfer_params}; the body unchanged when that is null.
   */
  static byte[] decodeBody(byte[] client, byte[] kvTransferParams) {
    if (kvTransferParams == null) return client;
    return rewrite(
        client,
        Set.of("kv_transfer_params"),
        (g, name, p) -> false,
        g -> {
          g.writeFieldName("kv_transfer_params");
          g.writeRawValue(new String(kvTransferParams, StandardCharsets.UTF_8));
        });
  }

  /**
   * The {@code kv_transfer_params} of a prefill engine's JSON answer, as its bytes; null when the
   * answer has none, has null or an empty object (vLLM's proxy then sends the request on without
   * them), or is not a JSON object.
   */
  static byte[] kvTransferParams(byte[] answer) {
    try (JsonParser p = Json.FACTORY.createParser(answer)) {
      if (p.nextToken() != JsonToken.START_OBJECT) return null;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String f = p.currentName();
        JsonToken t = p.nextToken();
        if (!f.equals("kv_transfer_params")) {
          p.skipChildren();
          continue;
        }
        if (t != JsonToken.START_OBJECT) return null;
        ByteArrayOutputStream out = new ByteArrayOutputStream(256);
        try (JsonGenerator g = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
          g.copyCurrentStructure(p);
        }
        byte[] v = out.toByteArray();
        return v.length <= 2 ? null : v; // "{}"
      }
      return null;
    } catch (IOException e) {
      return null;
    }
  }

  private interface Replace {
    /** Writes a replacement for field {@code name} (the parser at its value); false: copy it. */
    boolean field(JsonGenerator g, String name, JsonParser p) throws IOException;
  }

  private interface Append {
    void write(JsonGenerator g) throws IOException;
  }

  private static byte[] rewrite(byte[] body, Set<String> dropped, Replace replace, Append append) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(body.length + 256);
    try (JsonParser p = Json.FACTORY.createParser(body);
        JsonGenerator g = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new IllegalArgumentException("not a JSON object");
      }
      g.writeStartObject();
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        if (dropped.contains(name)) {
          p.skipChildren();
        } else if (!replace.field(g, name, p)) {
          g.writeFieldName(name);
          g.copyCurrentStructure(p);
        }
      }
      append.write(g);
      g.writeEndObject();
    } catch (IOException e) {
      throw new IllegalArgumentException("the request body is not JSON: " + e.getMessage(), e);
    }
    return out.toByteArray();
  }
}
