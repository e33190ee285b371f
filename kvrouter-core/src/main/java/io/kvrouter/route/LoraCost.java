package io.kvrouter.route;

/**
 * The LoRA placement term of the routing cost: what serving a request for an adapter costs on an
 * engine, from the adapters resident there. Nothing when the request names no adapter or the engine
 * has it resident; otherwise the engine must load it first, which costs {@code loadCost}, and when
 * the engine already holds {@code maxLoras} adapters the load also evicts one that later requests
 * may need again, which costs {@code evictionCost} more. Both are in the cost's units (blocks of
 * prefill work, docs/routing.md "LoRA adapters"). Immutable.
 *
 * @param loadCost the cost of loading an adapter that is not resident; finite, {@code >= 0}
 * @param evictionCost the added cost when the load evicts another adapter; finite, {@code >= 0}
 */
public record LoraCost(double loadCost, double evictionCost) {
  /**
   * Default {@link #loadCost}: 2,000 blocks. Under load the cost's decode term alone is thousands
   * of blocks per engine, so a load must weigh as much to keep an adapter's requests together; the
   * value comes from simulate --lora-adapters (docs/BENCHMARKS.md, "LoRA placement").
   */
  public static final double DEFAULT_LOAD_COST = 2000.0;

  /**
   * Default {@link #evictionCost}: 2,000 blocks more (the evicted adapter is loaded again later).
   */
  public static final double DEFAULT_EVICTION_COST = 2000.0;

  /**
   * @throws IllegalArgumentException when a cost is negative, infinite or NaN
   */
  public LoraCost {
    CostBasedSelector.requireWeight("loadCost", loadCost);
    CostBasedSelector.requireWeight("evictionCost", evictionCost);
  }

  /** The default costs. */
  public static LoraCost defaults() {
    return new LoraCost(DEFAULT_LOAD_COST, DEFAULT_EVICTION_COST);
  }

  /**
   * The cost addend of a request for an adapter on an engine.
   *
   * @param resident whether the engine has the request's adapter resident (true also for a request
   *     that names no adapter)
   * @param residentCount adapters resident on the engine now
   * @param maxLoras the engine's {@code --max-loras}; 0 or less when unknown (a load then evicts
   *     nothing that is known)
   */
  public double cost(boolean resident, int residentCount, int maxLoras) {
    if (resident) return 0.0;
    return maxLoras > 0 && residentCount >= maxLoras ? loadCost + evictionCost : loadCost;
  }
}
