package io.kvrouter.cli;

import static io.kvrouter.cli.KubeApi.pod;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceList;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.dsl.NonNamespaceOperation;
import io.fabric8.kubernetes.client.dsl.Resource;
import io.fabric8.kubernetes.client.dsl.base.ResourceDefinitionContext;
import io.kvrouter.discovery.DiscoveryConfig;
import io.kvrouter.discovery.KubernetesDiscovery;
import io.kvrouter.discovery.MockApiServer;
import io.kvrouter.gateway.Gateway;
import io.kvrouter.gateway.GatewayConfig;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.mockengine.MockEngines;
import io.kvrouter.route.EngineRole;
import io.kvrouter.server.KvRouterServer;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@code gateway --discovery kubernetes}'s wiring (DiscoveryEndpoint, GatewaySink) against
 * fabric8's mock API server in CRUD mode, with mock engines behind the pods on 127.0.0.x addresses
 * (all loopback on Linux): as pods are created, turn Ready, lose readiness and are deleted, the
 * gateway's {@code /workers} equals the Ready pods (computed by the test from the store), chats are
 * served by their engines only, and {@code /ready}, {@code /discovery} and {@code /metrics} say so.
 */
class GatewayDiscoveryTest {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, String> LABELS = Map.of("app", "vllm-tiny");
  private static final Map<String, String> TINY =
      Map.of("kvrouter.io/model", "tiny", "kvrouter.io/block-size", "4");
  private static final Duration DEADLINE = Duration.ofSeconds(90);

  private final List<AutoCloseable> open = new ArrayList<>();
  private KubeApi api;
  private Gateway gateway;

  /** The labels of the pod tearDown creates last (they must be ones the discovery selects). */
  private Map<String, String> fenceLabels = LABELS;

  /** The engine of each pod, by pod name. */
  private final Map<String, MockEngineServer> engines = new HashMap<>();

  @AfterEach
  void tearDown() throws Exception {
    if (gateway != null) {
      // the mock server can hang a watch closed while it still sends: let the discovery see a
      // last pod first (the mock's watch then has nothing left to send)
      api.create(pod("zz-fence", fenceLabels, TINY, "127.0.0.250", true, 8000, 0, 0));
      await(
          "the fence pod seen", () -> discovery().path("engines").toString().contains("zz-fence"));
      gateway.close();
    }
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
    if (api != null) api.close();
  }

  private void start(Duration drainBound) throws Exception {
    start(
        drainBound,
        DiscoveryConfig.labelSelector(KubeApi.NS, "app=vllm-tiny"),
        GatewayConfig.builder().model("tiny", MockEngines.tinyModel()).build());
  }

  private void start(Duration drainBound, DiscoveryConfig selects, GatewayConfig config)
      throws Exception {
    if (api == null) api = new KubeApi();
    DiscoveryConfig dc =
        selects
            .withDefaults(null, DiscoveryConfig.DEFAULT_BLOCK_SIZE, EngineRole.BOTH)
            .withRetry(Duration.ofMillis(50), Duration.ofMillis(400));
    DiscoveryEndpoint found = new DiscoveryEndpoint(dc);
    gateway = Gateway.start(KvRouterServer.Config.builder().port(0).build(), config, found);
    found.attach(
        KubernetesDiscovery.start(
            api.config(), dc, new GatewaySink(gateway, drainBound, found.metrics())));
    // the mock server's watch does not replay what changed between the list and the watch's
    // start (an API server does, from the list's resourceVersion): change nothing before it is open
    await("the pods watched", () -> discovery().path("connected").asBoolean());
  }

