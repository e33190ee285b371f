package io.kvrouter.discovery;

import static io.kvrouter.discovery.Pods.NS;
import static io.kvrouter.discovery.Pods.pod;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.kvrouter.route.EngineRole;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The discovery against fabric8's mock API server in CRUD mode (pods stored and watched as the API
 * server does): each test ends with the sink holding exactly the engines of the Ready pods.
 */
class KubernetesDiscoveryTest {
  private static final Map<String, String> VLLM = Map.of("app", "vllm");
  private static final Map<String, String> MODEL = Map.of("kvrouter.io/model", "qwen3");

  private MockApiServer api;
  private KubernetesClient admin;
  private RecordingSink sink;
  private KubernetesDiscovery discovery;
  private Map<String, String> fenceLabels = VLLM;

  @BeforeEach
  void setUp() {
    api = new MockApiServer();
    admin = api.admin();
    sink = new RecordingSink();
  }

  @AfterEach
  void tearDown() {
    if (discovery != null) {
      fence();
      discovery.close();
    }
    api.close();
  }

  /**
   * Waits until the discovery has seen a pod created last: the mock server's watch then has no
   * event left to send. (Its WatchEventsListener can deadlock its event loop when a watch is closed
   * while it still sends, e.g. the initial ADDED events of a watch opened just before.)
   */
  private void fence() {
    if (!discovery.status().connected() || fenceLabels == null) return;
    create(pod("zz-fence", fenceLabels, "127.0.0.250", true, MODEL, null, null));
    Await.until("fence seen", () -> sink.engines().containsKey("test/zz-fence/0"), this::state);
  }

  private void awaitStatus(String what, Predicate<DiscoveryStatus> p) {
    Await.until(what, () -> p.test(discovery.status()), this::state);
  }

  private void start(DiscoveryConfig config) {
    discovery =
        KubernetesDiscovery.start(
            api.apiConfig(), config.withRetry(Duration.ofMillis(50), Duration.ofMillis(400)), sink);
    // the mock server's watch does not replay what changed between the list and the watch's
    // start (an API server does, from the list's resourceVersion): change nothing before it is open
    awaitStatus("the pods watched", DiscoveryStatus::connected);
  }

  private void start() {
    start(DiscoveryConfig.labelSelector(NS, "app=vllm"));
  }

  private void create(Pod p) {
    admin.pods().inNamespace(NS).resource(p).create();
  }

  private void awaitReadyPods(String label, String value) {
    Await.until(
        "the sink holds the Ready pods with " + label + "=" + value,
        () -> sink.engines().keySet().equals(Pods.readyIds(admin, label, value)),
        this::state);
  }

  private Object state() {
    return "sink " + sink.engines().keySet() + ", log " + sink.log() + ", " + discovery.status();
  }

  @Test
  void readyPodsAreAddedWithWhatTheirAnnotationsAndPortsSay() {
    create(
        pod(
            "a",
            VLLM,
            "127.0.0.2",
            true,
            Map.of(
                "kvrouter.io/model", "qwen3",
                "kvrouter.io/block-size", "32",
                "kvrouter.io/role", "decode",
                "kvrouter.io/topic", "kv"),
            5557,
            5558));
    create(pod("b", VLLM, "127.0.0.3", false, MODEL, null, null));
    create(pod("c", Map.of("app", "other"), "127.0.0.4", true, MODEL, null, null));
    create(pod("d", VLLM, null, true, MODEL, null, null)); // no IP yet
    start();

    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/a/0");
    DiscoveredEngine a = sink.engines().get("test/a/0");
    assertThat(a.pod()).isEqualTo("test/a");
    assertThat(a.dpRank()).isZero();
    assertThat(a.baseUrl()).isEqualTo("http://127.0.0.2:8000");
    assertThat(a.eventsEndpoint()).isEqualTo("tcp://127.0.0.2:5557");
    assertThat(a.replayEndpoint()).isEqualTo("tcp://127.0.0.2:5558");
    assertThat(a.model()).isEqualTo("qwen3");
    assertThat(a.blockSize()).isEqualTo(32);
    assertThat(a.role()).isEqualTo(EngineRole.DECODE);
    assertThat(a.topic()).isEqualTo("kv");
    assertThat(a.instanceId()).isBetween(1L, (1L << 53) - 1);

    Pods.setReady(admin, "b", true);
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/a/0", "test/b/0");
    assertThat(sink.engines().get("test/b/0").eventsEndpoint()).isNull();
    assertThat(sink.engines().get("test/b/0").blockSize())
        .isEqualTo(DiscoveryConfig.DEFAULT_BLOCK_SIZE);
    awaitStatus("two engines", st -> st.engines() == 2);
    DiscoveryStatus s = discovery.status();
    assertThat(s.connected()).isTrue();
    assertThat(s.lastSync()).isNotNull();
    assertThat(s.lastError()).isNull();
    assertThat(discovery.engines())
        .extracting(DiscoveredEngine::id)
        .containsExactly("test/a/0", "test/b/0");
    // what it asked of the API server is exactly what the Role grants
    assertThat(RbacCalls.of(api.requests())).isEqualTo(KubernetesDiscovery.REQUIRED_RBAC);
  }

