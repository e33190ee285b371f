package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link Candidates} built with the overlaps as triples (the router's form when few ranks matched)
 * against the same candidates built with full columns, the reference: on seeded random candidates
 * where a random few have an overlap or cached blocks (some one and not the other, some at the
 * first or last index), every read ({@code overlapBlocks}, {@code cachedBlocks}, {@code newBlocks},
 * {@code get}), every built-in price (random compositions, compared bit for bit) and the selector's
 * tie-break ({@link Candidates#leastCostFewestCached}, against a one-pass naive search over (cost,
 * cached) pairs) must agree. And a decision that does not keep its costs ({@link PricedCandidates}
 * of built-in terms) must report the costs the selector chose by.
 */
class CandidatesSparseTest {

  @Test
  void triplesReadAndPriceAsTheColumns() {
    SplittableRandom rnd = new SplittableRandom(37_2026_12_05L);
    int compared = 0;
    int sparseNonEmpty = 0;
    for (int round = 0; round < 3_000; round++) {
      Pair p = randomPair(rnd);
      Candidates dense = p.dense;
      Candidates sparse = p.sparse;
      if (p.triples > 0) sparseNonEmpty++;
      assertThat(sparse.size()).isEqualTo(dense.size());
      for (int i = 0; i < dense.size(); i++) {
        assertThat(sparse.overlapBlocks(i))
            .as("round %d overlap %d", round, i)
            .isEqualTo(dense.overlapBlocks(i));
        assertThat(sparse.cachedBlocks(i))
            .as("round %d cached %d", round, i)
            .isEqualTo(dense.cachedBlocks(i));
        assertThat(sparse.newBlocks(i)).isEqualTo(dense.newBlocks(i));
        assertThat(sparse.get(i)).isEqualTo(dense.get(i));
      }
      Scorers scorers = ScorersPricingTest.randomComposition(rnd);
      double[] fromDense = new double[dense.size()];
      double[] fromSparse = new double[dense.size()];
      double[] byScorers = new double[dense.size()];
      scorers.price(dense, fromDense);
      scorers.price(sparse, fromSparse);
      scorers.priceByScorers(sparse, byScorers);
      for (int i = 0; i < dense.size(); i++) {
        long bits = Double.doubleToRawLongBits(fromDense[i]);
        assertThat(Double.doubleToRawLongBits(fromSparse[i]))
            .as("round %d, candidate %d, scorers %s", round, i, scorers)
            .isEqualTo(bits);
        assertThat(Double.doubleToRawLongBits(byScorers[i])).isEqualTo(bits);
        compared++;
      }
      // the tie-break, on costs with many ties (rounded), from both forms
      double[] costs = new double[dense.size()];
      for (int i = 0; i < costs.length; i++) costs[i] = Math.floor(fromDense[i] / 500);
      int[] expected = naiveTies(costs, dense);
      int[] out = new int[dense.size()];
      int ties = sparse.leastCostFewestCached(costs, out);
      assertThat(Arrays.copyOf(out, ties)).as("round %d", round).containsExactly(expected);
      ties = dense.leastCostFewestCached(costs, out);
      assertThat(Arrays.copyOf(out, ties)).containsExactly(expected);
    }
    assertThat(compared).isGreaterThan(20_000);
    assertThat(sparseNonEmpty).isGreaterThan(2_000);
  }

  @Test
  void aDecisionPricedAgainReportsTheSelectorsCosts() {
    SplittableRandom rnd = new SplittableRandom(41);
    for (int round = 0; round < 500; round++) {
      Pair p = randomPair(rnd);
      Scorers scorers = ScorersPricingTest.randomComposition(rnd);
      double[] chosenBy = new double[p.sparse.size()];
      scorers.price(p.sparse, chosenBy);
      PricedCandidates kept = new PricedCandidates(p.dense, chosenBy.clone(), scorers);
      PricedCandidates again = new PricedCandidates(p.sparse, scorers);
      for (int i = 0; i < chosenBy.length; i++) {
        assertThat(Double.doubleToRawLongBits(again.get(i).cost()))
            .isEqualTo(Double.doubleToRawLongBits(chosenBy[i]));
        assertThat(again.get(i)).isEqualTo(kept.get(i));
        assertThat(again.costOf(p.dense.worker(i))).isEqualTo(kept.costOf(p.dense.worker(i)));
      }
    }
  }

  /** The indices of the least (cost, cached) pairs, ascending: one pass, as the selector had it. */
  private static int[] naiveTies(double[] costs, Candidates c) {
    double best = Double.POSITIVE_INFINITY;
    int bestCached = Integer.MAX_VALUE;
    for (int i = 0; i < costs.length; i++) {
      if (costs[i] < best || (costs[i] == best && c.cachedBlocks(i) < bestCached)) {
        best = costs[i];
        bestCached = c.cachedBlocks(i);
      }
    }
    List<Integer> out = new ArrayList<>();
    for (int i = 0; i < costs.length; i++) {
      if (costs[i] == best && c.cachedBlocks(i) == bestCached) out.add(i);
    }
    return out.stream().mapToInt(Integer::intValue).toArray();
  }

  private record Pair(Candidates dense, Candidates sparse, int triples) {}

  private static Pair randomPair(SplittableRandom rnd) {
    int n = 1 + rnd.nextInt(300);
    int promptBlocks = rnd.nextInt(80);
    Worker[] workers = new Worker[n];
    int[] overlap = new int[n];
    int[] cached = new int[n];
    double[] prefill = new double[n];
    int[] decode = new int[n];
    double[] pressure = new double[n];
    int[] requests = new int[n];
    int matched = rnd.nextInt(Math.min(n, 8) + 1);
    for (int j = 0; j < matched; j++) {
      int i =
          switch (rnd.nextInt(4)) {
            case 0 -> 0;
            case 1 -> n - 1;
            default -> rnd.nextInt(n);
          };
      switch (rnd.nextInt(3)) {
        case 0 -> overlap[i] = 1 + rnd.nextInt(promptBlocks + 10);
        case 1 -> cached[i] = 1 + rnd.nextInt(100);
        default -> {
          overlap[i] = 1 + rnd.nextInt(promptBlocks + 10);
          cached[i] = overlap[i] + rnd.nextInt(100);
        }
      }
    }
    for (int i = 0; i < n; i++) {
      workers[i] = new Worker(i, rnd.nextInt(3));
      prefill[i] = rnd.nextInt(5_000) / 16.0 + (rnd.nextBoolean() ? 0 : rnd.nextDouble());
      decode[i] = rnd.nextInt(4) == 0 ? 64 : rnd.nextInt(20_000);
      pressure[i] = rnd.nextBoolean() ? 0 : rnd.nextDouble() * 4;
      requests[i] = rnd.nextInt(64);
    }
    // the triples of the candidates with an overlap or cached blocks, ascending
    int[] triples = new int[3 * n];
    int t = 0;
    for (int i = 0; i < n; i++) {
      if (overlap[i] != 0 || cached[i] != 0) {
        triples[t++] = i;
        triples[t++] = overlap[i];
        triples[t++] = cached[i];
      }
    }
    Worker affinity = rnd.nextBoolean() ? null : workers[rnd.nextInt(n)];
    RouteOptions options = RouteOptions.defaults().withAffinity(affinity);
    int[] req = rnd.nextBoolean() ? requests : null;
    Candidates dense =
        new Candidates(
            workers,
            overlap,
            cached,
            prefill,
            decode,
            n,
            promptBlocks,
            pressure,
            null,
            req,
            options);
    Candidates sparse =
        new Candidates(
            workers,
            null,
            null,
            Arrays.copyOf(triples, t),
            prefill,
            decode,
            n,
            promptBlocks,
            pressure,
            null,
            req,
            options);
    return new Pair(dense, sparse, t / 3);
  }
}
