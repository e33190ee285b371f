package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvrouter.server.KvRouterServer;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * A mock engine's KV events, consumed through a real {@code kvrouter serve} (KvRouterServer,
 * registered with the engine's ZMQ endpoints as a vLLM engine is): after a seeded mix of requests,
 * client aborts, evictions, a prefix-cache reset and a restart of the engine on the same ports, the
 * router's index holds exactly the engine's cache, block for block.
 */
class MockEngineKvEventsTest {
  private static final int BS = 16;

  @Test
  void theRouterIndexEqualsTheEngineCacheThroughAbortsEvictionsAndARestart() throws Exception {
    long seed = System.nanoTime();
    Random rnd = new Random(seed);
    String tag = "seed=" + seed;
    MockEngineServer.Config config =
        MockEngineServer.Config.builder()
            .blockSize(BS)
            .numGpuBlocks(64)
            .maxNumSeqs(4)
            .speedup(20)
            .decodeMsPerToken(20) // 1 ms per token in real time
            .seed(seed)
            .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*").withTopic("kv"))
            .build();
    try (KvRouterServer router =
        KvRouterServer.start(KvRouterServer.Config.builder().port(0).build())) {
      MockEngineServer engine = MockEngineServer.start(config);
      try {
        MockEngineBehaviourTest.registerOverZmq(router, engine, BS);

        int aborted = mix(engine, rnd, 40);
        EngineHttp.post(engine.url() + "/reset_prefix_cache", "");
        aborted += mix(engine, rnd, 20);
        assertIndexEqualsCache(router, engine, tag + " before the restart");
        MockEngineServer.CacheDump before = engine.cacheDump();
        assertThat(before.evictedBlocks()).as(tag + ": the mix evicted").isPositive();
        assertThat(aborted).as(tag + ": the mix aborted streams").isPositive();

        // the engine process restarts on the same ports: new sequence from 0, new block hashes
        String pub = engine.zmqEndpoint();
        String replay = engine.replayEndpoint();
        engine.close();
        engine =
            MockEngineServer.start(
                config.toBuilder()
                    .seed(seed + 1)
                    .kvEvents(KvEventsConfig.zmq(pub, replay).withTopic("kv"))
                    .build());
        mix(engine, rnd, 15);
        assertIndexEqualsCache(router, engine, tag + " after the restart");
        JsonNode workers = EngineHttp.get(router.url() + "/workers").json();
        assertThat(workers.toString())
            .as(tag + ": the router saw the restart and replayed from the engine's replay socket")
            .containsPattern("\"restarts\":[1-9]")
            .containsPattern("\"replays\":[1-9]");
      } finally {
        engine.close();
      }
    }
  }

  /** Sends {@code n} requests, some in parallel, some streamed and abandoned; returns how many. */
  private static int mix(MockEngineServer engine, Random rnd, int n) throws Exception {
    int[][] prefixes = new int[4][];
    for (int i = 0; i < prefixes.length; i++) {
      prefixes[i] = new int[BS * (2 + rnd.nextInt(6))];
      for (int j = 0; j < prefixes[i].length; j++) prefixes[i][j] = rnd.nextInt(50_000);
    }
    List<String> bodies = new ArrayList<>();
    List<Boolean> abandon = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      int[] p = prefixes[rnd.nextInt(prefixes.length)];
      StringBuilder sb = new StringBuilder("{\"prompt\":[");
      for (int t : p) sb.append(t).append(',');
      int suffix = 1 + rnd.nextInt(BS * 8);
      for (int j = 0; j < suffix; j++)
        sb.append(rnd.nextInt(50_000)).append(j + 1 < suffix ? "," : "");
      boolean drop = rnd.nextInt(5) == 0;
      sb.append("],\"max_tokens\":").append(drop ? 300 : 1 + rnd.nextInt(8));
      sb.append(",\"stream\":").append(drop || rnd.nextBoolean()).append('}');
      bodies.add(sb.toString());
      abandon.add(drop);
    }
    int dropped = 0;
    try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
      List<Future<?>> batch = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        String body = bodies.get(i);
        if (abandon.get(i)) {
          dropped++;
          batch.add(
              pool.submit(
                  () -> {
                    try (InputStream in = EngineHttp.open(engine.url() + "/v1/completions", body)) {
                      EngineHttp.firstData(in); // then hang up
                    }
                    return null;
                  }));
        } else {
          batch.add(
              pool.submit(
                  () -> {
                    EngineHttp.Reply r = EngineHttp.post(engine.url() + "/v1/completions", body);
                    if (r.status() != 200) throw new AssertionError(r.body());
                    return null;
                  }));
        }
        if (batch.size() == 3 || i == n - 1) {
          for (Future<?> f : batch) f.get();
          batch.clear();
        }
      }
    }
    // abandoned streams end when the engine's next write fails
    MockEngineBehaviourTest.await(
        () -> {
          MockEngineServer.CacheDump d = engine.cacheDump();
          return d.runningRequests() == 0 && d.waitingRequests() == 0;
        },
        "the engine to go idle");
    long aborts =
        engine.recentRequests().stream().filter(t -> t.finishReason().equals("abort")).count();
    return aborts > 0 ? dropped : 0;
  }

  /**
   * The router's index names a vLLM engine's blocks by the engine's own hashes (recomputing only
   * the local hashes from the token ids), so its dump's block_hash values must be exactly the
   * engine's cached blocks under their wire hashes.
   */
  private static void assertIndexEqualsCache(
      KvRouterServer router, MockEngineServer engine, String what) {
    JsonNode dump = EngineHttp.get(engine.url() + "/mock/cache").json();
    TreeSet<String> expected = new TreeSet<>();
    dump.get("engine_block_hashes").forEach(h -> expected.add(h.textValue()));
    long lastSeq = dump.get("last_event_seq").longValue();
    // the router has applied everything once its rank's last sequence is the engine's
    MockEngineBehaviourTest.await(
        () ->
            EngineHttp.get(router.url() + "/workers")
                .body()
                .contains("\"last_sequence\":" + lastSeq + ","),
        "the router to reach sequence " + lastSeq + " (" + what + ")");
    TreeSet<String> indexed = routerBlocks(router);
    assertThat(indexed).as(what).isEqualTo(expected);
    assertThat(expected).as(what + ": a non-trivial cache").hasSizeGreaterThan(4);
  }

  private static TreeSet<String> routerBlocks(KvRouterServer router) {
    JsonNode dump = EngineHttp.get(router.url() + "/dump").json();
    TreeSet<String> out = new TreeSet<>();
    for (JsonNode index : dump.get("indexes")) {
      for (JsonNode e : index.get("events")) {
        if (e.get("worker_id").asLong() != 1) continue;
        JsonNode stored = e.at("/event/data/stored");
        if (stored.isMissingNode()) continue;
        for (JsonNode b : stored.get("blocks")) out.add(b.get("block_hash").asText());
      }
    }
    return out;
  }
}
