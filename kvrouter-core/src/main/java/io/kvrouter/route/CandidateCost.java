package io.kvrouter.route;

import io.kvrouter.event.Worker;

/**
 * A candidate and the cost its {@link WorkerSelector} gave it (lower is better), reported in every
 * {@link RouteDecision.Routed} for observability.
 */
public record CandidateCost(Candidate candidate, double cost) {
  /** The candidate's worker rank. */
  public Worker worker() {
    return candidate.worker();
  }
}
