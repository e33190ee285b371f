package io.kvrouter.discovery;

import io.kvrouter.route.EngineRole;
import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What a {@link KubernetesDiscovery} watches and the defaults for what pods do not annotate.
 * Exactly one of {@code labelSelector} and {@code inferencePool} is given. Start from {@link
 * #labelSelector(String, String)} or {@link #inferencePool(String, String)}.
 *
 * @param namespace the namespace of the pods (and of the InferencePool)
 * @param labelSelector the pods' label selector ({@code app=vllm,tier in (gpu)}), or null
 * @param inferencePool the name of an InferencePool ({@code inference.networking.k8s.io/v1}) whose
 *     {@code spec.selector.matchLabels} selects the pods and whose {@code spec.targetPorts} are the
 *     engines' HTTP ports, or null
 * @param defaultModel the model of pods without {@code kvrouter.io/model}; null: such pods are
 *     skipped as invalid
 * @param defaultBlockSize the block size of pods without {@code kvrouter.io/block-size} (≥ 1)
 * @param defaultRole the role of pods without {@code kvrouter.io/role}
 * @param retryInitial the delay before the first retry of a failed list, watch or {@code add}; it
 *     doubles per failure in a row up to {@code retryMax}
 * @param retryMax the longest delay between retries
 */
public record DiscoveryConfig(
    String namespace,
    @Nullable String labelSelector,
    @Nullable String inferencePool,
    @Nullable String defaultModel,
    int defaultBlockSize,
    EngineRole defaultRole,
    Duration retryInitial,
    Duration retryMax) {

  /** The block size of pods that give none, unless configured: vLLM's default. */
  public static final int DEFAULT_BLOCK_SIZE = 16;

  /**
   * Checks the configuration.
   *
   * @throws IllegalArgumentException naming the field that is wrong (a label selector is parsed
   *     here, so a bad one is refused at start)
   */
  public DiscoveryConfig {
    if (namespace == null || namespace.isBlank()) {
      throw new IllegalArgumentException("discovery: a namespace is required");
    }
    if ((labelSelector == null) == (inferencePool == null)) {
      throw new IllegalArgumentException(
          "discovery: give either a label selector or an InferencePool name, not "
              + (labelSelector == null ? "neither" : "both"));
    }
    if (labelSelector != null) {
      try {
        LabelSelector.parse(labelSelector);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("discovery: " + e.getMessage(), e);
      }
    }
    if (inferencePool != null && inferencePool.isBlank()) {
      throw new IllegalArgumentException("discovery: the InferencePool name is empty");
    }
    if (defaultModel != null && defaultModel.isBlank()) {
      throw new IllegalArgumentException("discovery: the default model is empty");
    }
    if (defaultBlockSize < 1) {
      throw new IllegalArgumentException(
          "discovery: the default block size must be at least 1, got " + defaultBlockSize);
    }
    Objects.requireNonNull(defaultRole, "defaultRole");
    Objects.requireNonNull(retryInitial, "retryInitial");
    Objects.requireNonNull(retryMax, "retryMax");
    if (retryInitial.isNegative()
        || retryInitial.isZero()
        || retryMax.compareTo(retryInitial) < 0) {
      throw new IllegalArgumentException(
          "discovery: need 0 < retryInitial <= retryMax, got " + retryInitial + ", " + retryMax);
    }
  }

  /**
   * The Ready pods of {@code namespace} that {@code selector} selects; no default model, block size
   * {@value #DEFAULT_BLOCK_SIZE}, role both, retries from 500 ms up to 30 s.
   */
  public static DiscoveryConfig labelSelector(String namespace, String selector) {
    return new DiscoveryConfig(
        namespace,
        Objects.requireNonNull(selector, "selector"),
        null,
        null,
        DEFAULT_BLOCK_SIZE,
        EngineRole.BOTH,
        Duration.ofMillis(500),
        Duration.ofSeconds(30));
  }

  /** The Ready pods the InferencePool {@code namespace/name} selects; the other fields as above. */
  public static DiscoveryConfig inferencePool(String namespace, String name) {
    return new DiscoveryConfig(
        namespace,
        null,
        Objects.requireNonNull(name, "name"),
        null,
        DEFAULT_BLOCK_SIZE,
        EngineRole.BOTH,
        Duration.ofMillis(500),
        Duration.ofSeconds(30));
  }

  /** This configuration with other defaults for what pods do not annotate. */
  public DiscoveryConfig withDefaults(@Nullable String model, int blockSize, EngineRole role) {
    return new DiscoveryConfig(
        namespace, labelSelector, inferencePool, model, blockSize, role, retryInitial, retryMax);
  }

  /** This configuration with other retry delays. */
  public DiscoveryConfig withRetry(Duration initial, Duration max) {
    return new DiscoveryConfig(
        namespace,
        labelSelector,
        inferencePool,
        defaultModel,
        defaultBlockSize,
        defaultRole,
        initial,
        max);
  }

  /** What is watched, for logs and {@link DiscoveryStatus#source()}. */
  public String describe() {
    return labelSelector != null
        ? "pods of namespace " + namespace + " selected by '" + labelSelector + "'"
        : "pods of InferencePool " + namespace + "/" + inferencePool;
  }
}
