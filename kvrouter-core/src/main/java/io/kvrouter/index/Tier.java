package io.kvrouter.index;

/**
 * Where a worker rank keeps a copy of a KV block, fastest first: the tiers a {@link TieredIndex}
 * tracks. The order is the order of the cumulative indexes (device, then device ∪ host, ...).
 * Mirrors kvrouter-transport's {@code StorageTier}, constant for constant.
 */
public enum Tier {
  /** Accelerator memory: a hit costs nothing. */
  DEVICE,
  /** Host memory (CPU offloading): a hit costs a PCIe transfer. */
  HOST,
  /** Local disk (staged through host memory). */
  DISK,
  /** A store outside the worker (a shared or remote pool). */
  EXTERNAL;

  private static final Tier[] ALL = values();

  /** The tier of ordinal {@code i} (0 = {@link #DEVICE}). */
  public static Tier of(int i) {
    return ALL[i];
  }
}
