package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayStubTest.post;
import static io.kvrouter.gateway.GatewayStubTest.register;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.server.KvRouterServer;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 31, #1: what a request becomes once parsed is bounded, per request (413) and across the
 * requests in flight (429), not only its bytes.
 */
class GatewayValueBudgetTest {
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway(GatewayConfig.Builder b) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).maxBodyBytes(16 << 20).build(),
            b.model("tiny", GatewayStubTest.tiny()).build());
    open.add(g);
    return g;
  }

  private StubEngine stub() {
    StubEngine s = new StubEngine();
    open.add(s);
    return s;
  }

  static String chatWithEmptyTools(int tools) {
    StringBuilder b =
        new StringBuilder(32 + 3 * tools)
            .append("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],")
            .append("\"tools\":[");
    for (int i = 0; i < tools; i++) b.append(i == 0 ? "{}" : ",{}");
    return b.append("]}").toString();
  }

  private static long heapAfterGc() {
    MemoryMXBean m = ManagementFactory.getMemoryMXBean();
    for (int i = 0; i < 3; i++) System.gc();
    return m.getHeapMemoryUsage().getUsed();
  }

  /** The body: 2.8 million empty tools (8.4 MB) took some 200 MB of heap per request. */
  @Test
  void aChatOfMillionsOfEmptyToolsIsA413BeforeItIsBuilt() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    register(g, 1, e.url());
    String body = chatWithEmptyTools(2_800_000);
    HttpResponse<String> r = post(g, "/v1/chat/completions", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(413);
    assertThat(r.body())
        .startsWith("{\"error\":{\"message\":")
        .contains("\"type\":\"invalid_request_error\"")
        .contains("\"code\":\"request_too_large\"")
        .contains("more than " + GatewayConfig.DEFAULT_MAX_REQUEST_VALUES + " JSON values");
    assertThat(post(g, "/tokenize", body).statusCode()).isEqualTo(413);
    assertThat(e.hits()).isZero();
    assertThat(g.values.held()).isZero();

    // what the budget saves: the same parse without it, its heap after GC (a tenth of the tools)
    byte[] tenth = chatWithEmptyTools(280_000).getBytes(StandardCharsets.UTF_8);
    long before = heapAfterGc();
    ClientRequest held = ClientRequest.parse(ClientRequest.Kind.CHAT, tenth, Long.MAX_VALUE);
    long after = heapAfterGc();
    System.out.printf(
        "VALUES 280,000 empty tools (%d bytes): %d values, heap after GC +%.1f MB (%.0f B per"
            + " value)%n",
        tenth.length, held.values, (after - before) / 1e6, (after - before) / (double) held.values);
    assertThat(held.values).isEqualTo(280_000 + 4 + 1); // the tools, the message and its 2 fields
    assertThatThrownBy(
            () ->
                ClientRequest.parse(
                    ClientRequest.Kind.CHAT, tenth, GatewayConfig.DEFAULT_MAX_REQUEST_VALUES))
        .isInstanceOf(OpenAiError.class)
        .hasMessageContaining("more than 250000 JSON values");
  }

  /** Requests within their own bound, whose values together pass the gateway's, get 429. */
  @Test
  void valuesInFlightPastTheGatewaysBudgetAreA429UntilTheyAreFreed() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().maxRequestValues(1_000).maxInflightValues(1_500));
    StubEngine e = stub();
    register(g, 1, e.url());
    CountDownLatch release = new CountDownLatch(1);
    e.holdBeforeAnswer = release;
    String body = chatWithEmptyTools(795); // 800 values
    CompletableFuture<HttpResponse<String>> first =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return post(g, "/v1/chat/completions", body);
              } catch (Exception x) {
                throw new IllegalStateException(x);
              }
            });
    e.arrived.await();
    assertThat(g.values.held()).isEqualTo(800);
    HttpResponse<String> second = post(g, "/v1/chat/completions", body);
    assertThat(second.statusCode()).as(second.body()).isEqualTo(429);
    assertThat(second.headers().firstValue("Retry-After")).hasValue("1");
    assertThat(second.body()).contains("\"code\":\"gateway_busy\"").contains("1500");
    HttpResponse<String> tooBig = post(g, "/v1/chat/completions", chatWithEmptyTools(1_000));
    assertThat(tooBig.statusCode()).as(tooBig.body()).isEqualTo(413);
    release.countDown();
    assertThat(first.get().statusCode()).isEqualTo(200);
    // the client may read the answer before the gateway's handler returns and gives the values back
    GatewayStubTest.await(
        "the first request's values to be given back", () -> g.values.held() == 0);
    assertThat(post(g, "/v1/chat/completions", body).statusCode()).isEqualTo(200);
    GatewayStubTest.await(
        "the third request's values to be given back", () -> g.values.held() == 0);
  }
}
