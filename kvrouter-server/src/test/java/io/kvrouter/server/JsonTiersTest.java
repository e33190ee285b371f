package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.transport.json.RouterEventJson;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * Dynamo's JSON events with a {@code storage_tier} (docs/ingestion.md) through {@code POST
 * /events}: a {@code host_pinned} store lands on the host tier of the index, as the same copy over
 * ZMQ does (ZmqTiersTest), and a {@code cleared} clears every tier of the rank, as Dynamo's indexer
 * does whatever tier the event names; with {@code maxTierBlocks} (serve {@code --max-tier-blocks})
 * a rank keeps that many host blocks, the least recently stored leaves of its chains dropped (so
 * what is left of a prompt still scores) and counted.
 */
class JsonTiersTest {
  private static final int BS = 4;
  private static final int[] PROMPT = range(1, 16); // 4 blocks
  private static final long[] LOCAL = BlockHasher.of(BS).localHashes(PROMPT);
  private static final long[] SEQ = SequenceHasher.sequenceHashes(LOCAL);
  private static final Worker W = new Worker(7, 0);

  /** One event as Dynamo's JSON, with {@code storage_tier} when {@code tier} is not null. */
  private static String json(String tier, long id, CacheEvent data) {
    String e = RouterEventJson.writeEvent(new RouterEvent(W, id, data));
    return tier == null ? e : "{\"storage_tier\":\"" + tier + "\"," + e.substring(1);
  }

  @Test
  void hostPinnedEventsLandOnTheHostTierAndClearedClearsEveryTier() {
    try (HttpFixture http = new HttpFixture()) {
      assertThat(http.register(7, 0, "m", BS).status()).isEqualTo(201);
      HttpFixture.Reply r =
          http.post(
              "/events?model_name=m",
              "["
                  + json(null, 1, CacheEvent.storedAtRoot(SEQ, LOCAL))
                  + ","
                  + json("host_pinned", 2, CacheEvent.storedAtRoot(SEQ, LOCAL))
                  + ","
                  + json("device", 3, CacheEvent.removed(Arrays.copyOfRange(SEQ, 2, 4)))
                  + "]");
      assertThat(r.status()).as(r.body()).isEqualTo(200);
      assertThat(http.query("m", PROMPT).body())
          .contains(
              "\"tier_blocks\":{\"7\":{\"0\":{\"device\":2,\"host\":2,\"disk\":0,\"external\":0}}}");

      // a tier name Dynamo does not have: 400, nothing applied
      r =
          http.post(
              "/events?model_name=m",
              "[" + json("CPU", 4, CacheEvent.removed(Arrays.copyOfRange(SEQ, 0, 2))) + "]");
      assertThat(r.status()).as(r.body()).isEqualTo(400);
      assertThat(r.body()).contains("storage_tier", "host_pinned", "nothing was applied");

      // host_pinned removals touch the host copies only
      r =
          http.post(
              "/events?model_name=m",
              "["
                  + json("host_pinned", 5, CacheEvent.removed(Arrays.copyOfRange(SEQ, 3, 4)))
                  + "]");
      assertThat(r.status()).as(r.body()).isEqualTo(200);
      assertThat(http.query("m", PROMPT).body())
          .contains(
              "\"tier_blocks\":{\"7\":{\"0\":{\"device\":2,\"host\":1,\"disk\":0,\"external\":0}}}");

      // Dynamo's cleared clears the rank on every tier, whatever storage_tier says
      r =
          http.post(
              "/events?model_name=m", "[" + json("host_pinned", 6, CacheEvent.cleared()) + "]");
      assertThat(r.status()).as(r.body()).isEqualTo(200);
      assertThat(http.query("m", PROMPT).body()).doesNotContain("\"7\"");
    }
  }

  @Test
  void withMaxTierBlocksEachRankKeepsThatManyHostBlocksAndCountsTheRest() {
    int[] other = range(1000, 12); // 3 more blocks
    long[] otherLocal = BlockHasher.of(BS).localHashes(other);
    long[] otherSeq = SequenceHasher.sequenceHashes(otherLocal);
    try (HttpFixture http =
        new HttpFixture(
            KvRouterServer.Config.builder()
                .routing(RoutingSettings.DEFAULTS.withMaxTierBlocks(5)))) {
      assertThat(http.register(7, 0, "m", BS).status()).isEqualTo(201);
      HttpFixture.Reply r =
          http.post(
              "/events?model_name=m",
              "["
                  + json("host_pinned", 1, CacheEvent.storedAtRoot(SEQ, LOCAL))
                  + ","
                  + json("host_pinned", 2, CacheEvent.storedAtRoot(otherSeq, otherLocal))
                  + "]");
      assertThat(r.status()).as(r.body()).isEqualTo(200);
      // 7 host blocks, 5 kept: the prompt's last two (its leaf stored least recently, then its
      // parent) went, so what is left of it is a prefix and still scores
      assertThat(http.query("m", other).body())
          .contains(
              "\"tier_blocks\":{\"7\":{\"0\":{\"device\":0,\"host\":3,\"disk\":0,\"external\":0}}}");
      assertThat(http.query("m", PROMPT).body())
          .contains(
              "\"tier_blocks\":{\"7\":{\"0\":{\"device\":0,\"host\":2,\"disk\":0,\"external\":0}}}");
      String metrics = http.get("/metrics").body();
      String labels = "model_name=\"m\",routing_group=\"default\"";
      assertThat(metrics)
          .contains(
              "kvrouter_tier_blocks{" + labels + ",tier=\"host\"} 5.0",
              "kvrouter_tier_evicted_blocks_total{" + labels + ",tier=\"host\"} 2.0",
              "kvrouter_tier_evicted_blocks_total{" + labels + ",tier=\"disk\"} 0.0");
    }
  }
}
