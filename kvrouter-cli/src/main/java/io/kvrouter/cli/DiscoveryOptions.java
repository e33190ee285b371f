package io.kvrouter.cli;

import io.kvrouter.discovery.DiscoveryConfig;
import io.kvrouter.route.EngineRole;
import java.time.Duration;
import picocli.CommandLine.Option;

/**
 * The flags of {@code --discovery kubernetes} that {@code serve} and {@code gateway} share: what to
 * watch (a namespace and a label selector or an InferencePool) and the defaults for what pods do
 * not annotate (docs/deploy.md). Declared once here as a picocli mixin; {@link #config} turns them
 * into the discovery's {@link DiscoveryConfig}.
 */
final class DiscoveryOptions {
  /** The one kind of discovery there is. */
  static final String KUBERNETES = "kubernetes";

  @Option(
      names = "--discovery",
      paramLabel = KUBERNETES,
      description =
          "Find the engines by themselves: 'kubernetes' keeps them equal to the Ready pods that"
              + " --discovery-selector or --discovery-inference-pool selects in"
              + " --discovery-namespace, registering and draining them as pods come and go"
              + " (docs/deploy.md; GET /discovery shows what it sees). Default: none.")
  String discovery;

  @Option(
      names = "--discovery-namespace",
      paramLabel = "NS",
      description = "With --discovery: the namespace of the engine pods.")
  String namespace;

  @Option(
      names = "--discovery-selector",
      paramLabel = "SELECTOR",
      description =
          "With --discovery: the engine pods' label selector, e.g. 'app=vllm-qwen3' or"
              + " 'app=vllm,tier in (gpu)'.")
  String selector;

  @Option(
      names = "--discovery-inference-pool",
      paramLabel = "NAME",
      description =
          "With --discovery, instead of a selector: the InferencePool"
              + " (inference.networking.k8s.io/v1) whose selector picks the pods and whose"
              + " targetPorts are their HTTP ports.")
  String inferencePool;

  @Option(
      names = "--discovery-model",
      paramLabel = "NAME",
      description =
          "The model of pods without a kvrouter.io/model annotation (default: the gateway's"
              + " --model when it serves one; else such pods are skipped, GET /discovery says"
              + " why).")
  String model;

  @Option(
      names = "--discovery-block-size",
      paramLabel = "N",
      description =
          "The KV block size of pods without kvrouter.io/block-size (default: the gateway's"
              + " --block-size; serve: 16, vLLM's).")
  Integer blockSize;

  @Option(
      names = "--discovery-role",
      paramLabel = "ROLE",
      description =
          "prefill, decode or both: the role of pods without kvrouter.io/role (default:"
              + " ${DEFAULT-VALUE}).")
  String role = "both";

  @Option(
      names = "--discovery-drain-seconds",
      paramLabel = "S",
      description =
          "gateway: an engine whose pod stops being Ready or goes away gets no new request and"
              + " this long for those in flight before it is unregistered (default:"
              + " ${DEFAULT-VALUE}).")
  long drainSeconds = 30;

  /** Whether {@code --discovery} was given. */
  boolean enabled() {
    return discovery != null;
  }

  /**
   * The discovery's configuration, or null without {@code --discovery}.
   *
   * @param defaultModel the model of pods without one when {@code --discovery-model} is not given
   *     (null: none)
   * @param defaultBlockSize the block size when {@code --discovery-block-size} is not given
   * @throws IllegalArgumentException naming the flag that is wrong or missing
   */
  DiscoveryConfig config(String defaultModel, int defaultBlockSize) {
    if (discovery == null) {
      String stray =
          namespace != null
              ? "--discovery-namespace"
              : selector != null
                  ? "--discovery-selector"
                  : inferencePool != null ? "--discovery-inference-pool" : null;
      if (stray != null) {
        throw new IllegalArgumentException(stray + " needs --discovery " + KUBERNETES);
      }
      return null;
    }
    if (!discovery.equals(KUBERNETES)) {
      throw new IllegalArgumentException(
          "--discovery: '"
              + discovery
              + "' is not a kind of discovery (there is: "
              + KUBERNETES
              + ")");
    }
    if (namespace == null || namespace.isBlank()) {
      throw new IllegalArgumentException(
          "--discovery kubernetes needs --discovery-namespace (the namespace of the engine pods)");
    }
    if ((selector == null) == (inferencePool == null)) {
      throw new IllegalArgumentException(
          "--discovery kubernetes needs either --discovery-selector or"
              + " --discovery-inference-pool"
              + (selector == null ? "" : ", not both"));
    }
    EngineRole r;
    try {
      r = EngineRole.parse(role);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--discovery-role " + e.getMessage(), e);
    }
    if (drainSeconds < 0) {
      throw new IllegalArgumentException(
          "--discovery-drain-seconds must be >= 0, got " + drainSeconds);
    }
    int bs = blockSize != null ? blockSize : defaultBlockSize;
    if (bs < 1)
      throw new IllegalArgumentException("--discovery-block-size must be >= 1, got " + bs);
    DiscoveryConfig c =
        selector != null
            ? DiscoveryConfig.labelSelector(namespace, selector)
            : DiscoveryConfig.inferencePool(namespace, inferencePool);
    return c.withDefaults(model != null ? model : defaultModel, bs, r);
  }

  /** How long a gateway drains an engine that leaves before it unregisters it. */
  Duration drainBound() {
    return Duration.ofSeconds(drainSeconds);
  }
}
