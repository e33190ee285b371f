package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.kvevents.EngineEvent;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.VllmEncoder;
import io.kvrouter.transport.zmq.FakeVllmPublisher;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Offloaded copies over ZMQ (docs/routing.md, "Blocks beyond the GPU"): a vLLM-like engine
 * publishes device and CPU events (the OffloadingConnector's self-describing form) in its batches;
 * {@code /query} reports the blocks per tier, {@code AllBlocksCleared} clears the device and keeps
 * the host copies, {@code /route} prefers the host copy over nothing and reports its tiers, and
 * {@code /metrics} counts blocks per tier.
 */
class ZmqTiersTest {
  private static final int BS = 4;
  private static final Duration WAIT = Duration.ofSeconds(10);
  private static final VllmEncoder ENCODER = VllmEncoder.arrayLike();
  private static final int[] PROMPT = range(1, 16); // 4 blocks
  private static final long[] SEQ =
      SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(PROMPT));

  private static EngineEvent stored(String medium) {
    return new EngineEvent.BlockStored(
        SEQ, false, 0L, PROMPT, BS, null, medium, null, null, null, null, null);
  }

  private static byte[] batch(EngineEvent... events) {
    return ENCODER.encode(new KvEventBatch(1.7e9, 0, List.of(events), 0));
  }

  private static HttpFixture.Reply await(
      Supplier<HttpFixture.Reply> call, Predicate<String> until) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    HttpFixture.Reply r = call.get();
    while (!until.test(r.body())) {
      if (System.nanoTime() > deadline) throw new AssertionError("still " + r + " after " + WAIT);
      FakeVllmPublisher.sleep(20);
      r = call.get();
    }
    return r;
  }

  @Test
  void hostCopiesAreIndexedScoredRoutedAndCounted() {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher pub = FakeVllmPublisher.bound("kv-events")) {
      assertThat(http.register(1, 0, "m", BS).status()).isEqualTo(201); // caches nothing
      HttpFixture.Reply reg =
          http.post(
              "/register",
              "{\"instance_id\":7,\"dp_rank\":0,\"model_name\":\"m\",\"block_size\":"
                  + BS
                  + ",\"endpoint\":\""
                  + pub.pubEndpoint()
                  + "\",\"replay_endpoint\":\""
                  + pub.replayEndpoint()
                  + "\",\"topic\":\"kv-events\"}");
      assertThat(reg.status()).as(reg.body()).isEqualTo(201);
      pub.awaitSubscriptions(1, WAIT);

      // device store, its CPU offload, then the device evicts the last two blocks
      pub.publish(
          batch(
              stored("GPU"),
              stored("CPU"),
              new EngineEvent.BlockRemoved(Arrays.copyOfRange(SEQ, 2, 4), "GPU", null, null)));
      // the batch's events land one by one: wait for the last (the device removal)
      HttpFixture.Reply q =
          await(() -> http.query("m", PROMPT), b -> b.contains("\"scores\":{\"7\":{\"0\":8}}"));
      assertThat(q.body())
          .startsWith("{\"scores\":{\"7\":{\"0\":8}}")
          .contains(
              "\"tier_blocks\":{\"7\":{\"0\":{\"device\":2,\"host\":2,\"disk\":0,\"external\":0}}}");

      // vLLM's AllBlocksCleared clears the device; the CPU copies keep serving
      pub.publish(batch(new EngineEvent.AllBlocksCleared()));
      q = await(() -> http.query("m", PROMPT), b -> !b.contains("\"scores\":{\"7\""));
      assertThat(q.body())
          .contains(
              "\"tier_blocks\":{\"7\":{\"0\":{\"device\":0,\"host\":4,\"disk\":0,\"external\":0}}}");

      HttpFixture.Reply r =
          http.post(
              "/route",
              "{\"model_name\":\"m\",\"request_id\":\"r1\",\"token_ids\":"
                  + HttpFixture.json(range(1, 17))
                  + "}");
      assertThat(r.status()).as(r.body()).isEqualTo(200);
      // 4 host blocks at 0.75 credit 3 of a recompute: rank 7 beats rank 1, which caches nothing
      assertThat(r.body())
          .contains(
              "\"instance_id\":7,\"dp_rank\":0,\"overlap_blocks\":0,\"overlap_tokens\":0,",
              "\"tier_blocks\":{\"device\":0,\"host\":4,\"disk\":0,\"external\":0},"
                  + "\"weighted_blocks\":3.0");

      String tier = "kvrouter_tier_blocks{model_name=\"m\",routing_group=\"default\",tier=";
      assertThat(http.get("/metrics").body())
          .contains(tier + "\"device\"} 0.0", tier + "\"host\"} 4.0", tier + "\"disk\"} 0.0");
    }
  }
}
