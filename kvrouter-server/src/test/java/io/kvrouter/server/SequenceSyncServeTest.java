package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.json;
import static io.kvrouter.server.HttpFixture.range;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.transport.nats.NatsServer;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Two servers with sequence sync on one real nats-server: a request routed on one is load on the
 * other (its next decision avoids that worker), freed there it is gone here, /metrics counts the
 * peer, and a stopped server's requests leave with it. docs/service.md, "Several replicas share
 * their in-flight load".
 */
class SequenceSyncServeTest {
  private static final int BS = 4;
  private static final Duration WAIT = Duration.ofSeconds(15);
  private static final ModelKey M = new ModelKey("m", null);

  private static KvRouterServer.Config.Builder replica(String sync, String id) {
    return KvRouterServer.Config.builder()
        .sync(sync)
        .replicaId(id)
        .syncHeartbeat(Duration.ofMillis(100));
  }

  private static void registerFleet(HttpFixture f) {
    assertThat(f.register(1, 0, "m", BS).status()).isEqualTo(201);
    assertThat(f.register(2, 0, "m", BS).status()).isEqualTo(201);
  }

  private static String route(HttpFixture f, String id, int from, String allowed) {
    HttpFixture.Reply r =
        f.post(
            "/route",
            "{\"request_id\":\""
                + id
                + "\",\"model_name\":\"m\","
                + (allowed == null ? "" : "\"allowed_instances\":" + allowed + ",")
                + "\"token_ids\":"
                + json(range(from, 16))
                + "}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    return r.body();
  }

  private static void awaitSameLoads(HttpFixture of, HttpFixture other) throws Exception {
    ModelIndex x = of.server.registry().get(M);
    ModelIndex y = other.server.registry().get(M);
    assertThat(y.sync.await(() -> y.router.loads().equals(x.router.loads()), WAIT))
        .as("loads %s", x.router.loads())
        .isTrue();
  }

  private static void awaitReady(HttpFixture f) throws Exception {
    ModelIndex m = f.server.registry().get(M);
    assertThat(m.sync.await(m.sync::ready, WAIT)).isTrue();
    assertThat(f.get("/ready").status()).isEqualTo(200);
  }

  @Test
  @SuppressWarnings("try") // server a is closed mid-test to say goodbye, and again by the try
  void aRequestRoutedOnOneServerIsLoadOnTheOther() throws Exception {
    try (NatsServer nats = NatsServer.start();
        HttpFixture a = new HttpFixture(replica(nats.url(), "a"));
        HttpFixture b = new HttpFixture(replica(nats.url(), "b"));
        HttpFixture alone = new HttpFixture(replica("off", null))) {
      registerFleet(a);
      registerFleet(b);
      registerFleet(alone);
      awaitReady(a);
      awaitReady(b);
      assertThat(alone.server.registry().get(M).sync).isNull();

      assertThat(route(a, "r1", 0, "[1]")).contains("\"instance_id\":1");
      awaitSameLoads(a, b);
      // the same prompt size elsewhere: b avoids a's loaded worker, a server without sync does not
      assertThat(route(b, "q1", 100, null)).contains("\"instance_id\":2");
      assertThat(route(alone, "q1", 100, null)).contains("\"instance_id\":1");

      String metrics = b.get("/metrics").body();
      assertThat(metrics)
          .contains("kvrouter_sync_peers{model_name=\"m\",routing_group=\"default\"} 1.0")
          .contains("kvrouter_sync_peer_requests{model_name=\"m\",routing_group=\"default\"} 1.0")
          .contains(
              "kvrouter_sync_changes_applied_total{model_name=\"m\",routing_group=\"default\"}")
          .contains("kvrouter_sync_lag_seconds_count{model_name=\"m\",routing_group=\"default\"}")
          // event mode shares no predictions: exported, and zero
          .contains(
              "kvrouter_sync_predictions_applied_total{model_name=\"m\",routing_group=\"default\"}"
                  + " 0.0");

      assertThat(a.post("/requests/r1/free", "").status()).isEqualTo(200);
      awaitSameLoads(b, a);
      awaitSameLoads(a, b);
      ModelIndex mb = b.server.registry().get(M);
      assertThat(mb.router.inFlight()).isEqualTo(1); // b's own q1 only

      a.close(); // a goodbye: b drops a at once
      assertThat(mb.sync.await(() -> mb.sync.stats().peers() == 0, WAIT)).isTrue();
    }
  }

  @Test
  void syncIsOnByDefaultWithEventsAndOffWithoutOrWhenAsked() {
    String url = "nats://127.0.0.1:4222";
    assertThat(KvRouterServer.Config.builder().events(url).build().effectiveSync()).isEqualTo(url);
    assertThat(KvRouterServer.Config.builder().events(url).sync("off").build().effectiveSync())
        .isNull();
    assertThat(KvRouterServer.Config.builder().build().effectiveSync()).isNull();
    assertThat(
            KvRouterServer.Config.builder()
                .events(url)
                .sync("nats://10.0.0.1:4222")
                .build()
                .effectiveSync())
        .isEqualTo("nats://10.0.0.1:4222");
  }
}
