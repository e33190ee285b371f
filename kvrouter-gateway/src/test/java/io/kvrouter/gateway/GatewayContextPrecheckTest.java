package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.tokenize.Tokenizer;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 31, #4 (second half): a prompt certainly longer than every engine's context is refused
 * before it is tokenized. The tiny tokenizer is a byte-level BPE whose longest vocabulary entry is
 * {@code <|im_start|>}, 12 chars, so with a mock engine of 64 tokens the bound is 768 chars. The
 * tokenizer's segment cache counts every tokenization (a lookup per piece of text), which is how
 * the tests see that the tokenizer was not called.
 */
class GatewayContextPrecheckTest {
  private static final int CONTEXT = 64;
  private static final int L = "<|im_start|>".length();
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).maxBodyBytes(1 << 20).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).build());
    open.add(g);
    MockEngineServer e =
        MockEngineServer.start(GatewayMockEngineTest.tinyEngine().maxModelLen(CONTEXT).build());
    open.add(e);
    g.host.register(Registration.of("tiny", GatewayMockEngineTest.BS, 1, 0, e.url()));
    GatewayMockEngineTest.await(
        "the engine's context", () -> g.engines.largestModelLen(g.host.model("tiny", null)) > 0);
    return g;
  }

  private static long lookups(Gateway g) {
    Tokenizer.CacheStats s = g.target("tiny", null).tokenizer().cacheStats();
    return s.hits() + s.misses();
  }

  private static String completion(int chars) {
    return "{\"model\":\"tiny\",\"max_tokens\":1,\"prompt\":\"" + "a".repeat(chars) + "\"}";
  }

  @Test
  void aPromptOverTheBoundIsRefusedWithoutTokenizingIt() throws Exception {
    Gateway g = gateway();
    assertThat(g.target("tiny", null).tokenizer().maxCharsPerToken()).isEqualTo(L);
    assertThat(g.engines.largestModelLen(g.host.model("tiny", null))).isEqualTo(CONTEXT);

    long before = lookups(g);
    HttpResponse<String> over =
        GatewayMockEngineTest.post(g.url(), "/v1/completions", completion(CONTEXT * L + 1));
    assertThat(over.statusCode()).as(over.body()).isEqualTo(400);
    assertThat(over.body())
        .startsWith("{\"error\":{")
        .contains(
            "This model's maximum context length is 64 tokens. However, your request has at"
                + " least 65 input tokens (769 characters, at most 12 per token). Please reduce"
                + " the length of the input messages.")
        .contains("\"type\":\"BadRequestError\"")
        .contains("\"code\":400");
    assertThat(lookups(g)).as("the tokenizer was not called").isEqualTo(before);

    // at the bound it is not certain: tokenized, then refused by the engine itself
    HttpResponse<String> at =
        GatewayMockEngineTest.post(g.url(), "/v1/completions", completion(CONTEXT * L));
    assertThat(lookups(g)).as("tokenized").isGreaterThan(before);
    assertThat(at.statusCode()).as(at.body()).isEqualTo(400);
    assertThat(at.body()).doesNotContain("at least").contains("maximum context length is 64");

    // and a prompt that fits is served
    HttpResponse<String> small =
        GatewayMockEngineTest.post(g.url(), "/v1/completions", completion(10));
    assertThat(small.statusCode()).as(small.body()).isEqualTo(200);
  }

  /** A chat is measured as its template renders it (the rendered text is what is tokenized). */
  @Test
  void aChatIsMeasuredAsRendered() throws Exception {
    Gateway g = gateway();
    long before = lookups(g);
    String over =
        "{\"model\":\"tiny\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\""
            + "b".repeat(CONTEXT * L)
            + "\"}]}";
    HttpResponse<String> r = GatewayMockEngineTest.post(g.url(), "/v1/chat/completions", over);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(400);
    assertThat(r.body()).contains("However, your request has at least");
    assertThat(lookups(g)).as("the tokenizer was not called").isEqualTo(before);
  }
}
