package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What {@link KvRouter#route} decided: the request went to a worker, or every allowed worker was
 * busy, or there was no worker to consider. Only {@link Routed} records the request in flight.
 */
public sealed interface RouteDecision {

  /**
   * The request was sent to {@code worker} and is tracked until freed.
   *
   * @param worker the chosen worker rank
   * @param overlapBlocks leading blocks of the prompt the worker caches
   * @param overlapTokens {@code overlapBlocks × blockSize}
   * @param candidates every worker rank that was eligible, with its load terms and cost, in
   *     ascending {@link Worker} order
   * @param busy worker ranks that were allowed but excluded as busy, in ascending order
   * @param tierOverlap the chosen worker's cached prefix by tier (device, then what host, disk and
   *     external copies add); {@code null} when the index tracks no tier beyond the device
   */
  record Routed(
      Worker worker,
      int overlapBlocks,
      int overlapTokens,
      List<CandidateCost> candidates,
      List<Worker> busy,
      @Nullable TierOverlap tierOverlap)
      implements RouteDecision {
    /** A decision without tiers. */
    public Routed(
        Worker worker,
        int overlapBlocks,
        int overlapTokens,
        List<CandidateCost> candidates,
        List<Worker> busy) {
      this(worker, overlapBlocks, overlapTokens, candidates, busy, null);
    }

    public Routed {
      // the router's own view is unmodifiable and built lazily: copying it would build every
      // element (PricedCandidates)
      if (!(candidates instanceof PricedCandidates)) candidates = List.copyOf(candidates);
      busy = List.copyOf(busy);
    }

    /**
     * The cached prefix by tier of the candidate whose worker is {@code worker}; {@code null} when
     * it is not a candidate or the index tracks no tier beyond the device.
     */
    public @Nullable TierOverlap tierOverlapOf(Worker worker) {
      if (tierOverlap == null) return null;
      if (candidates instanceof PricedCandidates p) return p.tierOverlapOf(worker);
      return worker.equals(this.worker) ? tierOverlap : null;
    }

    /**
     * The names of the cost's terms ({@link Scorers}) whose contributions {@link #contribution}
     * reports, in order; empty when the selector is not a composition of scorers.
     */
    public List<String> scorerNames() {
      return candidates instanceof PricedCandidates p ? p.scorerNames() : List.of();
    }

    /**
     * What term {@code term} of {@link #scorerNames()} added to the cost of {@code
     * candidates().get(candidate)} (its weight times its figure; 0 for a term of weight 0); NaN
     * when the terms are not known.
     *
     * @throws IndexOutOfBoundsException when either index is out of range
     */
    public double contribution(int candidate, int term) {
      if (candidates instanceof PricedCandidates p) return p.contribution(candidate, term);
      Objects.checkIndex(candidate, candidates.size());
      return Double.NaN;
    }

    /** The cost of the chosen worker. */
    public double cost() {
      if (candidates instanceof PricedCandidates p) {
        double c = p.costOf(worker);
        if (!Double.isNaN(c)) return c;
      }
      for (CandidateCost c : candidates) {
        if (c.worker().equals(worker)) return c.cost();
      }
      throw new IllegalStateException("chosen worker " + worker + " is not among the candidates");
    }
  }

  /**
   * Every allowed worker rank is over a busy threshold; nothing was recorded. The gateway may queue
   * the request, shed it, or retry.
   *
   * @param candidates the busy worker ranks with the load terms they had, ascending
   */
  record AllBusy(List<Candidate> candidates) implements RouteDecision {
    public AllBusy {
      candidates = List.copyOf(candidates);
    }
  }

  /** No worker is registered, or none of the registered ones is allowed by the options. */
  record NoWorkers() implements RouteDecision {}
}
