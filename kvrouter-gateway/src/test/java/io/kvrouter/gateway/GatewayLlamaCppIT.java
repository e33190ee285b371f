package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonParser;
import io.kvrouter.event.Worker;
import io.kvrouter.mockengine.NodeSdkCheck;
import io.kvrouter.route.KvSource;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.EngineDialect;
import io.kvrouter.tokenize.EngineTokenizer;
import io.kvrouter.tokenize.JsonValues;
import io.kvrouter.tokenize.Tokenizer;
import io.kvrouter.tokenize.TokenizerCheck;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gateway in front of two real llama.cpp servers (engines/llama-cpp: llama-server and the tiny
 * Qwen3 model), each with one slot and no host prompt cache ({@code -np 1 --cache-ram 0}): they
 * publish no KV events, so the gateway tracks them by predictions, learns their dialect, context
 * and capacity from them, and compares their cached-token reports token by token. Run by failsafe
 * ({@code *LlamaCppIT}); needs {@code engines/llama-cpp/install.sh}'s output (LlamaCppEngines) and
 * the npm packages of parity/ and clients/openai-node.
 *
 * <p>The tests share the two engines and run in order: routing first, on cold engines; the engine
 * killed last.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class GatewayLlamaCppIT {
  static final int BS = 16;
  static final int SLOT_CTX = 2048;
  static final String MODEL = "qwen3";
  static final String DELEGATED = "qwen3-engine"; // tokenized by the engines
  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  static LlamaCppEngines engines;
  static LlamaCppEngines.Engine a;
  static LlamaCppEngines.Engine b;
  static Gateway g;
  static Path tokenizerDir;

  @BeforeAll
  static void start() throws Exception {
    engines = LlamaCppEngines.require();
    tokenizerDir = LlamaCppEngines.qwen3Tokenizer();
    // greedy sampling by default: with random sampling the noise model now and then writes text
    // that llama.cpp's own output parser rejects (a 500 mid-stream, seen straight from the engine)
    a = engines.start(MODEL, 1, SLOT_CTX, "--cache-ram", "0", "--temp", "0");
    b = engines.start(MODEL, 1, SLOT_CTX, "--cache-ram", "0", "--temp", "0");
    g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder()
                .model(MODEL, tokenizerDir)
                .model(DELEGATED, null)
                .healthInterval(Duration.ofMillis(200))
                .engineTimeout(Duration.ofSeconds(60))
                .build());
    // as `--engine URL;model=NAME` would: no event source
    g.register(EngineSpec.parse(a.url() + ";model=" + MODEL + ";instance_id=1"), BS);
    g.register(EngineSpec.parse(b.url() + ";model=" + MODEL + ";instance_id=2"), BS);
  }

  @AfterAll
  static void stop() throws Exception {
    if (g != null) g.close();
    if (engines != null) engines.close();
  }

  // ------------------------------------------------------------------ helpers

  static HttpResponse<String> post(String path, String body) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(g.url() + path))
            .header("Content-Type", "application/json")
            .timeout(Duration.ofSeconds(120))
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  static String get(String path) throws Exception {
    return HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + path)).build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  static Map<?, ?> json(String s) throws Exception {
    try (JsonParser p = Json.FACTORY.createParser(s)) {
      p.nextToken();
      return (Map<?, ?>) JsonValues.read(p);
    }
  }

  static Map<String, Object> msg(String role, String content) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("role", role);
    m.put("content", content);
    return m;
  }

  static String chatBody(String model, List<Map<String, Object>> messages, String extra)
      throws Exception {
    StringBuilder sb = new StringBuilder("{\"model\":\"").append(model).append("\",\"messages\":[");
    for (int i = 0; i < messages.size(); i++) {
      Map<String, Object> m = messages.get(i);
      sb.append(i == 0 ? "" : ",")
          .append("{\"role\":\"")
          .append(m.get("role"))
          .append("\",\"content\":")
          .append(quote((String) m.get("content")))
          .append('}');
    }
    return sb.append("],\"max_tokens\":2,\"temperature\":0").append(extra).append('}').toString();
  }

  static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
  }

  /**
   * Turn {@code k} (1-based) of a conversation: its first k user messages, fixed replies between.
   */
  static List<Map<String, Object>> turn(String[] users, int k) {
    List<Map<String, Object>> m = new ArrayList<>();
    for (int i = 0; i < k; i++) {
      if (i > 0) m.add(msg("assistant", "Noted. Please go on."));
      m.add(msg("user", users[i]));
    }
    return m;
  }

  static long number(Map<?, ?> body, String... path) {
    Object v = body;
    for (String p : path) v = ((Map<?, ?>) v).get(p);
    return (Long) v;
  }

  static long metric(String metrics, String name, String... labels) {
    long sum = 0;
    for (String line : metrics.split("\n")) {
      if (!line.startsWith(name + "{")) continue;
      boolean all = true;
      for (String l : labels) all &= line.contains(l);
      if (all) sum += (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
    }
    return sum;
  }

  // ------------------------------------------------------------------ tests

  static final String[] X = {
    "Tell me about the history of the Roman aqueducts and how their engineers kept the water"
        + " flowing over long distances.",
    "How steep were the channels, and how did they measure the slope?",
    "Which aqueduct was the longest, and how long did it take to build?",
    "What happened to them after the fall of the western empire?",
    "Are any of them still carrying water today?",
    "Summarise all of that in three sentences."
  };
  static final String[] Y = {
    "Write a short poem about autumn leaves falling in a quiet forest at dusk, with a gentle and"
        + " slightly melancholic tone.",
    "Now make the second stanza about the wind.",
    "Add a final stanza about the first snow.",
    "Give the poem a title.",
    "Explain the rhyme scheme you used.",
    "Suggest a musical setting for it."
  };

  /**
   * Two conversations alternating on two one-slot engines, cold: the second conversation goes to
   * the other engine (the emptier cache wins the tie), and each later turn lands where its prefix
   * is, which the engine confirms by reporting the earlier turn's prompt cached; the prediction
   * check agrees (no engine_more).
   */
  @Test
  @Order(1)
  void twoConversationsAlternatingStayWhereTheirPrefixIs() throws Exception {
    RouterModel m = g.host.model(MODEL, null);
    for (Worker w : List.of(new Worker(1, 0), new Worker(2, 0))) {
      assertThat(m.router().kvSource(w)).isEqualTo(KvSource.PREDICTED);
      // the capacity llama.cpp reports: one slot of 2048 tokens, in 16-token blocks
      assertThat(m.router().kvBlocks(w)).isEqualTo(SLOT_CTX / BS);
    }
    String[] home = new String[2];
    long[] lastPrompt = new long[2];
    int repeats = 0;
    int landed = 0;
    List<String> log = new ArrayList<>();
    for (int k = 1; k <= X.length; k++) {
      for (int c = 0; c < 2; c++) {
        String body = chatBody(MODEL, turn(c == 0 ? X : Y, k), "");
        HttpResponse<String> r = post("/v1/chat/completions", body);
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        Map<?, ?> answer = json(r.body());
        String worker = r.headers().firstValue("x-kvrouter-worker").orElseThrow();
        long prompt = number(answer, "usage", "prompt_tokens");
        long cached = number(answer, "usage", "prompt_tokens_details", "cached_tokens");
        log.add(
            "conversation "
                + c
                + " turn "
                + k
                + ": engine "
                + worker
                + ", predicted "
                + r.headers().firstValue("x-kvrouter-overlap-tokens").orElseThrow()
                + ", cached "
                + cached
                + " of "
                + prompt);
        if (k == 1) {
          home[c] = worker;
        } else {
          repeats++;
          if (worker.equals(home[c]) && cached >= lastPrompt[c]) landed++;
        }
        lastPrompt[c] = prompt;
      }
    }
    assertThat(home[0]).as("a cold fleet spreads new conversations: %s", log).isNotEqualTo(home[1]);
    assertThat(landed * 10)
        .as("repeats where their prefix is, cached: %s", log)
        .isGreaterThanOrEqualTo(repeats * 9);
    String metrics = get("/metrics");
    String model = "model=\"" + MODEL + "\"";
    assertThat(
            metric(metrics, "kvrouter_prefix_prediction_total", model, "outcome=\"engine_more\""))
        .as("%s%n%s", log, metrics)
        .isZero();
    assertThat(metric(metrics, "kvrouter_prefix_prediction_total", model, "outcome=\"exact\""))
        .as("%s", log)
        .isGreaterThanOrEqualTo(repeats * 9 / 10);
    assertThat(get("/workers")).contains("\"kv_source\":\"predicted\",\"kv_capacity_blocks\":128");
    System.out.println("GatewayLlamaCppIT routing:\n  " + String.join("\n  ", log));
  }

  /** Chat and completions, streamed and not, through the gateway to llama.cpp. */
  @Test
  @Order(2)
  void chatAndCompletionsStreamedAndNot() throws Exception {
    String chat = chatBody(MODEL, List.of(msg("user", "Hello there, gateway.")), "");
    HttpResponse<String> whole = post("/v1/chat/completions", chat);
    assertThat(whole.statusCode()).as(whole.body()).isEqualTo(200);
    Map<?, ?> w = json(whole.body());
    assertThat(w.get("object")).isEqualTo("chat.completion");
    assertThat(number(w, "usage", "completion_tokens")).isPositive();
    // the gateway's token count is the engine's
    Map<?, ?> tok =
        json(
            post(
                    "/tokenize",
                    "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\","
                        + "\"content\":\"Hello there, gateway.\"}]}")
                .body());
    assertThat(tok.get("count")).isEqualTo(number(w, "usage", "prompt_tokens"));

    HttpResponse<String> stream =
        post("/v1/chat/completions", chat.substring(0, chat.length() - 1) + ",\"stream\":true}");
    assertThat(stream.statusCode()).isEqualTo(200);
    assertThat(stream.headers().firstValue("content-type").orElseThrow())
        .startsWith("text/event-stream");
    assertThat(stream.body()).contains("chat.completion.chunk").endsWith("data: [DONE]\n\n");
    // the usage-only chunk the gateway asked for is not passed on
    assertThat(stream.body()).doesNotContain("\"choices\":[]");

    String completion =
        "{\"model\":\"qwen3\",\"prompt\":\"The quick brown fox jumps over the lazy dog.\","
            + "\"max_tokens\":3,\"temperature\":0}";
    HttpResponse<String> c = post("/v1/completions", completion);
    assertThat(c.statusCode()).as(c.body()).isEqualTo(200);
    assertThat(json(c.body()).get("object")).isEqualTo("text_completion");
    HttpResponse<String> cs =
        post(
            "/v1/completions",
            completion.substring(0, completion.length() - 1) + ",\"stream\":true}");
    assertThat(cs.statusCode()).isEqualTo(200);
    assertThat(cs.body()).contains("text_completion").endsWith("data: [DONE]\n\n");
    assertThat(g.host.model(MODEL, null).router().inFlight()).isZero();
  }

  /** The official OpenAI JavaScript SDK, through the gateway, against llama.cpp. */
  @Test
  @Order(3)
  void theOpenAiSdkRunsThroughTheGateway() throws Exception {
    NodeSdkCheck.requireSdk();
    NodeSdkCheck.Result run =
        NodeSdkCheck.run(g.url() + "/v1", MODEL, "--concurrency", "2", "--max-tokens", "4");
    Map<?, ?> summary = json(run.out());
    assertThat((List<?>) summary.get("errors")).as(run.out()).isEmpty();
    assertThat(run.exitValue()).as(run.out()).isZero();
    List<?> results = (List<?>) summary.get("results");
    assertThat(results).hasSize(8);
    for (Object o : results) {
      Map<?, ?> r = (Map<?, ?>) o;
      assertThat(number(r, "usage", "completion_tokens")).as(r.toString()).isPositive();
    }
  }

  /**
   * Token parity: the gateway's /tokenize gives the engine's own rendering and tokenization; the
   * built-in probes of tokenizer check agree but for llama.cpp's two documented differences from
   * Hugging Face's tokenizer, and a perturbed template fails every chat probe.
   */
  @Test
  @Order(4)
  void theGatewaysTokenizationIsTheEngines(@TempDir Path dir) throws Exception {
    EngineTokenizer engine =
        new EngineTokenizer(URI.create(a.url()), MODEL, Duration.ofSeconds(30));
    assertThat(engine.dialect()).isEqualTo(EngineDialect.LLAMA_CPP);
    List<Map<String, Object>> conversation = turn(X, 4);
    Map<?, ?> gw =
        json(
            post("/tokenize", chatBody(MODEL, conversation, "").replace(",\"max_tokens\":2", ""))
                .body());
    int[] engineIds = engine.tokenizeChat(ChatRequest.of(conversation)).tokens();
    List<Long> expected = new ArrayList<>();
    for (int id : engineIds) expected.add((long) id);
    assertThat(gw.get("tokens")).isEqualTo(expected);
    assertThat(gw.get("max_model_len")).isEqualTo((long) SLOT_CTX);

    StringWriter out = new StringWriter();
    TokenizerCheck.Report report;
    try (Tokenizer tok = Tokenizer.load(tokenizerDir)) {
      report = TokenizerCheck.run(tok, engine, new PrintWriter(out));
    }
    List<String> differ = new ArrayList<>();
    for (String line : out.toString().split("\n")) {
      if (line.startsWith("MISMATCH")) differ.add(line.substring(10, line.indexOf(':')));
    }
    // llama.cpp does not apply the tokenizer's NFC normalizer ("e" + U+0301), and it makes "</s>"
    // (an ordinary token of Qwen3's vocabulary) a control token: docs/gateway.md, Engine dialects
    assertThat(differ)
        .as(out.toString())
        .containsExactly("unicode and emoji", "special-token text");
    assertThat(report.matched()).as(out.toString()).isEqualTo(report.probes() - 2);

    Path perturbed = dir.resolve("qwen3-perturbed");
    Files.createDirectories(perturbed);
    Files.copy(tokenizerDir.resolve("tokenizer.json"), perturbed.resolve("tokenizer.json"));
    String cfg = Files.readString(tokenizerDir.resolve("tokenizer_config.json"));
    String marker = "<|im_start|>' + message.role + '\\\\n'";
    assertThat(cfg).contains(marker);
    Files.writeString(
        perturbed.resolve("tokenizer_config.json"),
        cfg.replace(marker, "<|im_start|>' + message.role + ':\\\\n'"));
    StringWriter out2 = new StringWriter();
    TokenizerCheck.Report bad;
    try (Tokenizer tok = Tokenizer.load(perturbed)) {
      bad = TokenizerCheck.run(tok, engine, new PrintWriter(out2));
    }
    assertThat(bad.mismatched()).as(out2.toString()).isGreaterThanOrEqualTo(report.probes() - 2);
  }

  /**
   * A model the gateway has no tokenizer for is tokenized by its llama.cpp engines in their own
   * dialect: its requests route with the real token count (the engine's prompt_tokens), so a repeat
   * finds its prefix.
   */
  @Test
  @Order(5)
  void engineDelegatedTokenizationRoutesWithTheRealTokenCount() throws Exception {
    g.register(EngineSpec.parse(a.url() + ";model=" + DELEGATED + ";instance_id=11"), BS);
    g.register(EngineSpec.parse(b.url() + ";model=" + DELEGATED + ";instance_id=12"), BS);
    List<Map<String, Object>> conversation = turn(Y, 3);
    String body = chatBody(DELEGATED, conversation, "");
    Map<?, ?> tok =
        json(post("/tokenize", body.replace(",\"max_tokens\":2,\"temperature\":0", "")).body());
    long count = (Long) tok.get("count");
    assertThat(count).isGreaterThan(40);
    HttpResponse<String> first = post("/v1/chat/completions", body);
    assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
    assertThat(number(json(first.body()), "usage", "prompt_tokens")).isEqualTo(count);
    HttpResponse<String> again = post("/v1/chat/completions", body);
    assertThat(again.headers().firstValue("x-kvrouter-worker"))
        .isEqualTo(first.headers().firstValue("x-kvrouter-worker"));
    long overlap = Long.parseLong(again.headers().firstValue("x-kvrouter-overlap-tokens").get());
    assertThat(overlap).isEqualTo(count / BS * BS);
    assertThat(number(json(again.body()), "usage", "prompt_tokens_details", "cached_tokens"))
        .isEqualTo(count - 1);
    // /v1/models reports the context the engines run with, not the tokenizer's 131072
    Map<?, ?> models = json(get("/v1/models"));
    for (Object o : (List<?>) models.get("data")) {
      assertThat(((Map<?, ?>) o).get("max_model_len")).isEqualTo((long) SLOT_CTX);
    }
  }

  /** {@code kill -9} of one engine: once it is gone, no request fails. */
  @Test
  @Order(6)
  void aKilledEngineCostsNoRequestOnceItIsGone() throws Exception {
    for (int i = 0; i < 4; i++) {
      HttpResponse<String> r =
          post(
              "/v1/chat/completions",
              chatBody(MODEL, List.of(msg("user", "Before the kill, request " + i)), ""));
      assertThat(r.statusCode()).isEqualTo(200);
    }
    b.kill9();
    int retried = 0;
    for (int i = 0; i < 8; i++) {
      // the conversations of both engines, and new ones
      String body =
          i < 4
              ? chatBody(MODEL, turn(i % 2 == 0 ? X : Y, 2), "")
              : chatBody(MODEL, List.of(msg("user", "After the kill, request " + i)), "");
      HttpResponse<String> r = post("/v1/chat/completions", body);
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvrouter-worker")).hasValue("1");
      if (r.headers().firstValue("x-kvrouter-attempts").orElseThrow().equals("2")) retried++;
    }
    // conversation 0 or 1 lived on the killed engine: its requests found it gone and went on
    assertThat(retried).isPositive();
    GatewayStubTest.awaitHealthy(g, b.url(), false);
    assertThat(g.host.model(MODEL, null).router().inFlight()).isZero();
  }
}