  @Test
  void anEngineThatLostReadinessIsDrainedBeforeItIsAddedAgain() {
    create(pod("a", VLLM, "127.0.0.2", true, MODEL, null, null));
    start();
    awaitReadyPods("app", "vllm");
    sink.holdRemovals(true);

    Pods.setReady(admin, "a", false);
    Await.until("a's drain has started", () -> sink.holding("test/a/0"), this::state);
    assertThat(sink.log()).contains("remove test/a/0 not_ready");
    awaitStatus("one draining", st -> st.draining() == 1 && st.engines() == 0);

    // Ready again while draining: not added until the drain completes. Pod z's event follows a's
    // on the same watch, so once z is added, a's was handled.
    Pods.setReady(admin, "a", true);
    create(pod("z", VLLM, "127.0.0.9", true, MODEL, null, null));
    Await.until("z added", () -> sink.log().contains("add test/z/0"), this::state);
    assertThat(sink.log()).containsOnlyOnce("add test/a/0");

    sink.finishRemoval("test/a/0");
    Await.until(
        "a added again after its drain",
        () -> sink.log().stream().filter("add test/a/0"::equals).count() == 2,
        this::state);
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/a/0", "test/z/0");
  }

  @Test
  void deletedAndTerminatingPodsAreRemoved() {
    create(pod("a", VLLM, "127.0.0.2", true, MODEL, null, null));
    create(
        new PodBuilder(pod("b", VLLM, "127.0.0.3", true, MODEL, null, null))
            .editMetadata()
            .withFinalizers("kvrouter.io/test")
            .endMetadata()
            .build());
    create(pod("c", VLLM, "127.0.0.4", true, MODEL, null, null));
    start();
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/a/0", "test/b/0", "test/c/0");

    admin.pods().inNamespace(NS).withName("a").delete();
    admin.pods().inNamespace(NS).withName("b").delete(); // the finalizer keeps it, terminating
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/c/0");
    assertThat(sink.log()).contains("remove test/a/0 gone", "remove test/b/0 terminating");
  }

  @Test
  void relabelledPodsLeaveAndComeBack() {
    create(pod("a", VLLM, "127.0.0.2", true, MODEL, null, null));
    create(pod("b", VLLM, "127.0.0.3", true, MODEL, null, null));
    start();
    awaitReadyPods("app", "vllm");

    Pods.setLabels(admin, "a", Map.of("app", "retired"));
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/b/0");
    assertThat(sink.log()).contains("remove test/a/0 gone");

    Pods.setLabels(admin, "a", VLLM);
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/a/0", "test/b/0");
  }

