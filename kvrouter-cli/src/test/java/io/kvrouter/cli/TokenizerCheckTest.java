package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.mockengine.MockEngines;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.ChatTemplateConfig;
import io.kvrouter.tokenize.EngineApi;
import io.kvrouter.tokenize.EngineDialect;
import io.kvrouter.tokenize.EngineTokenizer;
import io.kvrouter.tokenize.JsonValues;
import io.kvrouter.tokenize.Tokenizer;
import io.kvrouter.tokenize.TokenizerException;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code tokenizer check} against a tiny in-test engine on 127.0.0.1 that answers {@code POST
 * /tokenize} in vLLM's shapes (and rejects bodies without vLLM's field names), with the ids of the
 * same model directory, optionally corrupted.
 */
class TokenizerCheckTest {
  private static final JsonFactory JSON = new JsonFactory();
  static final int CORRUPT_AT = 3;
  HttpServer server;
  final List<Map<String, Object>> requests = new CopyOnWriteArrayList<>();

  @AfterEach
  void stop() {
    if (server != null) {
      server.stop(0);
    }
  }

  URI engine(Tokenizer tok, UnaryOperator<int[]> corrupt, int status) throws IOException {
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.createContext(
        "/v1/models",
        ex ->
            reply(
                ex,
                200,
                "{\"object\": \"list\", \"data\": [{\"id\": \"tiny-served\", \"object\": \"model\"}]}"));
    server.createContext(
        "/tokenize",
        ex -> {
          Map<?, ?> body;
          try {
            try (JsonParser p = JSON.createParser(ex.getRequestBody().readAllBytes())) {
              p.nextToken();
              body = (Map<?, ?>) JsonValues.read(p);
            }
          } catch (IOException e) {
            reply(ex, 400, "{\"error\": \"bad json\"}");
            return;
          }
          Map<String, Object> copy = new LinkedHashMap<>();
          body.forEach((k, v) -> copy.put((String) k, v));
          requests.add(copy);
          if (status != 200) {
            reply(
                ex,
                status,
                "{\"object\": \"error\", \"message\": \"model not found\", \"code\": "
                    + status
                    + "}");
            return;
          }
          if (!"tiny-served".equals(body.get("model"))
              || !(body.get("add_special_tokens") instanceof Boolean)) {
            reply(ex, 400, "{\"error\": \"missing model or add_special_tokens\"}");
            return;
          }
          int[] ids;
          if (body.containsKey("messages")) {
            if (!(body.get("add_generation_prompt") instanceof Boolean)) {
              reply(ex, 400, "{\"error\": \"missing add_generation_prompt\"}");
              return;
            }
            ids =
                tok.applyChatTemplateUncached(
                        new ChatRequest(
                            (List<?>) body.get("messages"),
                            (List<?>) body.get("tools"),
                            (Boolean) body.get("add_generation_prompt"),
                            Boolean.TRUE.equals(body.get("continue_final_message")),
                            (Boolean) body.get("add_special_tokens"),
                            Map.of()))
                    .ids();
          } else {
            ids =
                tok.encodeUncached(
                    (String) body.get("prompt"), (Boolean) body.get("add_special_tokens"));
          }
          ids = corrupt.apply(ids);
          StringBuilder sb =
              new StringBuilder(
                  "{\"count\": " + ids.length + ", \"max_model_len\": 4096, \"tokens\": [");
          for (int i = 0; i < ids.length; i++) {
            sb.append(i > 0 ? ", " : "").append(ids[i]);
          }
          reply(ex, 200, sb.append("]}").toString());
        });
    server.start();
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort());
  }

  static void reply(HttpExchange ex, int status, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "application/json");
    ex.sendResponseHeaders(status, b.length);
    ex.getResponseBody().write(b);
    ex.close();
  }

  record Run(int exit, String out, String err) {}

  static Run check(String... args) {
    StringWriter out = new StringWriter(), err = new StringWriter();
    int exit =
        new CommandLine(new TokenizerCommand())
            .setOut(new PrintWriter(out))
            .setErr(new PrintWriter(err))
            .execute(args);
    return new Run(exit, out.toString(), err.toString());
  }

  @Test
  void catchesATemplateOtherThanTheEnginesAndAgreesWithTheSameFlags(@TempDir Path dir)
      throws Exception {
    String template =
        "{% for m in messages %}<|im_start|>{{ m.role }}:{{ m.content }}"
            + "{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}<|im_end|>{% endfor %}"
            + "{% if tools %}{{ tools | tojson }}{% endif %}"
            + "{% if add_generation_prompt %}<|im_start|>assistant{% endif %}";
    Path file = dir.resolve("tool_template.jinja");
    Files.writeString(file, template);
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .modelDir(MockEngines.tinyModel())
                .servedModelName("tiny")
                .chatTemplate(ChatTemplateConfig.defaults().withTemplate(file.toString()))
                .build())) {
      String model = MockEngines.tinyModel().toString();
      Run without = check("check", "--model-dir", model, "--engine", e.url());
      assertThat(without.exit()).as(without.out() + without.err()).isEqualTo(1);
      assertThat(without.out()).contains("MISMATCH");
      Run with =
          check(
              "check",
              "--model-dir",
              model,
              "--engine",
              e.url(),
              "--chat-template",
              file.toString());
      assertThat(with.exit()).as(with.out() + with.err()).isZero();
      assertThat(with.out()).contains("12 probes: 12 match, 0 differ");
      Run bad =
          check(
              "check",
              "--model-dir",
              model,
              "--engine",
              e.url(),
              "--chat-template-content-format",
              "xml");
      assertThat(bad.exit()).isEqualTo(2);
      assertThat(bad.err()).contains("expected auto, string or openai");
    }
  }

  @Test
  void agreesWithAnEngineThatAnswersTheSameIds() throws IOException {
    try (Tokenizer tok = Tokenizer.load(MockEngines.tinyModel())) {
      URI url = engine(tok, ids -> ids, 200);
      Run r =
          check(
              "check",
              "--model-dir",
              MockEngines.tinyModel().toString(),
              "--engine",
              url.toString());
      assertThat(r.exit()).as(r.out() + r.err()).isZero();
      assertThat(r.out()).contains("12 probes: 12 match, 0 differ").doesNotContain("MISMATCH");
      // vLLM's shapes: chat form and completion form, the served model's name
      assertThat(requests)
          .anySatisfy(
              b ->
                  assertThat(b)
                      .containsKeys("messages", "add_generation_prompt", "add_special_tokens"));
      assertThat(requests)
          .anySatisfy(
              b ->
                  assertThat(b)
                      .containsKeys("prompt", "add_special_tokens")
                      .doesNotContainKey("messages"));
      assertThat(requests).anySatisfy(b -> assertThat(b).containsKey("tools"));
    }
  }

  @Test
  void reportsTheFirstDifferingTokenAndExitsOne() throws IOException {
    try (Tokenizer tok = Tokenizer.load(MockEngines.tinyModel())) {
      URI url =
          engine(
              tok,
              ids -> {
                int[] c = ids.clone();
                if (c.length > CORRUPT_AT) {
                  c[CORRUPT_AT] = c[CORRUPT_AT] == 'Z' ? 'Y' : 'Z';
                }
                return c;
              },
              200);
      Run r =
          check(
              "check", "--model-dir", MockEngines.tinyModel().toString(), "--engine", url + "/v1");
      assertThat(r.exit()).as(r.out() + r.err()).isEqualTo(1);
      assertThat(r.out())
          .contains(
              "MISMATCH  one user turn: first differing token at index "
                  + CORRUPT_AT
                  + ": kvrouter ")
          .contains(" vs engine 90 'Z'")
          .contains(" differ (" + MockEngines.tinyModel() + " against " + url + ")");
    }
  }

  @Test
  void anUnreachableEngineOrAnErrorStatusIsAClearFailure() throws IOException {
    try (Tokenizer tok = Tokenizer.load(MockEngines.tinyModel())) {
      URI url = engine(tok, ids -> ids, 404);
      Run r =
          check(
              "check",
              "--model-dir",
              MockEngines.tinyModel().toString(),
              "--engine",
              url.toString());
      assertThat(r.exit()).isEqualTo(1);
      assertThat(r.out())
          .contains("the engine fails: " + url + "/tokenize answered HTTP 404: ")
          .contains("model not found");
      int port = server.getAddress().getPort();
      server.stop(0);
      server = null;
      Run down =
          check(
              "check",
              "--model-dir",
              MockEngines.tinyModel().toString(),
              "--engine",
              "http://127.0.0.1:" + port);
      assertThat(down.exit()).isEqualTo(1);
      assertThat(down.err()).contains("cannot reach the engine at http://127.0.0.1:" + port);
    }
  }

  @Test
  @SuppressWarnings("try") // the tokenizer is held open for the test and closed by the try
  void malformedAnswersAreClearErrors() throws IOException {
    try (Tokenizer tok = Tokenizer.load(MockEngines.tinyModel())) {
      List<String> answers =
          new ArrayList<>(
              List.of(
                  "not json",
                  "{\"count\": 1}",
                  "{\"count\": 2, \"tokens\": [1]}",
                  "{\"tokens\": [-1]}"));
      List<String> wants =
          List.of(
              "invalid JSON",
              "in a shape the gateway does not know (expected a {\"tokens\": [...]} object)",
              "answered count 2 with 1 tokens",
              "tokens[0] = -1, not a token id");
      server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
      server.createContext("/tokenize", ex -> reply(ex, 200, answers.remove(0)));
      server.start();
      // a vLLM engine (its dialect given: no probe takes one of the answers)
      EngineTokenizer e =
          new EngineTokenizer(
              URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/"),
              "m",
              Duration.ofSeconds(10),
              null,
              new EngineApi(EngineDialect.VLLM, "m", -1, -1, 0));
      for (String want : wants) {
        assertThatThrownBy(() -> e.tokenizePrompt("x", true))
            .isInstanceOf(TokenizerException.class)
            .hasMessageContaining(want);
      }
    }
  }

  @Test
  void usageErrorsExitTwo() {
    assertThat(check("check", "--engine", "http://127.0.0.1:1").exit()).isEqualTo(2);
    assertThat(check().exit()).isEqualTo(2);
  }
}
