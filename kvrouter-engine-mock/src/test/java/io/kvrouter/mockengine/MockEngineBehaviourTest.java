package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.transport.kvevents.EngineEvent;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.KvEventDecoder;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** The mock engine's scheduling, timings, metrics, fault flags and event encodings. */
class MockEngineBehaviourTest {

  static String ids(int n, int from) {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < n; i++) sb.append(i == 0 ? "" : ",").append(from + i);
    return sb.append(']').toString();
  }

  static void await(BooleanSupplier cond, String what) {
    long deadline = System.nanoTime() + 20_000_000_000L;
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) throw new AssertionError("timed out waiting for " + what);
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }

  /**
   * Registers {@code engine} with {@code router} as instance 1 of model "mock" over its ZMQ
   * endpoints (topic "kv"), as {@code POST /register} does; asserts the 201.
   */
  static void registerOverZmq(KvRouterServer router, MockEngineServer engine, int blockSize) {
    EngineHttp.Reply reg =
        EngineHttp.post(
            router.url() + "/register",
            "{\"instance_id\":1,\"model_name\":\"mock\",\"block_size\":"
                + blockSize
                + ",\"endpoint\":\""
                + engine.zmqEndpoint()
                + "\",\"replay_endpoint\":\""
                + engine.replayEndpoint()
                + "\",\"topic\":\"kv\"}");
    assertThat(reg.status()).as(reg.body()).isEqualTo(201);
  }

  static double metric(MockEngineServer e, String line) {
    for (String l : EngineHttp.get(e.url() + "/metrics").body().split("\n")) {
      if (l.startsWith(line + " ")) return Double.parseDouble(l.substring(line.length() + 1));
    }
    throw new AssertionError("no metric " + line);
  }

  private static final String L = "{model_name=\"mock\",engine=\"0\"}";

  /**
   * With --speedup 1 the engine's own timings of a lone request follow the timing model: the
   * prefill it prescribes is base + uncached tokens × per-token cost (the second identical prompt
   * is one block cheaper), and the first token never comes before it. (How close TTFT comes to the
   * model is wall-clock and not asserted here; it is printed.)
   */
  @Test
  void timingsFollowTheModelAndTheCacheShortensThePrefill() {
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .prefillBaseMs(100)
                .prefillMsPer1kTokens(1000) // 1 ms per uncached token
                .decodeMsPerToken(1)
                .speedup(1)
                .build())) {
      String body = "{\"prompt\":" + ids(40, 7) + ",\"max_tokens\":2}";
      assertThat(EngineHttp.post(e.url() + "/v1/completions", body).status()).isEqualTo(200);
      assertThat(EngineHttp.post(e.url() + "/v1/completions", body).status()).isEqualTo(200);
      List<MockEngineServer.RequestTiming> t = e.recentRequests();
      assertThat(t).hasSize(2);
      // 100 ms + 40 uncached tokens; then 100 ms + 8 (32 of 40 tokens cached: two full blocks)
      assertThat(t.get(0).modelPrefillNanos()).isEqualTo(140_000_000L);
      assertThat(t.get(0).cachedTokens()).isZero();
      assertThat(t.get(1).cachedTokens()).isEqualTo(32);
      assertThat(t.get(1).modelPrefillNanos()).isEqualTo(108_000_000L);
      for (MockEngineServer.RequestTiming r : t) {
        assertThat(r.prefillWaitNanos())
            .as("a lone request's prefill starts at admission")
            .isZero();
        assertThat(r.ttftNanos()).isGreaterThanOrEqualTo(r.modelPrefillNanos());
        assertThat(r.outputTokens()).isEqualTo(2);
        assertThat(r.finishReason()).isEqualTo("length");
        System.out.printf(
            "mock engine TTFT %.1f ms for a model prefill of %.1f ms (%.1f %% over)%n",
            r.ttftNanos() / 1e6,
            r.modelPrefillNanos() / 1e6,
            100.0 * (r.ttftNanos() - r.modelPrefillNanos()) / r.modelPrefillNanos());
      }
      assertThat(metric(e, "vllm:prefix_cache_queries_total" + L)).isEqualTo(80.0);
      assertThat(metric(e, "vllm:prefix_cache_hits_total" + L)).isEqualTo(32.0);
      assertThat(metric(e, "vllm:prompt_tokens_total" + L)).isEqualTo(80.0);
      assertThat(metric(e, "vllm:generation_tokens_total" + L)).isEqualTo(4.0);
      assertThat(metric(e, "vllm:time_to_first_token_seconds_count" + L)).isEqualTo(2.0);
      assertThat(metric(e, "vllm:num_requests_running" + L)).isZero();
    }
  }

  /**
   * One running request at a time (--max-num-seqs 1): a second waits in the queue, and a client
   * that hangs up aborts its request, which frees the slot (and the blocks) for the next.
   */
  @Test
  void aDisconnectAbortsAndTheQueuedRequestRunsNext() throws Exception {
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .maxNumSeqs(1)
                .decodeMsPerToken(20)
                .speedup(1)
                .build())) {
      InputStream a =
          EngineHttp.open(
              e.url() + "/v1/completions",
              "{\"prompt\":" + ids(20, 1) + ",\"max_tokens\":2000,\"stream\":true}");
      assertThat(EngineHttp.firstData(a)).startsWith("data: {");
      CompletableFuture<EngineHttp.Reply> b =
          CompletableFuture.supplyAsync(
              () ->
                  EngineHttp.post(
                      e.url() + "/v1/completions",
                      "{\"prompt\":" + ids(20, 100) + ",\"max_tokens\":2}"));
      await(() -> metric(e, "vllm:num_requests_waiting" + L) == 1.0, "the second request to queue");
      assertThat(metric(e, "vllm:num_requests_running" + L)).isEqualTo(1.0);
      a.close(); // hang up
      EngineHttp.Reply rb = b.get(20, TimeUnit.SECONDS);
      assertThat(rb.status()).isEqualTo(200);
      List<MockEngineServer.RequestTiming> t = e.recentRequests();
      assertThat(t.get(0).finishReason()).isEqualTo("abort");
      assertThat(t.get(0).outputTokens()).isBetween(1, 1999);
      assertThat(t.get(1).finishReason()).isEqualTo("length");
      assertThat(t.get(1).queueNanos()).isPositive();
      assertThat(
              metric(
                  e,
                  "vllm:request_success_total{model_name=\"mock\",engine=\"0\",finished_reason=\"abort\"}"))
          .isEqualTo(1.0);
      await(() -> e.cacheDump().runningRequests() == 0, "the engine to go idle");
    }
  }

  @Test
  void failFractionAnswers500BeforeTheFirstByte() {
    try (MockEngineServer e =
        MockEngineServer.start(MockEngineServer.Config.builder().failFraction(1).build())) {
      EngineHttp.Reply r =
          EngineHttp.post(e.url() + "/v1/completions", "{\"prompt\":[1,2,3],\"stream\":true}");
      assertThat(r.status()).isEqualTo(500);
      assertThat(r.contentType()).startsWith("application/json");
      JsonNode j = r.json();
      assertThat(j.get("object").textValue()).isEqualTo("error");
      assertThat(j.get("type").textValue()).isEqualTo("InternalServerError");
      assertThat(j.get("code").intValue()).isEqualTo(500);
      assertThat(EngineHttp.get(e.url() + "/health").status()).isEqualTo(200);
    }
  }

  @Test
  @SuppressWarnings("try") // the socket is opened only to see whether the port still accepts
  void dieAfterRequestsStopsTheEngine() throws Exception {
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder().dieAfterRequests(2).speedup(100).build())) {
      String body = "{\"prompt\":[1,2,3],\"max_tokens\":1}";
      assertThat(EngineHttp.post(e.url() + "/v1/completions", body).status()).isEqualTo(200);
      assertThat(e.isDead()).isFalse();
      assertThat(EngineHttp.post(e.url() + "/v1/completions", body).status()).isEqualTo(200);
      int port = e.port();
      assertThat(port).isPositive();
      assertThat(e.death().get(10, TimeUnit.SECONDS)).contains("--die-after-requests 2");
      assertThat(e.port()).isEqualTo(port);
      await(
          () -> {
            try (Socket s = new Socket("127.0.0.1", port)) {
              return false;
            } catch (IOException x) {
              return true;
            }
          },
          "the listener to close");
    }
  }

  @Test
  void dieAfterSecondsStopsTheEngine() throws Exception {
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder().dieAfter(Duration.ofMillis(50)).build())) {
      assertThat(e.death().get(10, TimeUnit.SECONDS)).contains("--die-after-seconds");
      assertThat(e.isDead()).isTrue();
    }
  }

  @Test
  void startUpDelaysBindLater() throws Exception {
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .httpStartDelay(Duration.ofMinutes(5))
                .zmqStartDelay(Duration.ofMinutes(5))
                .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                .build())) {
      // start() returned at once with every port chosen, none of them bound yet
      assertThat(e.port()).isPositive();
      assertThat(e.zmqEndpoint()).matches("tcp://127\\.0\\.0\\.1:[0-9]+");
      assertThatThrownBy(() -> new Socket("127.0.0.1", e.port()).close())
          .isInstanceOf(ConnectException.class);
      int zmq = Integer.parseInt(e.zmqEndpoint().substring(e.zmqEndpoint().lastIndexOf(':') + 1));
      assertThatThrownBy(() -> new Socket("127.0.0.1", zmq).close())
          .isInstanceOf(ConnectException.class);
    }
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder().httpStartDelay(Duration.ofMillis(1)).build())) {
      e.awaitListening(Duration.ofSeconds(10));
      assertThat(EngineHttp.get(e.url() + "/health").status()).isEqualTo(200);
    }
  }

  @Test
  void aStalledStreamStopsAfterItsTokensAndHoldsItsSlot() throws Exception {
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder().stallAfterTokens(2).speedup(100).build())) {
      InputStream in =
          EngineHttp.open(
              e.url() + "/v1/completions",
              "{\"prompt\":[1,2,3],\"max_tokens\":50,\"stream\":true}");
      assertThat(EngineHttp.firstData(in)).contains("\"finish_reason\":null");
      await(() -> metric(e, "vllm:generation_tokens_total" + L) == 2.0, "two tokens");
      assertThat(e.cacheDump().runningRequests()).isEqualTo(1);
      // an unstreamed request is not stalled
      assertThat(
              EngineHttp.post(e.url() + "/v1/completions", "{\"prompt\":[4,5],\"max_tokens\":5}")
                  .json()
                  .at("/usage/completion_tokens")
                  .intValue())
          .isEqualTo(5);
      assertThat(metric(e, "vllm:generation_tokens_total" + L)).isEqualTo(7.0);
      in.close();
    }
  }

  @Test
  void resetPrefixCachePublishesAllBlocksClearedAndEmptiesTheCache() {
    try (MockEngineServer e =
        MockEngineServer.start(MockEngineServer.Config.builder().speedup(100).build())) {
      EngineHttp.post(
          e.url() + "/v1/completions", "{\"prompt\":" + ids(48, 1) + ",\"max_tokens\":1}");
      assertThat(e.cacheDump().blockHashes()).hasSize(3);
      assertThat(EngineHttp.post(e.url() + "/reset_prefix_cache", "").status()).isEqualTo(200);
      assertThat(e.cacheDump().blockHashes()).isEmpty();
    }
  }

  /**
   * The replay socket answers a DEALER's {@code [empty, start]} as vLLM's does: {@code [empty, seq,
   * payload]} for each buffered batch from start on, then {@code [empty, -1, empty]}.
   */
  @Test
  void theReplaySocketResendsBufferedBatchesAndEndsWithTheMarker() {
    try (MockEngineServer e =
            MockEngineServer.start(
                MockEngineServer.Config.builder()
                    .speedup(100)
                    .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                    .build());
        ZContext ctx = new ZContext(1)) {
      EngineHttp.post(
          e.url() + "/v1/completions", "{\"prompt\":" + ids(32, 1) + ",\"max_tokens\":1}");
      EngineHttp.post(
          e.url() + "/v1/completions", "{\"prompt\":" + ids(16, 500) + ",\"max_tokens\":1}");
      assertThat(e.cacheDump().lastEventSeq()).isEqualTo(1);
      ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER);
      dealer.setReceiveTimeOut(10_000);
      dealer.connect(e.replayEndpoint());
      dealer.sendMore(new byte[0]);
      dealer.send(ByteBuffer.allocate(8).putLong(1).array());
      // batch 1 only (replay from 1), then the end marker
      assertThat(dealer.recv()).isEmpty();
      assertThat(ByteBuffer.wrap(dealer.recv()).getLong()).isEqualTo(1);
      KvEventBatch b = KvEventDecoder.decode(dealer.recv());
      assertThat(dealer.hasReceiveMore()).isFalse();
      EngineEvent.BlockStored s = (EngineEvent.BlockStored) b.events().get(0);
      assertThat(s.tokenIds()).containsExactly(IntStream.range(500, 516).toArray());
      assertThat(s.hasParent()).isFalse();
      assertThat(s.blockSize()).isEqualTo(16);
      assertThat(s.medium()).isEqualTo("GPU");
      assertThat(dealer.recv()).isEmpty();
      assertThat(ByteBuffer.wrap(dealer.recv()).getLong()).isEqualTo(-1);
      assertThat(dealer.recv()).isEmpty();
      assertThat(dealer.hasReceiveMore()).isFalse();
      // the engine's hashes are its own: not the DESIGN.md §2 hashes of the same blocks
      assertThat(e.cacheDump().blockHashes())
          .doesNotContainAnyElementsOf(e.cacheDump().engineBlockHashes());
      assertThat(e.cacheDump().engineBlockHashes())
          .contains(Long.toUnsignedString(s.blockHashes()[0]));
    }
  }

  /** The map form is byte for byte the shared golden vector of newer vLLM's payload. */
  @Test
  void mapEncodingMatchesTheGoldenVectorAndArrayEncodingDecodes() throws Exception {
    List<EngineEvent> events =
        List.of(
            new EngineEvent.BlockStored(
                new long[] {10, 11},
                true,
                99,
                new int[] {1, 2, 3, 4, 5, 6, 7, 8},
                4,
                null,
                "GPU",
                null,
                null,
                null,
                null,
                null),
            new EngineEvent.BlockRemoved(new long[] {123}, "GPU", null, null),
            new EngineEvent.AllBlocksCleared());
    JsonNode vectors;
    try (InputStream in = getClass().getResourceAsStream("/vectors/kv-events.json")) {
      vectors = EngineHttp.JSON.readTree(in);
    }
    String expected = null;
    for (JsonNode v : vectors.get("decode")) {
      if (v.get("name").textValue().equals("map_events_in_positional_batch")) {
        expected = v.get("payload_hex").textValue();
      }
    }
    byte[] map = KvEventPublisher.encode(1700000000.5, events, MockEngineServer.EventEncoding.MAP);
    assertThat(HexFormat.of().formatHex(map)).isEqualTo(expected);
    for (MockEngineServer.EventEncoding enc : MockEngineServer.EventEncoding.values()) {
      KvEventBatch b = KvEventDecoder.decode(KvEventPublisher.encode(2.5, events, enc));
      assertThat(b.events()).as(enc.name()).isEqualTo(events);
      assertThat(b.dpRank()).isZero();
      assertThat(b.ts()).isEqualTo(2.5);
    }
    // an unsigned hash above 2^63 survives
    List<EngineEvent> big = List.of(EngineEvent.BlockRemoved.of(-2L));
    KvEventBatch b =
        KvEventDecoder.decode(
            KvEventPublisher.encode(1, big, MockEngineServer.EventEncoding.ARRAY));
    assertThat(((EngineEvent.BlockRemoved) b.events().get(0)).blockHashes()).containsExactly(-2L);
  }
}
