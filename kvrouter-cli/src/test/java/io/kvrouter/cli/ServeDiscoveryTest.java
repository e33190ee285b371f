package io.kvrouter.cli;

import static io.kvrouter.cli.KubeApi.pod;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fabric8.kubernetes.api.model.Pod;
import io.kvrouter.discovery.DiscoveryConfig;
import io.kvrouter.discovery.KubernetesDiscovery;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.mockengine.MockEngines;
import io.kvrouter.route.EngineRole;
import io.kvrouter.server.KvRouterServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * {@code serve --discovery kubernetes}'s wiring (DiscoveryEndpoint, ServeSink) against fabric8's
 * mock API server: the server's registered ranks, with their KV event endpoints, follow the Ready
 * pods, and {@code /ready} is 503 until the discovery found an engine.
 */
class ServeDiscoveryTest {
  private static final HttpClient HTTP = HttpClient.newHttpClient();
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, String> LABELS = Map.of("app", "vllm-tiny");
  private static final Map<String, String> TINY = Map.of("kvrouter.io/model", "tiny");

  private static int port(String endpoint) {
    return Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1));
  }

  private static HttpResponse<String> get(KvRouterServer s, String path) {
    try {
      return HTTP.send(
          HttpRequest.newBuilder(URI.create(s.url() + path)).build(),
          HttpResponse.BodyHandlers.ofString());
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  /** The KV event endpoints of the server's registered ranks. */
  private static TreeSet<String> endpoints(KvRouterServer s) {
    TreeSet<String> out = new TreeSet<>();
    try {
      for (JsonNode w : JSON.readTree(get(s, "/workers").body())) {
        w.path("endpoints").forEach(e -> out.add(e.asText()));
      }
    } catch (Exception e) {
      throw new AssertionError(e);
    }
    return out;
  }

  /** The ZMQ endpoints of the Ready pods in the store, as the test sees them. */
  private static TreeSet<String> readyEndpoints(KubeApi api) {
    TreeSet<String> out = new TreeSet<>();
    for (Pod p : api.pods()) {
      if (!KubeApi.ready(p)) continue;
      int events = p.getSpec().getContainers().get(0).getPorts().get(1).getContainerPort();
      out.add("tcp://" + p.getStatus().getPodIP() + ":" + events);
    }
    return out;
  }

  private static void await(String what, BooleanSupplier cond) {
    long end = System.nanoTime() + Duration.ofSeconds(90).toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() - end > 0) throw new AssertionError("not in time: " + what);
      LockSupport.parkNanos(Duration.ofMillis(10).toNanos());
    }
  }

  @Test
  void theServersRanksFollowTheReadyPods() throws Exception {
    List<AutoCloseable> open = new ArrayList<>();
    try (KubeApi api = new KubeApi()) {
      DiscoveryConfig dc =
          DiscoveryConfig.labelSelector(KubeApi.NS, "app=vllm-tiny")
              .withDefaults(null, 4, EngineRole.BOTH)
              .withRetry(Duration.ofMillis(50), Duration.ofMillis(400));
      DiscoveryEndpoint found = new DiscoveryEndpoint(dc);
      KvRouterServer server =
          KvRouterServer.start(KvRouterServer.Config.builder().port(0).build(), found);
      open.add(server);
      HttpResponse<String> starting = get(server, "/ready");
      assertThat(starting.statusCode()).isEqualTo(503);
      assertThat(starting.body()).contains("discovery: starting");
      found.attach(
          KubernetesDiscovery.start(
              api.config(), dc, new ServeSink(found.host(), found.metrics())));
      // the mock server's watch does not replay what changed between the list and the watch's
      // start (an API server does): change nothing before it is open
      await(
          "the pods watched",
          () -> get(server, "/discovery").body().contains("\"connected\":true"));
      assertThat(get(server, "/ready").body()).contains("discovery: no engine among the Ready");

      String[] ips = {"127.0.0.2", "127.0.0.3"};
      for (int i = 0; i < ips.length; i++) {
        MockEngineServer e =
            MockEngineServer.start(
                MockEngineServer.Config.builder()
                    .host(ips[i])
                    .port(0)
                    .modelDir(MockEngines.tinyModel())
                    .servedModelName("tiny")
                    .blockSize(4)
                    .kvEvents(KvEventsConfig.zmq("tcp://" + ips[i] + ":*", null))
                    .build());
        open.add(e);
        api.create(pod("e" + i, LABELS, TINY, ips[i], i == 0, e.port(), port(e.zmqEndpoint()), 0));
      }
      await("ranks equal to the Ready pods", () -> endpoints(server).equals(readyEndpoints(api)));
      assertThat(endpoints(server)).hasSize(1);
      await("ready", () -> get(server, "/ready").statusCode() == 200);
      api.setReady("e1", true);
      await("ranks equal to the Ready pods", () -> endpoints(server).equals(readyEndpoints(api)));
      assertThat(endpoints(server)).hasSize(2);
      api.delete("e0");
      await("ranks equal to the Ready pods", () -> endpoints(server).equals(readyEndpoints(api)));
      assertThat(endpoints(server)).hasSize(1);
      // the fence (see GatewayDiscoveryTest): a last pod seen before the discovery closes
      api.create(pod("zz-fence", LABELS, TINY, "127.0.0.250", true, 8000, 0, 0));
      await("the fence seen", () -> get(server, "/discovery").body().contains("zz-fence"));
    } finally {
      for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
    }
  }
}
