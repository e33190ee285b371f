package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.JsonValues;
import io.kvrouter.tokenize.TokenizerException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A client's {@code /v1/chat/completions} or {@code /v1/completions} body, read once: what the
 * gateway needs to tokenize and route it, and the bytes to forward.
 *
 * <pre>
 * Implementation notes
 *
 * One pass of Jackson's streaming parser over the body bytes. Only the fields routing needs are
 * built into values (messages, tools and chat_template_kwargs as plain Java objects, because the
 * chat template renderer takes those; chat_template, the request's own template, as a String; a
 * token-id prompt straight into an int[]); every other
 * field is skipped unread. The forwarded body is the client's array itself, unchanged, except
 * when the client streams without stream_options.include_usage: then upstreamBody() is a copy
 * with include_usage set to true at the byte offsets the parse recorded (a StreamOptions record,
 * made only when the body has stream_options: an inserted field, or a replaced null/false), and
 * injectedUsage is true, so that the relay drops the usage chunk the client did not ask for. parse()
 * reads the fields into a Fields object (one per parse: the values before they are checked), each
 * with a helper of its own; a field given twice is read twice, the last one winning (a skipped one
 * keeps the earlier value). Immutable after parse; one per request thread.
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

  /** vLLM's {@code priority} (lower first; 0 when absent), for admission; forwarded as sent. */
  final long priority;

  /** OpenAI's {@code user}, or null. */
  final @Nullable String user;

  /** The Responses API's {@code previous_response_id} (a session key source), or null. */
  final @Nullable String previousResponseId;

  /** {@code max_completion_tokens}, else {@code max_tokens}; -1 when neither is given. */
  final long maxTokens;

  /** The JSON values built for messages, tools and chat_template_kwargs (the parse's budget). */
  final long values;

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
      long priority,
      @Nullable String user,
      @Nullable String previousResponseId,
      long maxTokens,
      long values,
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
    this.priority = priority;
    this.user = user;
    this.previousResponseId = previousResponseId;
    this.maxTokens = maxTokens;
    this.values = values;
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
    return parse(kind, body, GatewayConfig.DEFAULT_MAX_REQUEST_VALUES);
  }

  /**
   * As {@link #parse(Kind, byte[])}, building at most {@code maxValues} JSON values of the
   * messages, tools and chat_template_kwargs (an 8 MB body of 2.8 million empty tools would take
   * some 200 MB of heap).
   *
   * @throws OpenAiError 413 when they hold more
   */
  static ClientRequest parse(Kind kind, byte[] body, long maxValues) {
    if (body.length == 0) {
      throw OpenAiError.invalid(
          null, null, "We could not parse the JSON body of your request: the body is empty.");
    }
    try (JsonParser p = Json.FACTORY.createParser(body)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw OpenAiError.invalid(
            null, null, "We could not parse the JSON body of your request: expected an object.");
      }
      Fields f = new Fields(kind, new JsonValues.Budget(maxValues));
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        f.read(p, name, p.nextToken());
      }
      return f.build(body, p);
    } catch (JsonProcessingException e) {
      throw unparsable(e);
    } catch (JsonValues.TooManyValues e) {
      throw new OpenAiError(
          413,
          "invalid_request_error",
          "request_too_large",
          null,
          "the request's messages, tools and chat_template_kwargs hold "
              + e.getMessage()
              + " (the gateway's limit per request; split the request or send fewer tools)");
    } catch (IOException e) {
      throw OpenAiError.invalid(null, null, "cannot read the request body: " + e.getMessage());
    }
  }

  /** What parse() reads of the body's fields, before they are checked; one per parse. */
  private static final class Fields {
    final Kind kind;
    String model;
    boolean stream;
    String cacheSalt;
    List<?> messages;
    boolean messagesGiven;
    List<?> tools;
    boolean toolChoiceNone;
    Map<String, Object> kwargs;
    String template;
    Boolean addGen;
    Boolean contFinal;
    Boolean addSpecial;
    String promptText;
    int[] promptIds;
    boolean promptGiven;
    @Nullable StreamOptions options; // null: not given
    long priority;
    @Nullable String user;
    @Nullable String previousResponseId;
    long maxTokens = -1;
    long maxCompletionTokens = -1;
    final JsonValues.Budget budget;

    Fields(Kind kind, JsonValues.Budget budget) {
      this.kind = kind;
      this.budget = budget;
    }

    /** Reads the field {@code name}, whose value starts at {@code t}. */
    void read(JsonParser p, String name, JsonToken t) throws IOException {
      switch (name) {
        case "model" -> {
          if (t != JsonToken.VALUE_STRING) throw wrongType("model", "a string");
          model = p.getText();
        }
        case "stream" -> stream = stream(t);
        case "stream_options" -> options = StreamOptions.read(p, t);
        case "cache_salt" -> {
          if (t == JsonToken.VALUE_STRING) cacheSalt = p.getText();
          else if (t != JsonToken.VALUE_NULL) throw wrongType("cache_salt", "a string");
        }
        case "messages" -> {
          messagesGiven = true;
          messages = messages(kind, p, t, messages, budget);
        }
        case "tools" -> tools = tools(kind, p, t, tools, budget);
        case "tool_choice" -> {
          toolChoiceNone = t == JsonToken.VALUE_STRING && "none".equals(p.getText());
          p.skipChildren(); // the engine judges every other choice
        }
        case "chat_template_kwargs" -> kwargs = kwargs(kind, p, t, kwargs, budget);
        case "chat_template" -> {
          if (t == JsonToken.VALUE_STRING) template = kind == Kind.CHAT ? p.getText() : null;
          else if (t != JsonToken.VALUE_NULL) throw wrongType("chat_template", "a string");
        }
        case "add_generation_prompt" -> addGen = bool(t, name);
        case "continue_final_message" -> contFinal = bool(t, name);
        case "add_special_tokens" -> addSpecial = bool(t, name);
        case "priority" -> {
          if (t == JsonToken.VALUE_NUMBER_INT) priority = p.getLongValue();
          else if (t != JsonToken.VALUE_NULL) throw wrongType("priority", "an integer");
        }
        case "user" -> {
          if (t == JsonToken.VALUE_STRING) user = p.getText();
          else p.skipChildren(); // the engine judges it
        }
        case "previous_response_id" -> {
          if (t == JsonToken.VALUE_STRING) previousResponseId = p.getText();
          else p.skipChildren(); // the engine judges it
        }
        case "max_tokens" -> maxTokens = count(t, p);
        case "max_completion_tokens" -> maxCompletionTokens = count(t, p);
        case "prompt" -> {
          promptGiven = true;
          Object v = prompt(kind, p, t);
          if (v instanceof String s) promptText = s;
          else if (v instanceof int[] ids) promptIds = ids;
        }
        default -> p.skipChildren();
      }
    }

    /** The request, once every field is read (the parser stands on the top-level '}'). */
    ClientRequest build(byte[] body, JsonParser p) throws IOException {
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
        chat =
            chat(messages, tools, addGen, contFinal, addSpecial, kwargs, template, toolChoiceNone);
      } else if (!promptGiven || (promptText == null && promptIds == null)) {
        throw OpenAiError.invalid(null, "prompt", "'prompt' is a required property");
      }
      // not when the client asked for usage in every chunk without the final one: vLLM sends
      // those only with include_usage, so setting it would change every chunk the client gets
      boolean inject =
          stream
              && (options == null || options.iuToken() != JsonToken.VALUE_TRUE)
              && (options == null || !options.continuousUsage());
      byte[] upstream = body;
      if (inject) {
        byte[] u = injectUsage(body, p, options);
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
          priority,
          user,
          previousResponseId,
          maxCompletionTokens >= 0 ? maxCompletionTokens : maxTokens,
          budget.used(),
          upstream);
    }
  }

  /**
   * Where {@code stream_options} is in the body and what it holds, for {@link #injectUsage}: the
   * byte offset and token of its value, how many fields it has (an object), the byte offset and
   * token of its {@code include_usage} value (-1 and null: absent), and whether it asks for vLLM's
   * {@code continuous_usage_stats}. Made only for a body that has {@code stream_options}.
   */
  private record StreamOptions(
      long start,
      JsonToken token,
      int fields,
      long iuStart,
      JsonToken iuToken,
      boolean continuousUsage) {

    /** Reads the value at {@code t} (the parser is on it) and records where its parts are. */
    static StreamOptions read(JsonParser p, JsonToken t) throws IOException {
      long start = p.currentTokenLocation().getByteOffset();
      int fields = 0;
      long iuStart = -1;
      JsonToken iuToken = null;
      boolean continuousUsage = false;
      if (t == JsonToken.START_OBJECT) {
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          fields++;
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
      return new StreamOptions(start, t, fields, iuStart, iuToken, continuousUsage);
    }
  }

  /**
   * A token count (max_tokens): its value when a non-negative integer, else -1 (left to the
   * engine).
   */
  private static long count(JsonToken t, JsonParser p) throws IOException {
    if (t == JsonToken.VALUE_NUMBER_INT) {
      long v = p.getLongValue();
      return v >= 0 ? v : -1;
    }
    p.skipChildren();
    return -1;
  }

  private static boolean stream(JsonToken t) {
    if (t == JsonToken.VALUE_TRUE) return true;
    if (t == JsonToken.VALUE_FALSE || t == JsonToken.VALUE_NULL) return false;
    throw wrongType("stream", "a boolean");
  }

  /** A chat's {@code messages} array; skipped (keeping {@code before}) for a completion. */
  private static List<?> messages(
      Kind kind, JsonParser p, JsonToken t, List<?> before, JsonValues.Budget budget)
      throws IOException {
    if (kind != Kind.CHAT) {
      p.skipChildren();
      return before;
    }
    if (t == JsonToken.START_ARRAY) return (List<?>) JsonValues.read(p, budget);
    throw wrongType("messages", "an array of {role, content} objects");
  }

  /** A chat's {@code tools} array; anything else is skipped, keeping {@code before}. */
  private static List<?> tools(
      Kind kind, JsonParser p, JsonToken t, List<?> before, JsonValues.Budget budget)
      throws IOException {
    if (kind == Kind.CHAT && t == JsonToken.START_ARRAY) {
      return (List<?>) JsonValues.read(p, budget);
    }
    p.skipChildren();
    return before;
  }

  /** A chat's {@code chat_template_kwargs} object; anything else is skipped, keeping before. */
  @SuppressWarnings("unchecked")
  private static Map<String, Object> kwargs(
      Kind kind, JsonParser p, JsonToken t, Map<String, Object> before, JsonValues.Budget budget)
      throws IOException {
    if (kind == Kind.CHAT && t == JsonToken.START_OBJECT) {
      return (Map<String, Object>) JsonValues.read(p, budget);
    }
    p.skipChildren();
    return before;
  }

  /**
   * A completion's {@code prompt}: a String or an int[] of token ids (of a batch, the first prompt,
   * which routes the request); null for a chat (skipped).
   */
  private static Object prompt(Kind kind, JsonParser p, JsonToken t) throws IOException {
    if (kind != Kind.COMPLETION) {
      p.skipChildren();
      return null;
    }
    if (t == JsonToken.VALUE_STRING) return p.getText();
    // a token-id list, a list of strings or a list of token-id lists (a batch)
    if (t == JsonToken.START_ARRAY) return firstPrompt(p);
    throw wrongType("prompt", "a string, an array of token ids, or an array of those");
  }

  /** The chat request the template renders; a message the tokenizer refuses is a 400. */
  private static ChatRequest chat(
      List<?> messages,
      List<?> tools,
      Boolean addGen,
      Boolean contFinal,
      Boolean addSpecial,
      Map<String, Object> kwargs,
      String template,
      boolean toolChoiceNone) {
    try {
      return new ChatRequest(
          messages,
          tools,
          addGen == null ? !Boolean.TRUE.equals(contFinal) : addGen,
          contFinal != null && contFinal,
          addSpecial != null && addSpecial,
          kwargs == null ? Map.of() : new LinkedHashMap<>(kwargs),
          template,
          toolChoiceNone);
    } catch (TokenizerException e) {
      throw OpenAiError.invalid(null, "messages", e.getMessage());
    }
  }

  /** The 400 of a body Jackson cannot parse, with the place when Jackson knows it. */
  private static OpenAiError unparsable(JsonProcessingException e) {
    // a limit of the parser (nesting depth, number length) has no location
    JsonLocation at = e.getLocation();
    return OpenAiError.invalid(
        null,
        null,
        "We could not parse the JSON body of your request: "
            + e.getOriginalMessage()
            + (at == null
                ? ""
                : " (at line " + at.getLineNr() + ", column " + at.getColumnNr() + ")"));
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
      if (n == out.length) out = Arrays.copyOf(out, n * 2);
      out[n++] = (int) v;
      t = p.nextToken();
    }
    return Arrays.copyOf(out, n);
  }

  /**
   * The body with {@code stream_options.include_usage} true, or null when {@code stream_options} is
   * neither absent, null nor an object (left to the engine to refuse).
   */
  private static byte[] injectUsage(byte[] body, JsonParser p, StreamOptions so) {
    if (so == null) {
      // no stream_options: before the top-level '}' (the parser stands on it)
      int end = (int) p.currentTokenLocation().getByteOffset();
      byte[] add = ",\"stream_options\":{\"include_usage\":true}".getBytes(StandardCharsets.UTF_8);
      return splice(body, end, 0, add);
    }
    if (so.token() == JsonToken.VALUE_NULL) {
      byte[] add = "{\"include_usage\":true}".getBytes(StandardCharsets.UTF_8);
      return splice(body, (int) so.start(), 4, add);
    }
    if (so.token() != JsonToken.START_OBJECT) return null;
    if (so.iuToken() == null) {
      byte[] add = so.fields() == 0 ? INCLUDE_USAGE : concat(INCLUDE_USAGE, new byte[] {','});
      return splice(body, (int) so.start() + 1, 0, add);
    }
    int len =
        switch (so.iuToken()) {
          case VALUE_NULL -> 4;
          case VALUE_FALSE -> 5;
          default -> -1;
        };
    if (len < 0) return null;
    return splice(body, (int) so.iuStart(), len, "true".getBytes(StandardCharsets.UTF_8));
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
