package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.BS;
import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static io.kvrouter.gateway.GatewayMockEngineTest.chat;
import static io.kvrouter.gateway.GatewayMockEngineTest.content;
import static io.kvrouter.gateway.GatewayMockEngineTest.number;
import static io.kvrouter.gateway.GatewayMockEngineTest.post;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.PairRouter;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.transport.kvevents.ClearScope;
import java.io.IOException;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Prefill/decode disaggregation end to end (docs/gateway.md, Disaggregated serving): two producer
 * and two consumer mock engines behind the gateway, KV events over ZMQ; the hand-over of vLLM's
 * disaggregated proxy, the streamed answer equal to the aggregated path's, and the router's
 * bookkeeping freed on every path, a failing prefill or decode engine included.
 */
class GatewayDisaggregationTest {
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  Gateway gateway(int minUncached) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .disaggregation(new PairRouter.Config(minUncached, Long.MAX_VALUE))
                .build());
    open.add(g);
    return g;
  }

  MockEngineServer engine(MockEngineServer.KvRole role, double failFraction) throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            GatewayMockEngineTest.tinyEngine()
                .failFraction(failFraction)
                .kvRole(role)
                .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                .build());
    open.add(e);
    return e;
  }

  static RouterModel register(Gateway g, long id, MockEngineServer e, EngineRole role) {
    return g.host.register(
        new Registration(
            "tiny",
            null,
            BS,
            id,
            0,
            e.url(),
            e.zmqEndpoint(),
            e.replayEndpoint(),
            null,
            role,
            ClearScope.DEVICE));
  }

  /** The concatenated {@code delta.content} of an SSE chat stream. */
  static String streamed(String sse) {
    StringBuilder b = new StringBuilder();
    for (String line : sse.split("\n")) {
      if (line.startsWith("data: {") && line.contains("\"content\":\"")) b.append(content(line));
    }
    return b.toString();
  }

  static String streaming(String body) {
    return body.replace("\"max_tokens\":4,", "\"max_tokens\":5,\"stream\":true,");
  }

  static String get(String url) throws Exception {
    return GatewayMockEngineTest.HTTP
        .send(
            HttpRequest.newBuilder(URI.create(url)).GET().build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  @Test
  void aLongPromptIsPrefilledOnOneEngineAndStreamedFromAnotherAsTheAggregatedPathStreamsIt()
      throws Exception {
    MockEngineServer[] engines = {
      engine(MockEngineServer.KvRole.PRODUCER, 0),
      engine(MockEngineServer.KvRole.PRODUCER, 0),
      engine(MockEngineServer.KvRole.CONSUMER, 0),
      engine(MockEngineServer.KvRole.CONSUMER, 0)
    };
    EngineRole[] roles = {
      EngineRole.PREFILL, EngineRole.PREFILL, EngineRole.DECODE, EngineRole.DECODE
    };
    Gateway pd = gateway(0); // every request a prefill engine can take is disaggregated
    Gateway agg = gateway(Integer.MAX_VALUE); // every request is served whole
    RouterModel m = null;
    for (int i = 0; i < 4; i++) {
      m = register(pd, i + 1, engines[i], roles[i]);
      register(agg, i + 1, engines[i], roles[i]);
    }
    RouterModel model = m;
    String body = streaming(chat("Tell me a long story about a router and its caches."));

    HttpResponse<String> split = post(pd.url(), "/v1/chat/completions", body);

    assertThat(split.statusCode()).isEqualTo(200);
    assertThat(split.headers().firstValue("x-kvrouter-path")).hasValue("disaggregated");
    long prefill = Long.parseLong(split.headers().firstValue("x-kvrouter-prefill-worker").get());
    long decode = Long.parseLong(split.headers().firstValue("x-kvrouter-worker").get());
    assertThat(prefill).isIn(1L, 2L);
    assertThat(decode).isIn(3L, 4L);
    assertThat(split.body()).endsWith("data: [DONE]\n\n");
    assertThat(model.router().inFlight()).isZero();

    // the prefill engine ran the request for one token, the decode engine pulled its blocks
    MockEngineServer p = engines[(int) prefill - 1];
    MockEngineServer d = engines[(int) decode - 1];
    String prefillRequests = get(p.url() + "/mock/requests");
    assertThat(prefillRequests)
        .contains("\"output_tokens\":1")
        .contains("\"finish_reason\":\"length\"");
    long promptTokens = number(prefillRequests, "prompt_tokens");
    assertThat(promptTokens).isGreaterThan(4 * BS);
    // it cached none of them before: it pulled every full block the producer named
    assertThat(get(d.url() + "/metrics"))
        .contains(
            "mock:kv_pulled_blocks_total{model_name=\"tiny\",engine=\"0\"} "
                + promptTokens / BS
                + ".0\n");
    // the decode engine published BlockStored for the blocks it received: the router sees them
    await(
        "the decode engine's blocks in the index",
        () -> model.router().index().blockCount(new Worker(decode, 0)) >= promptTokens / BS);

    HttpResponse<String> whole = post(agg.url(), "/v1/chat/completions", body);
    assertThat(whole.statusCode()).isEqualTo(200);
    assertThat(whole.headers().firstValue("x-kvrouter-path")).hasValue("aggregated");
    assertThat(whole.headers().firstValue("x-kvrouter-path-reason"))
        .hasValue("few_uncached_tokens");
    assertThat(Long.parseLong(whole.headers().firstValue("x-kvrouter-worker").get())).isIn(3L, 4L);
    assertThat(streamed(split.body())).isNotEmpty().isEqualTo(streamed(whole.body()));
    assertThat(agg.host.model("tiny", null).router().inFlight()).isZero();

    // a non-streamed request takes the same path
    HttpResponse<String> plain =
        post(pd.url(), "/v1/chat/completions", chat("Another prompt, answered whole."));
    assertThat(plain.statusCode()).isEqualTo(200);
    assertThat(plain.headers().firstValue("x-kvrouter-path")).hasValue("disaggregated");
    assertThat(number(plain.body(), "completion_tokens")).isEqualTo(4);
    assertThat(model.router().inFlight()).isZero();
  }

  @Test
  void aFailingPrefillEngineGivesAnOpenAiErrorAndFreesBothEntries() throws Exception {
    Gateway g = gateway(0);
    RouterModel m =
        register(g, 1, engine(MockEngineServer.KvRole.PRODUCER, 1.0), EngineRole.PREFILL);
    register(g, 2, engine(MockEngineServer.KvRole.CONSUMER, 0), EngineRole.DECODE);

    HttpResponse<String> r =
        post(g.url(), "/v1/chat/completions", streaming(chat("This prefill will fail.")));

    assertThat(r.statusCode()).isEqualTo(502);
    assertThat(r.headers().firstValue("content-type")).hasValue("application/json");
    assertThat(r.body())
        .startsWith("{\"error\":{")
        .contains("\"type\":\"server_error\"")
        .contains("\"code\":\"prefill_engine_failed\"")
        .contains("the prefill engine 1 answered 500");
    assertThat(m.router().inFlight()).isZero();
    assertThat(m.router().loads()).allMatch(l -> l.requests() == 0);
  }

  @Test
  void aFailingDecodeEngineGivesAnOpenAiErrorAndFreesBothEntries() throws Exception {
    Gateway g = gateway(0);
    RouterModel m = register(g, 1, engine(MockEngineServer.KvRole.PRODUCER, 0), EngineRole.PREFILL);
    register(g, 2, engine(MockEngineServer.KvRole.CONSUMER, 1.0), EngineRole.DECODE);

    HttpResponse<String> r =
        post(g.url(), "/v1/chat/completions", streaming(chat("This decode will fail.")));

    assertThat(r.statusCode()).isEqualTo(502);
    assertThat(r.body())
        .startsWith("{\"error\":{")
        .contains("\"code\":\"decode_engine_failed\"")
        .contains("after the prefill on 1");
    assertThat(m.router().inFlight()).isZero();
    assertThat(m.router().loads()).allMatch(l -> l.requests() == 0);
  }

  @SuppressWarnings("try") // the socket is opened only to see whether the port still accepts
  static boolean refuses(MockEngineServer e) {
    URI u = URI.create(e.url());
    try (Socket s = new Socket(u.getHost(), u.getPort())) {
      return false;
    } catch (IOException gone) {
      return true;
    }
  }

  @Test
  void deadEnginesGiveAnOpenAiErrorAndFreeBothEntries() throws Exception {
    Gateway g = gateway(0);
    MockEngineServer p = engine(MockEngineServer.KvRole.PRODUCER, 0);
    MockEngineServer d = engine(MockEngineServer.KvRole.CONSUMER, 0);
    RouterModel m = register(g, 1, p, EngineRole.PREFILL);
    register(g, 2, d, EngineRole.DECODE);
    p.kill();
    d.kill();
    await("the engines' ports closed", () -> refuses(p) && refuses(d));

    HttpResponse<String> r =
        post(g.url(), "/v1/chat/completions", streaming(chat("Nobody will prefill this.")));

    assertThat(r.statusCode()).as(r.body()).isEqualTo(502);
    assertThat(r.body())
        .startsWith("{\"error\":{")
        .contains("\"code\":\"prefill_engine_unreachable\"");
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void prefillEnginesAloneRefuseWithTheReason() throws Exception {
    Gateway g = gateway(0);
    RouterModel m = register(g, 1, engine(MockEngineServer.KvRole.PRODUCER, 0), EngineRole.PREFILL);
    HttpResponse<String> r = post(g.url(), "/v1/chat/completions", chat("Who decodes this?"));
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("\"code\":\"no_decode_engines\"");
    assertThat(m.router().inFlight()).isZero();
  }
}
