package io.kvrouter.sim;

import java.util.List;

/**
 * The end-of-run check that a router index holds exactly what the engines' caches hold.
 *
 * @param ok no problem found
 * @param ranks engine ranks compared
 * @param blocks (rank, block) pairs the caches hold
 * @param prompts trace prompts whose scores were compared on every rank
 * @param problems the first problems found (empty when ok)
 */
public record Verification(boolean ok, int ranks, long blocks, int prompts, List<String> problems) {
  public Verification {
    problems = List.copyOf(problems);
  }
}
