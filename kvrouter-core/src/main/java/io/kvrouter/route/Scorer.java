package io.kvrouter.route;

/**
 * One named term of the routing cost: a figure per candidate that a {@link Scorers} composition
 * multiplies by the term's weight and adds to the others' (lower is better). Built-in terms are
 * {@link Scorers#builtIn named}; a term of your own (an adapter's residency, a latency estimate) is
 * added to a composition under a name of its own with {@link Scorers.Builder#add(String, double,
 * Scorer)}.
 *
 * <p>A scorer reads the candidate's figures by index ({@link Candidates#prefillBlocks(int)}, {@link
 * Candidates#decodeBlocks(int)}, {@link Candidates#requests(int)}, {@link Candidates#options()}
 * ...) and returns a primitive: it runs inside {@link KvRouter#route} under the router's lock, once
 * per candidate and decision, so it must not allocate, box, block or take a lock a reader waits on.
 * It may keep state of its own (read without waiting, e.g. through a volatile array).
 */
@FunctionalInterface
public interface Scorer {

  /** Candidate {@code i}'s figure, before the weight; finite. */
  double score(Candidates candidates, int i);

  /**
   * Candidate {@code i}'s contribution to its cost: {@code weight × score(candidates, i)}. A term
   * whose historical formula rounds in another order overrides it (the built-in pressure term, so
   * that the default composition is today's cost bit for bit).
   */
  default double weighted(double weight, Candidates candidates, int i) {
    return weight * score(candidates, i);
  }
}
