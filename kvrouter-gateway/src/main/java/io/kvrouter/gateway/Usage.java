package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import org.jspecify.annotations.Nullable;

/**
 * Picks {@code usage.prompt_tokens}, {@code usage.completion_tokens}, {@code
 * usage.prompt_tokens_details.cached_tokens} and whether {@code choices} is empty out of one OpenAI
 * response object (a whole body or one SSE chunk), token by token, so that a blocking parser over a
 * chunk and a non-blocking one fed as a body arrives both drive it. Holds no copy of the input. One
 * per response; not thread-safe.
 */
final class Usage {
  private int depth;
  private String f1;
  private String f2;
  private String f3;
  private boolean inUsage;
  private boolean inDetails;
  private boolean choicesOpen;

  /** A non-null {@code usage} object was seen. */
  boolean usage;

  /** {@code usage.prompt_tokens_details} was an object. */
  boolean details;

  /** {@code choices} was seen and was an empty array. */
  boolean choicesEmpty;

  private boolean choicesSeen;

  /** The response object's {@code id} (a session key with previous_response_id), or null. */
  @Nullable String id;

  /** {@code usage.prompt_tokens}, or -1. */
  long promptTokens = -1;

  /** {@code usage.completion_tokens}, or -1 (for traces: gen_ai.usage.output_tokens). */
  long completionTokens = -1;

  /** {@code usage.prompt_tokens_details.cached_tokens}, or -1. */
  long cachedTokens = -1;

  /** Whether this object is a usage-only chunk: {@code "choices": []} and a usage object. */
  boolean usageOnly() {
    return usage && choicesSeen && choicesEmpty;
  }

  /** Feeds every token of a complete JSON text. */
  static Usage scan(byte[] buf, int off, int len) {
    Usage u = new Usage();
    try (JsonParser p = Json.FACTORY.createParser(buf, off, len)) {
      JsonToken t;
      while ((t = p.nextToken()) != null) u.token(t, p);
    } catch (IOException e) {
      // not JSON: nothing learnt (the bytes are forwarded as they are anyway)
    }
    return u;
  }

  void token(JsonToken t, JsonParser p) throws IOException {
    switch (t) {
      case FIELD_NAME -> {
        String n = p.currentName();
        if (depth == 1) f1 = n;
        else if (depth == 2 && inUsage) f2 = n;
        else if (depth == 3 && inDetails) f3 = n;
      }
      case START_OBJECT, START_ARRAY -> {
        if (depth == 2 && choicesOpen) choicesEmpty = false;
        if (depth == 1 && t == JsonToken.START_OBJECT && "usage".equals(f1)) {
          inUsage = true;
          usage = true;
        } else if (depth == 2
            && inUsage
            && t == JsonToken.START_OBJECT
            && "prompt_tokens_details".equals(f2)) {
          inDetails = true;
          details = true;
        } else if (depth == 1 && t == JsonToken.START_ARRAY && "choices".equals(f1)) {
          choicesOpen = true;
          choicesSeen = true;
          choicesEmpty = true;
        }
        depth++;
      }
      case END_OBJECT, END_ARRAY -> {
        depth--;
        if (depth == 1) {
          inUsage = false;
          choicesOpen = false;
        } else if (depth == 2) {
          inDetails = false;
        }
      }
      case VALUE_NUMBER_INT -> {
        if (depth == 2 && choicesOpen) choicesEmpty = false;
        if (depth == 2 && inUsage && "prompt_tokens".equals(f2)) promptTokens = p.getLongValue();
        else if (depth == 2 && inUsage && "completion_tokens".equals(f2)) {
          completionTokens = p.getLongValue();
        } else if (depth == 3 && inDetails && "cached_tokens".equals(f3)) {
          cachedTokens = p.getLongValue();
        }
      }
      case NOT_AVAILABLE -> {}
      case VALUE_STRING -> {
        if (depth == 2 && choicesOpen) choicesEmpty = false;
        if (depth == 1 && id == null && "id".equals(f1)) id = p.getText();
      }
      default -> {
        if (depth == 2 && choicesOpen) choicesEmpty = false;
      }
    }
  }
}
