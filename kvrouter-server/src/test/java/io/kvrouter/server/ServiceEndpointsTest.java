package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.list;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.route.RoutingSettings;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Every endpoint's success path against a real server on a random port. */
class ServiceEndpointsTest {
  private static final int BS = 4;
  // registrations with an endpoint that no engine serves are made without waiting for it
  private final HttpFixture http =
      new HttpFixture(KvRouterServer.Config.builder().zmqConnectTimeout(Duration.ZERO));

  @AfterEach
  void stop() {
    http.close();
  }

  @Test
  void registerAnswersWithTheRegistrationAndWorkersListsIt() {
    HttpFixture.Reply r =
        http.post(
            "/register",
            "{\"instance_id\": 18446744073709551615, \"endpoint\": \"tcp://127.0.0.1:5557\","
                + " \"model_name\": \"m\", \"block_size\": 4, \"dp_rank\": 1}");
    assertThat(r.status()).isEqualTo(201);
    assertThat(r.body())
        .isEqualTo(
            "{\"instance_id\":18446744073709551615,\"dp_rank\":1,\"model_name\":\"m\","
                + "\"routing_group\":\"default\",\"block_size\":4,"
                + "\"endpoint\":\"tcp://127.0.0.1:5557\",\"replay_endpoint\":null,"
                + "\"topic\":\"\",\"engine_block_size\":4,\"capacity_blocks\":0,\"ingestion\":\"connecting\","
                + "\"kv_source\":\"events\"}\n");
    assertThat(http.register(7, 0, "m", BS).status()).isEqualTo(201);
    assertThat(http.register(7, 2, "m", BS).status()).isEqualTo(201);
    assertThat(
            http.post(
                    "/register",
                    "{\"instance_id\":7,\"model_name\":\"m\",\"block_size\":8,"
                        + "\"tenant_id\":\"t\"}")
                .status())
        .isEqualTo(201);

    HttpFixture.Reply all = http.get("/workers");
    assertThat(all.status()).isEqualTo(200);
    assertThat(all.header("Content-Type")).startsWith("application/json");
    assertThat(all.body())
        .isEqualTo(
            "["
                + "{\"instance_id\":7,\"model_name\":\"m\",\"routing_group\":\"default\","
                + "\"block_size\":4,\"endpoints\":{},\"ranks\":["
                + "{\"dp_rank\":0,\"endpoint\":null,\"replay_endpoint\":null,\"capacity_blocks\":0,\"indexed_blocks\":0,"
                + "\"ingestion\":\"http\",\"kv_source\":\"events\",\"kv_capacity_blocks\":0},"
                + "{\"dp_rank\":2,\"endpoint\":null,\"replay_endpoint\":null,\"capacity_blocks\":0,\"indexed_blocks\":0,"
                + "\"ingestion\":\"http\",\"kv_source\":\"events\",\"kv_capacity_blocks\":0}]},"
                + "{\"instance_id\":18446744073709551615,\"model_name\":\"m\","
                + "\"routing_group\":\"default\",\"block_size\":4,"
                + "\"endpoints\":{\"1\":\"tcp://127.0.0.1:5557\"},\"ranks\":["
                + "{\"dp_rank\":1,\"endpoint\":\"tcp://127.0.0.1:5557\",\"replay_endpoint\":null,"
                + "\"topic\":\"\",\"engine_block_size\":4,\"capacity_blocks\":0,\"indexed_blocks\":0,\"ingestion\":\"connecting\","
                + "\"kv_source\":\"events\",\"kv_capacity_blocks\":0,\"zmq\":"
                + "{\"state\":\"connecting\",\"connected_once\":false,\"last_sequence\":-1,"
                + "\"messages\":0,\"batches\":0,\"events_applied\":0,\"decode_errors\":0,"
                + "\"bad_frames\":0,\"duplicates\":0,\"gaps\":0,\"lost_messages\":0,"
                + "\"replays\":0,\"replay_failures\":0,\"restarts\":0,\"connections\":0,"
                + "\"reconnects\":0,\"disconnects\":0,\"dropped_foreign_rank\":0,"
                + "\"dropped_unregistered\":0,\"tail_probes\":0,\"tail_recovered\":0,\"mean_event_lag_ms\":null,"
                + "\"seconds_since_last_message\":null}}]},"
                + "{\"instance_id\":7,\"model_name\":\"m\",\"routing_group\":\"t\","
                + "\"block_size\":8,\"endpoints\":{},\"ranks\":["
                + "{\"dp_rank\":0,\"endpoint\":null,\"replay_endpoint\":null,\"capacity_blocks\":0,\"indexed_blocks\":0,"
                + "\"ingestion\":\"http\",\"kv_source\":\"events\",\"kv_capacity_blocks\":0}]}"
                + "]\n");
    assertThat(http.get("/workers?routing_group=t").body())
        .startsWith("[{\"instance_id\":7,\"model_name\":\"m\",\"routing_group\":\"t\"")
        .doesNotContain("\"default\"");
    assertThat(http.get("/workers?model_name=other").body()).isEqualTo("[]\n");
  }

