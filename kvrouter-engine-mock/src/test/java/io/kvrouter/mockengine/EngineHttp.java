package io.kvrouter.mockengine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** HTTP calls against a mock engine, for tests. */
final class EngineHttp {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient CLIENT =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  private EngineHttp() {}

  /** The tiny tokenizer with a chat template ({@link MockEngines#tinyModel()}). */
  static Path tinyModel() {
    return MockEngines.tinyModel();
  }

  record Reply(int status, String contentType, String body) {
    JsonNode json() {
      try {
        return JSON.readTree(body);
      } catch (IOException e) {
        throw new AssertionError("not JSON: " + body, e);
      }
    }

    /** The SSE frames' data payloads, in order ("[DONE]" included). */
    List<String> events() {
      List<String> out = new ArrayList<>();
      if (!body.endsWith("\n\n"))
        throw new AssertionError("SSE body does not end a frame: " + body);
      for (String frame : body.split("\n\n")) {
        if (!frame.startsWith("data: "))
          throw new AssertionError("not an SSE data frame: " + frame);
        out.add(frame.substring("data: ".length()));
      }
      return out;
    }

    /** The JSON chunks of an SSE body (without the final [DONE]). */
    List<JsonNode> chunks() {
      List<String> ev = events();
      if (!ev.get(ev.size() - 1).equals("[DONE]")) throw new AssertionError("no [DONE]: " + body);
      List<JsonNode> out = new ArrayList<>();
      for (String e : ev.subList(0, ev.size() - 1)) {
        try {
          out.add(JSON.readTree(e));
        } catch (IOException x) {
          throw new AssertionError("chunk not JSON: " + e, x);
        }
      }
      return out;
    }
  }

  static Reply post(String url, String body) {
    return send(
        HttpRequest.newBuilder(URI.create(url))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build());
  }

  static Reply get(String url) {
    return send(
        HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30)).GET().build());
  }

  private static Reply send(HttpRequest r) {
    try {
      HttpResponse<String> res = CLIENT.send(r, HttpResponse.BodyHandlers.ofString());
      return new Reply(
          res.statusCode(), res.headers().firstValue("content-type").orElse(""), res.body());
    } catch (IOException e) {
      throw new AssertionError(r.uri() + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  /** Opens a streamed POST and returns its body stream (the caller closes it to disconnect). */
  static InputStream open(String url, String body) {
    try {
      HttpResponse<InputStream> res =
          CLIENT.send(
              HttpRequest.newBuilder(URI.create(url))
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString(body))
                  .build(),
              HttpResponse.BodyHandlers.ofInputStream());
      if (res.statusCode() != 200) throw new AssertionError("status " + res.statusCode());
      return res.body();
    } catch (IOException e) {
      throw new AssertionError(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  /** Reads SSE lines from {@code in} until one data line has arrived; returns it. */
  static String firstData(InputStream in) throws IOException {
    BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
    String line;
    while ((line = r.readLine()) != null) {
      if (line.startsWith("data: ")) return line;
    }
    throw new AssertionError("stream ended before any data");
  }
}