  /** A mock engine of the tiny model served as {@code served} on {@code ip}:{@code port}. */
  private MockEngineServer engine(String ip, int port, String served) {
    MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .host(ip)
                .port(port)
                .modelDir(MockEngines.tinyModel())
                .servedModelName(served)
                .blockSize(4)
                .numGpuBlocks(512)
                .speedup(20)
                .defaultMaxTokens(4)
                .kvEvents(KvEventsConfig.zmq("tcp://" + ip + ":*", "tcp://" + ip + ":*"))
                .build());
    open.add(e);
    return e;
  }

  private static int port(String endpoint) {
    return Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1));
  }

  /** A pod whose engine is a new mock engine on {@code ip}. */
  private void enginePod(String name, String ip, boolean ready) {
    enginePod(name, LABELS, "tiny", ip, 0, ready);
  }

  /**
   * A pod with {@code labels} whose engine is a new mock engine of {@code model} on {@code
   * ip}:{@code port} (0: any).
   */
  private void enginePod(
      String name, Map<String, String> labels, String model, String ip, int port, boolean ready) {
    MockEngineServer e = engine(ip, port, model);
    engines.put(name, e);
    api.create(
        pod(
            name,
            labels,
            Map.of("kvrouter.io/model", model, "kvrouter.io/block-size", "4"),
            ip,
            ready,
            e.port(),
            port(e.zmqEndpoint()),
            port(e.replayEndpoint())));
  }

  /** The base URLs of the Ready pods of the store, as the test sees them. */
  private TreeSet<String> readyUrls() {
    TreeSet<String> urls = new TreeSet<>();
    for (Pod p : api.pods()) {
      if (!KubeApi.ready(p) || p.getMetadata().getDeletionTimestamp() != null) continue;
      int http = p.getSpec().getContainers().get(0).getPorts().get(0).getContainerPort();
      urls.add("http://" + p.getStatus().getPodIP() + ":" + http);
    }
    return urls;
  }

  /** The base URLs of the ranks in the gateway's {@code GET /workers}. */
  private TreeSet<String> workerUrls() {
    TreeSet<String> urls = new TreeSet<>();
    for (JsonNode w : get("/workers")) {
      for (JsonNode r : w.path("ranks")) urls.add(r.path("base_url").asText());
    }
    return urls;
  }

  private JsonNode get(String path) {
    try {
      HttpResponse<String> r =
          HTTP.send(
              HttpRequest.newBuilder(URI.create(gateway.url() + path)).build(),
              HttpResponse.BodyHandlers.ofString());
      return JSON.readTree(r.body());
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  private int status(String path) throws Exception {
    return HTTP.send(
            HttpRequest.newBuilder(URI.create(gateway.url() + path)).build(),
            HttpResponse.BodyHandlers.discarding())
        .statusCode();
  }

  private JsonNode discovery() {
    return get("/discovery");
  }

  private void awaitWorkersEqualReadyPods() {
    await("/workers equal to the Ready pods", () -> workerUrls().equals(readyUrls()));
  }

  private static void await(String what, BooleanSupplier cond) {
    long end = System.nanoTime() + DEADLINE.toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() - end > 0)
        throw new AssertionError("not within " + DEADLINE + ": " + what);
      LockSupport.parkNanos(Duration.ofMillis(10).toNanos());
    }
  }

  private static final String CHAT =
      "{\"model\":\"tiny\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":"
          + "\"Tell me about the pods of this namespace, please.\"}]}";

  private HttpResponse<String> chat(String body) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(gateway.url() + "/v1/chat/completions"))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** Requests each pod's engine has answered so far. */
  private Map<String, Integer> served() {
    Map<String, Integer> m = new HashMap<>();
    engines.forEach((name, e) -> m.put(name, e.recentRequests().size()));
    return m;
  }

  /** Sends chats and checks that each was answered by the engine of a pod in {@code ready}. */
  private void chatsServedBy(List<String> ready, int n) throws Exception {
    chatsServedBy("tiny", ready, n);
  }

  /** Chats for {@code model}, each answered by the engine of a pod in {@code ready}. */
  private void chatsServedBy(String model, List<String> ready, int n) throws Exception {
    for (int i = 0; i < n; i++) {
      Map<String, Integer> before = served();
      HttpResponse<String> r =
          chat(
              CHAT.replace("\"model\":\"tiny\"", "\"model\":\"" + model + "\"")
                  .replace("please", "please " + i));
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      Map<String, Integer> after = served();
      List<String> answered = new ArrayList<>();
      after.forEach(
          (name, count) -> {
            if (count > before.get(name)) answered.add(name);
          });
      assertThat(answered).hasSize(1);
      assertThat(ready).contains(answered.get(0));
    }
  }

  @Test
  void theGatewaysEnginesFollowTheReadyPods() throws Exception {
    start(Duration.ofSeconds(30));
    // before any pod: not ready, and it says why
    await("the first list", () -> discovery().path("last_sync").isTextual());
    HttpResponse<String> notReady =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(gateway.url() + "/ready")).build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(notReady.statusCode()).isEqualTo(503);
    assertThat(notReady.body())
        .contains("discovery: no engine among the Ready pods of namespace llm");

    enginePod("a", "127.0.0.2", true);
    enginePod("b", "127.0.0.3", true);
    enginePod("c", "127.0.0.4", false);
    awaitWorkersEqualReadyPods();
    assertThat(workerUrls()).hasSize(2);
    await("ready", () -> statusOf("/ready") == 200);
    chatsServedBy(List.of("a", "b"), 6);

    api.setReady("c", true); // turns Ready
    awaitWorkersEqualReadyPods();
    assertThat(workerUrls()).hasSize(3);
    api.setReady("a", false); // loses readiness
    awaitWorkersEqualReadyPods();
    api.delete("b"); // deleted
    awaitWorkersEqualReadyPods();
    assertThat(workerUrls()).containsExactly(engines.get("c").url());
    chatsServedBy(List.of("c"), 4);

    JsonNode d = discovery();
    assertThat(d.path("connected").asBoolean()).isTrue();
    assertThat(d.path("engines")).hasSize(1);
    assertThat(d.path("engines").get(0).path("pod").asText()).isEqualTo("llm/c");
    assertThat(d.path("engines").get(0).path("endpoint").asText())
        .isEqualTo("tcp://127.0.0.4:" + port(engines.get("c").zmqEndpoint()));
    String metrics =
        HTTP.send(
                HttpRequest.newBuilder(URI.create(gateway.url() + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    assertThat(metrics)
        .contains("kvrouter_discovery_connected 1.0")
        .contains("kvrouter_discovery_engines 1.0")
        .contains("kvrouter_discovery_removals_total{reason=\"not_ready\"} 1.0")
        .contains("kvrouter_discovery_removals_total{reason=\"gone\"} 1.0");

    api.setReady("c", false); // the last one goes: not ready again
    awaitWorkersEqualReadyPods();
    assertThat(workerUrls()).isEmpty();
    await("not ready without engines", () -> statusOf("/ready") == 503);
  }

  private int statusOf(String path) {
    try {
      return status(path);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void aPodThatStopsBeingReadyIsDrainedItsStreamFinishesThenItIsUnregistered() throws Exception {
    start(Duration.ofMinutes(5));
    HeldEngine held = new HeldEngine("127.0.0.5");
    open.add(held);
    api.create(pod("held", LABELS, TINY, "127.0.0.5", true, held.port(), 0, 0));
    awaitWorkersEqualReadyPods();
    await("ready", () -> statusOf("/ready") == 200);

    HttpResponse<InputStream> stream =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(gateway.url() + "/v1/chat/completions"))
                .header("Content-Type", "application/json")
                .POST(
                    HttpRequest.BodyPublishers.ofString(
                        CHAT.replace("\"max_tokens\":4", "\"max_tokens\":4,\"stream\":true")))
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    assertThat(stream.statusCode()).isEqualTo(200);
    BufferedReader lines =
        new BufferedReader(new InputStreamReader(stream.body(), StandardCharsets.UTF_8));
    assertThat(lines.readLine()).contains("held");

    api.setReady("held", false);
    await("the drain begun", () -> discovery().path("draining").asInt() == 1);
    // still registered while its stream runs, but it gets no new request
    assertThat(workerUrls()).containsExactly(held.url());
    HttpResponse<String> refused = chat(CHAT);
    assertThat(refused.statusCode()).isEqualTo(503);
    assertThat(refused.body()).contains("is being drained");
    assertThat(held.chats.get()).isEqualTo(1);

    held.release();
    StringBuilder rest = new StringBuilder();
    for (String l; (l = lines.readLine()) != null; ) rest.append(l).append('\n');
    assertThat(rest.toString()).contains("then released").endsWith("data: [DONE]\n\n");
    awaitWorkersEqualReadyPods();
    assertThat(workerUrls()).isEmpty();
    assertThat(discovery().path("draining").asInt()).isZero();
    String metrics =
        HTTP.send(
                HttpRequest.newBuilder(URI.create(gateway.url() + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    assertThat(metrics)
        .contains("kvrouter_discovery_removals_total{reason=\"not_ready\"} 1.0")
        .contains("kvrouter_discovery_drain_timeouts_total 0.0");
  }

  @Test
  void aWatchThatExpiresWith410IsFollowedByAFullListAndTheGatewayCatchesUp() throws Exception {
    api = new KubeApi();
    enginePod("a", "127.0.0.6", true);
    MockApiServer.HeldWatch held = api.holdNextPodsWatch();
    start(Duration.ofSeconds(30));
    awaitWorkersEqualReadyPods();
    await("the held watch open", held::open);

    // changes the discovery cannot see while its watch is silent
    enginePod("b", "127.0.0.7", true);
    api.setReady("a", false);
    assertThat(workerUrls()).containsExactly(engines.get("a").url());
    assertThat(discovery().path("lists").asInt()).isEqualTo(1);

    held.expire(); // 410 Gone: the discovery lists again and the gateway follows
    awaitWorkersEqualReadyPods();
    assertThat(workerUrls()).containsExactly(engines.get("b").url());
    await(
        "listed again, connected",
        () -> discovery().path("lists").asInt() == 2 && discovery().path("connected").asBoolean());
    chatsServedBy(List.of("b"), 3);
  }

  @Test
  void anApiServerOutageKeepsTheFleetServingAndItResyncsAfter() throws Exception {
    start(Duration.ofSeconds(30));
    enginePod("a", "127.0.0.8", true);
    enginePod("b", "127.0.0.9", true);
    awaitWorkersEqualReadyPods();
    await("ready", () -> statusOf("/ready") == 200);

    api.stopApi();
    await(
        "disconnected, the outage reported",
        () -> {
          JsonNode d = discovery();
          return !d.path("connected").asBoolean() && d.path("disconnected_since").isTextual();
        });
    // the last known fleet is kept and serves
    assertThat(workerUrls())
        .containsExactlyInAnyOrder(engines.get("a").url(), engines.get("b").url());
    assertThat(statusOf("/ready")).isEqualTo(200);
    chatsServedBy(List.of("a", "b"), 4);
    assertThat(discovery().path("last_error").asText()).isNotEmpty();

    // the fleet changes while the discovery cannot see it
    api.delete("a");
    enginePod("c", "127.0.0.10", true);
    assertThat(workerUrls())
        .containsExactlyInAnyOrder(engines.get("a").url(), engines.get("b").url());

    api.startApi();
    awaitWorkersEqualReadyPods();
    assertThat(workerUrls())
        .containsExactlyInAnyOrder(engines.get("b").url(), engines.get("c").url());
    await("connected again", () -> discovery().path("connected").asBoolean());
    assertThat(discovery().path("disconnected_since").isNull()).isTrue();
    chatsServedBy(List.of("b", "c"), 4);
  }

  @Test
  void twoModelsInOneNamespaceAreServedEachByItsOwnPods() throws Exception {
    start(
        Duration.ofSeconds(30),
        DiscoveryConfig.labelSelector(KubeApi.NS, "app=vllm-tiny"),
        GatewayConfig.builder()
            .model("tiny", MockEngines.tinyModel())
            .model("tiny-b", MockEngines.tinyModel())
            .build());
    enginePod("t1", LABELS, "tiny", "127.0.0.11", 0, true);
    enginePod("t2", LABELS, "tiny", "127.0.0.12", 0, true);
    enginePod("b1", LABELS, "tiny-b", "127.0.0.13", 0, true);
    awaitWorkersEqualReadyPods();
    await("ready", () -> statusOf("/ready") == 200);
    Map<String, TreeSet<String>> byModel = new HashMap<>();
    for (JsonNode w : get("/workers")) {
      for (JsonNode r : w.path("ranks")) {
        byModel
            .computeIfAbsent(w.path("model_name").asText(), k -> new TreeSet<>())
            .add(r.path("base_url").asText());
      }
    }
    assertThat(byModel)
        .containsOnlyKeys("tiny", "tiny-b")
        .containsEntry("tiny", new TreeSet<>(List.of(url("t1"), url("t2"))))
        .containsEntry("tiny-b", new TreeSet<>(List.of(url("b1"))));
    chatsServedBy("tiny", List.of("t1", "t2"), 4);
    chatsServedBy("tiny-b", List.of("b1"), 3);

    api.setReady("b1", false); // the second model's only engine goes: the gateway says so
    awaitWorkersEqualReadyPods();
    await("not ready without an engine of tiny-b", () -> statusOf("/ready") == 503);
    chatsServedBy("tiny", List.of("t1", "t2"), 2);
  }

  private String url(String pod) {
    return engines.get(pod).url();
  }

  @Test
  void anInferencePoolsSelectorChangeMovesTheGatewaysFleet() throws Exception {
    api = new KubeApi();
    // an InferencePool's targetPorts name one port for every pod: the engines share it, each on
    // its own loopback address
    int port;
    try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.14"))) {
      port = probe.getLocalPort();
    }
    Map<String, String> appA = Map.of("app", "pool-a");
    Map<String, String> appB = Map.of("app", "pool-b");
    enginePod("a1", appA, "tiny", "127.0.0.14", port, true);
    enginePod("a2", appA, "tiny", "127.0.0.15", port, true);
    enginePod("b1", appB, "tiny", "127.0.0.16", port, true);
    pools().resource(pool("pool-a", port)).create();
    fenceLabels = appA;
    start(
        Duration.ofSeconds(30),
        DiscoveryConfig.inferencePool(KubeApi.NS, "pool"),
        GatewayConfig.builder().model("tiny", MockEngines.tinyModel()).build());
    await(
        "the pool's pods", () -> workerUrls().equals(new TreeSet<>(List.of(url("a1"), url("a2")))));
    chatsServedBy(List.of("a1", "a2"), 4);

    fenceLabels = appB;
    pools()
        .withName("pool")
        .edit(
            r -> {
              r.getAdditionalProperties()
                  .put("spec", pool("pool-b", port).getAdditionalProperties().get("spec"));
              return r;
            });
    await("the new selector's pods", () -> workerUrls().equals(new TreeSet<>(List.of(url("b1")))));
    chatsServedBy(List.of("b1"), 3);
  }

  private NonNamespaceOperation<
          GenericKubernetesResource,
          GenericKubernetesResourceList,
          Resource<GenericKubernetesResource>>
      pools() {
    return api.admin()
        .genericKubernetesResources(
            new ResourceDefinitionContext.Builder()
                .withGroup("inference.networking.k8s.io")
                .withVersion("v1")
                .withKind("InferencePool")
                .withPlural("inferencepools")
                .withNamespaced(true)
                .build())
        .inNamespace(KubeApi.NS);
  }

  /** An InferencePool named pool selecting {@code app=APP} pods on {@code port}. */
  private static GenericKubernetesResource pool(String app, int port) {
    return new GenericKubernetesResourceBuilder()
        .withApiVersion("inference.networking.k8s.io/v1")
        .withKind("InferencePool")
        .withNewMetadata()
        .withName("pool")
        .withNamespace(KubeApi.NS)
        .endMetadata()
        .addToAdditionalProperties(
            "spec",
            Map.of(
                "selector", Map.of("matchLabels", Map.of("app", app)),
                "targetPorts", List.of(Map.of("number", port)),
                "endpointPickerRef", Map.of("name", "epp", "port", Map.of("number", 9002))))
        .build();
  }
}
