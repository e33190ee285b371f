package io.kvrouter.sim;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

/** A routing policy the simulation compares. */
public enum Policy {
  /** KvRouter in event mode with the default cost (overlap weight 1, pressure weight 20). */
  KV("kv", "KvRouter, KV events, default cost (overlap weight 1, eviction-pressure weight 20)"),
  /** Each request to the next worker rank in turn. */
  ROUND_ROBIN("round-robin", "next rank in turn"),
  /** A uniformly random rank (seeded). */
  RANDOM("random", "uniform random rank (seeded)"),
  /** KvRouter's load alone: the cost with overlap weight 0 (fewest active blocks). */
  LEAST_LOADED("least-loaded", "fewest active KV blocks (KvRouter cost, overlap weight 0)"),
  /** KvRouter in approximate mode: no events, it predicts caches from its own decisions. */
  APPROX(
      "approx",
      "KvRouter approximate mode: no events, predicted caches (an LRU of each rank's capacity)"),
  /**
   * KvRouter as {@link #KV}, but with an index of the device tier alone: the host tier's events are
   * dropped. Run only with a host tier (--host-blocks), to compare with tier-aware routing.
   */
  KV_DEVICE("kv-device", "as kv, but routing on device blocks alone (host-tier events dropped)"),
  /**
   * KvRouter as {@link #KV}, but scoring a hybrid model on its main KV cache group alone (the other
   * groups' events dropped): kvrouter before hybrid scoring, and Dynamo's and llm-d's routers. Run
   * only with --kv-groups.
   */
  KV_MAIN(
      "kv-main",
      "as kv, but scoring a hybrid model on its full-attention group alone (other groups dropped)");

  private final String cliName;
  private final String description;

  Policy(String cliName, String description) {
    this.cliName = cliName;
    this.description = description;
  }

  /** The name on the command line and in reports. */
  public String cliName() {
    return cliName;
  }

  /** One line saying what it does. */
  public String description() {
    return description;
  }

  /**
   * The policies {@code simulate} runs when none are named: every one that means something for
   * {@code cfg} (kv-device only with a host tier; kv-main only, and approx never, with KV cache
   * groups).
   */
  public static List<Policy> defaults(SimConfig cfg) {
    List<Policy> out = new ArrayList<>(List.of(values()));
    if (cfg.hostBlocks() == 0) out.remove(KV_DEVICE); // the same as kv without a host tier
    if (cfg.hybrid()) out.remove(APPROX);
    else out.remove(KV_MAIN); // the same as kv with one group
    return out;
  }

  /**
   * Checks that every policy can run with {@code cfg}.
   *
   * @throws IllegalArgumentException naming the policy and why
   */
  public static void check(List<Policy> policies, SimConfig cfg) {
    for (Policy p : policies) {
      if (p == APPROX && cfg.hybrid()) {
        throw new IllegalArgumentException(
            "the approx policy predicts one cache per rank; it cannot model --kv-groups "
                + cfg.kvGroups());
      }
      if (p == KV_MAIN && !cfg.hybrid()) {
        throw new IllegalArgumentException(
            "the kv-main policy scores a hybrid model's main group; give --kv-groups");
      }
    }
  }

  /** Every name, comma-separated, in the order of the enum. */
  public static String known() {
    return Arrays.stream(values()).map(Policy::cliName).collect(Collectors.joining(", "));
  }

  /**
   * The policy called {@code name}.
   *
   * @throws IllegalArgumentException naming the known policies when there is none
   */
  public static Policy parse(String name) {
    for (Policy p : values()) {
      if (p.cliName.equals(name.trim())) return p;
    }
    throw new IllegalArgumentException("unknown policy '" + name + "'; known policies: " + known());
  }
}
