package io.kvrouter.route;

/**
 * A request's own addend to each candidate's routing cost, in the cost's units (blocks of prefill
 * work): what placing this request on a worker costs beyond its KV overlap and load. The LoRA
 * placement term ({@link LoraResidency#term}) is one. The router calls it under its lock, once per
 * eligible rank of one decision, on the routing thread: it must be fast, must not block and must
 * return a finite value {@code >= 0}.
 */
@FunctionalInterface
public interface CostTerm {
  /** Adds nothing: the cost of DESIGN.md §6 (and docs/routing.md's pressure term) alone. */
  CostTerm NONE = workerId -> 0.0;

  /** The addend for a request placed on worker {@code workerId} (every dp rank of it). */
  double cost(long workerId);
}
