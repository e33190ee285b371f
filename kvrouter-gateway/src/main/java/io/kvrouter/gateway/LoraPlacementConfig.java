package io.kvrouter.gateway;

import io.kvrouter.route.LoraCost;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * LoRA placement in the gateway (docs/gateway.md, "LoRA adapters"): whether it routes a request for
 * an adapter preferring the engines that have it resident, at what cost a load is weighed, and
 * whether it loads the adapter on the chosen engine itself before sending the request.
 *
 * @param enabled learn each engine's resident adapters (its {@code GET /v1/models} at every health
 *     round, and the gateway's own loads and routes) and add the {@link LoraCost} term to the cost;
 *     off: every engine of the base model counts as serving every adapter (hashes are salted all
 *     the same)
 * @param maxLoras the engines' {@code --max-loras} (vLLM does not report it); 0 when unknown: a
 *     load is then never priced as an eviction
 * @param cost the load and eviction costs, in blocks of prefill work
 * @param loadFirst before sending a request for an adapter to an engine that does not have it
 *     resident, {@code POST /v1/load_lora_adapter} there (vLLM needs {@code
 *     VLLM_ALLOW_RUNTIME_LORA_UPDATING}); off: the engine loads it on demand (a LoRA resolver) or
 *     serves it already
 * @param paths adapter name to the {@code lora_path} of its load; an adapter not listed is loaded
 *     with its name as the path
 */
public record LoraPlacementConfig(
    boolean enabled, int maxLoras, LoraCost cost, boolean loadFirst, Map<String, String> paths) {

  /** Off: today's routing, adapters only salt the hashes. */
  public static final LoraPlacementConfig OFF =
      new LoraPlacementConfig(false, 0, LoraCost.defaults(), false, Map.of());

  /**
   * @throws IllegalArgumentException when {@code maxLoras} is negative, or loadFirst without
   *     enabled
   */
  public LoraPlacementConfig {
    if (maxLoras < 0) {
      throw new IllegalArgumentException("--max-loras must be >= 0, got " + maxLoras);
    }
    Objects.requireNonNull(cost, "cost");
    if (loadFirst && !enabled) {
      throw new IllegalArgumentException("--lora-load-first needs --lora-placement");
    }
    paths =
        Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(paths, "paths")));
  }

  /** The {@code lora_path} of {@code adapter}'s load. */
  public String path(String adapter) {
    return paths.getOrDefault(adapter, adapter);
  }
}
