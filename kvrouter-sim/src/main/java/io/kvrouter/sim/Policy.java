package io.kvrouter.sim;

import java.util.Arrays;
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
  KV_DEVICE("kv-device", "as kv, but routing on device blocks alone (host-tier events dropped)");

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