  /** The rank's KV capacity is capacity_blocks (what it can hold), kv_blocks its former name. */
  @Test
  void capacityBlocksIsTheRegisteredCapacityUnderEitherName() {
    String base = "{\"model_name\":\"m\",\"block_size\":4,\"instance_id\":";
    HttpFixture.Reply r = http.post("/register", base + "1,\"capacity_blocks\":50}");
    assertThat(r.status()).as(r.body()).isEqualTo(201);
    assertThat(r.body()).contains("\"capacity_blocks\":50,").doesNotContain("kv_blocks");
    r = http.post("/register", base + "2,\"kv_blocks\":60}");
    assertThat(r.body()).contains("\"capacity_blocks\":60,");
    r = http.post("/register", base + "3,\"kv_blocks\":70,\"capacity_blocks\":70}");
    assertThat(r.status()).as(r.body()).isEqualTo(201);
    r = http.post("/register", base + "4,\"capacity_blocks\":5,\"kv_blocks\":6}");
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.body())
        .contains("kv_blocks: capacity_blocks and kv_blocks (its former name) disagree: 5 vs 6");
    assertThat(http.get("/workers").body())
        .contains("\"capacity_blocks\":50,", "\"capacity_blocks\":60,", "\"capacity_blocks\":70,")
        .doesNotContain("kv_blocks")
        .doesNotContain("\"instance_id\":4");
    // the dump keeps the former name beside it, for the warm start of peers
    assertThat(http.get("/dump").body())
        .contains(
            "\"capacity_blocks\":50,\"ingestion\":\"http\",\"kv_source\":\"events\","
                + "\"kv_blocks\":50}");
  }

  @Test
  void unregisterRemovesOneRankOrTheWholeInstanceAndDropsAnEmptyIndex() {
    http.register(1, 0, "m", BS);
    http.register(1, 1, "m", BS);
    http.register(2, 0, "m", BS);
    assertThat(http.events("m", list(stored(new Worker(1, 1), 0, range(0, 8), BS))).status())
        .isEqualTo(200);
    // what each rank holds, beside what it can hold
    assertThat(http.get("/workers").body())
        .contains(
            "{\"dp_rank\":0,\"endpoint\":null,\"replay_endpoint\":null,\"capacity_blocks\":0,"
                + "\"indexed_blocks\":0,",
            "{\"dp_rank\":1,\"endpoint\":null,\"replay_endpoint\":null,\"capacity_blocks\":0,"
                + "\"indexed_blocks\":"
                + 8 / BS
                + ",");

    HttpFixture.Reply one =
        http.post("/unregister", "{\"instance_id\":1,\"model_name\":\"m\",\"dp_rank\":1}");
    assertThat(one.status()).isEqualTo(200);
    assertThat(one.body())
        .isEqualTo(
            "{\"removed\":[{\"instance_id\":1,\"dp_rank\":1,\"model_name\":\"m\","
                + "\"routing_group\":\"default\"}]}\n");
    // its blocks are gone with it
    assertThat(http.query("m", range(0, 8)).body()).startsWith("{\"scores\":{}");

    HttpFixture.Reply whole = http.post("/unregister", "{\"instance_id\":1,\"model_name\":\"m\"}");
    assertThat(whole.status()).isEqualTo(200);
    assertThat(whole.body()).contains("\"dp_rank\":0");
    assertThat(http.post("/unregister", "{\"instance_id\":1,\"model_name\":\"m\"}").status())
        .isEqualTo(404);

    assertThat(http.post("/unregister", "{\"instance_id\":2,\"model_name\":\"m\"}").status())
        .isEqualTo(200);
    // the last rank took the index with it: the model is unknown, and may use another block size
    assertThat(http.query("m", range(0, 8)).status()).isEqualTo(404);
    assertThat(http.register(3, 0, "m", 16).status()).isEqualTo(201);
  }

  @Test
  void queryReportsMatchedTokensBlocksAndTreeSizesPerInstanceAndRank() {
    http.register(1, 0, "m", BS);
    http.register(1, 3, "m", BS);
    http.register(2, 0, "m", BS);
    assertThat(
            http.events(
                    "m",
                    list(
                        stored(new Worker(1, 0), 0, range(0, 8), BS),
                        stored(new Worker(1, 3), 0, range(0, 12), BS),
                        stored(new Worker(2, 0), 0, range(0, 4), BS),
                        stored(new Worker(2, 0), 1, range(100, 20), BS)))
                .body())
        .isEqualTo("{\"applied\":4}\n");
    HttpFixture.Reply r = http.query("m", range(0, 14)); // 3 full blocks, 2 tokens dropped
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.body())
        .isEqualTo(
            "{\"scores\":{\"1\":{\"0\":8,\"3\":12},\"2\":{\"0\":4}},"
                + "\"blocks\":{\"1\":{\"0\":2,\"3\":3},\"2\":{\"0\":1}},"
                + "\"tree_sizes\":{\"1\":{\"0\":2,\"3\":3},\"2\":{\"0\":6}},"
                + "\"block_size\":4}\n");
    assertThat(http.query("m", new int[0]).body())
        .isEqualTo("{\"scores\":{},\"blocks\":{},\"tree_sizes\":{},\"block_size\":4}\n");
  }

  @Test
  void loraNameAndCacheSaltSaltTheHashes() {
    http.register(1, 0, "m", BS);
    BlockHasher lora = BlockHasher.of(BS).withLora("ad");
    BlockHasher salted = BlockHasher.of(BS).withNamespace("s1");
    http.events(
        "m",
        list(
            stored(new Worker(1, 0), 0, range(0, 8), lora),
            stored(new Worker(1, 0), 1, range(0, 4), salted)));
    String tokens = HttpFixture.json(range(0, 8));
    assertThat(http.query("m", range(0, 8)).body()).startsWith("{\"scores\":{}");
    assertThat(
            http.post(
                    "/query",
                    "{\"model_name\":\"m\",\"lora_name\":\"ad\",\"token_ids\":" + tokens + "}")
                .body())
        .startsWith("{\"scores\":{\"1\":{\"0\":8}}");
    assertThat(
            http.post(
                    "/query",
                    "{\"model_name\":\"m\",\"cache_salt\":\"s1\",\"token_ids\":" + tokens + "}")
                .body())
        .startsWith("{\"scores\":{\"1\":{\"0\":4}}");
  }

  @Test
  void queryByHashTakesLocalHashesSignedOrUnsigned() {
    http.register(1, 0, "m", BS);
    long[] local = {-1L, 5L}; // -1 is 18446744073709551615 unsigned
    long[] seq = SequenceHasher.sequenceHashes(local);
    http.events(
        "m", list(new RouterEvent(new Worker(1, 0), 0, CacheEvent.storedAtRoot(seq, local))));
    String expected =
        "{\"scores\":{\"1\":{\"0\":8}},\"blocks\":{\"1\":{\"0\":2}},"
            + "\"tree_sizes\":{\"1\":{\"0\":2}},\"block_size\":4}\n";
    assertThat(http.post("/query_by_hash", "{\"model_name\":\"m\",\"block_hashes\":[-1,5]}").body())
        .isEqualTo(expected);
    assertThat(
            http.post(
                    "/query_by_hash",
                    "{\"model_name\":\"m\",\"block_hashes\":[18446744073709551615,5,9]}")
                .body())
        .isEqualTo(expected);
  }

  @Test
  void routeChoosesTheCachedRankAndTracksTheRequestUntilFreed() {
    http.register(1, 0, "m", BS);
    http.register(2, 0, "m", BS);
    http.events("m", list(stored(new Worker(2, 0), 0, range(0, 8), BS)));
    String body =
        "{\"request_id\":\"r1\",\"model_name\":\"m\",\"token_ids\":"
            + HttpFixture.json(range(0, 8))
            + "}";
    HttpFixture.Reply r = http.post("/route", body);
    assertThat(r.status()).isEqualTo(200);
    // W1: prefill 8/4 = 2, decode 2 -> 4; W2: prefill 0, decode 2 -> 2
    assertThat(r.body())
        .isEqualTo(
            "{\"request_id\":\"r1\",\"instance_id\":2,\"dp_rank\":0,\"overlap_blocks\":2,"
                + "\"overlap_tokens\":8,\"cost\":2.0,\"candidates\":["
                + "{\"instance_id\":1,\"dp_rank\":0,\"overlap_blocks\":0,\"cached_blocks\":0,"
                + "\"prefill_blocks\":2.0,\"decode_blocks\":2,\"cost\":4.0,"
                + "\"scores\":{\"prefill\":2.0,\"decode\":2.0,\"pressure\":0.0}},"
                + "{\"instance_id\":2,\"dp_rank\":0,\"overlap_blocks\":2,\"cached_blocks\":2,"
                + "\"prefill_blocks\":0.0,\"decode_blocks\":2,\"cost\":2.0,"
                + "\"scores\":{\"prefill\":0.0,\"decode\":2.0,\"pressure\":0.0}}],\"busy\":[]}\n");
    // the same id while in flight is a conflict naming the worker
    HttpFixture.Reply dup = http.post("/route", body);
    assertThat(dup.status()).isEqualTo(409);
    assertThat(dup.body()).contains("r1").contains("in flight");

    assertThat(http.post("/requests/r1/prefill_complete", "").body())
        .isEqualTo("{\"request_id\":\"r1\",\"state\":\"decoding\"}\n");
    assertThat(http.post("/requests/r1/free", "").body())
        .isEqualTo("{\"request_id\":\"r1\",\"state\":\"freed\"}\n");
    HttpFixture.Reply gone = http.post("/requests/r1/free", "");
    assertThat(gone.status()).isEqualTo(404);
    assertThat(gone.body()).contains("'r1' is not in flight");
    assertThat(http.post("/requests/r1/prefill_complete", "").status()).isEqualTo(404);
    // freed, the id may be routed again; model_name narrows the lifecycle calls
    assertThat(http.post("/route", body).status()).isEqualTo(200);
    assertThat(http.post("/requests/r1/free?model_name=other", "").status()).isEqualTo(404);
    assertThat(http.post("/requests/r1/free?model_name=m", "").status()).isEqualTo(200);
  }

  @Test
  void routeAnswers503WhenNoAllowedWorkerOrAllBusy() {
    try (HttpFixture busy =
        new HttpFixture(
            KvRouterServer.Config.builder()
                .routing(RoutingSettings.DEFAULTS.withBusyPrefillTokens(0)))) {
      busy.register(1, 0, "m", BS);
      busy.register(2, 0, "m", BS);
      String tokens = HttpFixture.json(range(0, 8));
      HttpFixture.Reply none =
          busy.post(
              "/route",
              "{\"request_id\":\"a\",\"model_name\":\"m\",\"allowed_instances\":[],"
                  + "\"token_ids\":"
                  + tokens
                  + "}");
      assertThat(none.status()).isEqualTo(503);
      assertThat(none.body()).contains("no registered worker").contains("allowed_instances");
      HttpFixture.Reply only2 =
          busy.post(
              "/route",
              "{\"request_id\":\"b\",\"model_name\":\"m\",\"allowed_instances\":[2],"
                  + "\"token_ids\":"
                  + tokens
                  + "}");
      assertThat(only2.body()).contains("\"instance_id\":2");
      // b's 8 prefill tokens make worker 2 busy; worker 1 is left
      assertThat(
              busy.post(
                      "/route",
                      "{\"request_id\":\"c\",\"model_name\":\"m\",\"token_ids\":" + tokens + "}")
                  .body())
          .contains("\"instance_id\":1")
          .contains("\"busy\":[{\"instance_id\":2,\"dp_rank\":0}]");
      HttpFixture.Reply allBusy =
          busy.post(
              "/route", "{\"request_id\":\"d\",\"model_name\":\"m\",\"token_ids\":" + tokens + "}");
      assertThat(allBusy.status()).isEqualTo(503);
      assertThat(allBusy.body()).contains("busy").contains("\"candidates\":[{\"instance_id\":1");
    }
  }

  @Test
  void eventsOfSeveralKindsApplyInOrder() {
    http.register(1, 0, "m", BS);
    RouterEvent s = stored(new Worker(1, 0), 0, range(0, 12), BS);
    long[] seq = ((CacheEvent.Stored) s.data()).blockHashes();
    assertThat(
            http.events(
                    "m",
                    List.of(s, new RouterEvent(new Worker(1, 0), 1, CacheEvent.removed(seq[2]))))
                .body())
        .isEqualTo("{\"applied\":2}\n");
    assertThat(http.query("m", range(0, 12)).body()).startsWith("{\"scores\":{\"1\":{\"0\":8}}");
    assertThat(
            http.events("m", List.of(new RouterEvent(new Worker(1, 0), 2, CacheEvent.cleared())))
                .status())
        .isEqualTo(200);
    assertThat(http.query("m", range(0, 12)).body()).startsWith("{\"scores\":{}");
    assertThat(http.post("/events?model_name=m", "[]").body()).isEqualTo("{\"applied\":0}\n");
  }

  @Test
  void eventsOfUnregisteredWorkersApplyWhenTheServerAcceptsThem() {
    try (HttpFixture open =
        new HttpFixture(KvRouterServer.Config.builder().acceptUnregistered(true))) {
      open.register(1, 0, "m", BS);
      assertThat(open.events("m", list(stored(new Worker(9, 0), 0, range(0, 8), BS))).status())
          .isEqualTo(200);
      assertThat(open.query("m", range(0, 8)).body()).startsWith("{\"scores\":{\"9\":{\"0\":8}}");
    }
  }

  @Test
  void healthReadyAndMetricsAnswer() {
    assertThat(http.get("/health").body()).isEqualTo("{\"status\":\"ok\"}\n");
    assertThat(http.get("/ready").body())
        .isEqualTo(
            "{\"ready\":true,\"indexes\":0,\"listeners\":0,\"listeners_connecting\":0,"
                + "\"listeners_given_up\":0}\n");
    http.register(1, 0, "m", BS);
    http.register(2, 0, "m", BS);
    http.events("m", list(stored(new Worker(1, 0), 0, range(0, 8), BS)));
    http.post("/events?model_name=m", "[{]");
    http.query("m", range(0, 8));
    http.post("/query", "{}");
    http.post("/route", "{\"request_id\":\"x\",\"model_name\":\"m\",\"token_ids\":[0,1,2,3]}");
    HttpFixture.Reply m = http.get("/metrics");
    assertThat(m.status()).isEqualTo(200);
    assertThat(m.header("Content-Type")).startsWith("text/plain");
    assertThat(m.body())
        .contains(
            "kvrouter_http_requests_total{endpoint=\"/query\",status_class=\"2xx\"} 1.0",
            "kvrouter_http_requests_total{endpoint=\"/query\",status_class=\"4xx\"} 1.0",
            "kvrouter_http_request_duration_seconds_count{endpoint=\"/register\","
                + "status_class=\"2xx\"} 2",
            "kvrouter_find_matches_duration_seconds_count{model_name=\"m\","
                + "routing_group=\"default\"} 1",
            "kvrouter_events_applied_total{model_name=\"m\",outcome=\"applied\","
                + "routing_group=\"default\",type=\"stored\"} 1.0",
            "kvrouter_events_received_total{source=\"http\"} 1.0",
            "kvrouter_event_decode_errors_total{source=\"http\"} 1.0",
            "kvrouter_event_batches_rejected_total{reason=\"decode_error\",source=\"http\"} 1.0",
            "kvrouter_workers{model_name=\"m\",routing_group=\"default\"} 2.0",
            "kvrouter_blocks_indexed{model_name=\"m\",routing_group=\"default\"} 2.0",
            "kvrouter_requests_in_flight{model_name=\"m\",routing_group=\"default\"} 1.0",
            "kvrouter_route_decisions_total{dp_rank=\"0\",instance_id=\"1\",model_name=\"m\","
                + "routing_group=\"default\"} 1.0",
            "jvm_memory_used_bytes");
  }

  /** So that answers printed one after another (curl in a shell) stay on lines of their own. */
  @Test
  void everyJsonAnswerEndsWithANewline() throws Exception {
    http.register(1, 0, "m", BS);
    http.events("m", list(stored(new Worker(1, 0), 0, range(0, 8), BS)));
    for (HttpFixture.Reply r :
        List.of(
            http.get("/dump"),
            http.get("/workers"),
            http.query("m", range(0, 8)),
            http.get("/nowhere"), // 404
            http.get("/query"), // 405
            http.post("/query", "{"))) { // 400
      assertThat(r.body()).as(r.toString()).endsWith("\n").doesNotEndWith("\n\n");
      assertThat(r.body().indexOf('\n')).as(r.toString()).isEqualTo(r.body().length() - 1);
    }
    // answered by Helidon before routing: a declared body far over the limit
    try (Socket s = new Socket("127.0.0.1", http.server.port())) {
      s.setSoTimeout(10_000);
      s.getOutputStream()
          .write(
              ("POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      + "Content-Length: 999999999999\r\n\r\n")
                  .getBytes(StandardCharsets.US_ASCII));
      String answer = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(answer).startsWith("HTTP/1.1 413").contains("\"error\"").endsWith("}\n");
    }
  }

  @Test
  void stopTurnsTheServerNotReadyAndIsIdempotent() {
    assertThat(http.server.isReady()).isTrue();
    http.server.stop();
    assertThat(http.server.isReady()).isFalse();
    http.server.stop();
    assertThat(http.server.isReady()).isFalse();
  }
}
