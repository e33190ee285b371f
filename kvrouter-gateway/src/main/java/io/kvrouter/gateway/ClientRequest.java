package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.JsonValues;
import io.kvrouter.tokenize.TokenizerException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A client's {@code /v1/chat/completions} or {@code /v1/completions} body, read once: what the
 * gateway needs to tokenize and route it, and the bytes to forward.
 *
 * <pre>
 * Implementation notes
 *
 * One pass of Jackson's streaming parser over the body bytes. Only the fields routing needs are
 * built into values (messages, tools and chat_template_kwargs as plain Java objects, because the
 * chat template renderer takes those; a token-id prompt straight into an int[]); every other
 * field is skipped unread. The forwarded body is the client's array itself, unchanged, except
 * when the client streams without stream_options.include_usage: then upstreamBody() is a copy
 * with include_usage set to true at the byte offsets the parse recorded (an inserted field, or
 * a replaced null/false), and injectedUsage is true, so that the relay drops the usage chunk the
 * client did not ask for. Immutable after parse; one per request thread.
 * </pre>
 */
final class ClientRequest {
  enum Kind {
    CHAT,
    COMPLETION
  }

  private static final byte[] INCLUDE_USAGE =
      "\"include_usage\":true".getBytes(StandardCharsets.UTF_8);

  final Kind kind;
  final String model;
  final boolean stream;
  final boolean injectedUsage;
  final String cacheSalt;

  /** Chat only. */
  final ChatRequest chat;

  /** Completion only: a text prompt, or null when {@link #promptIds} is given. */
  final String promptText;

  /** Completion only: a token-id prompt, or null. */
  final int[] promptIds;

  /** Completion: {@code add_special_tokens} (vLLM's default true). */
  final boolean addSpecialTokens;

  private final byte[] upstream;

  private ClientRequest(
      Kind kind,
      String model,
      boolean stream,
      boolean injectedUsage,
      String cacheSalt,
      ChatRequest chat,
      String promptText,
      int[] promptIds,
      boolean addSpecialTokens,
      byte[] upstream) {
    this.kind = kind;
    this.model = model;
    this.stream = stream;
    this.injectedUsage = injectedUsage;
    this.cacheSalt = cacheSalt;
    this.chat = chat;
    this.promptText = promptText;
    this.promptIds = promptIds;
    this.addSpecialTokens = addSpecialTokens;
    this.upstream = upstream;
  }

  /** The body to send to the engine. */
  byte[] upstreamBody() {
    return upstream;
  }