  @Test
  void aWatchThatExpiresWith410IsFollowedByAFullList() {
    create(pod("a", VLLM, "127.0.0.2", true, MODEL, null, null));
    MockApiServer.HeldWatch held = api.holdNextPodsWatch();
    start();
    awaitReadyPods("app", "vllm");
    Await.until("the held watch is open", held::open, this::state);

    // changes the discovery cannot see: its watch is silent
    create(pod("b", VLLM, "127.0.0.3", true, MODEL, null, null));
    Pods.setReady(admin, "a", false);
    assertThat(sink.engines()).containsOnlyKeys("test/a/0");
    awaitStatus("listed once", st -> st.lists() == 1);

    held.expire(); // 410 Gone: the discovery lists again
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/b/0");
    assertThat(sink.log()).contains("remove test/a/0 not_ready");
    awaitStatus("listed again, connected", st -> st.lists() == 2 && st.connected());
  }

  @Test
  void anApiServerOutageKeepsTheEnginesAndTheyResyncAfterIt() {
    create(pod("a", VLLM, "127.0.0.2", true, MODEL, null, null));
    create(pod("b", VLLM, "127.0.0.3", true, MODEL, null, null));
    start();
    awaitReadyPods("app", "vllm");
    long listsBefore = discovery.status().lists();

    api.stopApi();
    Await.until(
        "disconnected, a list attempted and failed",
        () ->
            !discovery.status().connected()
                && discovery.status().lastError() != null
                && discovery.status().lastError().startsWith("listing pods"),
        this::state);
    DiscoveryStatus down = discovery.status();
    assertThat(down.disconnectedSince()).isNotNull();
    assertThat(down.engines()).isEqualTo(2);
    assertThat(sink.engines()).containsOnlyKeys("test/a/0", "test/b/0");
    assertThat(sink.log()).noneMatch(l -> l.startsWith("remove"));

    // the fleet changes while the discovery cannot see it
    admin.pods().inNamespace(NS).withName("a").delete();
    create(pod("c", VLLM, "127.0.0.4", true, MODEL, null, null));

    api.startApi();
    awaitReadyPods("app", "vllm");
    assertThat(sink.engines()).containsOnlyKeys("test/b/0", "test/c/0");
    assertThat(sink.log()).contains("remove test/a/0 gone");
    Await.until("connected again", () -> discovery.status().connected(), this::state);
    assertThat(discovery.status().disconnectedSince()).isNull();
    assertThat(discovery.status().lists()).isGreaterThan(listsBefore);
    assertThat(discovery.status().lastSync()).isAfter(down.disconnectedSince());
  }

  @Test
  void twoModelsInOneNamespaceWithDataParallelRanks() {
    Map<String, String> llm = Map.of("app", "llm");
    create(pod("m1-a", llm, "127.0.0.2", true, Map.of("kvrouter.io/model", "m1"), null, null));
    create(pod("m1-b", llm, "127.0.0.3", true, Map.of("kvrouter.io/model", "m1"), null, null));
    create(
        pod(
            "m2-a",
            llm,
            "127.0.0.4",
            true,
            Map.of("kvrouter.io/model", "m2", "kvrouter.io/dp-ranks", "0-1"),
            5557,
            5600));
    create(pod("unnamed", llm, "127.0.0.5", true, Map.of(), null, null));
    fenceLabels = llm;
    start(DiscoveryConfig.labelSelector(NS, "app=llm"));

    Await.until("four engines", () -> sink.engines().size() == 4, this::state);
    Map<String, DiscoveredEngine> e = sink.engines();
    assertThat(e).containsOnlyKeys("test/m1-a/0", "test/m1-b/0", "test/m2-a/0", "test/m2-a/1");
    assertThat(e.get("test/m1-a/0").model()).isEqualTo("m1");
    assertThat(e.get("test/m1-b/0").model()).isEqualTo("m1");
    assertThat(e.get("test/m2-a/0").model()).isEqualTo("m2");
    assertThat(e.get("test/m2-a/1").model()).isEqualTo("m2");
    // both ranks behind one URL, each with its own events and replay ports (vLLM's offset)
    assertThat(e.get("test/m2-a/1").baseUrl()).isEqualTo("http://127.0.0.4:8000");
    assertThat(e.get("test/m2-a/0").eventsEndpoint()).isEqualTo("tcp://127.0.0.4:5557");
    assertThat(e.get("test/m2-a/1").eventsEndpoint()).isEqualTo("tcp://127.0.0.4:5558");
    assertThat(e.get("test/m2-a/1").replayEndpoint()).isEqualTo("tcp://127.0.0.4:5601");
    assertThat(e.get("test/m2-a/1").instanceId()).isEqualTo(e.get("test/m2-a/0").instanceId());
    assertThat(e.get("test/m1-a/0").instanceId()).isNotEqualTo(e.get("test/m1-b/0").instanceId());
    // the pod without a model is skipped, and says why
    Await.until(
        "unnamed reported",
        () -> discovery.status().skippedPods().containsKey("test/unnamed"),
        this::state);
    assertThat(discovery.status().skippedPods())
        .containsExactly(
            Map.entry(
                "test/unnamed", "no kvrouter.io/model annotation and no default model configured"));
    assertThat(discovery.status().invalidPods()).isEqualTo(1);
  }

