package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost.Registration;
import java.io.InputStream;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * End to end against in-process mock engines (kvrouter-sim's MockEngineServer) on real ports, with
 * their KV events over ZMQ into the router: the claims of docs/gateway.md, "Tests".
 */
class GatewayMockEngineTest {
  static final int BS = 4;
  static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  Gateway gateway(Path model, GatewayConfig.Builder b) {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(), b.model("tiny", model).build());
    open.add(g);
    return g;
  }

  /**
   * A mock engine of the tiny model: block size {@link #BS}, 512 GPU blocks, cached-token details
   * on, 20 times real speed, 6 output tokens unless asked.
   */
  static MockEngineServer.Builder tinyEngine() throws Exception {
    return MockEngineServer.Config.builder()
        .modelDir(GatewayStubTest.tiny())
        .servedModelName("tiny")
        .blockSize(BS)
        .numGpuBlocks(512)
        .enablePromptTokensDetails(true)
        .speedup(20)
        .defaultMaxTokens(6);
  }

  MockEngineServer engine(int httpPort, int pub, int replay, int stallAfter) throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            tinyEngine()
                .port(httpPort)
                .stallAfterTokens(stallAfter)
                .kvEvents(
                    KvEventsConfig.zmq(
                        "tcp://127.0.0.1:" + (pub == 0 ? "*" : pub),
                        "tcp://127.0.0.1:" + (replay == 0 ? "*" : replay)))
                .build());
    open.add(e);
    return e;
  }

  /** An engine at real-time speed (20 ms per token): a long answer streams for seconds. */
  MockEngineServer slowEngine() throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .modelDir(GatewayStubTest.tiny())
                .servedModelName("tiny")
                .blockSize(BS)
                .numGpuBlocks(2048)
                .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                .build());
    open.add(e);
    return e;
  }

  static RouterModel register(Gateway g, long id, MockEngineServer e) {
    return g.host.register(
        Registration.of("tiny", BS, id, 0, e.url())
            .withEvents(e.zmqEndpoint(), e.replayEndpoint()));
  }

  static HttpResponse<String> post(String base, String path, String body, String... headers)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i < headers.length; i += 2) b.header(headers[i], headers[i + 1]);
    return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static void await(String what, BooleanSupplier cond) {
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) throw new AssertionError("timed out waiting for " + what);
      Thread.onSpinWait();
    }
  }

  static String chat(String... turns) {
    StringBuilder b = new StringBuilder("{\"model\":\"tiny\",\"max_tokens\":4,\"messages\":[");
    b.append(
        "{\"role\":\"system\",\"content\":\"You are a helpful assistant of the kvrouter test.\"}");
    for (int i = 0; i < turns.length; i++) {
      b.append(",{\"role\":\"")
          .append(i % 2 == 0 ? "user" : "assistant")
          .append("\",\"content\":\"")
          .append(turns[i].replace("\\", "\\\\").replace("\"", "\\\""))
          .append("\"}");
    }
    return b.append("]}").toString();
  }

  static String content(String chatResponse) {
    int i = chatResponse.indexOf("\"content\":\"") + 11;
    StringBuilder b = new StringBuilder();
    for (; chatResponse.charAt(i) != '"'; i++) {
      char c = chatResponse.charAt(i);
      if (c == '\\') {
        char n = chatResponse.charAt(++i);
        if (n == 'u') {
          b.append((char) Integer.parseInt(chatResponse.substring(i + 1, i + 5), 16));
          i += 4;
        } else {
          b.append(n == 'n' ? '\n' : n == 't' ? '\t' : n);
        }
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }

  static long number(String json, String field) {
    int i = json.lastIndexOf("\"" + field + "\":");
    if (i < 0) return -1;
    i += field.length() + 3;
    int j = i;
    while (Character.isDigit(json.charAt(j))) j++;
    return Long.parseLong(json.substring(i, j));
  }

  @Test
  void aConversationLandsWhereItsPrefixIsAndTheEngineConfirmsTheHit() throws Exception {
    Gateway g = gateway(GatewayStubTest.tiny(), GatewayConfig.builder());
    RouterModel m = null;
    for (int i = 1; i <= 3; i++) m = register(g, i, engine(0, 0, 0, 0));
    RouterModel model = m;
    HttpResponse<String> t1 = post(g.url(), "/v1/chat/completions", chat("Tell me about caches."));
    assertThat(t1.statusCode()).isEqualTo(200);
    String worker = t1.headers().firstValue("x-kvrouter-worker").orElseThrow();
    Worker w = new Worker(Long.parseLong(worker), 0);
    long prompt1 = number(t1.body(), "prompt_tokens");
    // the engine's KV events reach the index over ZMQ
    await(
        "turn 1's blocks in the index", () -> model.router().index().blockCount(w) >= prompt1 / BS);
    String answer = content(t1.body());
    String turn2 =
        chat("Tell me about caches.", answer, "And routers?")
            .replace(
                "\"max_tokens\":4,",
                "\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},");
    HttpResponse<String> t2 = post(g.url(), "/v1/chat/completions", turn2);
    assertThat(t2.statusCode()).isEqualTo(200);
    assertThat(t2.headers().firstValue("x-kvrouter-worker")).hasValue(worker);
    long overlap =
        Long.parseLong(t2.headers().firstValue("x-kvrouter-overlap-tokens").orElseThrow());
    assertThat(overlap).isGreaterThanOrEqualTo(prompt1 / BS * BS - BS);
    long cached = number(t2.body(), "cached_tokens");
    long prompt2 = number(t2.body(), "prompt_tokens");
    assertThat(cached).isEqualTo(PredictionCheck.expected(overlap, prompt2, BS)).isPositive();
    assertThat(model.accuracy(w).exact()).isEqualTo(1);
    assertThat(model.accuracy(w).fewer() + model.accuracy(w).more()).isZero();
    assertThat(model.router().inFlight()).isZero();
  }

  @Test
  void engineDelegatedTokenizationRoutesAsWell() throws Exception {
    Gateway g = gateway(null, GatewayConfig.builder()); // no tokenizer: the engines' /tokenize
    MockEngineServer e = engine(0, 0, 0, 0);
    RouterModel m = register(g, 1, e);
    Worker w = new Worker(1, 0);
    String body = chat("Tokenized by the engine itself, please.");
    HttpResponse<String> first = post(g.url(), "/v1/chat/completions", body);
    assertThat(first.statusCode()).isEqualTo(200);
    long prompt = number(first.body(), "prompt_tokens");
    await("blocks indexed", () -> m.router().index().blockCount(w) >= prompt / BS);
    HttpResponse<String> second = post(g.url(), "/v1/chat/completions", body);
    long overlap =
        Long.parseLong(second.headers().firstValue("x-kvrouter-overlap-tokens").orElseThrow());
    assertThat(overlap).isEqualTo(prompt / BS * BS);
    assertThat(number(second.body(), "cached_tokens"))
        .isEqualTo(PredictionCheck.expected(overlap, prompt, BS));
    assertThat(m.accuracy(w).exact()).isEqualTo(1);
    // /tokenize is the engine's own answer
    String tok = "{\"model\":\"tiny\",\"prompt\":\"hello\"}";
    assertThat(post(g.url(), "/tokenize", tok).body())
        .isEqualTo(post(e.url(), "/tokenize", tok).body());
  }

  @Test
  void coldPrefixesSpreadByLoad() throws Exception {
    Gateway g = gateway(GatewayStubTest.tiny(), GatewayConfig.builder());
    RouterModel m = null;
    for (int i = 1; i <= 3; i++) m = register(g, i, slowEngine()); // answers stream for seconds
    Map<String, Integer> per = new HashMap<>();
    List<InputStream> streams = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      String body =
          "{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":1000,\"prompt\":\""
              + (i + " ").repeat(4)
              + "is a cold prompt\"}"; // no two share a first block
      HttpResponse<InputStream> r =
          HTTP.send(
              HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString(body))
                  .build(),
              HttpResponse.BodyHandlers.ofInputStream());
      assertThat(r.statusCode()).isEqualTo(200);
      per.merge(r.headers().firstValue("x-kvrouter-worker").orElseThrow(), 1, Integer::sum);
      streams.add(r.body());
    }
    assertThat(per).containsOnlyKeys("1", "2", "3");
    assertThat(per.values()).containsOnly(2);
    assertThat(m.router().inFlight()).isEqualTo(6);
    for (InputStream in : streams) in.close();
    RouterModel model = m;
    await("every request freed", () -> model.router().inFlight() == 0);
  }

  @Test
  void answersAreByteIdenticalToTheEnginesOwn() throws Exception {
    Gateway g = gateway(GatewayStubTest.tiny(), GatewayConfig.builder());
    MockEngineServer e = engine(0, 0, 0, 0);
    register(g, 1, e);
    String[] bodies = {
      chat("Hello there, engine."),
      chat("Hello there, engine.").replace("{\"model\"", "{\"stream\":true,\"model\""),
      "{\"model\":\"tiny\",\"prompt\":\"Once upon a time\",\"max_tokens\":5}",
      "{\"model\":\"tiny\",\"prompt\":\"Once upon a time\",\"max_tokens\":5,\"stream\":true}",
      "{\"model\":\"tiny\",\"prompt\":\"Once upon a time\",\"max_tokens\":5,\"stream\":true,"
          + "\"stream_options\":{\"include_usage\":true}}",
    };
    String[] paths = {
      "/v1/chat/completions",
      "/v1/chat/completions",
      "/v1/completions",
      "/v1/completions",
      "/v1/completions"
    };
    for (int i = 0; i < bodies.length; i++) {
      String id = "same-id-" + i;
      post(e.url(), paths[i], bodies[i], "x-request-id", id); // warms the cache
      HttpResponse<String> direct = post(e.url(), paths[i], bodies[i], "x-request-id", id);
      HttpResponse<String> via = post(g.url(), paths[i], bodies[i], "x-request-id", id);
      assertThat(via.statusCode()).isEqualTo(direct.statusCode()).isEqualTo(200);
      assertThat(created(via.body()))
          .as(paths[i] + " " + bodies[i])
          .isEqualTo(created(direct.body()));
      assertThat(via.headers().firstValue("content-type"))
          .isEqualTo(direct.headers().firstValue("content-type"));
    }
  }

  /** The answer with {@code created} (seconds of the clock) zeroed. */
  static String created(String s) {
    return s.replaceAll("\"created\":\\d+", "\"created\":0");
  }

  @Test
  void aClientThatLeavesIsFreedAndAbortedOnTheEngine() throws Exception {
    Gateway g = gateway(GatewayStubTest.tiny(), GatewayConfig.builder());
    MockEngineServer e = slowEngine();
    RouterModel m = register(g, 1, e);
    HttpResponse<InputStream> r =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
                .header("Content-Type", "application/json")
                .POST(
                    HttpRequest.BodyPublishers.ofString(
                        "{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":1000,\"prompt\":\"stay\"}"))
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    InputStream in = r.body();
    assertThat(new String(in.readNBytes(5), StandardCharsets.UTF_8)).isEqualTo("data:");
    assertThat(m.router().inFlight()).isEqualTo(1);
    assertThat(e.cacheDump().runningRequests()).isEqualTo(1);
    in.close();
    await("the router freed it", () -> m.router().inFlight() == 0);
    await("the engine aborted it", () -> e.cacheDump().runningRequests() == 0);
  }

  static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  @Test
  void aKilledEngineIsRetriedAroundTakenOutAndRejoins() throws Exception {
    // no periodic round in the test's time: the test runs the rounds (a round between the kill
    // and the retried request would take engine 1 out before the request could try it)
    Gateway g =
        gateway(
            GatewayStubTest.tiny(), GatewayConfig.builder().healthInterval(Duration.ofHours(1)));
    int http = freePort();
    int pub = freePort();
    int rep = freePort();
    MockEngineServer a = engine(http, pub, rep, 0);
    RouterModel m = register(g, 1, a);
    String body = chat("A prompt that engine one will cache for us.");
    HttpResponse<String> first = post(g.url(), "/v1/chat/completions", body); // only 1 is there
    Worker w1 = new Worker(1, 0);
    long prompt = number(first.body(), "prompt_tokens");
    await("blocks indexed", () -> m.router().index().blockCount(w1) >= prompt / BS);
    register(g, 2, engine(0, 0, 0, 0));
    String deadUrl = a.url();
    a.kill();
    // 1 holds the prefix, so it is tried first, refuses, and 2 answers
    HttpResponse<String> retried = post(g.url(), "/v1/chat/completions", body);
    assertThat(retried.statusCode()).isEqualTo(200);
    assertThat(retried.headers().firstValue("x-kvrouter-attempts")).hasValue("2");
    assertThat(retried.headers().firstValue("x-kvrouter-worker")).hasValue("2");
    // unhealthyAfter (2) failures in a row take it out (the refused attempt may count as one)
    for (int i = 0; i < 2 && g.answersHealthChecks(deadUrl); i++) g.checkHealthNow();
    assertThat(g.answersHealthChecks(deadUrl)).isFalse();
    // out of routing: the next request goes straight to 2, and 1's index is kept
    HttpResponse<String> direct = post(g.url(), "/v1/chat/completions", body);
    assertThat(direct.headers().firstValue("x-kvrouter-attempts")).hasValue("1");
    assertThat(direct.headers().firstValue("x-kvrouter-worker")).hasValue("2");
    assertThat(m.router().index().blockCount(w1)).isPositive();
    engine(http, pub, rep, 0); // the same engine comes back on its ports
    g.checkHealthNow(); // one answered round brings it back
    assertThat(g.answersHealthChecks(deadUrl)).isTrue();
    // back in routing: cold prompts reach it again (ties go to the rank caching fewer blocks)
    boolean reached = false;
    for (int i = 0; i < 4 && !reached; i++) {
      HttpResponse<String> r =
          post(g.url(), "/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"" + i + " new\"}");
      assertThat(r.statusCode()).isEqualTo(200);
      reached = r.headers().firstValue("x-kvrouter-worker").orElseThrow().equals("1");
    }
    assertThat(reached).as("engine 1 takes requests again").isTrue();
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void aTemplateMismatchShowsInThePredictionMetricAndWarning(@TempDir Path dir) throws Exception {
    Path other = dir.resolve("tiny-other");
    Files.createDirectories(other);
    Path src = GatewayStubTest.tiny();
    Files.copy(src.resolve("tokenizer.json"), other.resolve("tokenizer.json"));
    String cfg = Files.readString(src.resolve("tokenizer_config.json"));
    assertThat(cfg).contains("{{ bos_token }}");
    Files.writeString(
        other.resolve("tokenizer_config.json"),
        cfg.replace("{{ bos_token }}", "{{ bos_token }}SYS "));
    Gateway g = gateway(other, GatewayConfig.builder());
    RouterModel m = register(g, 1, engine(0, 0, 0, 0));
    LogCapture log = new LogCapture(PredictionCheck.LOG);
    try (log) {
      String body = chat("The same question, asked again and again by a client.");
      for (int i = 0; i < PredictionCheck.MIN_SAMPLES + 1; i++) {
        assertThat(post(g.url(), "/v1/chat/completions", body).statusCode()).isEqualTo(200);
      }
    }
    List<String> warnings = log.messages();
    assertThat(warnings)
        .anySatisfy(
            w -> assertThat(w).contains("MORE cached tokens").contains("prompt_tokens differing"));
    assertThat(m.accuracy(new Worker(1, 0)).more())
        .isGreaterThanOrEqualTo(PredictionCheck.MIN_SAMPLES);
    String metrics = GatewayStubTest.metrics(g);
    assertThat(metrics)
        .contains(
            "kvrouter_prefix_prediction_total{engine=\"1\",model=\"tiny\",outcome=\"engine_more\"}");
  }
}
