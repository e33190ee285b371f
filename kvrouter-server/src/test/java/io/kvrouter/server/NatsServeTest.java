package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.list;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.nats.NatsServer;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.time.Duration;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * {@code serve --events nats://...} against a real {@code nats-server -js} (started by the test on
 * a free port; {@code .ci/run} installs it): {@code POST /events} to either of two servers reaches
 * both indexes through the stream, a server started later catches up from the stream, and what the
 * server refuses in this mode is refused.
 */
class NatsServeTest {
  private static final int BS = 4;
  private static final Duration WAIT = Duration.ofSeconds(15);

  private static KvRouterServer.Config.Builder replica(NatsServer nats, String id) {
    return KvRouterServer.Config.builder().events(nats.url()).replicaId(id);
  }

  private static void registerFleet(HttpFixture f) {
    HttpFixture.Reply first = f.register(1, 0, "m", BS);
    assertThat(first.status()).isEqualTo(201);
    assertThat(first.body()).contains("\"ingestion\":\"nats\"");
    assertThat(f.register(2, 0, "m", BS).status()).isEqualTo(201);
    assertThat(f.register(2, 1, "m", BS).status()).isEqualTo(201);
  }

  private static String awaitBody(Supplier<HttpFixture.Reply> call, String prefix) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    HttpFixture.Reply r = call.get();
    while (!r.body().startsWith(prefix)) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("still " + r + " after " + WAIT + "; expected " + prefix);
      }
      sleep(20);
      r = call.get();
    }
    return r.body();
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Test
  void eventsPostedToEitherServerReachBothAndALateServerCatchesUp() {
    try (NatsServer nats = NatsServer.start();
        HttpFixture a = new HttpFixture(replica(nats, "a"));
        HttpFixture b = new HttpFixture(replica(nats, "b"))) {
      registerFleet(a);
      registerFleet(b);
      assertThat(a.get("/ready").status()).isEqualTo(200);

      HttpFixture.Reply viaA = a.events("m", list(stored(new Worker(1, 0), 0, range(0, 16), BS)));
      assertThat(viaA.status()).as(viaA.body()).isEqualTo(200);
      assertThat(viaA.body()).isEqualTo("{\"applied\":1}\n");
      HttpFixture.Reply viaB =
          b.events(
              "m",
              list(
                  stored(new Worker(2, 1), 0, range(0, 8), BS),
                  stored(new Worker(2, 0), 0, range(100, 12), BS)));
      assertThat(viaB.status()).as(viaB.body()).isEqualTo(200);

      // B answered after its own replica applied B's events; A's are in the stream before them
      String both = "{\"scores\":{\"1\":{\"0\":16},\"2\":{\"1\":8}}";
      assertThat(b.query("m", range(0, 16)).body()).startsWith(both);
      awaitBody(() -> a.query("m", range(0, 16)), both);
      awaitBody(() -> a.query("m", range(100, 12)), "{\"scores\":{\"2\":{\"0\":12}}");

      // a removal through A: blocks 2 and 3 of worker 1 go on both
      long[] seq = SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(range(0, 16)));
      RouterEvent removal =
          new RouterEvent(new Worker(1, 0), 1, CacheEvent.removed(seq[2], seq[3]));
      assertThat(a.events("m", list(removal)).status()).isEqualTo(200);
      String after = "{\"scores\":{\"1\":{\"0\":8},\"2\":{\"1\":8}}";
      assertThat(a.query("m", range(0, 16)).body()).startsWith(after);
      awaitBody(() -> b.query("m", range(0, 16)), after);

      // a third server started now follows the stream from its start (no snapshot yet)
      try (HttpFixture c = new HttpFixture(replica(nats, "c"))) {
        registerFleet(c);
        awaitBody(() -> c.get("/ready"), "{\"ready\":true");
        assertThat(c.query("m", range(0, 16)).body()).startsWith(after);
        assertThat(c.query("m", range(100, 12)).body())
            .startsWith("{\"scores\":{\"2\":{\"0\":12}}");
      }

      String labels = "{model_name=\"m\",routing_group=\"default\"}";
      assertThat(a.get("/metrics").body())
          .contains(
              "kvrouter_nats_messages_total" + labels + " 4.0",
              "kvrouter_nats_events_applied_total" + labels + " 4.0",
              "kvrouter_nats_decode_errors_total" + labels + " 0.0",
              "kvrouter_nats_gaps_total" + labels + " 0.0",
              "kvrouter_events_received_total{source=\"http\"} 2.0");
    }
  }

  @Test
  void whatTheNatsModeRefusesIsRefusedAndNothingIsPublished() {
    try (NatsServer nats = NatsServer.start();
        HttpFixture a = new HttpFixture(replica(nats, "a"));
        HttpFixture b = new HttpFixture(replica(nats, "b"))) {
      registerFleet(a);
      registerFleet(b);
      HttpFixture.Reply zmq =
          a.post(
              "/register",
              "{\"instance_id\":5,\"model_name\":\"m\",\"block_size\":4,"
                  + "\"endpoint\":\"tcp://127.0.0.1:5557\"}");
      assertThat(zmq.status()).isEqualTo(400);
      assertThat(zmq.body())
          .contains("endpoint: this server takes its events from NATS (--events)");
      // a batch with an unregistered rank is refused whole: nothing reaches the stream
      HttpFixture.Reply refused =
          a.events(
              "m",
              list(
                  stored(new Worker(1, 0), 0, range(0, 8), BS),
                  stored(new Worker(9, 0), 0, range(0, 8), BS)));
      assertThat(refused.status()).isEqualTo(404);
      assertThat(refused.body()).contains("event [1]: instance 9 dp_rank 0 is not registered");
      assertThat(a.events("m", list(stored(new Worker(2, 0), 0, range(50, 4), BS))).status())
          .isEqualTo(200);
      awaitBody(() -> b.query("m", range(50, 4)), "{\"scores\":{\"2\":{\"0\":4}}");
      assertThat(b.query("m", range(0, 8)).body()).startsWith("{\"scores\":{}");
      assertThat(b.get("/metrics").body())
          .contains(
              "kvrouter_nats_events_applied_total{model_name=\"m\",routing_group=\"default\"}"
                  + " 1.0");
    }
  }

  @Test
  void anUnreachableNatsStopsTheStartWithAMessage() throws IOException {
    int nobody;
    try (ServerSocket s = new ServerSocket(0)) {
      nobody = s.getLocalPort();
    }
    KvRouterServer.Config cfg =
        KvRouterServer.Config.builder()
            .host("127.0.0.1")
            .port(0)
            .events("nats://127.0.0.1:" + nobody)
            .build();
    assertThatThrownBy(() -> KvRouterServer.start(cfg))
        .isInstanceOf(KvRouterServer.StartException.class)
        .hasMessageStartingWith("events: cannot connect to NATS at nats://127.0.0.1:" + nobody);
    assertThatThrownBy(() -> KvRouterServer.Config.builder().events("127.0.0.1:4222").build())
        .hasMessageContaining("is not a NATS server URL; expected nats://host:port");
    assertThatThrownBy(
            () ->
                KvRouterServer.Config.builder()
                    .events("nats://127.0.0.1:4222")
                    .peer("http://127.0.0.1:8090")
                    .build())
        .hasMessageStartingWith("peer and events: choose one");
    assertThatThrownBy(
            () -> KvRouterServer.Config.builder().events("nats://h:1").replicaId("a.b").build())
        .hasMessageContaining("replica-id: 'a.b' may hold only");
    assertThatThrownBy(() -> KvRouterServer.Config.builder().natsApplyWait(Duration.ZERO).build())
        .hasMessage("natsApplyWait must be > 0, got PT0S");
    assertThat(
            KvRouterServer.Config.builder()
                .events("nats://h:1")
                .natsApplyWait(Duration.ofMillis(2500))
                .build()
                .describe())
        .containsEntry("nats-apply-wait-ms", "2500");
    assertThat(KvRouterServer.Config.builder().events("nats://h:1").build().natsApplyWait())
        .isEqualTo(Duration.ofSeconds(10));
  }

  @Test
  void aRestartedServerWithTheSameIdRecoversFromTheStream() {
    try (NatsServer nats = NatsServer.start()) {
      String expected;
      try (HttpFixture a = new HttpFixture(replica(nats, "a"))) {
        registerFleet(a);
        for (int i = 0; i < 20; i++) {
          assertThat(
                  a.events("m", list(stored(new Worker(1 + i % 2, 0), i, range(i * 100, 8), BS)))
                      .status())
              .isEqualTo(200);
        }
        expected = a.query("m", range(300, 8)).body();
        assertThat(expected).startsWith("{\"scores\":{\"2\":{\"0\":8}}");
      }
      try (HttpFixture again = new HttpFixture(replica(nats, "a"))) {
        registerFleet(again);
        awaitBody(() -> again.get("/ready"), "{\"ready\":true");
        assertThat(again.query("m", range(300, 8)).body()).isEqualTo(expected);
        assertThat(again.query("m", range(1900, 8)).body())
            .startsWith("{\"scores\":{\"2\":{\"0\":8}}");
      }
    }
  }

  private static HttpFixture.Reply eventsWithKey(HttpFixture f, String key, String body) {
    return f.send(
        HttpRequest.newBuilder(URI.create(f.url + "/events?model_name=m"))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString(body)));
  }

  private static double metric(HttpFixture f, String series) {
    for (String line : f.get("/metrics").body().split("\n")) {
      if (line.startsWith(series + " "))
        return Double.parseDouble(line.substring(series.length() + 1));
    }
    throw new AssertionError("no series " + series);
  }

  @Test
  void aBatchRetriedWithTheSameIdempotencyKeyIsStoredOnce() {
    try (NatsServer nats = NatsServer.start();
        HttpFixture a = new HttpFixture(replica(nats, "a"));
        HttpFixture b = new HttpFixture(replica(nats, "b"))) {
      registerFleet(a);
      registerFleet(b);
      String batch =
          RouterEventJson.writeEvents(
              list(
                  stored(new Worker(1, 0), 0, range(0, 8), BS),
                  stored(new Worker(2, 0), 0, range(40, 8), BS)));
      String messages = "kvrouter_nats_messages_total{model_name=\"m\",routing_group=\"default\"}";
      // the first attempt, and two retries of it (one through the other replica)
      assertThat(eventsWithKey(a, "batch-17", batch).body()).isEqualTo("{\"applied\":2}\n");
      assertThat(eventsWithKey(a, "batch-17", batch).body()).isEqualTo("{\"applied\":2}\n");
      assertThat(eventsWithKey(b, "batch-17", batch).body()).isEqualTo("{\"applied\":2}\n");
      assertThat(metric(a, "kvrouter_nats_publish_duplicates_total")).isEqualTo(2.0);
      assertThat(metric(b, "kvrouter_nats_publish_duplicates_total")).isEqualTo(2.0);
      // another key, or the same key with another body, is another batch
      assertThat(eventsWithKey(a, "batch-18", batch).status()).isEqualTo(200);
      String other =
          RouterEventJson.writeEvents(list(stored(new Worker(2, 1), 0, range(80, 4), BS)));
      assertThat(eventsWithKey(a, "batch-17", other).status()).isEqualTo(200);
      // without a key every post is stored; the last one marks the end for b
      assertThat(a.events("m", list(stored(new Worker(1, 0), 1, range(200, 4), BS))).status())
          .isEqualTo(200);
      awaitBody(() -> b.query("m", range(200, 4)), "{\"scores\":{\"1\":{\"0\":4}}");
      // 2 (batch-17) + 2 (batch-18) + 1 (batch-17, other body) + 1: each copy of batch-17 once
      assertThat(metric(b, messages)).isEqualTo(6.0);
      assertThat(metric(a, messages)).isEqualTo(6.0);
      assertThat(eventsWithKey(a, "with space", batch).status()).isEqualTo(400);
    }
  }

  /** "instance/dp_rank@model/group" for every rank /workers lists, in its order. */
  private static String ranks(String workersJson) {
    StringBuilder out = new StringBuilder();
    Pattern head =
        Pattern.compile("^(\\d+),\"model_name\":\"([^\"]*)\",\"routing_group\":\"([^\"]*)\"");
    Pattern rank = Pattern.compile("\\{\"dp_rank\":(\\d+)");
    for (String entry : workersJson.split("\\{\"instance_id\":")) {
      Matcher h = head.matcher(entry);
      if (!h.find()) continue;
      Matcher r = rank.matcher(entry);
      while (r.find()) {
        out.append(out.isEmpty() ? "" : " ")
            .append(h.group(1))
            .append('/')
            .append(r.group(1))
            .append('@')
            .append(h.group(2))
            .append('/')
            .append(h.group(3));
      }
    }
    return out.toString();
  }

  @Test
  void aRestartedReplicaKnowsTheRegistrationsOfTheFleet() {
    try (NatsServer nats = NatsServer.start();
        HttpFixture a = new HttpFixture(replica(nats, "a"))) {
      try (HttpFixture b = new HttpFixture(replica(nats, "b"))) {
        // registered on A only: B follows through the stream
        registerFleet(a);
        assertThat(
                a.post(
                        "/register",
                        "{\"instance_id\":3,\"model_name\":\"n\",\"routing_group\":\"g\","
                            + "\"block_size\":8,\"capacity_blocks\":100}")
                    .status())
            .isEqualTo(201);
        awaitBody(() -> b.get("/ready"), "{\"ready\":true,\"indexes\":2");
        assertThat(ranks(b.get("/workers").body()))
            .isEqualTo("1/0@m/default 2/0@m/default 2/1@m/default 3/0@n/g");
        // the same registration again, on B: accepted as it is; another one is a 409
        assertThat(b.register(1, 0, "m", BS).status()).isEqualTo(201);
        assertThat(b.register(1, 0, "m", 2 * BS).status()).isEqualTo(409);
        assertThat(
                a.events(
                        "m",
                        list(
                            stored(new Worker(1, 0), 0, range(0, 8), BS),
                            stored(new Worker(2, 0), 0, range(0, 8), BS)))
                    .status())
            .isEqualTo(200);
      }
      // while B is down: rank 2/0 and the whole of model n go, instance 4 comes
      HttpFixture.Reply gone =
          a.post("/unregister", "{\"instance_id\":2,\"model_name\":\"m\",\"dp_rank\":0}");
      assertThat(gone.status()).as(gone.body()).isEqualTo(200);
      assertThat(a.post("/unregister", "{\"instance_id\":3,\"model_name\":\"n\"}").status())
          .isEqualTo(200);
      assertThat(
              a.post(
                      "/register",
                      "{\"instance_id\":4,\"model_name\":\"m\",\"block_size\":"
                          + BS
                          + ",\"base_url\":\"http://10.0.0.4:8000\"}")
                  .status())
          .isEqualTo(201);
      assertThat(a.post("/unregister", "{\"instance_id\":3,\"model_name\":\"n\"}").status())
          .isEqualTo(404);
      String expected = "1/0@m/default 2/1@m/default 4/0@m/default";
      assertThat(ranks(a.get("/workers").body())).isEqualTo(expected);

      try (HttpFixture again = new HttpFixture(replica(nats, "b"))) {
        // start() returned after replaying the log: the registrations are there at once
        assertThat(ranks(again.get("/workers").body())).isEqualTo(expected);
        assertThat(again.get("/workers").body())
            .contains("\"ingestion\":\"nats\"", "\"base_url\":\"http://10.0.0.4:8000\"");
        awaitBody(() -> again.get("/ready"), "{\"ready\":true,\"indexes\":1,");
        // worker 2 rank 0's blocks went with it (its Cleared is in the event stream)
        assertThat(again.query("m", range(0, 8)).body())
            .startsWith("{\"scores\":{\"1\":{\"0\":8}}");
        assertThat(a.query("m", range(0, 8)).body()).startsWith("{\"scores\":{\"1\":{\"0\":8}}");
        assertThat(again.get("/metrics").body())
            .contains(
                "kvrouter_nats_registration_ops_total{op=\"register\",outcome=\"applied\"} 5.0",
                "kvrouter_nats_registration_ops_total{op=\"unregister\",outcome=\"applied\"} 2.0",
                // two stored events and the Cleared that the unregistration of 2/0 published
                "kvrouter_nats_events_applied_total{model_name=\"m\",routing_group=\"default\"} 3.0");
        // what the restarted replica registers reaches A
        assertThat(again.register(5, 0, "m", BS).status()).isEqualTo(201);
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!ranks(a.get("/workers").body()).endsWith("5/0@m/default")) {
          assertThat(System.nanoTime()).as("A lists instance 5").isLessThan(deadline);
          sleep(20);
        }
      }
    }
  }

  @Test
  void aBatchWhoseStoreWasNotConfirmedIsRetriedSafely() {
    try (NatsServer nats = NatsServer.start();
        HttpFixture a = new HttpFixture(replica(nats, "a").natsApplyWait(Duration.ofSeconds(2)))) {
      registerFleet(a);
      String batch =
          RouterEventJson.writeEvents(
              list(
                  stored(new Worker(1, 0), 0, range(0, 8), BS),
                  stored(new Worker(2, 0), 0, range(40, 8), BS)));
      nats.pause();
      // NATS is down: the publish is not acknowledged, though jnats holds it for the reconnection
      HttpFixture.Reply lost = eventsWithKey(a, "outage-1", batch);
      assertThat(lost.status()).isEqualTo(503);
      assertThat(lost.body())
          .contains(
              "NATS did not confirm storing event [0]",
              "the store was not confirmed: event [0] may have been published",
              "Retry the same batch with the same Idempotency-Key")
          .doesNotContain("nothing was published");
      nats.startAgain();
      // the retry, once NATS is back (the connection comes back by itself)
      HttpFixture.Reply retry = eventsWithKey(a, "outage-1", batch);
      long deadline = System.nanoTime() + WAIT.toNanos();
      while (retry.status() != 200 && System.nanoTime() < deadline) {
        sleep(100);
        retry = eventsWithKey(a, "outage-1", batch);
      }
      assertThat(retry.body()).isEqualTo("{\"applied\":2}\n");
      assertThat(a.query("m", range(40, 8)).body()).startsWith("{\"scores\":{\"2\":{\"0\":8}}");
      // whatever the first attempt got into the stream, each event is there once
      String messages = "kvrouter_nats_messages_total{model_name=\"m\",routing_group=\"default\"}";
      assertThat(metric(a, messages)).isEqualTo(2.0);
    }
  }
}
