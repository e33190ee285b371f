package io.kvrouter.discovery;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ScheduledThreadPoolExecutor;

/**
 * Keeps an {@link EngineSink} equal to the engines of the Ready pods that a label selector or an
 * InferencePool selects in one namespace (docs/deploy.md): adds an engine when its pod turns Ready,
 * removes it (the sink drains it) when the pod stops being Ready, terminates, is deleted,
 * re-labelled or unselected, re-lists when a watch expires (410) or breaks, and keeps the engines
 * last known while the API server cannot be reached ({@link #status()} says so).
 *
 * <pre>{@code
 * KubernetesDiscovery d = KubernetesDiscovery.start(
 *     DiscoveryConfig.labelSelector("llm", "app=vllm").withDefaults("qwen3", 16, EngineRole.BOTH),
 *     sink);
 * ...
 * d.close();
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * The public face of DiscoveryLoop, which does the work on one thread of its own
 * ("kvrouter-discovery", a daemon). The client is fabric8's on the JDK's HttpClient, configured
 * from the pod's service account in a cluster or from ~/.kube/config (fabric8's
 * auto-configuration), with its own watch reconnects and request retries turned off: the loop
 * retries, with re-lists (DiscoveryLoop's notes say why). Thread-safe: status() and engines()
 * read snapshots the loop publishes.
 * </pre>
 */
public final class KubernetesDiscovery implements AutoCloseable {
  /**
   * The API calls a discovery by label selector makes, as RBAC names them: resource ({@code
   * resource.group} outside the core group) to verbs. A Role granting exactly these is enough
   * (deploy/base/role.yaml).
   */
  public static final Map<String, Set<String>> REQUIRED_RBAC =
      Map.of("pods", Set.of("list", "watch"));

  /**
   * What a discovery by InferencePool needs besides {@link #REQUIRED_RBAC}: the pool is read by
   * name and watched by name (deploy/overlays/inference-pool).
   */
  public static final Map<String, Set<String>> REQUIRED_RBAC_INFERENCE_POOL =
      Map.of(PoolTarget.PLURAL + "." + PoolTarget.GROUP, Set.of("get", "watch"));

  /**
   * The pod annotations a discovery reads (docs/deploy.md); other {@code kvrouter.io/} keys are
   * refused.
   */
  public static final List<String> ANNOTATIONS =
      List.of(
          PodEngines.MODEL,
          PodEngines.BLOCK_SIZE,
          PodEngines.ROLE,
          PodEngines.DP_RANKS,
          PodEngines.TOPIC,
          PodEngines.ALL_BLOCKS_CLEARED);

  /** The container port names a discovery reads: the HTTP API, the KV events, the replay socket. */
  public static final List<String> PORT_NAMES =
      List.of(PodEngines.PORT_HTTP, PodEngines.PORT_EVENTS, PodEngines.PORT_REPLAY);

  private static final Duration CLOSE_WAIT = Duration.ofSeconds(30);

  private final KubernetesClient client;
  private final DiscoveryLoop loop;

  private KubernetesDiscovery(KubernetesClient client, DiscoveryLoop loop) {
    this.client = client;
    this.loop = loop;
  }

  /**
   * Starts discovering with the cluster the process runs in (its service account) or the current
   * context of {@code ~/.kube/config} ({@code KUBECONFIG}). Returns at once; the first list follows
   * on the discovery's thread.
   */
  public static KubernetesDiscovery start(DiscoveryConfig config, EngineSink sink) {
    return start(Config.autoConfigure(null), config, sink);
  }

  /** Starts discovering with the API server and credentials of {@code clientConfig}. */
  public static KubernetesDiscovery start(
      Config clientConfig, DiscoveryConfig config, EngineSink sink) {
    Objects.requireNonNull(config, "config");
    Objects.requireNonNull(sink, "sink");
    Config c =
        new ConfigBuilder(clientConfig)
            // every end of a watch reaches the loop, which lists again (DiscoveryLoop)
            .withWatchReconnectLimit(0)
            // the loop retries with its own backoff and reports each failure
            .withRequestRetryBackoffLimit(0)
            .build();
    KubernetesClient client = new KubernetesClientBuilder().withConfig(c).build();
    ScheduledThreadPoolExecutor exec =
        new ScheduledThreadPoolExecutor(
            1,
            r -> {
              Thread t = new Thread(r, "kvrouter-discovery");
              t.setDaemon(true);
              return t;
            });
    exec.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    exec.setRemoveOnCancelPolicy(true);
    DiscoveryLoop loop = new DiscoveryLoop(client, config, sink, Clock.systemUTC(), exec);
    loop.start();
    return new KubernetesDiscovery(client, loop);
  }

  /** What the discovery sees now. */
  public DiscoveryStatus status() {
    return loop.status();
  }

  /** The engines added to the sink and not removed, ordered by id. */
  public List<DiscoveredEngine> engines() {
    return loop.engines();
  }

  /**
   * Stops watching (waiting up to 30 s for a sink call in progress) and closes the client. The
   * engines added stay in the sink: removing them is the consumer's call.
   */
  @Override
  public void close() {
    try {
      loop.close(CLOSE_WAIT);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      client.close();
    }
  }
}
