package io.kvrouter.index;

import io.kvrouter.event.Worker;
import java.util.Objects;

/**
 * The answer of {@link TieredIndex#findTiered}: the device index's own answer, and for each worker
 * rank with at least one block on some tier, its cumulative scores {@code P_k}: the number of
 * leading query blocks each of which is held on at least one of the first {@code k} tiers.
 *
 * <p>{@code blocks(i, Tier.DEVICE)} is the device score ({@link #device()}'s); {@code blocks(i,
 * Tier.EXTERNAL)} is the <em>tiered overlap</em>, the longest prefix of the query in which every
 * block is on some tier. Scores never decrease with the tier: {@code P_1 <= P_2 <= P_3 <= P_4}.
 */
public final class TieredScores {
  static final int TIERS = 4;
  private final OverlapScores device;
  private final Worker[] workers;
  private final int[] cumulative; // TIERS per worker, row-major
  private final int size;

  TieredScores(OverlapScores device, Worker[] workers, int[] cumulative, int size) {
    this.device = device;
    this.workers = workers;
    this.cumulative = cumulative;
    this.size = size;
  }

  /** The device index's answer (what routing without tiers sees). */
  public OverlapScores device() {
    return device;
  }

  /** How many worker ranks have a score of at least 1 on some tier. */
  public int size() {
    return size;
  }

  /** The {@code i}-th worker rank, {@code 0 <= i < size()}, in no particular order. */
  public Worker worker(int i) {
    Objects.checkIndex(i, size);
    return workers[i];
  }

  /** {@code P_k} of {@link #worker(int) worker(i)} for {@code k = upTo.ordinal() + 1}. */
  public int blocks(int i, Tier upTo) {
    Objects.checkIndex(i, size);
    return cumulative[i * TIERS + upTo.ordinal()];
  }

  /** {@code P_k} of {@code worker}; 0 when it has no score. */
  public int blocks(Worker worker, Tier upTo) {
    for (int i = 0; i < size; i++) {
      if (workers[i].equals(worker)) return cumulative[i * TIERS + upTo.ordinal()];
    }
    return 0;
  }

  /** The tiered overlap of {@link #worker(int) worker(i)}: {@code blocks(i, EXTERNAL)}. */
  public int tieredOverlap(int i) {
    return blocks(i, Tier.EXTERNAL);
  }
}
