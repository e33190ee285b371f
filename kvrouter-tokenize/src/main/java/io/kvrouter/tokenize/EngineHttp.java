package io.kvrouter.tokenize;

import io.kvrouter.tokenize.jinja.Py;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;

/**
 * The HTTP calls {@link EngineTokenizer} and {@link EngineApi} make to an engine: GET or POST a
 * path of its base URL, read the answer as text or JSON values, every failure an exception naming
 * the URL.
 *
 * <pre>
 * Implementation notes
 *
 * One java.net.http.HttpClient (HTTP/1.1, connect timeout) per instance, shared by all calls; the
 * base URL has no trailing slash and no trailing /v1 (vLLM and llama.cpp serve /tokenize at the
 * root). A connection that cannot be made or an answer that does not come within the timeout is
 * EngineTokenizer.UnreachableException; an answer that came is returned with its status (get,
 * post) or, for the JSON calls, must be 200 and valid JSON, else TokenizerException. An answer
 * is read up to maxAnswerBytes (EngineTokenizer.MAX_ANSWER_BYTES) and one byte more: longer is
 * EngineTokenizer.AnswerTooLargeException, the stream closed early (which closes the
 * connection), so a hostile engine's endless body costs at most the bound. With an
 * API key every call sends Authorization: Bearer KEY. Safe from any thread.
 * </pre>
 */
final class EngineHttp {
  /** An answer: its status and body. */
  record Answer(int status, String body) {}

  private final URI base;
  private final Duration timeout;
  private final String apiKey;
  private final HttpClient http;
  private final int maxAnswerBytes;

  EngineHttp(URI engine, Duration timeout, String apiKey) {
    this(engine, timeout, apiKey, EngineTokenizer.MAX_ANSWER_BYTES);
  }

  EngineHttp(URI engine, Duration timeout, String apiKey, int maxAnswerBytes) {
    String s = engine.toString().replaceAll("/+$", "");
    if (s.endsWith("/v1")) s = s.substring(0, s.length() - 3);
    this.base = URI.create(s);
    this.timeout = timeout;
    this.apiKey = apiKey == null || apiKey.isEmpty() ? null : apiKey;
    this.maxAnswerBytes = maxAnswerBytes;
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(timeout)
            .build();
  }

  URI base() {
    return base;
  }

  Duration timeout() {
    return timeout;
  }

  URI uri(String path) {
    return base.resolve(base.getPath() + path);
  }

  /** GET {@code path}: the answer whatever its status. */
  Answer get(String path) {
    URI uri = uri(path);
    return send(builder(uri).GET().build(), uri);
  }

  /** POST {@code body} as JSON to {@code path}: the answer whatever its status. */
  Answer post(String path, Map<String, Object> body) {
    URI uri = uri(path);
    HttpRequest req =
        builder(uri)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(Py.jsonDumps(body), StandardCharsets.UTF_8))
            .build();
    return send(req, uri);
  }

  /**
   * POST {@code body} to {@code path} and read the answer as JSON values.
   *
   * @throws TokenizerException for a status other than 200 or an answer that is not JSON
   */
  Object postJson(String path, Map<String, Object> body) {
    return json(path, post(path, body));
  }

  /**
   * The body of a 200 answer to {@code path} as JSON values.
   *
   * @throws TokenizerException for another status or an answer that is not JSON
   */
  Object json(String path, Answer a) {
    URI uri = uri(path);
    if (a.status() != 200) {
      throw new TokenizerException(uri + " answered HTTP " + a.status() + ": " + abbrev(a.body()));
    }
    try {
      return Json.parse(a.body());
    } catch (IOException e) {
      throw new TokenizerException(uri + " answered with invalid JSON: " + e.getMessage(), e);
    }
  }

  private HttpRequest.Builder builder(URI uri) {
    HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(timeout);
    if (apiKey != null) b.header("Authorization", "Bearer " + apiKey);
    return b;
  }

  private Answer send(HttpRequest req, URI uri) {
    int status;
    byte[] body;
    try {
      HttpResponse<InputStream> resp = http.send(req, HttpResponse.BodyHandlers.ofInputStream());
      status = resp.statusCode();
      // closing the stream before its end cancels the exchange: the connection is closed
      try (InputStream in = resp.body()) {
        body = in.readNBytes(maxAnswerBytes + 1);
      }
    } catch (HttpTimeoutException e) {
      throw new EngineTokenizer.UnreachableException(
          "engine at " + uri + " did not answer within " + timeout, e);
    } catch (ConnectException e) {
      throw new EngineTokenizer.UnreachableException(
          "cannot reach the engine at " + uri + ": connection refused", e);
    } catch (IOException e) {
      throw new EngineTokenizer.UnreachableException(
          "cannot reach the engine at " + uri + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TokenizerException("interrupted while calling " + uri, e);
    }
    if (body.length > maxAnswerBytes) {
      throw new EngineTokenizer.AnswerTooLargeException(
          "engine at "
              + uri
              + " answered more than "
              + maxAnswerBytes
              + " bytes (HTTP "
              + status
              + "); the answer is refused and its connection closed",
          uri.getPath());
    }
    return new Answer(status, new String(body, StandardCharsets.UTF_8));
  }

  static String abbrev(String s) {
    s = s.strip();
    return s.length() <= 300 ? s : s.substring(0, 297) + "...";
  }
}
