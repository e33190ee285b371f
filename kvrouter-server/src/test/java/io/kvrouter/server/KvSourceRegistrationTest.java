package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.list;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.route.KvSource;
import io.kvrouter.route.RoutingSettings;
import org.junit.jupiter.api.Test;

/**
 * {@code kv_source} of {@code POST /register} (docs/service.md): a rank with a base URL and no
 * event source is tracked by predictions, the others by events; {@code kv_source} names it
 * explicitly; {@code --approximate} predicts every rank; {@code /workers}, {@code /dump} and a warm
 * start carry it; a predicted rank's {@code /events} are refused.
 */
class KvSourceRegistrationTest {
  static final int BS = 4;

  static String reg(long id, String extra) {
    return "{\"instance_id\":" + id + ",\"model_name\":\"m\",\"block_size\":4" + extra + "}";
  }

  @Test
  void aBaseUrlWithoutAnEventSourceIsPredictedAndEverythingElseFedByEvents() {
    try (HttpFixture a = new HttpFixture()) {
      HttpFixture.Reply p = a.post("/register", reg(1, ",\"base_url\":\"http://e:1\""));
      assertThat(p.status()).as(p.body()).isEqualTo(201);
      assertThat(p.body()).contains("\"ingestion\":\"none\",\"kv_source\":\"predicted\"");
      HttpFixture.Reply e = a.post("/register", reg(2, ""));
      assertThat(e.body()).contains("\"ingestion\":\"http\",\"kv_source\":\"events\"");
      HttpFixture.Reply named =
          a.post("/register", reg(3, ",\"base_url\":\"http://e:3\",\"kv_source\":\"events\""));
      assertThat(named.body()).contains("\"kv_source\":\"events\"");
      ModelIndex m = a.server.registry().get(new ModelKey("m", null));
      assertThat(m.router.kvSource(new Worker(1, 0))).isEqualTo(KvSource.PREDICTED);
      assertThat(m.router.kvSource(new Worker(2, 0))).isEqualTo(KvSource.EVENTS);
      assertThat(m.router.kvSource(new Worker(3, 0))).isEqualTo(KvSource.EVENTS);
      assertThat(a.get("/workers").body())
          .contains("\"ingestion\":\"none\",\"kv_source\":\"predicted\"")
          .contains("\"ingestion\":\"http\",\"kv_source\":\"events\"");

      // events of an events rank are applied; of a predicted rank refused, naming it
      assertThat(a.events("m", list(stored(new Worker(3, 0), 0, range(0, 8), BS))).status())
          .isEqualTo(200);
      HttpFixture.Reply refused = a.events("m", list(stored(new Worker(1, 0), 0, range(0, 8), BS)));
      assertThat(refused.status()).isEqualTo(409);
      assertThat(refused.body())
          .contains("instance 1 dp_rank 0", "tracked by predictions", "nothing was applied");

      // a rank is one or the other
      HttpFixture.Reply both =
          a.post(
              "/register",
              reg(4, ",\"endpoint\":\"tcp://127.0.0.1:5557\",\"kv_source\":\"predicted\""));
      assertThat(both.status()).isEqualTo(400);
      assertThat(both.body()).contains("kv_source: predicted, but an endpoint is given");
      HttpFixture.Reply bogus = a.post("/register", reg(5, ",\"kv_source\":\"guess\""));
      assertThat(bogus.status()).isEqualTo(400);
      assertThat(bogus.body()).contains("kv_source", "events or predicted");

      // the dump and a warm-started peer keep each rank's source
      assertThat(a.get("/dump").body()).contains("\"kv_source\":\"predicted\"");
      try (HttpFixture b = new HttpFixture(KvRouterServer.Config.builder().peer(a.url))) {
        ModelIndex mb = b.server.registry().get(new ModelKey("m", null));
        assertThat(mb.router.kvSource(new Worker(1, 0))).isEqualTo(KvSource.PREDICTED);
        assertThat(mb.router.kvSource(new Worker(3, 0))).isEqualTo(KvSource.EVENTS);
        assertThat(mb.router.index().blockCount(new Worker(3, 0))).isEqualTo(2);
      }
    }
  }

  @Test
  void approximatePredictsEveryRankAndRefusesEventSources() {
    try (HttpFixture a =
        new HttpFixture(
            KvRouterServer.Config.builder()
                .routing(RoutingSettings.DEFAULTS.withApproximate(true)))) {
      HttpFixture.Reply plain = a.post("/register", reg(1, ""));
      assertThat(plain.body()).contains("\"kv_source\":\"predicted\"");
      HttpFixture.Reply zmq = a.post("/register", reg(2, ",\"endpoint\":\"tcp://127.0.0.1:5557\""));
      assertThat(zmq.status()).isEqualTo(400);
      assertThat(zmq.body()).contains("--approximate", "nothing was registered");
      HttpFixture.Reply events = a.post("/register", reg(3, ",\"kv_source\":\"events\""));
      assertThat(events.status()).isEqualTo(400);
      assertThat(a.get("/workers").body()).doesNotContain("\"instance_id\":2");
    }
  }
}
