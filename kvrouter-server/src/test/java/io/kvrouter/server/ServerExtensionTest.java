package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.helidon.webserver.http.HttpRouting;
import io.kvrouter.event.Worker;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * What an extension adds to the server besides routes: its reason in {@code GET /ready}, its
 * unregistrations through {@link ServerHost#unregister}, several extensions as one ({@link
 * ServerExtension#of}).
 */
class ServerExtensionTest {

  /** An extension whose reason the test sets, recording its close. */
  private static final class Probe implements ServerExtension {
    final String name;
    final List<String> closed;
    final AtomicReference<String> reason = new AtomicReference<>();
    final List<String> registered = new CopyOnWriteArrayList<>();
    volatile ServerHost host;

    Probe(String name, List<String> closed) {
      this.name = name;
      this.closed = closed;
    }

    @Override
    public void routing(HttpRouting.Builder routing, ServerHost host) {
      this.host = host;
    }

    @Override
    public String notReadyReason() {
      return reason.get();
    }

    @Override
    public void registered(RouterModel model, RouterModel.Rank rank) {
      registered.add(model.modelName() + "/" + rank.worker());
    }

    @Override
    public void close() {
      closed.add(name);
    }
  }

  @Test
  void theFirstExtensionReasonHoldsReadyBackAndClosesRunInReverse() {
    List<String> closed = new CopyOnWriteArrayList<>();
    Probe a = new Probe("a", closed);
    Probe b = new Probe("b", closed);
    try (HttpFixture http =
        new HttpFixture(KvRouterServer.Config.builder(), ServerExtension.of(a, b))) {
      assertThat(http.get("/ready").status()).isEqualTo(200);
      b.reason.set("b waits for its engines");
      HttpFixture.Reply r = http.get("/ready");
      assertThat(r.status()).isEqualTo(503);
      assertThat(r.body()).contains("\"reason\":\"b waits for its engines\"");
      a.reason.set("a waits too");
      assertThat(http.get("/ready").body()).contains("\"reason\":\"a waits too\"");
      a.reason.set(null);
      b.reason.set(null);
      assertThat(http.get("/ready").status()).isEqualTo(200);
      // the extension's reason does not make the server refuse its own endpoints
      assertThat(http.get("/workers").status()).isEqualTo(200);
    }
    assertThat(closed).containsExactly("b", "a");
  }

  @Test
  void theServersOwnReasonsComeFirst() {
    Probe a = new Probe("a", new CopyOnWriteArrayList<>());
    HttpFixture http = new HttpFixture(KvRouterServer.Config.builder(), a);
    a.reason.set("no engine");
    assertThat(http.get("/ready").body()).contains("no engine");
    // stopping wins over the extension's reason (asked while stop() has begun: isReady false)
    http.close();
    assertThat(http.server.isReady()).isFalse();
    assertThat(http.server.readiness().reason()).isEqualTo("shutting down");
  }

  @Test
  void anExtensionUnregistersARankAsPostUnregisterDoes() {
    Probe a = new Probe("a", new CopyOnWriteArrayList<>());
    try (HttpFixture http = new HttpFixture(KvRouterServer.Config.builder(), a)) {
      a.host.register(ServerHost.Registration.of("m", 4, 7, 0, "http://127.0.0.1:9"));
      a.host.register(ServerHost.Registration.of("m", 4, 7, 1, "http://127.0.0.1:9"));
      assertThat(a.host.model("m", null).ranks()).hasSize(2);
      assertThat(a.host.model("m", null).listenerState(new Worker(7, 0))).isNull();
      assertThat(a.host.unregister("m", null, 7, 1)).isEqualTo(1);
      assertThat(a.host.model("m", null).ranks())
          .extracting(RouterModel.Rank::worker)
          .containsExactly(new Worker(7, 0));
      assertThatThrownBy(() -> a.host.unregister("m", null, 7, 1))
          .isInstanceOf(ServerHost.HttpError.class)
          .hasMessageContaining("instance 7 dp_rank 1 is not registered for model 'm'")
          .extracting(e -> ((ServerHost.HttpError) e).status())
          .isEqualTo(404);
      assertThat(a.host.unregister("m", null, 7, -1)).isEqualTo(1);
      assertThat(a.host.model("m", null)).isNull();
      assertThat(http.get("/workers").body()).doesNotContain("\"instance_id\":7");
    }
  }

  @Test
  void everyCombinedExtensionHearsOfEachRegistration() {
    List<String> closed = new CopyOnWriteArrayList<>();
    Probe a = new Probe("a", closed);
    Probe b = new Probe("b", closed);
    try (HttpFixture http =
        new HttpFixture(KvRouterServer.Config.builder(), ServerExtension.of(a, b))) {
      a.host.register(ServerHost.Registration.of("m", 4, 7, 0, "http://127.0.0.1:9"));
      assertThat(a.registered).containsExactly("m/" + new Worker(7, 0));
      assertThat(b.registered).containsExactly("m/" + new Worker(7, 0));
      assertThat(http.get("/workers").body()).contains("\"instance_id\":7");
    }
  }
}
