package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.server.KvRouterServer;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The mock engine serving a hybrid model ({@code --kv-groups}, docs/mock-engine.md "Hybrid
 * models"): its per-group KV events, read over ZMQ by a real {@code kvrouter serve}, let the router
 * predict every hit the engine then reports in {@code cached_tokens} (events as positional arrays
 * and as tagged maps), while the main group alone (what {@code /query} shows) over-predicts once
 * the sliding window evicted blocks the full-attention group keeps.
 */
class MockEngineHybridTest {
  private static final int BS = 16;

  @ParameterizedTest
  @EnumSource(MockEngineServer.EventEncoding.class)
  void theRoutersPredictionIsTheHitTheEngineReports(MockEngineServer.EventEncoding encoding) {
    MockEngineServer.Config config =
        MockEngineServer.Config.builder()
            .blockSize(BS)
            .numGpuBlocks(40)
            .maxNumSeqs(1)
            .prefillBaseMs(1)
            .prefillMsPer1kTokens(1)
            .decodeMsPerToken(1)
            .enablePromptTokensDetails(true)
            .kvGroups(KvCacheGroups.parse("full,sliding:33")) // 2 blocks before the cut
            .eventEncoding(encoding)
            .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*").withTopic("kv"))
            .build();
    Random rnd = new Random(5);
    int[][] prefixes = new int[3][];
    for (int i = 0; i < prefixes.length; i++) {
      prefixes[i] = new int[BS * (3 + i * 2)];
      for (int j = 0; j < prefixes[i].length; j++) prefixes[i][j] = 1 + rnd.nextInt(40_000);
    }
    int overPredictedByMain = 0;
    int hits = 0;
    try (KvRouterServer router =
            KvRouterServer.start(KvRouterServer.Config.builder().port(0).build());
        MockEngineServer engine = MockEngineServer.start(config)) {
      MockEngineBehaviourTest.registerOverZmq(router, engine, BS);
      for (int step = 0; step < 40; step++) {
        int[] base = prefixes[rnd.nextInt(prefixes.length)];
        int extra = rnd.nextInt(3 * BS);
        int[] prompt = new int[base.length + extra];
        System.arraycopy(base, 0, prompt, 0, base.length);
        for (int j = base.length; j < prompt.length; j++) prompt[j] = 40_001 + rnd.nextInt(9000);

        awaitRouterSynced(router, engine);
        int predicted = route(router, prompt, step);
        int mainOnly = query(router, prompt).at("/scores/1/0").asInt(0) / BS;
        int cached = Math.max(0, complete(engine, prompt)) / BS;
        assertThat(predicted)
            .as("step %d: the router's prediction is the engine's hit", step)
            .isEqualTo(cached);
        if (mainOnly > cached) overPredictedByMain++;
        if (cached > 0) hits++;
      }
      assertThat(hits).as("prompts that hit").isPositive();
      assertThat(engine.cacheDump().evictedBlocks()).as("the pool evicted").isPositive();
    }
    assertThat(overPredictedByMain)
        .as("steps where the main group alone over-predicts")
        .isPositive();
  }

  /** /route's overlap for {@code prompt} (one more token than the engine sees is not needed). */
  private static int route(KvRouterServer router, int[] prompt, int step) {
    EngineHttp.Reply r =
        EngineHttp.post(
            router.url() + "/route",
            "{\"model_name\":\"mock\",\"request_id\":\"s"
                + step
                + "\",\"token_ids\":"
                + EngineHttp.JSON.valueToTree(prompt)
                + "}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    int blocks = r.json().at("/overlap_blocks").asInt(-1);
    assertThat(blocks).as(r.body()).isGreaterThanOrEqualTo(0);
    EngineHttp.post(router.url() + "/requests/s" + step + "/free?model_name=mock", "");
    return blocks;
  }

  private static JsonNode query(KvRouterServer router, int[] tokens) {
    EngineHttp.Reply r =
        EngineHttp.post(
            router.url() + "/query",
            "{\"model_name\":\"mock\",\"token_ids\":" + EngineHttp.JSON.valueToTree(tokens) + "}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    return r.json();
  }

  /** Completes {@code prompt} with one output token; returns usage's cached_tokens, -1: absent. */
  private static int complete(MockEngineServer engine, int[] prompt) {
    EngineHttp.Reply r =
        EngineHttp.post(
            engine.url() + "/v1/completions",
            "{\"prompt\":" + EngineHttp.JSON.valueToTree(prompt) + ",\"max_tokens\":1}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    return r.json().at("/usage/prompt_tokens_details/cached_tokens").asInt(-1);
  }

  private static void awaitRouterSynced(KvRouterServer router, MockEngineServer engine) {
    long lastSeq = engine.cacheDump().lastEventSeq();
    if (lastSeq < 0) return;
    MockEngineBehaviourTest.await(
        () ->
            EngineHttp.get(router.url() + "/workers")
                .body()
                .contains("\"last_sequence\":" + lastSeq + ","),
        "the router to reach sequence " + lastSeq);
  }
}
