package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.helidon.http.Method;
import io.helidon.webserver.http.HttpRouting;
import io.kvrouter.event.Worker;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.transport.kvevents.ClearScope;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

/**
 * {@code base_url} on {@code /register} (the gateway's engine address): checked, normalised, echoed
 * in {@code /workers} and {@code /dump}, restored by a warm start; and the ServerExtension hook:
 * extra routes on the same server, seeing the registrations.
 */
class BaseUrlRegistrationTest {
  static String reg(String baseUrl) {
    return "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4,\"base_url\":" + baseUrl + "}";
  }

  @Test
  void baseUrlIsCheckedEchoedDumpedAndWarmStarted() {
    try (HttpFixture a = new HttpFixture()) {
      assertThat(a.post("/register", reg("\"ftp://x\"")).status()).isEqualTo(400);
      HttpFixture.Reply bad = a.post("/register", reg("\"http://h:1/?q=1\""));
      assertThat(bad.status()).isEqualTo(400);
      assertThat(bad.body()).contains("base_url");
      for (String port : new String[] {"\"http://h:99999\"", "\"http://h:0/v1\""}) {
        HttpFixture.Reply r = a.post("/register", reg(port));
        assertThat(r.status()).as(port).isEqualTo(400);
        assertThat(r.body()).as(port).contains("a port is 1 to 65535");
      }
      assertThat(a.get("/workers").body()).isEqualTo("[]\n");
      HttpFixture.Reply ok = a.post("/register", reg("\"http://10.0.0.5:8000/v1/\""));
      assertThat(ok.status()).isEqualTo(201);
      assertThat(ok.body()).contains("\"base_url\":\"http://10.0.0.5:8000\"");
      assertThat(a.get("/workers").body()).contains("\"base_url\":\"http://10.0.0.5:8000\"");
      assertThat(a.get("/dump").body()).contains("\"base_url\":\"http://10.0.0.5:8000\"");
      try (HttpFixture b = new HttpFixture(KvRouterServer.Config.builder().peer(a.url))) {
        assertThat(b.get("/workers").body()).contains("\"base_url\":\"http://10.0.0.5:8000\"");
      }
    }
  }

  @Test
  void roleIsCheckedEchoedDumpedAndWarmStarted() {
    try (HttpFixture a = new HttpFixture()) {
      HttpFixture.Reply bad =
          a.post(
              "/register",
              "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4,\"role\":\"decoder\"}");
      assertThat(bad.status()).isEqualTo(400);
      assertThat(bad.body())
          .contains("role")
          .contains("\\\"prefill\\\", \\\"decode\\\" or \\\"both\\\"");
      assertThat(
              a.post(
                      "/register",
                      "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4,"
                          + "\"base_url\":\"http://p:1\",\"role\":\"prefill\"}")
                  .status())
          .isEqualTo(201);
      assertThat(
              a.post(
                      "/register",
                      reg("\"http://b:1\"").replace("\"instance_id\":1", "\"instance_id\":2"))
                  .status())
          .isEqualTo(201);
      String workers = a.get("/workers").body();
      // "both", the default, is not written
      assertThat(workers.split("\"role\":", -1)).hasSize(2);
      assertThat(workers).contains("\"role\":\"prefill\"");
      assertThat(a.get("/dump").body()).contains("\"role\":\"prefill\"");
      try (HttpFixture b = new HttpFixture(KvRouterServer.Config.builder().peer(a.url))) {
        assertThat(b.get("/workers").body()).contains("\"role\":\"prefill\"");
      }
    }
  }

