package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvrouter.server.KvRouterServer;
import org.junit.jupiter.api.Test;

/**
 * {@code mock-engine --host-blocks}: a mock engine with a device cache of 16 blocks and a host tier
 * of 16, its KV events over real ZMQ to a real {@code kvrouter serve}. Three prompts of 8 blocks
 * push the first off the device; the router then holds its 8 blocks on the host tier (the engine's
 * CPU events are self-describing and chain under the GPU events' hashes), and the first prompt
 * again is loaded from the host: cached_tokens counts the loaded blocks and the engine's model
 * prefill time is the timing model's for the rest plus the transfer, below the cold prefill.
 */
class MockEngineHostTierTest {
  private static final int BS = 16;

  private static int[] prompt(int base) {
    int[] p = new int[8 * BS];
    for (int i = 0; i < p.length; i++) p[i] = base + i;
    return p;
  }

  @Test
  void evictedBlocksGoToTheHostTierAndAreLoadedBackInsteadOfRecomputed() {
    MockEngineServer.Config config =
        MockEngineServer.Config.builder()
            .blockSize(BS)
            .numGpuBlocks(16)
            .maxNumSeqs(1)
            .prefillBaseMs(5)
            .prefillMsPer1kTokens(50)
            .decodeMsPerToken(1)
            .hostBlocks(16)
            .hostMsPerBlock(0.1)
            .enablePromptTokensDetails(true)
            .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*").withTopic("kv"))
            .build();
    try (KvRouterServer router =
            KvRouterServer.start(KvRouterServer.Config.builder().port(0).build());
        MockEngineServer engine = MockEngineServer.start(config)) {
      MockEngineBehaviourTest.registerOverZmq(router, engine, BS);

      int[] p = prompt(1000);
      assertThat(complete(engine, p)).as("no prompt_tokens_details without a hit").isEqualTo(-1);
      complete(engine, prompt(5000));
      complete(engine, prompt(9000)); // the device is full: p's 8 blocks go to the host
      assertThat(engine.cacheDump().evictedBlocks()).isEqualTo(8);

      awaitRouterSynced(router, engine);
      JsonNode q = query(router, p);
      assertThat(q.at("/tier_blocks/1/0").toString())
          .as(q.toString())
          .isEqualTo("{\"device\":0,\"host\":8,\"disk\":0,\"external\":0}");

      // again: the device misses, the host holds all 8; vLLM computes the last token, so 7 load
      assertThat(complete(engine, p)).isEqualTo(7 * BS);
      MockEngineServer.RequestTiming cold = engine.recentRequests().get(0);
      MockEngineServer.RequestTiming warm = engine.recentRequests().get(3);
      assertThat(cold.cachedTokens()).isZero();
      assertThat(cold.modelPrefillNanos()).isEqualTo(11_400_000L); // 5 ms + 128 × 0.05 ms
      assertThat(warm.cachedTokens()).isEqualTo(7 * BS);
      assertThat(warm.hostTokens()).isEqualTo(7 * BS);
      // 5 ms + 16 × 0.05 ms computed, 7 × 0.1 ms loaded
      assertThat(warm.modelPrefillNanos())
          .isEqualTo(6_500_000L)
          .isLessThan(cold.modelPrefillNanos());
      assertThat(EngineHttp.get(engine.url() + "/metrics").body())
          .contains("mock:kv_host_loaded_blocks_total{model_name=\"mock\",engine=\"0\"} 7.0");

      // p is back on the device; the host keeps its copies (write-through)
      awaitRouterSynced(router, engine);
      q = query(router, p);
      assertThat(q.at("/tier_blocks/1/0/device").asInt()).as(q.toString()).isEqualTo(8);

      // host LRU: the repeat's admission offloaded q's blocks (host: p, q; p touched by its hit),
      // a new prompt evicts r from the device, and the full host evicts q for it: CPU
      // BlockRemoved under the hashes its CPU BlockStored used
      int[] qp = prompt(5000);
      complete(engine, prompt(13000));
      awaitRouterSynced(router, engine);
      q = query(router, prompt(9000));
      assertThat(q.at("/tier_blocks/1/0").toString())
          .as(q.toString())
          .isEqualTo("{\"device\":0,\"host\":8,\"disk\":0,\"external\":0}");
      q = query(router, qp);
      assertThat(q.at("/tier_blocks/1/0/host").asInt(0)).as(q.toString()).isZero();
      assertThat(q.at("/tier_blocks/1/0/device").asInt(0)).as(q.toString()).isZero();
    }
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

  private static JsonNode query(KvRouterServer router, int[] tokens) {
    EngineHttp.Reply r =
        EngineHttp.post(
            router.url() + "/query",
            "{\"model_name\":\"mock\",\"token_ids\":" + EngineHttp.JSON.valueToTree(tokens) + "}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    return r.json();
  }

  /** Waits until the router has applied every batch the engine has published. */
  private static void awaitRouterSynced(KvRouterServer router, MockEngineServer engine) {
    long lastSeq = engine.cacheDump().lastEventSeq();
    MockEngineBehaviourTest.await(
        () ->
            EngineHttp.get(router.url() + "/workers")
                .body()
                .contains("\"last_sequence\":" + lastSeq + ","),
        "the router to reach sequence " + lastSeq);
  }
}