  @Test
  void invalidAnnotationsSkipThePodUntilFixed() {
    create(
        pod("a", VLLM, "127.0.0.2", true, Map.of("kvrouter.io/block-size", "sixteen"), null, null));
    create(pod("b", VLLM, "127.0.0.3", true, MODEL, null, null));
    start(DiscoveryConfig.labelSelector(NS, "app=vllm").withDefaults("qwen3", 16, EngineRole.BOTH));
    awaitStatus("a skipped", st -> st.skippedPods().containsKey("test/a") && st.engines() == 1);
    assertThat(sink.engines()).containsOnlyKeys("test/b/0");
    assertThat(discovery.status().skippedPods())
        .containsExactly(
            Map.entry("test/a", "kvrouter.io/block-size must be a number, got 'sixteen'"));
    assertThat(discovery.status().invalidPods()).isEqualTo(1);

    // fixed: added; b broken: removed as invalid
    admin
        .pods()
        .inNamespace(NS)
        .withName("a")
        .edit(
            p ->
                new PodBuilder(p)
                    .editMetadata()
                    .withAnnotations(Map.of("kvrouter.io/block-size", "16"))
                    .endMetadata()
                    .build());
    admin
        .pods()
        .inNamespace(NS)
        .withName("b")
        .edit(
            p ->
                new PodBuilder(p)
                    .editMetadata()
                    .withAnnotations(Map.of("kvrouter.io/rolee", "decode"))
                    .endMetadata()
                    .build());
    Await.until(
        "a added, b removed",
        () -> sink.engines().keySet().equals(Set.of("test/a/0")),
        this::state);
    assertThat(sink.log()).contains("remove test/b/0 invalid");
    assertThat(sink.engines().get("test/a/0").model()).isEqualTo("qwen3");
    awaitStatus("b skipped", st -> st.skippedPods().containsKey("test/b"));
    assertThat(discovery.status().skippedPods()).containsOnlyKeys("test/b");
    assertThat(discovery.status().skippedPods().get("test/b"))
        .startsWith("unknown annotation kvrouter.io/rolee");
    assertThat(discovery.status().invalidPods()).isEqualTo(2);
  }

  @Test
  void anEngineTheSinkRefusesIsOfferedAgain() {
    sink.refuse(
        e ->
            e.id().equals("test/a/0")
                && sink.log().stream().filter(l -> l.startsWith("refused")).count() < 2);
    create(pod("a", VLLM, "127.0.0.2", true, MODEL, null, null));
    start();
    awaitReadyPods("app", "vllm");
    assertThat(sink.log()).containsExactly("refused test/a/0", "refused test/a/0", "add test/a/0");
    awaitStatus("published", st -> st.engines() == 1);
    assertThat(discovery.status().addFailures()).isEqualTo(2);
    assertThat(discovery.status().lastError()).contains("test/a/0").contains("refused by the test");
  }
}
