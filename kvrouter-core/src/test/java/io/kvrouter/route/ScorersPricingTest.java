package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link Scorers#price}'s loop over the columns for built-in terms ({@link
 * Candidates#priceBuiltIn}) against the reference, {@link Scorers#priceByScorers}, which calls
 * every weighted term's scorer for every candidate: on seeded random candidates, random
 * compositions of the built-in terms (some weights 0, in random order), with and without a session
 * affinity and a requests column, every cost must have the same bits.
 */
class ScorersPricingTest {

  private static final String[] BUILT_IN = {
    Scorers.PREFILL, Scorers.DECODE, Scorers.PRESSURE, Scorers.QUEUE, Scorers.SESSION
  };

  @Test
  void builtInTermsPriceToTheSameBitsAsTheirScorers() {
    SplittableRandom rnd = new SplittableRandom(20261205);
    int compared = 0;
    for (int round = 0; round < 2_000; round++) {
      Scorers scorers = randomComposition(rnd);
      Candidates c = randomCandidates(rnd);
      double[] fast = new double[c.size()];
      double[] reference = new double[c.size()];
      scorers.price(c, fast);
      scorers.priceByScorers(c, reference);
      for (int i = 0; i < c.size(); i++) {
        assertThat(Double.doubleToRawLongBits(fast[i]))
            .as("round %d, candidate %d, scorers %s", round, i, scorers)
            .isEqualTo(Double.doubleToRawLongBits(reference[i]));
        compared++;
      }
    }
    assertThat(compared).isGreaterThan(10_000);
  }

  @Test
  void theDefaultCompositionPricesAsTheFormula() {
    // a hand-computed case: prefill 2.5 at weight 1, decode 7, pressure 20 × 3 new blocks × 0.5
    Worker w = Worker.of(1);
    Candidates c =
        new Candidates(
            new Worker[] {w},
            new int[] {1},
            new int[] {1},
            new double[] {2.5},
            new int[] {7},
            1,
            4,
            new double[] {0.5},
            null,
            null,
            RouteOptions.defaults());
    double[] costs = new double[1];
    Scorers.defaults(1.0, 20.0).price(c, costs);
    assertThat(costs[0]).isEqualTo(2.5 + 7 + 30.0);
  }

  @Test
  void aScorerOfYourOwnIsCalled() {
    Candidates c = randomCandidates(new SplittableRandom(7));
    Scorers s = Scorers.defaults(1.0, 0.0).toBuilder().add("own", 2.0, (cs, i) -> 100 + i).build();
    double[] costs = new double[c.size()];
    s.price(c, costs);
    for (int i = 0; i < c.size(); i++) {
      double expected = 1.0 * c.prefillBlocks(i) + 1.0 * c.decodeBlocks(i) + 2.0 * (100 + i);
      assertThat(costs[i]).isEqualTo(expected);
    }
  }

  /** A random composition of one to all built-in terms, weights 0, 1 or up to 50 (seeded). */
  static Scorers randomComposition(SplittableRandom rnd) {
    List<String> names = new ArrayList<>(List.of(BUILT_IN));
    Scorers.Builder b = Scorers.builder();
    int terms = 1 + rnd.nextInt(BUILT_IN.length);
    for (int t = 0; t < terms; t++) {
      String name = names.remove(rnd.nextInt(names.size()));
      double weight =
          switch (rnd.nextInt(4)) {
            case 0 -> 0.0;
            case 1 -> 1.0;
            default -> rnd.nextDouble() * 50;
          };
      b.add(name, weight);
    }
    return b.build();
  }

  private static Candidates randomCandidates(SplittableRandom rnd) {
    int n = 1 + rnd.nextInt(40);
    int promptBlocks = rnd.nextInt(80);
    Worker[] workers = new Worker[n];
    int[] overlap = new int[n];
    int[] cached = new int[n];
    double[] prefill = new double[n];
    int[] decode = new int[n];
    double[] pressure = new double[n];
    int[] requests = new int[n];
    for (int i = 0; i < n; i++) {
      workers[i] = new Worker(i, rnd.nextInt(3));
      overlap[i] = rnd.nextInt(promptBlocks + 10); // past the prompt too: newBlocks is clamped
      cached[i] = overlap[i] + rnd.nextInt(100);
      prefill[i] = rnd.nextInt(5_000) / 16.0 + rnd.nextDouble();
      decode[i] = rnd.nextInt(20_000);
      pressure[i] = rnd.nextBoolean() ? 0 : rnd.nextDouble() * 4;
      requests[i] = rnd.nextInt(64);
    }
    Worker affinity = rnd.nextBoolean() ? null : workers[rnd.nextInt(n)];
    return new Candidates(
        workers,
        overlap,
        cached,
        prefill,
        decode,
        n,
        promptBlocks,
        pressure,
        null,
        rnd.nextBoolean() ? requests : null,
        RouteOptions.defaults().withAffinity(affinity));
  }
}