  /**
   * Parses a body, which the server has checked to be UTF-8 with no NUL byte (so not UTF-16 or
   * UTF-32, which Jackson would otherwise detect: the byte offsets the parse records are UTF-8's).
   *
   * @throws OpenAiError 400 for a body that is not a JSON object, lacks {@code model}, or (chat)
   *     lacks a valid {@code messages} list or (completion) a valid {@code prompt}
   */
  static ClientRequest parse(Kind kind, byte[] body) {
    if (body.length == 0) {
      throw OpenAiError.invalid(
          null, null, "We could not parse the JSON body of your request: the body is empty.");
    }
    try (JsonParser p = Json.FACTORY.createParser(body)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw OpenAiError.invalid(
            null, null, "We could not parse the JSON body of your request: expected an object.");
      }
      String model = null;
      boolean stream = false;
      String cacheSalt = null;
      List<?> messages = null;
      boolean messagesGiven = false;
      List<?> tools = null;
      Map<String, Object> kwargs = null;
      Boolean addGen = null;
      Boolean contFinal = null;
      Boolean addSpecial = null;
      String promptText = null;
      int[] promptIds = null;
      boolean promptGiven = false;
      // byte offsets for include_usage: -1 = not seen
      long soStart = -1; // offset of stream_options' value token
      JsonToken soToken = null;
      int soFields = 0;
      long iuStart = -1; // offset of include_usage's value
      JsonToken iuToken = null;
      boolean continuousUsage = false; // stream_options.continuous_usage_stats, vLLM's
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken t = p.nextToken();
        switch (name) {
          case "model" -> {
            if (t != JsonToken.VALUE_STRING) throw wrongType("model", "a string");
            model = p.getText();
          }
          case "stream" -> {
            if (t == JsonToken.VALUE_TRUE) stream = true;
            else if (t == JsonToken.VALUE_FALSE || t == JsonToken.VALUE_NULL) stream = false;
            else throw wrongType("stream", "a boolean");
          }
          case "stream_options" -> {
            soStart = p.currentTokenLocation().getByteOffset();
            soToken = t;
            soFields = 0;
            iuStart = -1;
            iuToken = null;
            continuousUsage = false;
            if (t == JsonToken.START_OBJECT) {
              while (p.nextToken() == JsonToken.FIELD_NAME) {
                soFields++;
                String f = p.currentName();
                JsonToken v = p.nextToken();
                if (f.equals("include_usage")) {
                  iuStart = p.currentTokenLocation().getByteOffset();
                  iuToken = v;
                } else if (f.equals("continuous_usage_stats")) {
                  continuousUsage = v != JsonToken.VALUE_FALSE && v != JsonToken.VALUE_NULL;
                }
                p.skipChildren();
              }
            } else {
              p.skipChildren();
            }
          }
          case "cache_salt" -> {
            if (t == JsonToken.VALUE_STRING) cacheSalt = p.getText();
            else if (t != JsonToken.VALUE_NULL) throw wrongType("cache_salt", "a string");
          }
          case "messages" -> {
            messagesGiven = true;
            if (kind != Kind.CHAT) {
              p.skipChildren();
            } else if (t == JsonToken.START_ARRAY) {
              messages = (List<?>) JsonValues.read(p);
            } else {
              throw wrongType("messages", "an array of {role, content} objects");
            }
          }
          case "tools" -> {
            if (kind == Kind.CHAT && t == JsonToken.START_ARRAY)
              tools = (List<?>) JsonValues.read(p);
            else p.skipChildren();
          }
          case "chat_template_kwargs" -> {
            if (kind == Kind.CHAT && t == JsonToken.START_OBJECT) {
              @SuppressWarnings("unchecked")
              Map<String, Object> m = (Map<String, Object>) JsonValues.read(p);
              kwargs = m;
            } else {
              p.skipChildren();
            }
          }
          case "add_generation_prompt" -> addGen = bool(t, name);
          case "continue_final_message" -> contFinal = bool(t, name);
          case "add_special_tokens" -> addSpecial = bool(t, name);
          case "prompt" -> {
            promptGiven = true;
            if (kind != Kind.COMPLETION) {
              p.skipChildren();
            } else if (t == JsonToken.VALUE_STRING) {
              promptText = p.getText();
            } else if (t == JsonToken.START_ARRAY) {
              // a token-id list, a list of strings or a list of token-id lists (a batch): the
              // first prompt routes the request
              Object first = firstPrompt(p);
              if (first instanceof String s) promptText = s;
              else promptIds = (int[]) first;
            } else {
              throw wrongType("prompt", "a string, an array of token ids, or an array of those");
            }
          }
          default -> p.skipChildren();
        }
      }
      if (model == null) {
        throw OpenAiError.invalid(
            null,
            "model",
            "you must provide a model parameter (the name of a model this gateway serves, GET"
                + " /v1/models lists them)");
      }
      ChatRequest chat = null;
      if (kind == Kind.CHAT) {
        if (!messagesGiven || messages == null) {
          throw OpenAiError.invalid(null, "messages", "'messages' is a required property");
        }
        try {
          chat =
              new ChatRequest(
                  messages,
                  tools,
                  addGen == null ? !Boolean.TRUE.equals(contFinal) : addGen,
                  contFinal != null && contFinal,
                  addSpecial != null && addSpecial,
                  kwargs == null ? Map.of() : new LinkedHashMap<>(kwargs));
        } catch (TokenizerException e) {
          throw OpenAiError.invalid(null, "messages", e.getMessage());
        }
      } else if (!promptGiven || (promptText == null && promptIds == null)) {
        throw OpenAiError.invalid(null, "prompt", "'prompt' is a required property");
      }
      // not when the client asked for usage in every chunk without the final one: vLLM sends
      // those only with include_usage, so setting it would change every chunk the client gets
      boolean inject = stream && iuToken != JsonToken.VALUE_TRUE && !continuousUsage;
      byte[] upstream = body;
      if (inject) {
        byte[] u = injectUsage(body, p, soStart, soToken, soFields, iuStart, iuToken);
        if (u == null) inject = false; // a stream_options of the wrong type: the engine says so
        else upstream = u;
      }
      if (p.nextToken() != null) {
        throw OpenAiError.invalid(
            null,
            null,
            "We could not parse the JSON body of your request: there is more after the JSON"
                + " object.");
      }
      return new ClientRequest(
          kind,
          model,
          stream,
          inject,
          cacheSalt,
          chat,
          promptText,
          promptIds,
          addSpecial == null || addSpecial,
          upstream);
    } catch (JsonProcessingException e) {
      // a limit of the parser (nesting depth, number length) has no location
      var at = e.getLocation();
      throw OpenAiError.invalid(
          null,
          null,
          "We could not parse the JSON body of your request: "
              + e.getOriginalMessage()
              + (at == null
                  ? ""
                  : " (at line " + at.getLineNr() + ", column " + at.getColumnNr() + ")"));
    } catch (IOException e) {
      throw OpenAiError.invalid(null, null, "cannot read the request body: " + e.getMessage());
    }
  }

  private static OpenAiError wrongType(String field, String what) {
    return OpenAiError.invalid(null, field, "'" + field + "' must be " + what);
  }

  private static Boolean bool(JsonToken t, String field) {
    if (t == JsonToken.VALUE_TRUE) return Boolean.TRUE;
    if (t == JsonToken.VALUE_FALSE) return Boolean.FALSE;
    if (t == JsonToken.VALUE_NULL) return null;
    throw wrongType(field, "a boolean");
  }

  /** The first prompt of a {@code prompt} array (the parser is at its START_ARRAY). */
  private static Object firstPrompt(JsonParser p) throws IOException {
    JsonToken t = p.nextToken();
    if (t == JsonToken.END_ARRAY) {
      throw OpenAiError.invalid(null, "prompt", "'prompt' must not be empty");
    }
    Object first;
    if (t == JsonToken.VALUE_NUMBER_INT) {
      first = ids(p, t);
      return first; // the whole array was the token list
    }
    if (t == JsonToken.VALUE_STRING) {
      first = p.getText();
    } else if (t == JsonToken.START_ARRAY) {
      first = ids(p, p.nextToken());
    } else {
      throw wrongType("prompt", "a string, an array of token ids, or an array of those");
    }
    while (p.nextToken() != JsonToken.END_ARRAY) p.skipChildren();
    return first;
  }

  /** Token ids up to the END_ARRAY, starting at token {@code t}; no boxing. */
  private static int[] ids(JsonParser p, JsonToken t) throws IOException {
    int[] out = new int[64];
    int n = 0;
    while (t != JsonToken.END_ARRAY) {
      if (t != JsonToken.VALUE_NUMBER_INT) throw wrongType("prompt", "token ids (integers)");
      long v = p.getLongValue();
      if (v < 0 || v > 0xFFFF_FFFFL) {
        throw OpenAiError.invalid(null, "prompt", "token id " + v + " is out of range");
      }
      if (n == out.length) out = java.util.Arrays.copyOf(out, n * 2);
      out[n++] = (int) v;
      t = p.nextToken();
    }
    return java.util.Arrays.copyOf(out, n);
  }

  /**
   * The body with {@code stream_options.include_usage} true, or null when {@code stream_options} is
   * neither absent, null nor an object (left to the engine to refuse).
   */
  private static byte[] injectUsage(
      byte[] body,
      JsonParser p,
      long soStart,
      JsonToken soToken,
      int soFields,
      long iuStart,
      JsonToken iuToken) {
    if (soToken == null) {
      // no stream_options: before the top-level '}' (the parser stands on it)
      int end = (int) p.currentTokenLocation().getByteOffset();
      byte[] add = ",\"stream_options\":{\"include_usage\":true}".getBytes(StandardCharsets.UTF_8);
      return splice(body, end, 0, add);
    }
    if (soToken == JsonToken.VALUE_NULL) {
      byte[] add = "{\"include_usage\":true}".getBytes(StandardCharsets.UTF_8);
      return splice(body, (int) soStart, 4, add);
    }
    if (soToken != JsonToken.START_OBJECT) return null;
    if (iuToken == null) {
      byte[] add = soFields == 0 ? INCLUDE_USAGE : concat(INCLUDE_USAGE, new byte[] {','});
      return splice(body, (int) soStart + 1, 0, add);
    }
    int len =
        switch (iuToken) {
          case VALUE_NULL -> 4;
          case VALUE_FALSE -> 5;
          default -> -1;
        };
    if (len < 0) return null;
    return splice(body, (int) iuStart, len, "true".getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] splice(byte[] body, int at, int removed, byte[] add) {
    byte[] out = new byte[body.length - removed + add.length];
    System.arraycopy(body, 0, out, 0, at);
    System.arraycopy(add, 0, out, at, add.length);
    System.arraycopy(body, at + removed, out, at + add.length, body.length - at - removed);
    return out;
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] out = new byte[a.length + b.length];
    System.arraycopy(a, 0, out, 0, a.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }
}
