package io.kvrouter.discovery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.route.EngineRole;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class DiscoveryConfigTest {
  @Test
  void badConfigurationsAreRefusedAtStart() {
    assertThatThrownBy(() -> DiscoveryConfig.labelSelector("", "app=vllm"))
        .hasMessage("discovery: a namespace is required");
    assertThatThrownBy(() -> DiscoveryConfig.labelSelector("llm", "app in (vllm"))
        .hasMessage(
            "discovery: label selector 'app in (vllm': 'app in (vllm' does not end with ')'");
    assertThatThrownBy(
            () ->
                new DiscoveryConfig(
                    "llm",
                    "app=a",
                    "pool",
                    null,
                    16,
                    EngineRole.BOTH,
                    Duration.ofSeconds(1),
                    Duration.ofSeconds(1)))
        .hasMessage("discovery: give either a label selector or an InferencePool name, not both");
    assertThatThrownBy(
            () ->
                DiscoveryConfig.inferencePool("llm", "pool").withDefaults("m", 0, EngineRole.BOTH))
        .hasMessage("discovery: the default block size must be at least 1, got 0");
    assertThatThrownBy(
            () ->
                DiscoveryConfig.inferencePool("llm", "pool")
                    .withRetry(Duration.ofSeconds(2), Duration.ofSeconds(1)))
        .hasMessage("discovery: need 0 < retryInitial <= retryMax, got PT2S, PT1S");
  }

  @Test
  void describesWhatItWatches() {
    assertThat(DiscoveryConfig.labelSelector("llm", "app=vllm").describe())
        .isEqualTo("pods of namespace llm selected by 'app=vllm'");
    assertThat(DiscoveryConfig.inferencePool("llm", "pool").describe())
        .isEqualTo("pods of InferencePool llm/pool");
  }
}
