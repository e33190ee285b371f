package io.kvrouter.sim;

import io.kvrouter.route.Candidates;
import io.kvrouter.route.WorkerSelector;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * The baseline routing policies that ignore cost, as {@link WorkerSelector}s: round-robin and
 * random, used by {@code kvrouter simulate} (FleetSimulation) and {@code kvrouter bench fleet}. The
 * chosen candidate's cost is set to 0 and every other's to 1. A selector holds its own state (the
 * next turn, the random stream) and is not thread-safe: one per router, as the router calls it.
 */
public final class BaselineSelectors {
  private BaselineSelectors() {}

  /** Candidates in turn: the n-th call takes candidate {@code n mod size}. */
  public static WorkerSelector roundRobin() {
    return new WorkerSelector() {
      private long next;

      @Override
      public int select(Candidates candidates, double[] costs) {
        return chose((int) (next++ % candidates.size()), costs);
      }

      @Override
      public String toString() {
        return "round-robin";
      }
    };
  }

  /** A uniformly random candidate from a stream seeded with {@code seed}. */
  public static WorkerSelector random(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    return new WorkerSelector() {
      @Override
      public int select(Candidates candidates, double[] costs) {
        return chose(rnd.nextInt(candidates.size()), costs);
      }

      @Override
      public String toString() {
        return "random";
      }
    };
  }

  private static int chose(int chosen, double[] costs) {
    Arrays.fill(costs, 1.0);
    costs[chosen] = 0.0;
    return chosen;
  }
}
