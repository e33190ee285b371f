package io.kvrouter.tokenize;

import java.net.URI;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Tokenization delegated to an engine, in the engine's own dialect ({@link EngineDialect}), for
 * templates kvrouter cannot render or for parity by construction.
 *
 * <p>vLLM (and SGLang, and an engine of unknown dialect): {@code POST {engine}/tokenize}, chat form
 * {@code {"model", "messages", "add_generation_prompt", "continue_final_message",
 * "add_special_tokens", "tools"?, "chat_template_kwargs"?}}, completion form {@code {"model",
 * "prompt", "add_special_tokens"}}; answer {@code {"count", "max_model_len", "tokens"}}. llama.cpp:
 * a chat is rendered by {@code POST /apply-template} (the chat body: {@code messages}, {@code
 * tools}, {@code chat_template_kwargs}, {@code add_generation_prompt}) into {@code {"prompt"}},
 * which {@code POST /tokenize {"content", "add_special", "parse_special": true}} tokenizes; a
 * completion prompt goes to {@code /tokenize} the same way. The engine URL is its base ({@code
 * http://host:8000}); a trailing {@code /v1} is dropped.
 *
 * <p>An answer without tokens for a non-empty input is an error, never an empty prompt: llama.cpp
 * answers a vLLM-shaped body with {@code 200 {"tokens": []}}, and routing that as a prompt would
 * route every request blind.
 *
 * <pre>
 * Implementation notes
 *
 * HTTP through one EngineHttp (its own HttpClient). The dialect comes from the EngineApi given
 * at construction, or is probed (EngineApi.probe) at the first call that needs it and kept in
 * a volatile field (two threads may both probe once; the answers are the same). Each answer is
 * read with Json.parse: tokens must be a list of ints in 0..2^31-1, non-empty for a non-empty
 * input, and count (when given) its length. Every failure (unreachable, timeout, a non-200
 * status, a malformed or empty answer) is a TokenizerException naming the URL and the dialect.
 * Safe from any thread.
 * </pre>
 */
public final class EngineTokenizer {

  /** The engine could not be reached at all (refused, timed out, no route). */
  public static final class UnreachableException extends TokenizerException {
    private static final long serialVersionUID = 1L;

    UnreachableException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /**
   * The engine's answer was longer than {@link #MAX_ANSWER_BYTES}: refused, its connection closed
   * after the bytes up to the bound were read (issue 31: a hostile engine's endless answer).
   */
  public static final class AnswerTooLargeException extends TokenizerException {
    private static final long serialVersionUID = 1L;

    private final String path;

    AnswerTooLargeException(String message, String path) {
      super(message);
      this.path = path;
    }

    /** The path the engine answered, e.g. {@code /tokenize}. */
    public String path() {
      return path;
    }
  }

  /**
   * The longest engine answer read (32 MiB, the gateway's bound on one streamed event): a
   * tokenization of a prompt of a few MB is far below it.
   */
  public static final int MAX_ANSWER_BYTES = 32 << 20;

  /** The engine's answer: the token ids, and its context length (-1 when not said). */
  public record Result(int[] tokens, long maxModelLen) {}

  private final EngineHttp http;
  private final @Nullable String model; // null: left out of the requests
  private volatile @Nullable EngineApi api; // null until the first call probes it

  /**
   * A client for the engine at {@code engine}; {@code model} is sent as the request's {@code model}
   * (null leaves it out, which vLLM accepts when it serves one model). Its dialect is probed at the
   * first call.
   */
  public EngineTokenizer(URI engine, String model, Duration timeout) {
    this(engine, model, timeout, null, null);
  }

  /**
   * A client for the engine at {@code engine} whose API is {@code api} (null: probed at the first
   * call), sending {@code apiKey} as a bearer token (null: none).
   */
  public EngineTokenizer(URI engine, String model, Duration timeout, String apiKey, EngineApi api) {
    this.http = new EngineHttp(engine, timeout, apiKey);
    this.model = model;
    this.api = api;
  }

  /** The engine's base URL. */
  public URI base() {
    return http.base();
  }

  /**
   * What the engine says of itself (probed at the first call when not given).
   *
   * @throws UnreachableException when it cannot be reached
   */
  public EngineApi api() {
    EngineApi a = api;
    if (a == null) api = a = EngineApi.probe(http);
    return a;
  }

  /** The engine's dialect; see {@link #api()}. */
  public EngineDialect dialect() {
    return api().dialect();
  }

  /** Tokenizes a chat as the engine renders it. */
  public Result tokenizeChat(ChatRequest req) {
    EngineApi a = api();
    if (a.dialect() == EngineDialect.LLAMA_CPP) {
      Map<String, Object> body = new LinkedHashMap<>();
      body.put("messages", req.messages());
      if (req.tools() != null) body.put("tools", req.tools());
      if (!req.templateKwargs().isEmpty()) body.put("chat_template_kwargs", req.templateKwargs());
      body.put("add_generation_prompt", req.addGenerationPrompt());
      Object v = http.postJson("/apply-template", body);
      if (!(v instanceof Map<?, ?> m) || !(m.get("prompt") instanceof String prompt)) {
        throw shape("/apply-template", "a {\"prompt\": ...} object", v);
      }
      if (prompt.isEmpty()) {
        throw new TokenizerException(
            where("/apply-template")
                + " rendered the chat as an empty prompt: the engine's chat template gave no"
                + " text for "
                + req.messages().size()
                + " message(s)");
      }
      return llamaTokenize(prompt, req.addSpecialTokens(), a);
    }
    Map<String, Object> body = new LinkedHashMap<>();
    if (model != null) body.put("model", model);
    body.put("messages", req.messages());
    body.put("add_generation_prompt", req.addGenerationPrompt());
    body.put("continue_final_message", req.continueFinalMessage());
    body.put("add_special_tokens", req.addSpecialTokens());
    if (req.tools() != null) body.put("tools", req.tools());
    if (!req.templateKwargs().isEmpty()) body.put("chat_template_kwargs", req.templateKwargs());
    // a chat template always renders something: no tokens means the engine did not read the body
    return vllmTokenize(body, true, a);
  }

  /** Tokenizes a plain prompt (a completion's). */
  public Result tokenizePrompt(String prompt, boolean addSpecialTokens) {
    EngineApi a = api();
    if (a.dialect() == EngineDialect.LLAMA_CPP) {
      return llamaTokenize(prompt, addSpecialTokens, a);
    }
    Map<String, Object> body = new LinkedHashMap<>();
    if (model != null) body.put("model", model);
    body.put("prompt", prompt);
    body.put("add_special_tokens", addSpecialTokens);
    return vllmTokenize(body, !prompt.isEmpty(), a);
  }

  /** The text of {@code ids} as the engine decodes them ({@code /detokenize}). */
  public String detokenize(int[] ids) {
    EngineApi a = api();
    Map<String, Object> body = new LinkedHashMap<>();
    if (model != null && a.dialect() != EngineDialect.LLAMA_CPP) body.put("model", model);
    Long[] boxed = new Long[ids.length];
    for (int i = 0; i < ids.length; i++) boxed[i] = Integer.toUnsignedLong(ids[i]);
    body.put("tokens", List.of(boxed));
    Object v = http.postJson("/detokenize", body);
    String field = a.dialect() == EngineDialect.LLAMA_CPP ? "content" : "prompt";
    if (!(v instanceof Map<?, ?> m) || !(m.get(field) instanceof String text)) {
      throw shape("/detokenize", "a {\"" + field + "\": ...} object", v);
    }
    return text;
  }

  /** The first model the engine lists at {@code GET /v1/models}, or null if it lists none. */
  public String firstServedModel() {
    Object v = http.json("/v1/models", http.get("/v1/models"));
    if (v instanceof Map<?, ?> m
        && m.get("data") instanceof List<?> data
        && !data.isEmpty()
        && data.get(0) instanceof Map<?, ?> first
        && first.get("id") instanceof String id) {
      return id;
    }
    return null;
  }

  private Result llamaTokenize(String text, boolean addSpecial, EngineApi a) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("content", text);
    body.put("add_special", addSpecial);
    body.put("parse_special", true);
    Object v = http.postJson("/tokenize", body);
    return new Result(tokens(v, !text.isEmpty()), a.maxModelLen());
  }

  private Result vllmTokenize(Map<String, Object> body, boolean nonEmpty, EngineApi a) {
    Object v = http.postJson("/tokenize", body);
    int[] ids = tokens(v, nonEmpty);
    Map<?, ?> m = (Map<?, ?>) v;
    if (m.get("count") instanceof Long count && count != ids.length) {
      throw new TokenizerException(
          where("/tokenize") + " answered count " + count + " with " + ids.length + " tokens");
    }
    long maxLen = m.get("max_model_len") instanceof Long l ? l : a.maxModelLen();
    return new Result(ids, maxLen);
  }

  /** The "tokens" of a /tokenize answer; none for a non-empty input is an error. */
  private int[] tokens(Object v, boolean nonEmptyInput) {
    if (!(v instanceof Map<?, ?> m) || !(m.get("tokens") instanceof List<?> tokens)) {
      throw shape("/tokenize", "a {\"tokens\": [...]} object", v);
    }
    if (tokens.isEmpty() && nonEmptyInput) {
      throw new TokenizerException(
          where("/tokenize")
              + " answered no tokens for a non-empty input: the engine did not read the request"
              + " in this shape (llama.cpp's server takes {\"content\"} and answers a vLLM-shaped"
              + " body with {\"tokens\": []}); the gateway will not route an empty prompt. Give"
              + " the gateway the model's tokenizer directory (--model NAME=DIR), or check the"
              + " engine's dialect in the gateway's log");
    }
    int[] ids = new int[tokens.size()];
    for (int i = 0; i < ids.length; i++) {
      if (!(tokens.get(i) instanceof Long l) || l < 0 || l > Integer.MAX_VALUE) {
        throw new TokenizerException(
            where("/tokenize")
                + " answered tokens["
                + i
                + "] = "
                + tokens.get(i)
                + ", not a token id");
      }
      ids[i] = (int) (long) l;
    }
    return ids;
  }

  private TokenizerException shape(String path, String expected, Object got) {
    String seen = got == null ? "null" : EngineHttp.abbrev(String.valueOf(got));
    return new TokenizerException(
        where(path)
            + " answered in a shape the gateway does not know (expected "
            + expected
            + "): "
            + seen);
  }

  /** "engine http://h:p/tokenize (llama.cpp)" for messages. */
  private String where(String path) {
    EngineApi a = api;
    return "engine "
        + http.uri(path)
        + (a == null ? "" : " (" + a.dialect().wireName() + " dialect)");
  }
}
