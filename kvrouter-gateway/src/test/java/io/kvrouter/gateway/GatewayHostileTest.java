package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayStubTest.CHAT;
import static io.kvrouter.gateway.GatewayStubTest.post;
import static io.kvrouter.gateway.GatewayStubTest.register;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.ServerHost.Registration;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The findings of issue 31 on the gateway: names echoed without bound in errors, token ids out of
 * range, tool-call arguments nested thousands deep, the admin side open with --api-key, and
 * Connection: close on /v1/chat/completions. Each test fails on the code before its fix.
 */
class GatewayHostileTest {
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway(KvRouterServer.Config.Builder server, GatewayConfig.Builder b)
      throws Exception {
    Gateway g = Gateway.start(server.port(0).maxBodyBytes(1 << 20).build(), b.build());
    open.add(g);
    return g;
  }

  private Gateway gateway() throws Exception {
    return gateway(
        KvRouterServer.Config.builder(),
        GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()));
  }

  private StubEngine stub() {
    StubEngine s = new StubEngine();
    open.add(s);
    return s;
  }

  @Test
  void anUnknownModelsNameIsEchoedCutShort() throws Exception {
    Gateway g = gateway();
    String name = "n".repeat(100_000);
    HttpResponse<String> r =
        post(
            g,
            "/v1/chat/completions",
            "{\"model\":\"" + name + "\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    assertThat(r.statusCode()).isEqualTo(404);
    assertThat(r.body()).contains("model_not_found").contains("…(100000 bytes)");
    assertThat(r.body().length()).isLessThan(1_000);
  }

  @Test
  void detokenizeRefusesTokenIdsOutsideInt32() throws Exception {
    Gateway g = gateway();
    for (String id : List.of("-1", "4294967296", "2147483648", "99999999999999999999999")) {
      HttpResponse<String> r =
          post(g, "/detokenize", "{\"model\":\"tiny\",\"tokens\":[1," + id + "]}");
      assertThat(r.statusCode()).as(id + " -> " + r.body()).isEqualTo(400);
      assertThat(r.body())
          .as(id)
          .startsWith("{\"error\":{")
          .contains("\"param\":\"tokens\"")
          .contains("tokens[1]")
          .contains("0..2147483647");
    }
    assertThat(post(g, "/detokenize", "{\"model\":\"tiny\",\"tokens\":[1,2]}").statusCode())
        .isEqualTo(200);
  }

  /**
   * #13: an id inside int32 but past the vocabulary (the tiny tokenizer's ids are 0..304, its
   * vocabulary and added tokens) is vLLM's 400 for an out-of-vocabulary id, naming the largest;
   * before, the tokenizers library was handed it.
   */
  @Test
  void detokenizeRefusesTokenIdsPastTheVocabulary() throws Exception {
    Gateway g = gateway();
    HttpResponse<String> last = post(g, "/detokenize", "{\"model\":\"tiny\",\"tokens\":[304]}");
    assertThat(last.statusCode()).as(last.body()).isEqualTo(200);
    assertThat(last.body()).isEqualTo("{\"prompt\":\"<|im\"}\n");
    for (String ids : List.of("305", "1,2147483647", "7,400000,305")) {
      HttpResponse<String> r =
          post(g, "/detokenize", "{\"model\":\"tiny\",\"tokens\":[" + ids + "]}");
      String max = ids.substring(ids.lastIndexOf(',') + 1);
      if (ids.equals("7,400000,305")) max = "400000";
      assertThat(r.statusCode()).as(ids + " -> " + r.body()).isEqualTo(400);
      assertThat(r.body())
          .as(ids)
          .startsWith("{\"error\":{")
          .contains("\"message\":\"Token id " + max + " is out of vocabulary\"")
          .contains("\"type\":\"BadRequestError\"")
          .contains("\"code\":400");
    }
  }

  /**
   * A model whose template renders tool calls' arguments with tojson (as Qwen's and Llama's do),
   * which recurses once per level of nesting.
   */
  private static Path toolTemplateModel(Path dir) throws Exception {
    Files.copy(GatewayStubTest.tiny().resolve("tokenizer.json"), dir.resolve("tokenizer.json"));
    Files.writeString(
        dir.resolve("tokenizer_config.json"),
        "{\"bos_token\":\"<bos>\",\"eos_token\":\"<|im_end|>\",\"chat_template\":"
            + "\"{% for m in messages %}{{ m.role }}{% if m.tool_calls %}{% for t in"
            + " m.tool_calls %}{{ t.function.arguments | tojson }}{% endfor %}{% else %}{{"
            + " m.content }}{% endif %}{% endfor %}\"}");
    return dir;
  }

  @Test
  void toolCallArgumentsNestedThousandsDeepAreA400InOpenAisShape(@TempDir Path dir)
      throws Exception {
    Gateway g =
        gateway(
            KvRouterServer.Config.builder(),
            GatewayConfig.builder().model("tools", toolTemplateModel(dir)));
    StubEngine e = stub();
    g.host.register(GatewayStubTest.events(Registration.of("tools", 4, 1, 0, e.url())));
    for (int depth : new int[] {4_000, 20_000}) {
      String args = "[".repeat(depth) + "]".repeat(depth);
      String chat =
          "{\"model\":\"tools\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
              + "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
              + "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\""
              + args
              + "\"}}]}]}";
      for (String path : List.of("/v1/chat/completions", "/tokenize")) {
        HttpResponse<String> r = post(g, path, chat);
        String why = path + " depth " + depth + " -> " + r.body();
        assertThat(r.statusCode()).as(why).isEqualTo(400);
        assertThat(r.body())
            .as(why)
            .startsWith("{\"error\":{\"message\":")
            .contains("invalid_request_error")
            .contains("arguments")
            .contains("nesting depth");
      }
    }
    // a shallow one is fine
    String ok =
        "{\"model\":\"tools\",\"messages\":[{\"role\":\"assistant\",\"content\":null,"
            + "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
            + "\"arguments\":\"{\\\"a\\\":[[1]]}\"}}]}]}";
    HttpResponse<String> r = post(g, "/tokenize", ok);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(e.hits()).isZero();
  }

  @Test
  void withAnApiKeyAndNoAuthTokenTheAdminEndpointsNeedTheKey() throws Exception {
    StubEngine rogue = stub();
    Gateway g =
        gateway(
            KvRouterServer.Config.builder(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).apiKey("client-key"));
    String reg =
        "{\"instance_id\":66,\"model_name\":\"tiny\",\"block_size\":4,\"base_url\":\""
            + rogue.url()
            + "\"}";
    HttpResponse<String> keyless = post(g, "/register", reg);
    assertThat(keyless.statusCode()).as(keyless.body()).isEqualTo(401);
    assertThat(keyless.body()).contains("--api-key");
    assertThat(post(g, "/unregister", "{\"instance_id\":1,\"model_name\":\"tiny\"}").statusCode())
        .isEqualTo(401);
    assertThat(g.host.model("tiny", null)).isNull();
    HttpResponse<String> keyed = post(g, "/register", reg, "Authorization", "Bearer client-key");
    assertThat(keyed.statusCode()).as(keyed.body()).isEqualTo(201);
  }

  @Test
  void anAuthTokenStaysTheAdminTokenNextToAnApiKey() throws Exception {
    StubEngine e = stub();
    Gateway g =
        gateway(
            KvRouterServer.Config.builder().authToken("admin"),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).apiKey("client-key"));
    String reg =
        "{\"instance_id\":5,\"model_name\":\"tiny\",\"block_size\":4,\"base_url\":\""
            + e.url()
            + "\"}";
    assertThat(post(g, "/register", reg, "Authorization", "Bearer client-key").statusCode())
        .isEqualTo(401);
    assertThat(post(g, "/register", reg, "Authorization", "Bearer admin").statusCode())
        .isEqualTo(201);
  }

  @Test
  void connectionCloseIsHonouredOnChatCompletionsWholeAndStreamed() throws Exception {
    Gateway g = gateway();
    StubEngine e = stub();
    register(g, 1, e.url());
    String whole = CHAT.replace(",\"stream\":true", "");
    for (String body : List.of(whole, CHAT)) {
      String req =
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + "Connection: close\r\nContent-Length: "
              + body.getBytes(StandardCharsets.UTF_8).length
              + "\r\n\r\n"
              + body
              + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
      String all;
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress("127.0.0.1", g.port()), 5000);
        s.setSoTimeout(10_000); // a SocketTimeoutException: the server kept the connection open
        s.getOutputStream().write(req.getBytes(StandardCharsets.UTF_8));
        s.getOutputStream().flush();
        all = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      }
      String why = body + " -> " + all;
      assertThat(all).as(why).startsWith("HTTP/1.1 200");
      assertThat(all.split("HTTP/1.1 ", -1)).as(why + ": one answer").hasSize(2);
      assertThat(all).as(why).contains(body.equals(CHAT) ? "[DONE]" : "\"chat.completion\"");
    }
  }
}
