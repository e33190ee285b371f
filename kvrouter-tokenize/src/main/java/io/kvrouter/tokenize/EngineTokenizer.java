package io.kvrouter.tokenize;

import io.kvrouter.tokenize.jinja.Py;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Tokenization delegated to an engine: {@code POST {engine}/tokenize} in vLLM's request and
 * response shapes, for templates kvrouter cannot render or for parity by construction.
 *
 * <p>Chat form: {@code {"model", "messages", "add_generation_prompt", "continue_final_message",
 * "add_special_tokens", "tools"?, "chat_template_kwargs"?}}; completion form: {@code {"model",
 * "prompt", "add_special_tokens"}}; answer: {@code {"count", "max_model_len", "tokens"}}. The
 * engine URL is its base ({@code http://host:8000}); a trailing {@code /v1} is dropped, since vLLM
 * serves {@code /tokenize} at the root.
 *
 * <pre>
 * Implementation notes
 *
 * One java.net.http.HttpClient (HTTP/1.1, connect timeout) shared by all calls; each call
 * writes its body with Py.jsonDumps and reads the answer with Json.parse, checking that tokens is
 * a list of ints in 0..2^31-1 and that count equals its length. Every failure (unreachable,
 * timeout, a non-200 status, a malformed answer) is a TokenizerException naming the URL. Safe
 * from any thread.
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

  /** The engine's answer. */
  public record Result(int[] tokens, long maxModelLen) {}

  private final URI base;
  private final String model;
  private final Duration timeout;
  private final HttpClient http;

  /**
   * A client for the engine at {@code engine}; {@code model} is sent as the request's {@code model}
   * (null leaves it out, which vLLM accepts when it serves one model).
   */
  public EngineTokenizer(URI engine, String model, Duration timeout) {
    String s = engine.toString().replaceAll("/+$", "");
    if (s.endsWith("/v1")) {
      s = s.substring(0, s.length() - 3);
    }
    this.base = URI.create(s);
    this.model = model;
    this.timeout = timeout;
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(timeout)
            .build();
  }

  /** The engine's base URL. */
  public URI base() {
    return base;
  }

  /** Tokenizes a chat as the engine renders it. */
  public Result tokenizeChat(ChatRequest req) {
    Map<String, Object> body = new LinkedHashMap<>();
    if (model != null) {
      body.put("model", model);
    }
    body.put("messages", req.messages());
    body.put("add_generation_prompt", req.addGenerationPrompt());
    body.put("continue_final_message", req.continueFinalMessage());
    body.put("add_special_tokens", req.addSpecialTokens());
    if (req.tools() != null) {
      body.put("tools", req.tools());
    }
    if (!req.templateKwargs().isEmpty()) {
      body.put("chat_template_kwargs", req.templateKwargs());
    }
    return post(body);
  }

  /** Tokenizes a plain prompt (vLLM's completion form). */
  public Result tokenizePrompt(String prompt, boolean addSpecialTokens) {
    Map<String, Object> body = new LinkedHashMap<>();
    if (model != null) {
      body.put("model", model);
    }
    body.put("prompt", prompt);
    body.put("add_special_tokens", addSpecialTokens);
    return post(body);
  }

  /** The first model the engine lists at {@code GET /v1/models}, or null if it lists none. */
  public String firstServedModel() {
    URI uri = base.resolve(base.getPath() + "/v1/models");
    String text = send(HttpRequest.newBuilder(uri).timeout(timeout).GET().build(), uri);
    try {
      if (Json.parse(text) instanceof Map<?, ?> m
          && m.get("data") instanceof List<?> data
          && !data.isEmpty()
          && data.get(0) instanceof Map<?, ?> first
          && first.get("id") instanceof String id) {
        return id;
      }
      return null;
    } catch (IOException e) {
      throw new TokenizerException(uri + " answered with invalid JSON: " + e.getMessage(), e);
    }
  }

  private Result post(Map<String, Object> body) {
    URI uri = base.resolve(base.getPath() + "/tokenize");
    HttpRequest req =
        HttpRequest.newBuilder(uri)
            .timeout(timeout)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(Py.jsonDumps(body), StandardCharsets.UTF_8))
            .build();
    String text = send(req, uri);
    Object v;
    try {
      v = Json.parse(text);
    } catch (IOException e) {
      throw new TokenizerException(uri + " answered with invalid JSON: " + e.getMessage(), e);
    }
    if (!(v instanceof Map<?, ?> m) || !(m.get("tokens") instanceof List<?> tokens)) {
      throw new TokenizerException(uri + " answered without a \"tokens\" list: " + abbrev(text));
    }
    int[] ids = new int[tokens.size()];
    for (int i = 0; i < ids.length; i++) {
      if (!(tokens.get(i) instanceof Long l) || l < 0 || l > Integer.MAX_VALUE) {
        throw new TokenizerException(
            uri + " answered tokens[" + i + "] = " + tokens.get(i) + ", not a token id");
      }
      ids[i] = (int) (long) l;
    }
    if (m.get("count") instanceof Long count && count != ids.length) {
      throw new TokenizerException(
          uri + " answered count " + count + " with " + ids.length + " tokens");
    }
    long maxLen = m.get("max_model_len") instanceof Long l ? l : -1;
    return new Result(ids, maxLen);
  }

  private String send(HttpRequest req, URI uri) {
    HttpResponse<String> resp;
    try {
      resp = http.send(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    } catch (HttpTimeoutException e) {
      throw new UnreachableException("engine at " + uri + " did not answer within " + timeout, e);
    } catch (ConnectException e) {
      throw new UnreachableException(
          "cannot reach the engine at " + uri + ": connection refused", e);
    } catch (IOException e) {
      throw new UnreachableException("cannot reach the engine at " + uri + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TokenizerException("interrupted while calling " + uri, e);
    }
    if (resp.statusCode() != 200) {
      throw new TokenizerException(
          uri + " answered HTTP " + resp.statusCode() + ": " + abbrev(resp.body()));
    }
    return resp.body();
  }

  private static String abbrev(String s) {
    s = s.strip();
    return s.length() <= 300 ? s : s.substring(0, 297) + "...";
  }
}
