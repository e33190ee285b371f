package io.kvrouter.route;

import io.kvrouter.index.Tier;

/**
 * What a cached block on each tier saves, as a fraction of recomputing it: a device block saves all
 * of it (1), a host block {@code host}, a disk block {@code disk}, an external one {@code
 * external}. The routing cost charges prefill for a block the device misses at {@code 1 − weight}
 * of a recompute (docs/routing.md, "Blocks beyond the GPU").
 *
 * <p>Defaults ({@link #DEFAULTS}): host 0.75 and disk 0.25 are NVIDIA Dynamo's {@code
 * host_cache_hit_weight} and {@code disk_cache_hit_weight}; llm-d weighs cpu 0.8 and its router
 * object_store 0.2; external 0.1 is ours (a network fetch, below llm-d's object store). Each weight
 * must be in {@code [0, 1]}.
 */
public record TierWeights(double host, double disk, double external) {
  /** Host 0.75, disk 0.25, external 0.1. */
  public static final TierWeights DEFAULTS = new TierWeights(0.75, 0.25, 0.1);

  public TierWeights {
    check("host", host);
    check("disk", disk);
    check("external", external);
  }

  private static void check(String name, double w) {
    if (!(w >= 0 && w <= 1)) {
      throw new IllegalArgumentException(name + " tier weight must be in [0, 1], got " + w);
    }
  }

  /** The weight of {@code tier} (1 for the device). */
  public double of(Tier tier) {
    return switch (tier) {
      case DEVICE -> 1;
      case HOST -> host;
      case DISK -> disk;
      case EXTERNAL -> external;
    };
  }

  /**
   * Weighted blocks of cumulative scores {@code p1 <= p2 <= p3 <= p4}: {@code p1 + (p2 − p1)·host +
   * (p3 − p2)·disk + (p4 − p3)·external}.
   */
  public double weightedBlocks(int p1, int p2, int p3, int p4) {
    return p1 + (p2 - p1) * host + (p3 - p2) * disk + (p4 - p3) * external;
  }
}
