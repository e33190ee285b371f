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
import org.junit.jupiter.api.Test;

/**
 * A hybrid model over ZMQ (docs/routing.md, "Hybrid models"): an engine publishes a full-attention
 * group and a sliding-window group, as vLLM does; {@code /route} scores the rank by the prefix both
 * groups serve, so a sliding-window eviction lowers its overlap while the full-attention blocks
 * stay.
 */
class ZmqHybridTest {
  private static final int BS = 4;
  private static final Duration WAIT = Duration.ofSeconds(10);
  private static final VllmEncoder ENCODER = VllmEncoder.arrayLike();
  private static final int[] PROMPT = range(1, 16); // 4 blocks
  private static final long[] ENGINE_HASHES = {901, 902, 903, 904}; // opaque, as vLLM's sha256

  private static EngineEvent stored(int group, String kind, Integer window) {
    return new EngineEvent.BlockStored(
        ENGINE_HASHES, false, 0L, PROMPT, BS, null, "GPU", null, null, group, kind, window, null);
  }

  private static byte[] batch(EngineEvent... events) {
    return ENCODER.encode(new KvEventBatch(1.7e9, 0, List.of(events), 0));
  }

  @Test
  void aSlidingWindowEvictionLowersTheRoutedOverlap() {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher pub = FakeVllmPublisher.bound("kv-events")) {
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
      // a window of 5 tokens needs the one block before the cut
      pub.publish(batch(stored(0, "full_attention", null), stored(1, "sliding_window", 5)));
      assertThat(awaitOverlap(http, 4)).isEqualTo(4);
      // the window group evicted blocks 2 and 3; the full-attention group keeps all four
      pub.publish(
          batch(
              new EngineEvent.BlockRemoved(
                  Arrays.copyOfRange(ENGINE_HASHES, 2, 4), "GPU", 1, null)));
      assertThat(awaitOverlap(http, 2)).isEqualTo(2);
      // /query reports the index: the full-attention group still holds 16 tokens
      assertThat(http.query("m", PROMPT).body()).contains("\"scores\":{\"7\":{\"0\":16}}");
    }
  }

  private int routes;

  /** Routes the prompt (plus one token) until the overlap is {@code want} or the wait ends. */
  private int awaitOverlap(HttpFixture http, int want) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    int got;
    do {
      HttpFixture.Reply r =
          http.post(
              "/route",
              "{\"model_name\":\"m\",\"request_id\":\"r"
                  + routes++
                  + "\",\"token_ids\":"
                  + HttpFixture.json(range(1, 17))
                  + "}");
      assertThat(r.status()).as(r.body()).isEqualTo(200);
      String b = r.body();
      int at = b.indexOf("\"overlap_blocks\":") + "\"overlap_blocks\":".length();
      got = Integer.parseInt(b.substring(at, b.indexOf(',', at)));
      if (got == want) return got;
      FakeVllmPublisher.sleep(20);
    } while (System.nanoTime() < deadline);
    return got;
  }

  static {
    // the engine's hashes are opaque; the router indexes positions by its own hashes
    assertThat(SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(PROMPT)))
        .doesNotContain(ENGINE_HASHES);
  }
}
