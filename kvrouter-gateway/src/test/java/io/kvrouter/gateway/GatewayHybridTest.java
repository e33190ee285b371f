package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost.Registration;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A hybrid model end to end (docs/routing.md, "Hybrid models"): two mock engines with a
 * full-attention and a sliding-window group behind the gateway, their per-group KV events over ZMQ.
 * One engine's full-attention group holds more of the prompt, but its window lost the blocks that
 * prefix needs; the gateway sends the request to the other engine, whose hit the engine confirms,
 * where the full-attention blocks alone would have chosen the first.
 */
class GatewayHybridTest {
  private static final int BS = 4;
  private static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private MockEngineServer engine() throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .modelDir(GatewayStubTest.tiny())
                .servedModelName("tiny")
                .blockSize(BS)
                .numGpuBlocks(40)
                .maxNumSeqs(1)
                .enablePromptTokensDetails(true)
                .speedup(20)
                .defaultMaxTokens(2)
                .kvGroups(KvCacheGroups.parse("full,sliding:9")) // 2 blocks before the cut
                .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                .build());
    open.add(e);
    return e;
  }

  private static int[] range(int from, int blocks) {
    int[] t = new int[blocks * BS];
    for (int i = 0; i < t.length; i++) t[i] = from + i;
    return t;
  }

  private static int[] concat(int[]... parts) {
    int n = 0;
    for (int[] p : parts) n += p.length;
    int[] out = new int[n];
    int at = 0;
    for (int[] p : parts) {
      System.arraycopy(p, 0, out, at, p.length);
      at += p.length;
    }
    return out;
  }

  private static HttpResponse<String> complete(String base, int[] prompt) throws Exception {
    HttpRequest r =
        HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
            .header("Content-Type", "application/json")
            .POST(
                HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"tiny\",\"max_tokens\":2,\"prompt\":"
                        + Arrays.toString(prompt).replace(" ", "")
                        + "}"))
            .build();
    HttpResponse<String> res = HTTP.send(r, HttpResponse.BodyHandlers.ofString());
    assertThat(res.statusCode()).as(res.body()).isEqualTo(200);
    return res;
  }

  private static long cachedTokens(HttpResponse<String> r) {
    String b = r.body();
    int i = b.indexOf("\"cached_tokens\":");
    if (i < 0) return 0;
    i += "\"cached_tokens\":".length();
    int j = i;
    while (Character.isDigit(b.charAt(j))) j++;
    return Long.parseLong(b.substring(i, j));
  }

  private static void await(String what, BooleanSupplier cond) {
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) throw new AssertionError("timed out waiting for " + what);
      Thread.onSpinWait();
    }
  }

  @Test
  void aSlidingWindowEvictionSendsTheRequestWhereTheEngineCanReuseIt() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).build());
    open.add(g);
    MockEngineServer a = engine();
    MockEngineServer b = engine();
    RouterModel m = null;
    long id = 1;
    for (MockEngineServer e : List.of(a, b)) {
      m =
          g.host.register(
              Registration.of("tiny", BS, id++, 0, e.url())
                  .withEvents(e.zmqEndpoint(), e.replayEndpoint()));
    }
    RouterModel model = m;
    Worker wa = new Worker(1, 0);
    Worker wb = new Worker(2, 0);

    int[] shared = range(1000, 6); // a prefix both engines see
    int[] x = range(2000, 10);
    // engine A: shared + x; its window frees the blocks before the last two after the prefill,
    // and an unrelated prompt then takes exactly those pages: A's full-attention group keeps all
    // 16 blocks, its window only x's last two
    complete(a.url(), concat(shared, x, new int[] {7}));
    complete(a.url(), concat(range(5000, 11), new int[] {7}));
    // engine B: shared alone; nothing evicted
    complete(b.url(), concat(shared, new int[] {7}));

    int[] prompt = concat(shared, Arrays.copyOf(x, 2 * BS), range(9000, 2), new int[] {7});
    long[] local = BlockHasher.of(BS).localHashes(prompt);
    await(
        "both engines' events in the index",
        () ->
            model.router().index().findMatches(local, false).scores().equals(Map.of(wa, 8, wb, 6))
                && model.router().kvCacheGroups().positions(1, wa).length == 2 + 11
                && model.router().kvCacheGroups().positions(1, wb).length == 6);
    // full attention alone would choose A (8 blocks against 6); the engines' rule gives A nothing
    assertThat(model.router().overlaps(prompt, RouteOptions.defaults()).scores())
        .isEqualTo(Map.of(wb, 6));

    HttpResponse<String> r = complete(g.url(), prompt);
    assertThat(r.headers().firstValue("x-kvrouter-worker")).hasValue("2");
    assertThat(r.headers().firstValue("x-kvrouter-overlap-tokens")).hasValue("24");
    assertThat(cachedTokens(r)).as("B's hit, as the engine reports it").isEqualTo(24);
    assertThat(model.accuracy(wb).exact()).isEqualTo(1);
  }
}
