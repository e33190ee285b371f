package io.kvrouter.discovery;

import static io.kvrouter.discovery.Pods.NS;
import static io.kvrouter.discovery.Pods.pod;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.dsl.Resource;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Discovery by InferencePool ({@code inference.networking.k8s.io/v1}) against the mock API server.
 */
class InferencePoolDiscoveryTest {
  private static final Map<String, String> MODEL = Map.of("kvrouter.io/model", "qwen3");

  private MockApiServer api;
  private KubernetesClient admin;
  private RecordingSink sink;
  private KubernetesDiscovery discovery;
  private String fenceApp;

  @BeforeEach
  void setUp() {
    api = new MockApiServer();
    admin = api.admin();
    sink = new RecordingSink();
    for (String[] p :
        new String[][] {{"a1", "a", "2"}, {"a2", "a", "3"}, {"b1", "b", "4"}, {"b2", "b", "5"}}) {
      admin
          .pods()
          .inNamespace(NS)
          .resource(
              pod(
                  p[0],
                  Map.of("app", p[1]),
                  "127.0.0." + p[2],
                  !p[0].equals("b2"),
                  MODEL,
                  null,
                  null))
          .create();
    }
  }

  @AfterEach
  void tearDown() {
    if (discovery != null) {
      if (discovery.status().connected() && fenceApp != null) {
        admin
            .pods()
            .inNamespace(NS)
            .resource(
                pod("zz-fence", Map.of("app", fenceApp), "127.0.0.250", true, MODEL, null, null))
            .create();
        Await.until("fence seen", () -> sink.engines().containsKey("test/zz-fence/0"), this::state);
      }
      discovery.close();
    }
    api.close();
  }

  private static GenericKubernetesResource pool(String app, int... ports) {
    List<Map<String, Object>> targetPorts = new ArrayList<>();
    for (int p : ports) targetPorts.add(Map.of("number", p));
    return new GenericKubernetesResourceBuilder()
        .withApiVersion(PoolTarget.GROUP + "/" + PoolTarget.VERSION)
        .withKind(PoolTarget.KIND)
        .withNewMetadata()
        .withName("pool")
        .withNamespace(NS)
        .endMetadata()
        .addToAdditionalProperties(
            "spec",
            Map.of(
                "selector", Map.of("matchLabels", Map.of("app", app)),
                "targetPorts", targetPorts,
                "endpointPickerRef", Map.of("name", "epp", "port", Map.of("number", 9002))))
        .build();
  }

  private Resource<GenericKubernetesResource> poolResource() {
    return admin.genericKubernetesResources(PoolTarget.CONTEXT).inNamespace(NS).withName("pool");
  }

  private void setPool(String app, int... ports) {
    GenericKubernetesResource want = pool(app, ports);
    poolResource()
        .edit(
            r -> {
              r.getAdditionalProperties().put("spec", want.getAdditionalProperties().get("spec"));
              return r;
            });
    fenceApp = app;
  }

  private void start() {
    discovery =
        KubernetesDiscovery.start(
            api.apiConfig(),
            DiscoveryConfig.inferencePool(NS, "pool")
                .withRetry(Duration.ofMillis(50), Duration.ofMillis(400)),
            sink);
  }

  private Object state() {
    return "sink " + sink.engines().keySet() + ", log " + sink.log() + ", " + discovery.status();
  }

  private void awaitReadyPods(String app) {
    Await.until(
        "the sink holds the Ready pods with app=" + app,
        () -> sink.engines().keySet().equals(Pods.readyIds(admin, "app", app)),
        this::state);
  }

  private void awaitStatus(String what, Predicate<DiscoveryStatus> p) {
    Await.until(what, () -> p.test(discovery.status()), this::state);
  }

  private Map<String, String> urls() {
    Map<String, String> m = new TreeMap<>();
    sink.engines().forEach((id, e) -> m.put(id, e.baseUrl()));
    return m;
  }

  @Test
  void followsThePoolsSelectorAndTargetPorts() {
    admin
        .genericKubernetesResources(PoolTarget.CONTEXT)
        .inNamespace(NS)
        .resource(pool("a", 8000))
        .create();
    fenceApp = "a";
    start();
    awaitReadyPods("a");
    assertThat(urls())
        .containsExactly(
            Map.entry("test/a1/0", "http://127.0.0.2:8000"),
            Map.entry("test/a2/0", "http://127.0.0.3:8000"));
    awaitStatus("selector and connection", st -> "app=a".equals(st.selector()) && st.connected());

    // the pool now selects app=b: a1 and a2 go, b1 comes (b2 is not Ready)
    setPool("b", 8000);
    awaitReadyPods("b");
    assertThat(sink.engines()).containsOnlyKeys("test/b1/0");
    assertThat(sink.log()).contains("remove test/a1/0 unselected", "remove test/a2/0 unselected");
    awaitStatus("new selector", st -> "app=b".equals(st.selector()));

    // a new target port: the engine is removed and added again at the new URL
    setPool("b", 9000);
    Await.until(
        "b1 on port 9000",
        () -> urls().equals(Map.of("test/b1/0", "http://127.0.0.4:9000")),
        this::state);
    assertThat(sink.log()).contains("remove test/b1/0 changed");

    // two target ports: one engine per port, rank k on the k-th
    Pods.setReady(admin, "b2", true);
    setPool("b", 8000, 8001);
    Await.until(
        "two engines per pod",
        () ->
            urls()
                .equals(
                    Map.of(
                        "test/b1/0", "http://127.0.0.4:8000",
                        "test/b1/1", "http://127.0.0.4:8001",
                        "test/b2/0", "http://127.0.0.5:8000",
                        "test/b2/1", "http://127.0.0.5:8001")),
        this::state);

    // what it asked of the API server is exactly what the Roles grant
    Map<String, Set<String>> rbac = new TreeMap<>(KubernetesDiscovery.REQUIRED_RBAC);
    rbac.putAll(KubernetesDiscovery.REQUIRED_RBAC_INFERENCE_POOL);
    assertThat(RbacCalls.of(api.requests())).isEqualTo(rbac);
  }

  @Test
  void aPoolDeletedSelectsNothingAndAPoolCreatedLaterIsFollowed() {
    start();
    awaitStatus(
        "pool not found reported",
        st -> st.lastError() != null && st.lastError().contains("not found") && st.connected());
    assertThat(sink.engines()).isEmpty();
    assertThat(discovery.status().selector()).isNull();

    admin
        .genericKubernetesResources(PoolTarget.CONTEXT)
        .inNamespace(NS)
        .resource(pool("a", 8000))
        .create();
    fenceApp = "a";
    awaitReadyPods("a");
    assertThat(sink.engines()).containsOnlyKeys("test/a1/0", "test/a2/0");

    poolResource().delete();
    Await.until("nothing selected", () -> sink.engines().isEmpty(), this::state);
    assertThat(sink.log()).contains("remove test/a1/0 unselected", "remove test/a2/0 unselected");
    awaitStatus(
        "deletion reported",
        st ->
            st.selector() == null && st.lastError() != null && st.lastError().contains("deleted"));
    fenceApp = null;
  }
}
