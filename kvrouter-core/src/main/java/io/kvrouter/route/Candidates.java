package io.kvrouter.route;

import java.util.AbstractList;
import java.util.List;
import java.util.Objects;
import java.util.RandomAccess;

/**
 * The candidates of one routing decision, as a {@link WorkerSelector} gets them: an unmodifiable
 * list of the eligible worker ranks' {@link Candidate}s (DESIGN.md §6's load terms) in ascending
 * worker order, with what the eviction-pressure term of docs/routing.md needs for each: its {@link
 * #newBlocks new blocks} and its {@link #relativePressure relative eviction pressure}.
 *
 * <pre>
 * Implementation notes
 *
 * A view over arrays the router fills for this decision alone (candidates[0..size) and
 * relativePressure[0..size)); nothing changes them afterwards, so a selector may keep it.
 * newBlocks is derived from promptBlocks and the candidate's overlap, not stored.
 * </pre>
 */
public final class Candidates extends AbstractList<Candidate> implements RandomAccess {
  private final Candidate[] candidates;
  private final int size;
  private final int promptBlocks;
  private final double[] relativePressure;

  /** The router's constructor: no copies, no checks (see the class comment). */
  Candidates(Candidate[] candidates, int size, int promptBlocks, double[] relativePressure) {
    this.candidates = candidates;
    this.size = size;
    this.promptBlocks = promptBlocks;
    this.relativePressure = relativePressure;
  }

  /**
   * Candidates as the router would pass them, for testing or wrapping a selector.
   *
   * @param candidates the candidates, in the order the selector should see them (the router's is
   *     ascending worker order); at least one
   * @param promptBlocks full blocks of the prompt
   * @param relativePressure each candidate's relative eviction pressure (finite, {@code >= 0}),
   *     copied
   * @throws IllegalArgumentException on an empty list, lengths that differ, or bad values
   */
  public static Candidates of(
      List<Candidate> candidates, int promptBlocks, double[] relativePressure) {
    Candidate[] c = candidates.toArray(new Candidate[0]);
    if (c.length == 0) throw new IllegalArgumentException("no candidates");
    if (relativePressure.length != c.length) {
      throw new IllegalArgumentException(
          relativePressure.length + " relative pressures for " + c.length + " candidates");
    }
    if (promptBlocks < 0) {
      throw new IllegalArgumentException("promptBlocks must be >= 0, got " + promptBlocks);
    }
    for (int i = 0; i < c.length; i++) {
      Objects.requireNonNull(c[i], "candidate");
      double p = relativePressure[i];
      if (!(p >= 0) || Double.isInfinite(p)) {
        throw new IllegalArgumentException(
            "relative pressure " + i + " must be finite and >= 0, got " + p);
      }
    }
    return new Candidates(c, c.length, promptBlocks, relativePressure.clone());
  }

  @Override
  public Candidate get(int i) {
    Objects.checkIndex(i, size);
    return candidates[i];
  }

  @Override
  public int size() {
    return size;
  }

  /** Full blocks of the prompt being routed (its partial last block is never cached). */
  public int promptBlocks() {
    return promptBlocks;
  }

  /**
   * The prompt's full blocks that candidate {@code i} does not cache: {@code promptBlocks −
   * overlapBlocks}, never negative; what storing the prompt there adds to its cache.
   */
  public int newBlocks(int i) {
    return Math.max(0, promptBlocks - get(i).overlapBlocks());
  }

  /**
   * How fast candidate {@code i}'s cache has been evicting compared with the ranks allowed for this
   * request: its decaying count of evicted blocks over the mean count of those ranks (busy ones
   * included), the mean taken as at least one block. 1 is average, 0 when it never evicted (about 0
   * when not lately), always 0 in approximate mode (docs/routing.md).
   */
  public double relativePressure(int i) {
    Objects.checkIndex(i, size);
    return relativePressure[i];
  }
}