  @Test
  void anExtensionServesBesideTheRouterAndSeesItsRanks() {
    ServerHost[] seen = new ServerHost[1];
    boolean[] closed = new boolean[1];
    ServerExtension ext =
        new ServerExtension() {
          @Override
          public void routing(HttpRouting.Builder r, ServerHost host) {
            seen[0] = host;
            r.route(
                Method.GET,
                "/ext",
                (req, res) -> {
                  RouterModel m = host.model("m", null);
                  res.send(m == null ? "none" : m.baseUrl(new Worker(1, 0)));
                });
          }

          @Override
          public void close() {
            closed[0] = true;
          }
        };
    KvRouterServer s = KvRouterServer.start(KvRouterServer.Config.builder().port(0).build(), ext);
    try {
      HttpFixture.Reply none = new HttpFixtureClient(s.url()).get("/ext");
      assertThat(none.body()).isEqualTo("none");
      RouterModel m = seen[0].register(Registration.of("m", 4, 1, 0, "http://e:9"));
      // an engine with a base URL and no event source is tracked by predictions
      assertThat(m.ranks())
          .containsExactly(
              new RouterModel.Rank(
                  new Worker(1, 0), "http://e:9", 4, EngineRole.BOTH, KvSource.PREDICTED));
      assertThat(new HttpFixtureClient(s.url()).get("/ext").body()).isEqualTo("http://e:9");
      seen[0].register(
          new Registration(
              "m",
              null,
              4,
              2,
              0,
              "http://d:9",
              null,
              null,
              null,
              EngineRole.DECODE,
              ClearScope.DEVICE));
      assertThat(m.ranks())
          .containsExactly(
              new RouterModel.Rank(
                  new Worker(1, 0), "http://e:9", 4, EngineRole.BOTH, KvSource.PREDICTED),
              new RouterModel.Rank(
                  new Worker(2, 0), "http://d:9", 4, EngineRole.DECODE, KvSource.PREDICTED));
      // the router's own endpoints and its 404 are still there
      assertThat(new HttpFixtureClient(s.url()).get("/workers").body()).contains("http://e:9");
      assertThat(new HttpFixtureClient(s.url()).get("/nope").status()).isEqualTo(404);
      m.accuracy(new Worker(1, 0)).record(8, 4);
      assertThat(new HttpFixtureClient(s.url()).get("/workers").body())
          .contains(
              "\"prediction\":{\"compared\":1,\"exact\":0,\"engine_fewer\":1,\"engine_more\":0");
    } finally {
      s.stop();
    }
    assertThat(closed[0]).isTrue();
  }

  /** The gateway's prediction counters of a rank go with the rank: churn leaves none behind. */
  @Test
  void predictionCountersOfUnregisteredRanksAreDropped() {
    try (HttpFixture a = new HttpFixture()) {
      String keep = "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4}";
      assertThat(a.post("/register", keep).status()).isEqualTo(201);
      ModelIndex m = a.server.registry().get(new ModelKey("m", "default"));
      m.accuracy(new Worker(1, 0)).record(8, 8);
      for (int id = 2; id < 42; id++) {
        String r = keep.replace("\"instance_id\":1", "\"instance_id\":" + id);
        assertThat(a.post("/register", r).status()).isEqualTo(201);
        m.accuracy(new Worker(id, 0)).record(8, 4);
        assertThat(m.accuracyCount()).isEqualTo(2);
        assertThat(
                a.post("/unregister", "{\"instance_id\":" + id + ",\"model_name\":\"m\"}").status())
            .isEqualTo(200);
        assertThat(m.accuracyCount()).isEqualTo(1);
        // an unregistered rank gets counters that are not kept
        m.accuracy(new Worker(id, 0)).record(8, 4);
        assertThat(m.accuracyCount()).isEqualTo(1);
      }
      assertThat(m.accuracy(new Worker(1, 0)).compared()).isEqualTo(1);
    }
  }

  /** A client of a server that HttpFixture did not start. */
  static final class HttpFixtureClient {
    final String url;

    HttpFixtureClient(String url) {
      this.url = url;
    }

    HttpFixture.Reply get(String path) {
      try {
        HttpResponse<String> r =
            HttpFixture.CLIENT.send(
                HttpRequest.newBuilder(URI.create(url + path)).build(),
                HttpResponse.BodyHandlers.ofString());
        return new HttpFixture.Reply(r.statusCode(), r.body(), r);
      } catch (Exception e) {
        throw new AssertionError(e);
      }
    }
  }
}
