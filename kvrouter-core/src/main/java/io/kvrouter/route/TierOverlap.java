package io.kvrouter.route;

/**
 * A candidate's cached prefix split by tier: the leading blocks on the device, then how many more
 * leading blocks the host, disk and external tiers add (each block counted once, at the fastest of
 * the cumulative tiers that reaches it), and the weighted blocks the cost credited.
 *
 * @param device leading blocks of the prompt on the device ({@code P_1})
 * @param host leading blocks reached once host copies count, beyond {@code device} ({@code P_2 −
 *     P_1})
 * @param disk beyond those, with disk copies ({@code P_3 − P_2})
 * @param external beyond those, with external copies ({@code P_4 − P_3})
 * @param weightedBlocks {@code device + host·w_host + disk·w_disk + external·w_external}
 */
public record TierOverlap(int device, int host, int disk, int external, double weightedBlocks) {
  /** The tiered overlap: leading blocks each held on some tier. */
  public int total() {
    return device + host + disk + external;
  }

  /** The split of cumulative scores {@code p1 <= p2 <= p3 <= p4} under {@code weights}. */
  public static TierOverlap of(int p1, int p2, int p3, int p4, TierWeights weights) {
    return new TierOverlap(p1, p2 - p1, p3 - p2, p4 - p3, weights.weightedBlocks(p1, p2, p3, p4));
  }
}
