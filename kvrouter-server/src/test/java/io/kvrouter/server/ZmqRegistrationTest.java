package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.kvevents.EngineEvent;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.VllmEncoder;
import io.kvrouter.transport.zmq.FakeVllmPublisher;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * {@code POST /register} with an {@code endpoint}: a vLLM-like publisher (real jeromq PUB and
 * ROUTER replay sockets, vLLM's framing and msgpack) registered over HTTP feeds the index, its
 * counters show in {@code /workers} and {@code /metrics}, unregistering stops it, bad endpoints are
 * refused, and {@code /ready} waits for first connections.
 */
class ZmqRegistrationTest {
  private static final int BS = 4;
  private static final Duration WAIT = Duration.ofSeconds(10);
  private static final VllmEncoder ENCODER = VllmEncoder.arrayLike();

  /** A vLLM batch of rank {@code rank} storing the full blocks of {@code tokens} from the root. */
  private static byte[] storedBatch(int[] tokens, int rank) {
    long[] seq = SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(tokens));
    EngineEvent e = EngineEvent.BlockStored.of(seq, null, tokens, BS);
    return ENCODER.encode(new KvEventBatch(1.7e9, rank, List.of(e), 0));
  }

  private static String registerBody(long id, int rank, FakeVllmPublisher pub, String topic) {
    return "{\"instance_id\":"
        + id
        + ",\"dp_rank\":"
        + rank
        + ",\"model_name\":\"m\",\"block_size\":"
        + BS
        + ",\"endpoint\":\""
        + pub.pubEndpoint()
        + "\",\"replay_endpoint\":\""
        + pub.replayEndpoint()
        + "\",\"topic\":\""
        + topic
        + "\"}";
  }

  private static HttpFixture.Reply await(
      Supplier<HttpFixture.Reply> call, Predicate<String> until) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    HttpFixture.Reply r = call.get();
    while (!until.test(r.body())) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("still " + r + " after " + WAIT);
      }
      FakeVllmPublisher.sleep(20);
      r = call.get();
    }
    return r;
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  @Test
  void aRegisteredEngineFeedsTheIndexUntilItIsUnregistered() {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher pub = FakeVllmPublisher.bound("kv-events")) {
      assertThat(http.register(1, 0, "m", BS).status()).isEqualTo(201); // keeps the index alive
      HttpFixture.Reply reg = http.post("/register", registerBody(7, 0, pub, "kv-events"));
      assertThat(reg.status()).as(reg.body()).isEqualTo(201);
      assertThat(reg.body()).contains("\"topic\":\"kv-events\"", "\"ingestion\":\"connected\"");
      pub.awaitSubscriptions(1, WAIT);

      pub.publish(storedBatch(range(1, 8), 0));
      HttpFixture.Reply q =
          await(() -> http.query("m", range(1, 10)), b -> b.contains("\"7\":{\"0\":8}"));
      assertThat(q.body()).startsWith("{\"scores\":{\"7\":{\"0\":8}}");

      // a dropped live message is replayed; a malformed payload is counted and skipped
      pub.dropNext(1);
      pub.publish(storedBatch(range(100, 4), 0));
      pub.publish(new byte[] {(byte) 0xc1, 1, 2});
      pub.publish(storedBatch(range(200, 4), 0));
      await(() -> http.query("m", range(200, 4)), b -> b.contains("\"7\":{\"0\":4}"));
      assertThat(http.query("m", range(100, 4)).body()).contains("\"7\":{\"0\":4}");
      HttpFixture.Reply workers =
          await(() -> http.get("/workers"), b -> b.contains("\"last_sequence\":3"));
      assertThat(workers.body())
          .contains(
              "\"ingestion\":\"connected\",\"kv_source\":\"events\",\"kv_capacity_blocks\":0,"
                  + "\"zmq\":{\"state\":\"connected\","
                  + "\"connected_once\":true,\"last_sequence\":3,",
              // the stores and the Cleared that starts a history followed from sequence 0
              "\"batches\":3,\"events_applied\":4,\"decode_errors\":1,",
              "\"gaps\":1,\"lost_messages\":0,")
          .containsPattern("\"replays\":[1-9]")
          // messages came: the staleness is a number of seconds, not null
          .containsPattern("\"seconds_since_last_message\":[0-9]");

      String labels = "{dp_rank=\"0\",instance_id=\"7\",model_name=\"m\",routing_group=\"default\"";
      String metrics = http.get("/metrics").body();
      assertThat(metrics)
          .contains(
              "kvrouter_zmq_batches_total" + labels + "} 3.0",
              "kvrouter_zmq_decode_errors_total" + labels + "} 1.0",
              "kvrouter_zmq_gaps_total" + labels + "} 1.0",
              "kvrouter_zmq_lost_messages_total" + labels + "} 0.0",
              "kvrouter_zmq_bad_frames_total" + labels + "} 0.0",
              "kvrouter_zmq_restarts_total" + labels + "} 0.0",
              "kvrouter_zmq_replay_failures_total" + labels + "} 0.0",
              "kvrouter_zmq_connection_events_total"
                  + "{dp_rank=\"0\",event=\"connected\",instance_id=\"7\"",
              "kvrouter_zmq_last_sequence" + labels + "} 3.0",
              "kvrouter_events_received_total{source=\"zmq\"} 4.0") // with the Cleared
          .containsPattern("kvrouter_zmq_replays_total\\Q" + labels + "}\\E [1-9]")
          .containsPattern("kvrouter_zmq_tail_probes_total\\Q" + labels + "}\\E [0-9]")
          .containsPattern("kvrouter_zmq_tail_recovered_messages_total\\Q" + labels + "}\\E [0-9]")
          .containsPattern("kvrouter_zmq_seconds_since_last_message\\Q" + labels + "}\\E [0-9]");

      HttpFixture.Reply un =
          http.post("/unregister", "{\"instance_id\":7,\"model_name\":\"m\",\"dp_rank\":0}");
      assertThat(un.status()).isEqualTo(200);
      assertThat(http.query("m", range(1, 8)).body()).doesNotContain("\"7\"");
      pub.publish(storedBatch(range(300, 8), 0));
      FakeVllmPublisher.sleep(300);
      assertThat(http.query("m", range(300, 8)).body()).doesNotContain("\"7\"");
      assertThat(http.get("/workers").body()).doesNotContain("\"instance_id\":7");
      // the stopped listener's counters are kept and did not move: it received nothing more
      assertThat(http.get("/metrics").body())
          .contains(
              "kvrouter_zmq_messages_total" + labels + "} 3.0", // the dropped one never came live
              "kvrouter_zmq_batches_total" + labels + "} 3.0");
    }
  }

  @Test
  void eventsOfAnotherRankThanTheRegisteredOneAreDroppedAndCounted() {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher pub = FakeVllmPublisher.bound("")) {
      HttpFixture.Reply reg = http.post("/register", registerBody(5, 0, pub, ""));
      assertThat(reg.status()).as(reg.body()).isEqualTo(201);
      pub.awaitSubscriptions(1, WAIT);
      pub.publish(storedBatch(range(1, 4), 1)); // the batch says data_parallel_rank 1
      pub.publish(storedBatch(range(50, 4), 0));
      await(() -> http.query("m", range(50, 4)), b -> b.contains("\"5\":{\"0\":4}"));
      assertThat(http.query("m", range(1, 4)).body()).doesNotContain("\"5\"");
      // rank 1's store, and the Cleared for rank 1 that starts the history followed from 0
      assertThat(http.get("/workers").body()).contains("\"dropped_foreign_rank\":2");
    }
  }

  @Test
  void engineBlocksTwiceTheIndexBlockSizeAreSplitIntoIndexBlocks() {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher pub = FakeVllmPublisher.bound("")) {
      String body =
          "{\"instance_id\":9,\"model_name\":\"m\",\"block_size\":4,\"engine_block_size\":8,"
              + "\"kv_blocks\":100,\"endpoint\":\""
              + pub.pubEndpoint()
              + "\"}";
      HttpFixture.Reply reg = http.post("/register", body);
      assertThat(reg.status()).as(reg.body()).isEqualTo(201);
      assertThat(reg.body()).contains("\"block_size\":4,", "\"engine_block_size\":8,");
      pub.awaitSubscriptions(1, WAIT);
      // two engine blocks of 8 tokens each
      int[] tokens = range(1, 16);
      long[] engineHashes = SequenceHasher.sequenceHashes(BlockHasher.of(8).localHashes(tokens));
      pub.publish(
          ENCODER.encode(
              new KvEventBatch(
                  1.7e9,
                  0,
                  List.of(EngineEvent.BlockStored.of(engineHashes, null, tokens, 8)),
                  0)));
      // the index's 4-token blocks: 4 of them match, so 16 tokens; a prompt diverging in the
      // second router block of the first engine block matches one router block (4 tokens)
      await(() -> http.query("m", range(1, 20)), b -> b.contains("\"9\":{\"0\":16}"));
      int[] diverging = range(1, 16);
      diverging[5] = 999;
      assertThat(http.query("m", diverging).body()).startsWith("{\"scores\":{\"9\":{\"0\":4}}");
      assertThat(http.get("/workers").body()).contains("\"engine_block_size\":8,");
    }
  }

  @Test
  void anEngineBlockSizeThatIsNotAMultipleIsRefusedAtRegistration() throws IOException {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher pub = FakeVllmPublisher.bound("")) {
      String base = "{\"instance_id\":9,\"model_name\":\"m\",\"block_size\":4,";
      assertError(
          http.post(
              "/register",
              base + "\"engine_block_size\":6,\"endpoint\":\"" + pub.pubEndpoint() + "\"}"),
          "engine_block_size: engine block size 6 is not a multiple of the router block size 4");
      assertError(
          http.post("/register", base + "\"engine_block_size\":8}"),
          "engine_block_size: given without endpoint");
      assertThat(http.get("/workers").body()).isEqualTo("[]\n");
      // the index's block size stays the first registration's: another one is 409
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      HttpFixture.Reply other = http.register(2, 0, "m", 8);
      assertThat(other.status()).isEqualTo(409);
      assertThat(other.body())
          .contains(
              "uses block_size 4 (fixed by its first registration); this registration asks for 8",
              "can register with block_size 4, engine_block_size 8 and its endpoint");
    }
  }

  @Test
  void endpointsTheRouterCannotUseAre400AndRegisterNothing() throws IOException {
    KvRouterServer.Config.Builder quick =
        KvRouterServer.Config.builder().zmqConnectTimeout(Duration.ofMillis(300));
    try (HttpFixture http = new HttpFixture(quick)) {
      String base = "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4,";
      assertError(
          http.post("/register", base + "\"endpoint\":\"localhost:5557\"}"),
          "endpoint: 'localhost:5557' is not a ZMQ address the router can connect to");
      assertError(
          http.post("/register", base + "\"endpoint\":\"tcp://*:5557\"}"),
          "endpoint: 'tcp://*:5557' is the engine's bind address");
      assertError(
          http.post("/register", base + "\"endpoint\":\"tcp://10.0.0.5:99999\"}"),
          "endpoint: 'tcp://10.0.0.5:99999' has port '99999'");
      assertError(
          http.post(
              "/register",
              base + "\"endpoint\":\"tcp://127.0.0.1:5557\",\"replay_endpoint\":\"tcp://h\"}"),
          "replay_endpoint: 'tcp://h' needs a host and a port");
      assertError(
          http.post("/register", base + "\"topic\":\"kv\"}"), "topic: given without endpoint");
      int port = freePort();
      assertError(
          http.post("/register", base + "\"endpoint\":\"tcp://127.0.0.1:" + port + "\"}"),
          "endpoint: no connection to 'tcp://127.0.0.1:" + port + "' within 300 ms");
      assertThat(http.get("/workers").body()).isEqualTo("[]\n");
      assertThat(http.get("/ready").status()).isEqualTo(200);
      assertThat(http.register(1, 0, "m", BS).status()).isEqualTo(201);
    }
  }

  /**
   * {@code all_blocks_cleared}: {@code "all_tiers"} (SGLang HiCache) is accepted and echoed, the
   * default {@code "device"} is not written, a warm start keeps it; another value, or the field
   * without an endpoint, is a 400 naming the field, with nothing registered.
   */
  @Test
  void theClearScopeIsCheckedAndEchoed() {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher pub = FakeVllmPublisher.bound("")) {
      String body = registerBody(7, 0, pub, "");
      assertError(
          http.post("/register", body.replace("}", ",\"all_blocks_cleared\":\"host\"}")),
          "all_blocks_cleared");
      assertError(
          http.post(
              "/register",
              "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4,"
                  + "\"all_blocks_cleared\":\"all_tiers\"}"),
          "all_blocks_cleared: given without endpoint");
      assertThat(http.get("/workers").body()).isEqualTo("[]\n");
      HttpFixture.Reply ok =
          http.post("/register", body.replace("}", ",\"all_blocks_cleared\":\"all_tiers\"}"));
      assertThat(ok.status()).as(ok.body()).isEqualTo(201);
      assertThat(ok.body()).contains("\"all_blocks_cleared\":\"all_tiers\"");
      HttpFixture.Reply dflt =
          http.post(
              "/register",
              registerBody(8, 0, pub, "").replace("}", ",\"all_blocks_cleared\":\"device\"}"));
      assertThat(dflt.status()).as(dflt.body()).isEqualTo(201);
      assertThat(dflt.body()).doesNotContain("all_blocks_cleared");
      assertThat(http.get("/dump").body()).contains("\"all_blocks_cleared\":\"all_tiers\"");
      // a warm start registers the rank again with its scope
      try (HttpFixture warm = new HttpFixture(KvRouterServer.Config.builder().peer(http.url))) {
        String workers = warm.get("/workers").body();
        assertThat(workers.split("\"all_blocks_cleared\":\"all_tiers\"", -1)).hasSize(2);
      }
    }
  }

  /**
   * A batch of rank 0 storing the full blocks of {@code tokens} from the root on {@code medium}.
   */
  private static byte[] storedOn(String medium, int[] tokens) {
    long[] seq = SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(tokens));
    EngineEvent e =
        new EngineEvent.BlockStored(
            seq, false, 0, tokens, BS, null, medium, null, null, null, null, null);
    return ENCODER.encode(new KvEventBatch(1.7e9, 0, List.of(e), 0));
  }

  private static byte[] allCleared() {
    return ENCODER.encode(
        new KvEventBatch(1.7e9, 0, List.of(new EngineEvent.AllBlocksCleared()), 0));
  }

  /**
   * The scope reaches the engine's converter: after an {@code AllBlocksCleared}, an {@code
   * all_tiers} engine (SGLang) has lost its host copies, a {@code device} one (vLLM) keeps them.
   */
  @Test
  void anAllTiersEngineLosesItsHostCopiesOnAClearAndADeviceOneKeepsThem() {
    try (HttpFixture http = new HttpFixture();
        FakeVllmPublisher sglang = FakeVllmPublisher.bound("");
        FakeVllmPublisher vllm = FakeVllmPublisher.bound("")) {
      HttpFixture.Reply a =
          http.post(
              "/register",
              registerBody(7, 0, sglang, "")
                  .replace("}", ",\"all_blocks_cleared\":\"all_tiers\"}"));
      assertThat(a.status()).as(a.body()).isEqualTo(201);
      HttpFixture.Reply b = http.post("/register", registerBody(8, 0, vllm, ""));
      assertThat(b.status()).as(b.body()).isEqualTo(201);
      sglang.awaitSubscriptions(1, WAIT);
      vllm.awaitSubscriptions(1, WAIT);
      String hostOf7 = "\"7\":{\"0\":{\"device\":0,\"host\":2";
      String hostOf8 = "\"8\":{\"0\":{\"device\":0,\"host\":2";
      sglang.publish(storedOn("CPU_PINNED", range(1, 8)));
      vllm.publish(storedOn("CPU", range(1, 8)));
      await(() -> http.query("m", range(1, 8)), q -> q.contains(hostOf7) && q.contains(hostOf8));

      sglang.publish(allCleared());
      vllm.publish(allCleared());
      // a device store after each clear: once both are seen, both clears were applied
      sglang.publish(storedOn("GPU", range(50, 4)));
      vllm.publish(storedOn("GPU", range(50, 4)));
      await(
          () -> http.query("m", range(50, 4)),
          q -> q.contains("\"7\":{\"0\":1}") && q.contains("\"8\":{\"0\":1}"));
      String after = http.query("m", range(1, 8)).body();
      assertThat(after).contains(hostOf8).doesNotContain("\"7\":{\"0\":{");
    }
  }

  private static void assertError(HttpFixture.Reply r, String message) {
    assertThat(r.status()).as(r.body()).isEqualTo(400);
    assertThat(r.body()).startsWith("{\"error\":\"").contains(message);
  }

  @Test
  void readyWaitsForTheFirstConnectionOfEveryListener() throws IOException {
    KvRouterServer.Config.Builder noWait =
        KvRouterServer.Config.builder()
            .zmqConnectTimeout(Duration.ZERO)
            .readyGrace(Duration.ofSeconds(30));
    int port = freePort();
    try (HttpFixture http = new HttpFixture(noWait);
        ZContext ctx = new ZContext()) {
      String endpoint = "tcp://127.0.0.1:" + port;
      HttpFixture.Reply reg =
          http.post(
              "/register",
              "{\"instance_id\":3,\"model_name\":\"m\",\"block_size\":4,\"endpoint\":\""
                  + endpoint
                  + "\"}");
      assertThat(reg.body()).contains("\"ingestion\":\"connecting\"");
      HttpFixture.Reply ready = http.get("/ready");
      assertThat(ready.status()).isEqualTo(503);
      assertThat(ready.body())
          .contains(
              "\"ready\":false,\"indexes\":1,\"listeners\":1,\"listeners_connecting\":1,",
              "waiting for the first connection of 1 ZMQ listener(s): " + endpoint);
      assertThat(http.get("/health").status()).isEqualTo(200);

      ZMQ.Socket engine = ctx.createSocket(SocketType.PUB); // the engine comes up
      engine.bind(endpoint);
      HttpFixture.Reply now = await(() -> http.get("/ready"), b -> b.contains("\"ready\":true"));
      assertThat(now.status()).isEqualTo(200);
      assertThat(now.body())
          .isEqualTo(
              "{\"ready\":true,\"indexes\":1,\"listeners\":1,\"listeners_connecting\":0,"
                  + "\"listeners_given_up\":0}\n");
    }
  }

  @Test
  void readyStopsWaitingForAListenerAfterTheGracePeriod() throws IOException {
    KvRouterServer.Config.Builder shortGrace =
        KvRouterServer.Config.builder()
            .zmqConnectTimeout(Duration.ZERO)
            .readyGrace(Duration.ofMillis(800));
    try (HttpFixture http = new HttpFixture(shortGrace)) {
      http.post(
          "/register",
          "{\"instance_id\":3,\"model_name\":\"m\",\"block_size\":4,\"endpoint\":\"tcp://127.0.0.1:"
              + freePort()
              + "\"}");
      assertThat(http.get("/ready").status()).isEqualTo(503);
      HttpFixture.Reply now = await(() -> http.get("/ready"), b -> b.contains("\"ready\":true"));
      assertThat(now.body())
          .isEqualTo(
              "{\"ready\":true,\"indexes\":1,\"listeners\":1,\"listeners_connecting\":0,"
                  + "\"listeners_given_up\":1}\n");
      assertThat(http.get("/workers").body()).contains("\"ingestion\":\"connecting\"");
    }
  }
}
