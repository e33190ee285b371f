package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.json;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code serve --peer}: a second server in the same JVM loads the first one's {@code GET /dump}
 * before it serves and then answers every {@code /query} as the first one does; while loading it is
 * not ready (503 with the reason) and serves no queries; a peer it cannot use stops the start with
 * a message naming the peer.
 */
class PeerWarmStartTest {
  private static final Duration WAIT = Duration.ofSeconds(10);

  private static KvRouterServer.Config.Builder config() {
    return KvRouterServer.Config.builder().zmqConnectTimeout(Duration.ZERO);
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  /** Two indexes with a seeded history of stores and removals; returns the prompts used. */
  private static List<int[]> populate(HttpFixture a, Random rnd) {
    String[][] models = {{"m1", "default", "4"}, {"m2", "g", "8"}};
    for (String[] m : models) {
      for (int id = 1; id <= 3; id++) {
        String body =
            "{\"instance_id\":"
                + id
                + ",\"model_name\":\""
                + m[0]
                + "\",\"routing_group\":\""
                + m[1]
                + "\",\"block_size\":"
                + m[2]
                + ",\"kv_blocks\":"
                + (100 * id)
                + (id == 3 ? ",\"endpoint\":\"tcp://127.0.0.1:" + (40_000 + id) + "\"" : "")
                + "}";
        assertThat(a.post("/register", body).status()).isEqualTo(201);
      }
    }
    List<int[]> prompts = new ArrayList<>();
    for (int p = 0; p < 10; p++) {
      int[] t = new int[16 + rnd.nextInt(40)];
      for (int i = 0; i < t.length; i++) t[i] = i < 16 ? (p % 3) * 1000 + i : rnd.nextInt(50_000);
      prompts.add(t);
    }
    for (String[] m : models) {
      BlockHasher hasher = BlockHasher.of(Integer.parseInt(m[2]));
      List<RouterEvent> events = new ArrayList<>();
      for (int k = 0; k < 60; k++) {
        Worker w = new Worker(1 + rnd.nextInt(3), 0);
        long[] local = hasher.localHashes(prompts.get(rnd.nextInt(prompts.size())));
        long[] seq = SequenceHasher.sequenceHashes(local);
        if (rnd.nextInt(5) > 0) {
          events.add(new RouterEvent(w, k, CacheEvent.storedAtRoot(seq, local)));
        } else {
          int from = rnd.nextInt(seq.length);
          events.add(new RouterEvent(w, k, CacheEvent.removed(seq[from])));
        }
      }
      HttpFixture.Reply r =
          a.post(
              "/events?model_name=" + m[0] + "&routing_group=" + m[1],
              RouterEventJson.writeEvents(events));
      assertThat(r.status()).as(r.body()).isEqualTo(200);
    }
    return prompts;
  }

  /**
   * The scores and blocks of a /query answer; tree_sizes may differ after a replay (blocks behind a
   * removed one are not dumped, and never counted for scores).
   */
  private static String query(HttpFixture f, String model, String group, int[] tokens) {
    HttpFixture.Reply r =
        f.post(
            "/query",
            "{\"model_name\":\""
                + model
                + "\",\"routing_group\":\""
                + group
                + "\",\"token_ids\":"
                + json(tokens)
                + "}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    return r.body().replaceAll(",\"tree_sizes\":\\{[^a-z]*\\}\\},", ",");
  }

  @Test
  void aServerStartedWithAPeerAnswersEveryQueryAsThePeer() {
    long seed = new Random().nextLong();
    try (HttpFixture a = new HttpFixture(config())) {
      List<int[]> prompts = populate(a, new Random(seed));
      try (HttpFixture b = new HttpFixture(config().peer(a.url + "/"))) {
        // registrations (endpoints and capacities included) came along
        String workersA = a.get("/workers").body();
        assertThat(b.get("/workers").body())
            .isEqualTo(workersA)
            .contains("\"capacity_blocks\":300", "\"endpoint\":\"tcp://127.0.0.1:40003\"");
        int nonEmpty = 0;
        for (int[] p : prompts) {
          for (String[] m : new String[][] {{"m1", "default"}, {"m2", "g"}}) {
            String qa = query(a, m[0], m[1], p);
            assertThat(query(b, m[0], m[1], p)).as("seed " + seed).isEqualTo(qa);
            if (!qa.startsWith("{\"scores\":{}")) nonEmpty++;
          }
        }
        assertThat(nonEmpty).as("prompts that score on the peer, seed " + seed).isPositive();
        // the listener of worker 3 has no engine: readiness waits for it within the grace period
        assertThat(b.get("/ready").body()).contains("\"listeners\":2,");
        // what the warm start reports having loaded: the peer's models, ranks and blocks
        // (the dump holds one stored event of one block per (rank, block) pair it carries)
        String dump = a.get("/dump").body();
        long dumpedBlocks = occurrences(dump, "\"block_hash\"");
        assertThat(dumpedBlocks).as("seed " + seed).isPositive();
        KvRouterServer.WarmStart w = b.server.warmStart();
        assertThat(w.models()).isEqualTo(2);
        assertThat(w.indexes()).isEqualTo(2);
        assertThat(w.workers()).isEqualTo(6);
        assertThat(w.events()).as("seed " + seed).isEqualTo(occurrences(dump, "\"stored\""));
        assertThat(w.blocks()).as("seed " + seed).isEqualTo(dumpedBlocks);
        assertThat(a.server.warmStart()).as("a server started without a peer").isNull();
      }
    }
  }

  private static long occurrences(String text, String fragment) {
    long n = 0;
    for (int i = text.indexOf(fragment); i >= 0; i = text.indexOf(fragment, i + 1)) n++;
    return n;
  }

  @Test
  @SuppressWarnings("try") // the started server is held only to be closed at the end
  void whileThePeerIsLoadedTheServerIsNotReadyAndServesNoQueries() throws Exception {
    try (HttpFixture a = new HttpFixture()) {
      a.register(1, 0, "m", 4);
      a.events("m", HttpFixture.list(stored(new Worker(1, 0), 0, range(0, 16), 4)));
      String dump = a.get("/dump").body();
      CountDownLatch release = new CountDownLatch(1);
      HttpServer slowPeer = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
      slowPeer.createContext(
          "/dump",
          ex -> {
            try {
              release.await(WAIT.toSeconds(), TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            byte[] body = dump.getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream out = ex.getResponseBody()) {
              out.write(body);
            }
          });
      slowPeer.start();
      String peer = "http://127.0.0.1:" + slowPeer.getAddress().getPort();
      int port = freePort();
      ExecutorService starter = Executors.newSingleThreadExecutor();
      try {
        Future<KvRouterServer> b =
            starter.submit(
                () ->
                    KvRouterServer.start(
                        KvRouterServer.Config.builder()
                            .host("127.0.0.1")
                            .port(port)
                            .peer(peer)
                            .build()));
        HttpFixture.Reply ready = awaitAnswer("http://127.0.0.1:" + port + "/ready");
        assertThat(ready.status()).isEqualTo(503);
        assertThat(ready.body())
            .contains(
                "\"ready\":false,", "\"reason\":\"warm start from " + peer + " in progress\"");
        HttpFixture.Reply q = post(port, "/query", "{\"model_name\":\"m\",\"token_ids\":[1]}");
        assertThat(q.status()).isEqualTo(503);
        assertThat(q.body()).contains("the server is not serving yet: warm start from " + peer);
        assertThat(get(port, "/health").status()).isEqualTo(200);

        release.countDown();
        try (KvRouterServer started = b.get(WAIT.toSeconds(), TimeUnit.SECONDS)) {
          assertThat(get(port, "/ready").status()).isEqualTo(200);
          assertThat(
                  post(
                          port,
                          "/query",
                          "{\"model_name\":\"m\",\"token_ids\":" + json(range(0, 16)) + "}")
                      .body())
              .startsWith("{\"scores\":{\"1\":{\"0\":16}}");
        }
      } finally {
        release.countDown();
        starter.shutdownNow();
        slowPeer.stop(0);
      }
    }
  }

  @Test
  void aPeerThatCannotBeUsedStopsTheStartWithAMessage() throws IOException {
    int nobody = freePort();
    int port = freePort();
    KvRouterServer.Config unreachable =
        KvRouterServer.Config.builder()
            .host("127.0.0.1")
            .port(port)
            .peer("http://127.0.0.1:" + nobody)
            .build();
    assertThatThrownBy(() -> KvRouterServer.start(unreachable))
        .isInstanceOf(KvRouterServer.StartException.class)
        .hasMessageStartingWith(
            "warm start: cannot reach the peer http://127.0.0.1:" + nobody + " (GET /dump)");
    try (ServerSocket again = new ServerSocket(port)) { // the failed server let its port go
      assertThat(again.getLocalPort()).isEqualTo(port);
    }

    HttpServer notADump = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    notADump.createContext(
        "/",
        ex -> {
          byte[] body =
              ex.getRequestURI().getPath().equals("/dump")
                  ? "{\"status\":\"ok\"}".getBytes(StandardCharsets.UTF_8)
                  : new byte[0];
          ex.sendResponseHeaders(body.length == 0 ? 404 : 200, body.length == 0 ? -1 : body.length);
          ex.getResponseBody().write(body);
          ex.close();
        });
    notADump.start();
    try {
      String peer = "http://127.0.0.1:" + notADump.getAddress().getPort();
      assertThatThrownBy(
              () -> KvRouterServer.start(config().host("127.0.0.1").port(0).peer(peer).build()))
          .isInstanceOf(KvRouterServer.StartException.class)
          .hasMessage(
              "warm start: the answer of " + peer + "/dump has no \"indexes\" field: not a dump");
    } finally {
      notADump.stop(0);
    }
    assertThatThrownBy(() -> config().peer("ftp://x").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("peer: 'ftp://x' is not an http://host:port URL");
  }

  private static HttpFixture.Reply awaitAnswer(String url) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (true) {
      try {
        return send(HttpRequest.newBuilder(URI.create(url)).GET());
      } catch (UncheckedIOException e) {
        if (System.nanoTime() > deadline) throw e; // not listening yet
        sleep(10);
      }
    }
  }

  private static HttpFixture.Reply get(int port, String path) {
    return send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).GET());
  }

  private static HttpFixture.Reply post(int port, String path, String body) {
    return send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .POST(HttpRequest.BodyPublishers.ofString(body)));
  }

  private static HttpFixture.Reply send(HttpRequest.Builder b) {
    try {
      HttpResponse<String> r =
          HttpFixture.CLIENT.send(
              b.timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString());
      return new HttpFixture.Reply(r.statusCode(), r.body(), r);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
