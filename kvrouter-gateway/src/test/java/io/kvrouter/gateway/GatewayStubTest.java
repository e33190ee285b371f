package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.route.KvSource;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.WorkerLoad;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost.Registration;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The gateway against stub engines on real sockets: relay, retries, errors, health, feedback. */
class GatewayStubTest {
  static final int BS = 4;
  static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  static Path tiny() throws Exception {
    return Path.of(GatewayStubTest.class.getResource("/models/tiny/tokenizer.json").toURI())
        .getParent();
  }

  Gateway gateway(GatewayConfig.Builder b) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).maxBodyBytes(64 * 1024).build(),
            b.model("tiny", tiny()).build());
    open.add(g);
    return g;
  }

  StubEngine stub() {
    StubEngine s = new StubEngine();
    open.add(s);
    return s;
  }

  /**
   * Registers a stub engine as one fed by KV events, which the tests apply themselves ({@link
   * #holds}); registered with a base URL alone, it would be tracked by predictions.
   */
  static RouterModel register(Gateway g, long id, String url) {
    return g.host.register(events(Registration.of("tiny", BS, id, 0, url)));
  }

  static Registration events(Registration r) {
    return r.withKvSource(KvSource.EVENTS);
  }

  /** The engine {@code id} caches the full blocks of {@code tokens}. */
  static void holds(RouterModel m, long id, int[] tokens) {
    long[] local = BlockHasher.of(BS).localHashes(tokens);
    m.router()
        .applyEvent(
            new RouterEvent(
                new Worker(id, 0),
                0,
                CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
  }

  static int[] range(int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) t[i] = 10 + i;
    return t;
  }

  static String ids(int[] t) {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < t.length; i++) b.append(i == 0 ? "" : ",").append(t[i]);
    return b.append(']').toString();
  }

  static HttpResponse<String> post(Gateway g, String path, String body, String... headers)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(g.url() + path))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i < headers.length; i += 2) b.header(headers[i], headers[i + 1]);
    return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static String completion(int[] prompt, boolean stream, String extra) {
    return "{\"model\":\"tiny\",\"prompt\":"
        + ids(prompt)
        + ",\"max_tokens\":3"
        + (stream ? ",\"stream\":true" : "")
        + extra
        + "}";
  }

  static final String CHAT =
      "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"stream\":true}";

  @Test
  void ranksBehindOneUrlAreNamedInEachRequestAndARankOnItsOwnUrlIsNot() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine dp = stub();
    StubEngine solo = stub();
    // one data-parallel engine serving ranks 0 and 1 behind one URL, and engine 1 on its own
    RouterModel m = g.host.register(events(Registration.of("tiny", BS, 7, 0, dp.url())));
    g.host.register(events(Registration.of("tiny", BS, 7, 1, dp.url())));
    g.host.register(events(Registration.of("tiny", BS, 1, 0, solo.url())));
    int[] a = range(16);
    int[] b = new int[16];
    for (int i = 0; i < b.length; i++) b[i] = 500 + i;
    long[] la = BlockHasher.of(BS).localHashes(a);
    long[] lb = BlockHasher.of(BS).localHashes(b);
    m.router()
        .applyEvent(
            new RouterEvent(
                new Worker(7, 1),
                0,
                CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(la), la)));
    m.router()
        .applyEvent(
            new RouterEvent(
                new Worker(7, 0),
                0,
                CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(lb), lb)));
    HttpResponse<String> r1 = post(g, "/v1/completions", completion(a, false, ""));
    HttpResponse<String> r0 = post(g, "/v1/completions", completion(b, false, ""));
    assertThat(r1.statusCode()).isEqualTo(200);
    assertThat(r1.headers().firstValue("x-kvrouter-dp-rank")).hasValue("1");
    assertThat(r0.headers().firstValue("x-kvrouter-dp-rank")).hasValue("0");
    assertThat(dp.dpRanks).containsExactly("1", "0");
    holds(m, 1, range(24)); // engine 1 now holds more of prompt a than rank 1 of engine 7
    HttpResponse<String> s = post(g, "/v1/completions", completion(range(24), false, ""));
    assertThat(s.headers().firstValue("x-kvrouter-worker")).hasValue("1");
    assertThat(solo.dpRanks).containsExactly("-");
    // engine 7 comes back with one rank only: its URL is no longer shared
    assertThat(post(g, "/unregister", "{\"instance_id\":7,\"model_name\":\"tiny\"}").statusCode())
        .isEqualTo(200);
    g.host.register(events(Registration.of("tiny", BS, 7, 0, dp.url())));
    assertThat(m.sharesBaseUrl(new Worker(7, 0))).isFalse();
    assertThat(m.sharesBaseUrl(new Worker(1, 0))).isFalse();
    // rank 3 of an engine whose other ranks are not registered: named all the same
    StubEngine three = stub();
    g.host.register(events(Registration.of("tiny", BS, 9, 3, three.url())));
    int[] c = range(32);
    long[] lc = BlockHasher.of(BS).localHashes(c);
    m.router()
        .applyEvent(
            new RouterEvent(
                new Worker(9, 3),
                0,
                CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(lc), lc)));
    assertThat(post(g, "/v1/completions", completion(c, false, "")).statusCode()).isEqualTo(200);
    assertThat(three.dpRanks).containsExactly("3");
  }

  /**
   * A model tokenized by its engines, whose engine answers {@code /tokenize} with no tokens (as
   * llama.cpp answers a vLLM-shaped body): a clear error naming the engine, never an empty prompt
   * routed on.
   */
  @Test
  void anEngineThatTokenizesANonEmptyPromptIntoNothingIsAnErrorNamingIt() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().model("delegated", null));
    StubEngine e = stub();
    RouterModel m = g.host.register(events(Registration.of("delegated", BS, 1, 0, e.url())));
    String chat =
        "{\"model\":\"delegated\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}";
    HttpResponse<String> r = post(g, "/v1/chat/completions", chat);
    assertThat(r.statusCode()).isEqualTo(502);
    assertThat(r.body())
        .contains("engine_tokenize_failed")
        .contains("engine " + e.url() + "/tokenize")
        .contains("no tokens for a non-empty input");
    HttpResponse<String> t = post(g, "/tokenize", chat);
    assertThat(t.statusCode()).isEqualTo(502);
    assertThat(t.body()).contains("engine " + e.url() + "/tokenize");
    assertThat(e.tokenizeCalls.get()).isGreaterThanOrEqualTo(2);
    assertThat(e.hits()).as("nothing was routed to the engine").isZero();
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void streamedChatIsRelayedUnchangedWithoutTheUsageChunkItAskedFor() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    RouterModel m = register(g, 1, e.url());
    HttpResponse<String> r = post(g, "/v1/chat/completions", CHAT, "x-request-id", "req-abc");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).isEqualTo(e.expectedStream(true, false));
    assertThat(r.headers().firstValue("x-kvrouter-worker")).hasValue("1");
    assertThat(r.headers().firstValue("x-kvrouter-overlap-tokens")).hasValue("0");
    assertThat(r.headers().firstValue("x-request-id")).hasValue("req-abc");
    assertThat(r.headers().firstValue("content-type").orElseThrow())
        .startsWith("text/event-stream");
    // the engine got the body with include_usage added, and the client's request id
    assertThat(new String(e.bodies.get(0), StandardCharsets.UTF_8))
        .isEqualTo(
            CHAT.substring(0, CHAT.length() - 1) + ",\"stream_options\":{\"include_usage\":true}}");
    assertThat(e.requestIds).containsExactly("req-abc");
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void aClientThatAsksForUsageGetsTheEnginesBytesExactly() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    register(g, 1, e.url());
    String body = completion(range(12), true, ",\"stream_options\":{\"include_usage\":true}");
    HttpResponse<String> r = post(g, "/v1/completions", body);
    assertThat(r.body()).isEqualTo(e.expectedStream(false, true));
    assertThat(e.bodies.get(0)).isEqualTo(body.getBytes(StandardCharsets.UTF_8));
    // include_usage false is turned true, and the usage chunk removed again
    String off = completion(range(12), true, ",\"stream_options\":{\"include_usage\":false}");
    assertThat(post(g, "/v1/completions", off).body()).isEqualTo(e.expectedStream(false, false));
    assertThat(new String(e.bodies.get(1), StandardCharsets.UTF_8))
        .isEqualTo(off.replace("\"include_usage\":false", "\"include_usage\":true"));
    String empty = completion(range(12), true, ",\"stream_options\":{}");
    assertThat(post(g, "/v1/completions", empty).body()).isEqualTo(e.expectedStream(false, false));
    assertThat(new String(e.bodies.get(2), StandardCharsets.UTF_8))
        .isEqualTo(empty.replace("{}", "{\"include_usage\":true}"));
  }

  @Test
  void wholeAnswersAreRelayedUnchangedAndTheirUsageIsCompared() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    RouterModel m = register(g, 7, e.url());
    int[] prompt = range(12);
    holds(m, 7, range(8)); // 2 blocks
    e.cachedTokens.set(8);
    String body = completion(prompt, false, "");
    HttpResponse<String> r = post(g, "/v1/completions", body);
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).isEqualTo(e.whole(false));
    assertThat(r.headers().firstValue("x-kvrouter-overlap-tokens")).hasValue("8");
    assertThat(e.bodies.get(0)).isEqualTo(body.getBytes(StandardCharsets.UTF_8));
    assertThat(m.accuracy(new Worker(7, 0)).compared()).isEqualTo(1);
    assertThat(m.accuracy(new Worker(7, 0)).exact()).isEqualTo(1);
    // /workers shows it
    String workers =
        HTTP.send(
                HttpRequest.newBuilder(URI.create(g.url() + "/workers")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    assertThat(workers)
        .contains("\"base_url\":\"" + e.url() + "\"")
        .contains("\"prediction\":{\"compared\":1,\"exact\":1,\"engine_fewer\":0");
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void aFailingEngineIsRetriedOnTheNextBestBeforeTheFirstByte() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine bad = stub();
    StubEngine good = stub();
    bad.status.set(500);
    RouterModel m = register(g, 1, bad.url());
    register(g, 2, good.url());
    int[] prompt = range(12);
    holds(m, 1, prompt); // the failing engine holds the prefix: the router picks it first
    HttpResponse<String> r = post(g, "/v1/completions", completion(prompt, false, ""));
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).isEqualTo(good.whole(false));
    assertThat(r.headers().firstValue("x-kvrouter-worker")).hasValue("2");
    assertThat(r.headers().firstValue("x-kvrouter-attempts")).hasValue("2");
    assertThat(bad.hits()).isEqualTo(1);
    assertThat(good.hits()).isEqualTo(1);
    assertThat(m.router().inFlight()).isZero();
    // both failing: the last engine's answer is the client's, after max attempts
    good.status.set(503);
    bad.status.set(503);
    HttpResponse<String> r3 = post(g, "/v1/completions", completion(range(12), false, ""));
    assertThat(r3.statusCode()).isEqualTo(503);
    assertThat(r3.body()).contains("stub fails"); // the engine's own answer, passed through
    good.status.set(200);
    // a refused connection too
    StubEngine gone = new StubEngine();
    String goneUrl = gone.url();
    gone.close();
    register(g, 3, goneUrl);
    holds(m, 3, range(16)); // more overlap than 1's: 3 is first, then 1
    bad.status.set(200);
    HttpResponse<String> r2 = post(g, "/v1/completions", completion(range(16), false, ""));
    assertThat(r2.statusCode()).isEqualTo(200);
    assertThat(r2.headers().firstValue("x-kvrouter-attempts")).hasValue("2");
    assertThat(r2.headers().firstValue("x-kvrouter-worker")).hasValue("1");
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void errorsAreOpenAiShapedAndNeverReachAnEngine() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().apiKey("sekret"));
    String auth = "Bearer sekret";
    // model configured, nothing registered
    HttpResponse<String> none =
        post(g, "/v1/completions", completion(range(8), false, ""), "Authorization", auth);
    assertThat(none.statusCode()).isEqualTo(503);
    assertThat(none.body())
        .contains("\"code\":\"no_engines\"")
        .startsWith("{\"error\":{\"message\":");
    StubEngine e = stub();
    register(g, 1, e.url());
    HttpResponse<String> noKey = post(g, "/v1/completions", completion(range(8), false, ""));
    assertThat(noKey.statusCode()).isEqualTo(401);
    assertThat(noKey.body())
        .contains("\"code\":\"invalid_api_key\"")
        .contains("\"type\":\"invalid_request_error\"");
    assertThat(post(g, "/v1/completions", "{\"model\":", "Authorization", auth).statusCode())
        .isEqualTo(400);
    HttpResponse<String> noModel =
        post(g, "/v1/completions", "{\"prompt\":\"hi\"}", "Authorization", auth);
    assertThat(noModel.statusCode()).isEqualTo(400);
    assertThat(noModel.body()).contains("\"param\":\"model\"");
    HttpResponse<String> unknown =
        post(g, "/v1/chat/completions", CHAT.replace("tiny", "nope"), "Authorization", auth);
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(unknown.body()).contains("\"code\":\"model_not_found\"");
    String big = "{\"model\":\"tiny\",\"prompt\":\"" + "x".repeat(70_000) + "\"}";
    HttpResponse<String> tooBig = post(g, "/v1/completions", big, "Authorization", auth);
    assertThat(tooBig.statusCode()).isEqualTo(413);
    assertThat(tooBig.body()).contains("\"error\":{");
    assertThat(
            post(g, "/v1/chat/completions", "{\"model\":\"tiny\"}", "Authorization", auth)
                .statusCode())
        .isEqualTo(400);
    assertThat(e.hits()).isZero();
    // the router's admin endpoints keep their own token (none here), the client key is not needed
    assertThat(
            HTTP.send(
                    HttpRequest.newBuilder(URI.create(g.url() + "/workers")).build(),
                    HttpResponse.BodyHandlers.ofString())
                .statusCode())
        .isEqualTo(200);
    // and a good request passes, with the engine key sent to the engine
    assertThat(
            post(g, "/v1/completions", completion(range(8), false, ""), "Authorization", auth)
                .statusCode())
        .isEqualTo(200);
  }

  @Test
  void theEngineKeyIsSentToEngines() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().engineApiKey("engine-key"));
    StubEngine e = stub();
    register(g, 1, e.url());
    post(g, "/v1/completions", completion(range(8), false, ""));
    assertThat(e.auth).containsExactly("Bearer engine-key");
  }

  @Test
  void aClientThatGoesAwayFreesItsRequestAndAbortsTheEngine() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    RouterModel m = register(g, 1, e.url());
    e.holdAfterFirst = new CountDownLatch(1);
    HttpRequest req =
        HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(completion(range(12), true, "")))
            .build();
    HttpResponse<InputStream> r = HTTP.send(req, HttpResponse.BodyHandlers.ofInputStream());
    InputStream in = r.body();
    byte[] first = in.readNBytes(6);
    assertThat(new String(first, StandardCharsets.UTF_8)).isEqualTo("data: ");
    assertThat(m.router().inFlight()).isEqualTo(1);
    // the first token reached the client: its prefill is no longer charged, its blocks are
    WorkerLoad load = m.router().load(new Worker(1, 0));
    assertThat(load.activePrefillTokens()).isZero();
    assertThat(load.activeBlocks()).isEqualTo(3);
    in.close(); // the client hangs up mid-stream
    assertThat(e.aborted.await(10, TimeUnit.SECONDS)).isTrue();
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (m.router().inFlight() != 0 && System.nanoTime() < deadline) Thread.onSpinWait();
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void shutdownDrainsStreamsInFlight() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    register(g, 1, e.url());
    CountDownLatch hold = new CountDownLatch(1);
    e.holdAfterFirst = hold;
    HttpResponse<InputStream> r =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(completion(range(12), true, "")))
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    InputStream in = r.body();
    assertThat(new String(in.readNBytes(6), StandardCharsets.UTF_8)).isEqualTo("data: ");
    Thread stopper = Thread.ofVirtual().start(g::close);
    await("the server stops taking traffic", () -> !g.server().isReady());
    hold.countDown(); // the engine finishes its answer while the gateway stops
    String rest = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    assertThat(rest).endsWith("data: [DONE]\n\n").contains("\"t2\"");
    stopper.join();
  }

  @Test
  void aStreamLongerThanTheReadTimeoutIsNotCutOff() throws Exception {
    // the edge's read deadline is for the request's arrival, not for a long answer
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).readTimeout(Duration.ofMillis(300)).build(),
            GatewayConfig.builder().model("tiny", tiny()).build());
    open.add(g);
    StubEngine e = stub();
    register(g, 1, e.url());
    CountDownLatch hold = new CountDownLatch(1);
    e.holdAfterFirst = hold;
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    try {
      // released well after the read timeout (and Helidon's idle timer of the same length)
      ScheduledFuture<?> unused = timer.schedule(hold::countDown, 1500, TimeUnit.MILLISECONDS);
      HttpResponse<String> r = post(g, "/v1/completions", completion(range(12), true, ""));
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.body()).endsWith("data: [DONE]\n\n").contains(StubEngine.chunk(false, 2));
    } finally {
      timer.shutdownNow();
    }
  }

  @Test
  void severalModelsEachWithTheirEnginesAndBlockSize() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().model("other", tiny()));
    StubEngine a = stub();
    StubEngine b = stub();
    register(g, 1, a.url()); // tiny, block size 4
    RouterModel other = g.host.register(events(Registration.of("other", 8, 1, 0, b.url())));
    assertThat(other.blockSize()).isEqualTo(8);
    HttpResponse<String> r =
        post(
            g, "/v1/completions", completion(range(8), false, "").replace("\"tiny\"", "\"other\""));
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(b.hits()).isEqualTo(1);
    assertThat(a.hits()).isZero();
    assertThat(post(g, "/v1/completions", completion(range(8), false, "")).statusCode())
        .isEqualTo(200);
    assertThat(a.hits()).isEqualTo(1);
  }

  static void await(String what, BooleanSupplier cond) {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) throw new AssertionError("timed out waiting for " + what);
      Thread.onSpinWait();
    }
  }

  @Test
  void healthChecksTakeADeadEngineOutAndPutItBack() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().healthInterval(Duration.ofMillis(50)));
    StubEngine e = stub();
    register(g, 1, e.url());
    e.healthy.set(false);
    awaitHealthy(g, e.url(), false);
    HttpResponse<String> r = post(g, "/v1/completions", completion(range(8), false, ""));
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("\"code\":\"all_unhealthy\"");
    assertThat(e.hits()).isZero();
    e.healthy.set(true);
    awaitHealthy(g, e.url(), true);
    assertThat(post(g, "/v1/completions", completion(range(8), false, "")).statusCode())
        .isEqualTo(200);
  }

  static void awaitHealthy(Gateway g, String url, boolean healthy) {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (System.nanoTime() < deadline) {
      EngineState s = g.engines.get(url);
      if (s != null && s.healthy() == healthy) return;
      Thread.onSpinWait();
    }
    throw new AssertionError(url + " did not become " + (healthy ? "healthy" : "unhealthy"));
  }

  /**
   * Helidon's idle monitor gives up on a pooled connection after as long idle as the read timeout
   * of its last request, and a request handed that connection at that moment fails with a
   * SocketTimeoutException. With one pool for both clients a proxy request could ride on a
   * connection a health check (2 s) used last, and failed so: a false 504 engine_timeout in bench
   * fleet runs. The proxy and the health checker have separate pools.
   */
  @Test
  void proxyRequestsNeverRideOnAHealthCheckConnection() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().healthInterval(Duration.ofHours(1)));
    StubEngine e = stub();
    register(g, 1, e.url());
    // checkAll joins its checks, each closes its response: the connection is idle in its pool
    g.checkAll();
    assertThat(e.healthPorts).hasSize(1);
    assertThat(post(g, "/v1/completions", completion(range(8), true, "")).statusCode())
        .isEqualTo(200);
    assertThat(post(g, "/v1/completions", completion(range(8), false, "")).statusCode())
        .isEqualTo(200);
    g.checkAll();
    assertThat(e.healthPorts).hasSize(2);
    assertThat(e.requestPorts).hasSize(2).doesNotContainAnyElementsOf(e.healthPorts);
  }

  /**
   * Engines that come and go under new ids (autoscaling, restarts) leave nothing behind: what the
   * gateway keeps per engine (EngineState, engine tokenizers, prediction windows, metric series) is
   * pruned at the next health round, and the model's last engine leaving prunes the model's.
   */
  @Test
  void perEngineStateStaysBoundedAsEnginesComeAndGo() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().healthInterval(Duration.ofHours(1)));
    StubEngine e = stub();
    e.cachedTokens.set(4); // the answers show prompt details: every request is compared
    RouterModel m = register(g, 1, e.url());
    g.engineTokenizer(e.url(), "tiny");
    assertThat(post(g, "/v1/completions", completion(range(8), false, "")).statusCode())
        .isEqualTo(200);
    int cycles = 40;
    for (int i = 0; i < cycles; i++) {
      long id = 100L + i;
      register(g, id, e.url(i));
      g.engineTokenizer(e.url(i), "tiny");
      holds(m, id, range(8 + i)); // the router sends this prompt to engine id
      HttpResponse<String> r = post(g, "/v1/completions", completion(range(8 + i), false, ""));
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvrouter-worker")).hasValue(Long.toString(id));
      assertThat(metrics(g)).contains("engine=\"" + id + "\"");
      assertThat(g.predictions.windowCount()).isEqualTo(2);
      HttpResponse<String> u =
          post(g, "/unregister", "{\"instance_id\":" + id + ",\"model_name\":\"tiny\"}");
      assertThat(u.statusCode()).isEqualTo(200);
      g.checkAll();
      // only engine 1 is left: nothing of engine id stays
      assertThat(g.engineStates()).hasSize(1);
      assertThat(g.engineTokenizerCount()).isEqualTo(1);
      assertThat(g.predictions.windowCount()).isEqualTo(1);
      assertThat(g.predictions.detailCount()).isEqualTo(1);
      assertThat(metrics(g)).doesNotContain("engine=\"" + id + "\"").contains("engine=\"1\"");
    }
    assertThat(e.hits()).isEqualTo(cycles + 1);
    // the model's last engine leaves
    assertThat(post(g, "/unregister", "{\"instance_id\":1,\"model_name\":\"tiny\"}").statusCode())
        .isEqualTo(200);
    g.checkAll();
    assertThat(g.engineStates()).isEmpty();
    assertThat(g.engineTokenizerCount()).isZero();
    assertThat(g.predictions.windowCount()).isZero();
    assertThat(g.predictions.detailCount()).isZero();
    assertThat(metrics(g)).doesNotContain("engine=\"1\"");
  }

  static String metrics(Gateway g) throws Exception {
    return HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/metrics")).build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  @Test
  void aPooledConnectionThatExpiredAsItWasHandedOutIsNotAnEngineTimeout() {
    // what Helidon's idle monitor throws (IdleInputStream.endIdle) when it gave up on the socket
    Proxy.Retry stale =
        Proxy.failure(
            new RuntimeException(
                "Exception in socket monitor thread.",
                new ExecutionException(
                    new UncheckedIOException(new SocketTimeoutException("Read timed out")))));
    assertThat(stale.reason()).isEqualTo("stale_connection");
    assertThat(stale.timeout()).isFalse();
    // the engine itself silent past the read timeout
    Proxy.Retry silent =
        Proxy.failure(new UncheckedIOException(new SocketTimeoutException("Read timed out")));
    assertThat(silent.reason()).isEqualTo("timeout");
    assertThat(silent.timeout()).isTrue();
  }

  @Test
  void anEngineSilentPastTheTimeoutIsRetriedElsewhere() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().engineTimeout(Duration.ofMillis(300)));
    StubEngine slow = stub();
    StubEngine good = stub();
    RouterModel m = register(g, 1, slow.url());
    register(g, 2, good.url());
    holds(m, 1, range(12));
    CountDownLatch never = new CountDownLatch(1);
    slow.holdBeforeAnswer = never;
    try {
      HttpResponse<String> r = post(g, "/v1/completions", completion(range(12), true, ""));
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvrouter-worker")).hasValue("2");
      assertThat(r.headers().firstValue("x-kvrouter-attempts")).hasValue("2");
      assertThat(r.body()).isEqualTo(good.expectedStream(false, false));
      good.holdBeforeAnswer = never; // now both are silent: 504
      HttpResponse<String> t = post(g, "/v1/completions", completion(range(12), false, ""));
      assertThat(t.statusCode()).isEqualTo(504);
      assertThat(t.body()).contains("\"code\":\"engine_timeout\"");
    } finally {
      never.countDown();
    }
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void everyEngineBusyWithoutAnAdmissionQueueIsA503() throws Exception {
    // --max-queue-depth 0: no queue (with one, the request would wait: GatewayAdmissionTest)
    AdmissionConfig d = AdmissionConfig.DEFAULTS;
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                .routing(RoutingSettings.DEFAULTS.withBusyPrefillTokens(0))
                .build(),
            GatewayConfig.builder()
                .model("tiny", tiny())
                .admission(
                    new AdmissionConfig(
                        0,
                        d.maxQueueTime(),
                        d.starvationLimit(),
                        d.tenantFrom(),
                        d.tenantWeights(),
                        d.defaultDecodeTokens(),
                        d.maxTenantLabels()))
                .build());
    open.add(g);
    StubEngine e = stub();
    register(g, 1, e.url());
    CountDownLatch hold = new CountDownLatch(1);
    e.holdBeforeAnswer = hold; // the first request stays in prefill
    Thread first =
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    post(g, "/v1/completions", completion(range(12), false, ""));
                  } catch (Exception x) {
                    throw new AssertionError(x);
                  }
                });
    assertThat(e.arrived.await(10, TimeUnit.SECONDS)).isTrue();
    HttpResponse<String> r = post(g, "/v1/completions", completion(range(8), false, ""));
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("\"code\":\"all_busy\"");
    hold.countDown();
    first.join();
    assertThat(e.hits()).isEqualTo(1);
  }

  @Test
  void consecutiveFailuresOpenTheBreaker() throws Exception {
    Gateway g = gateway(breakerAfterTwo());
    StubEngine e = stub();
    register(g, 1, e.url());
    e.status.set(500);
    assertOpensAfterTwoFailures(g, e, false, 500);
  }

  /** One attempt per request; two failures in a row open an engine's breaker for 5 minutes. */
  static GatewayConfig.Builder breakerAfterTwo() {
    return GatewayConfig.builder()
        .maxAttempts(1)
        .breakerFailures(2)
        .breakerOpen(Duration.ofMinutes(5));
  }

  /** Two requests fail on {@code e} with {@code failed}; the third is refused, circuit open. */
  static void assertOpensAfterTwoFailures(Gateway g, StubEngine e, boolean stream, int failed)
      throws Exception {
    for (int i = 0; i < 2; i++) {
      assertThat(post(g, "/v1/completions", completion(range(8), stream, "")).statusCode())
          .isEqualTo(failed);
    }
    HttpResponse<String> r = post(g, "/v1/completions", completion(range(8), stream, ""));
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).contains("\"code\":\"circuit_open\"");
    assertThat(e.hits()).isEqualTo(2);
  }

  @Test
  void anEngineThatSendsItsHeadersAndNoAnswerOpensTheBreaker() throws Exception {
    Gateway g = gateway(breakerAfterTwo());
    StubEngine e = stub();
    register(g, 1, e.url());
    e.emptyStream.set(true);
    assertOpensAfterTwoFailures(g, e, true, 502);
  }

  @Test
  void anEngineThatFailsIsNamedInTheError() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().maxAttempts(1));
    StubEngine e = stub();
    register(g, 7, e.url());
    e.emptyStream.set(true);
    HttpResponse<String> r = post(g, "/v1/completions", completion(range(8), true, ""));
    assertThat(r.statusCode()).isEqualTo(502);
    assertThat(r.body())
        .contains("\"code\":\"engine_unreachable\"")
        .contains("last: engine " + e.url() + " (instance 7): ");
  }

  /**
   * The client's stream_options the gateway cannot set include_usage in (not an object, or an
   * include_usage that is not a boolean) goes to the engine as the client sent it: the engine
   * judges it, and its answer counts for the engine, not against it.
   */
  @Test
  void streamOptionsTheGatewayCannotAmendGoToTheEngineAsSent() throws Exception {
    Gateway g = gateway(breakerAfterTwo());
    StubEngine e = stub();
    register(g, 1, e.url());
    String[] odd = {
      ",\"stream_options\":\"x\"",
      ",\"stream_options\":{\"include_usage\":1}",
      ",\"stream_options\":[true]",
      // usage in every chunk, which vLLM sends only with include_usage: not set for the client
      ",\"stream_options\":{\"continuous_usage_stats\":true}"
    };
    for (String extra : odd) {
      String body = completion(range(8), true, extra);
      HttpResponse<String> r = post(g, "/v1/completions", body);
      assertThat(r.statusCode()).as(extra).isEqualTo(200);
      assertThat(new String(e.bodies.get(e.bodies.size() - 1), StandardCharsets.UTF_8))
          .as(extra)
          .isEqualTo(body);
    }
    assertThat(e.hits()).isEqualTo(odd.length);
  }

  @Test
  void bodiesThatAreNotOneUtf8JsonObjectAreA400() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    register(g, 1, e.url());
    String deep =
        "{\"model\":\"tiny\",\"prompt\":\"x\",\"user\":" + "[".repeat(300) + "]".repeat(300) + "}";
    HttpResponse<String> nested = post(g, "/v1/completions", deep);
    assertThat(nested.statusCode()).isEqualTo(400);
    assertThat(nested.body()).contains("\"type\":\"invalid_request_error\"").contains("nesting");
    HttpResponse<String> trailing =
        post(g, "/v1/completions", completion(range(8), false, "") + " {}");
    assertThat(trailing.statusCode()).isEqualTo(400);
    assertThat(trailing.body()).contains("more after the JSON object");
    byte[] utf16 = completion(range(8), true, "").getBytes(StandardCharsets.UTF_16LE);
    HttpResponse<String> wide =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(utf16))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(wide.statusCode()).isEqualTo(400);
    assertThat(wide.body()).contains("UTF-16");
    assertThat(e.hits()).isZero();
  }

  /**
   * An engine that dies in the middle of a whole (not streamed) answer sent without a
   * Content-Length: the client must not get the part as a complete 200 (the gateway's own framing
   * would end it as if it were whole). The gateway drops the connection instead.
   */
  @Test
  void aWholeAnswerTheEngineBreaksOffIsNotDeliveredAsComplete() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    RouterModel m = register(g, 1, e.url());
    e.breakWhole.set(true);
    assertThatThrownBy(() -> post(g, "/v1/completions", completion(range(8), false, "")))
        .isInstanceOf(IOException.class);
    // the route was freed, and the next request gets a whole answer
    e.breakWhole.set(false);
    HttpResponse<String> ok = post(g, "/v1/completions", completion(range(8), false, ""));
    assertThat(ok.statusCode()).isEqualTo(200);
    assertThat(ok.body()).isEqualTo(e.whole(false));
    assertThat(m.router().inFlight()).isZero();
  }

  @Test
  void aHalfOpenProbeClosesTheBreaker() throws Exception {
    Gateway g =
        gateway(
            GatewayConfig.builder()
                .maxAttempts(1)
                .breakerFailures(1)
                .breakerOpen(Duration.ofMillis(200)));
    StubEngine e = stub();
    register(g, 1, e.url());
    e.status.set(500);
    assertThat(post(g, "/v1/completions", completion(range(8), false, "")).statusCode())
        .isEqualTo(500);
    EngineState st = g.engines.get(e.url());
    assertThat(st.breaker(System.nanoTime())).isEqualTo(EngineState.Breaker.OPEN);
    await(
        "the breaker to turn half-open",
        () -> st.breaker(System.nanoTime()) == EngineState.Breaker.HALF_OPEN);
    e.status.set(200);
    assertThat(post(g, "/v1/completions", completion(range(8), false, "")).statusCode())
        .isEqualTo(200);
    assertThat(st.breaker(System.nanoTime())).isEqualTo(EngineState.Breaker.CLOSED);
  }

  @Test
  void persistentUnderPredictionIsWarnedAboutAndCounted() throws Exception {
    Gateway g = gateway(GatewayConfig.builder());
    StubEngine e = stub();
    RouterModel m = register(g, 1, e.url());
    LogCapture log = new LogCapture(PredictionCheck.LOG);
    try (log) {
      e.cachedTokens.set(8); // the engine hits 8 tokens the router never heard of
      e.promptTokens.set(13); // and counts another prompt length than the gateway's 12
      for (int i = 0; i < PredictionCheck.MIN_SAMPLES; i++) {
        assertThat(post(g, "/v1/completions", completion(range(12), false, "")).statusCode())
            .isEqualTo(200);
      }
    }
    List<String> warnings = log.messages();
    assertThat(warnings).hasSize(1);
    assertThat(warnings.get(0))
        .contains("MORE cached tokens than the router predicted")
        .contains("model 'tiny'")
        .contains(e.url())
        .contains("prompt_tokens differing");
    assertThat(m.accuracy(new Worker(1, 0)).more()).isEqualTo(PredictionCheck.MIN_SAMPLES);
    String metrics = metrics(g);
    assertThat(metrics)
        .contains(
            "kvrouter_prefix_prediction_total{engine=\"1\",model=\"tiny\",outcome=\"engine_more\"} 8.0")
        .contains(
            "kvrouter_prefix_prediction_prompt_mismatch_total{engine=\"1\",model=\"tiny\"} 8.0")
        .contains("kvrouter_prefix_prediction_error_tokens_bucket");
  }

  @Test
  void modelsTokenizeAndUnknownPaths() throws Exception {
    Gateway g = gateway(GatewayConfig.builder().lora("tiny-sql", "tiny"));
    StubEngine e = stub();
    register(g, 1, e.url());
    String models =
        HTTP.send(
                HttpRequest.newBuilder(URI.create(g.url() + "/v1/models")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    assertThat(models)
        .startsWith("{\"object\":\"list\",\"data\":[{\"id\":\"tiny\",\"object\":\"model\"")
        .contains("{\"id\":\"tiny-sql\",\"object\":\"model\"")
        .contains("\"parent\":\"tiny\"");
    HttpResponse<String> tok = post(g, "/tokenize", "{\"model\":\"tiny\",\"prompt\":\"hell\"}");
    assertThat(tok.body())
        .isEqualTo("{\"count\":2,\"max_model_len\":16,\"tokens\":[303,261],\"token_strs\":null}\n");
    HttpResponse<String> detok = post(g, "/detokenize", "{\"model\":\"tiny\",\"tokens\":[261]}");
    assertThat(detok.body()).isEqualTo("{\"prompt\":\"hell\"}\n");
    HttpResponse<String> nope = post(g, "/v1/embeddings", "{}");
    assertThat(nope.statusCode()).isEqualTo(404);
    assertThat(nope.body()).contains("\"code\":\"unknown_url\"");
    // a LoRA request routes among its base model's engines
    assertThat(
            post(
                    g,
                    "/v1/completions",
                    completion(range(8), false, "").replace("\"tiny\"", "\"tiny-sql\""))
                .statusCode())
        .isEqualTo(200);
  }
}
