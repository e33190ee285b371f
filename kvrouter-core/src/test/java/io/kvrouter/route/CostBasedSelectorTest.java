package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.kvrouter.event.Worker;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The default cost and selection (DESIGN.md §6). Statistical tests use fixed seeds, so they are
 * deterministic; their tolerances are derived from the binomial standard deviation.
 */
class CostBasedSelectorTest {

  private static Candidate cand(long id, double prefillBlocks, int decodeBlocks, int cached) {
    return new Candidate(Worker.of(id), 0, cached, prefillBlocks, decodeBlocks);
  }

  /** The candidates with no eviction pressure anywhere. */
  private static Candidates in(List<Candidate> cands) {
    return Candidates.of(cands, 0, new double[cands.size()]);
  }

  private static int pick(WorkerSelector s, List<Candidate> cands, double[] costs) {
    return s.select(in(cands), costs);
  }

  @Test
  void theDocumentedExampleChoosesW2() {
    List<Candidate> cands = List.of(cand(1, 8, 10, 0), cand(2, 5, 5, 0), cand(3, 2, 9, 0));
    double[] costs = new double[3];
    int chosen = pick(WorkerSelector.costBased(1.0, 0, 42), cands, costs);
    assertThat(costs).containsExactly(18, 10, 11);
    assertThat(chosen).isEqualTo(1);
  }

  @Test
  void theOverlapWeightScalesOnlyThePrefillTerm() {
    List<Candidate> cands = List.of(cand(1, 8, 10, 0), cand(2, 5, 5, 0), cand(3, 2, 9, 0));
    double[] costs = new double[3];
    int chosen = pick(WorkerSelector.costBased(2.0, 0, 42), cands, costs);
    assertThat(costs).containsExactly(26, 15, 13);
    assertThat(chosen).isEqualTo(2);
    chosen = pick(WorkerSelector.costBased(0.0, 0, 42), cands, costs);
    assertThat(costs).as("weight 0: decode blocks only").containsExactly(10, 5, 9);
    assertThat(chosen).isEqualTo(1);
  }

  @Test
  void aSingleCandidateIsChosenAndCosted() {
    double[] costs = new double[1];
    assertThat(pick(WorkerSelector.costBased(1, 0.7, 1), List.of(cand(9, 1.5, 3, 0)), costs))
        .isZero();
    assertThat(costs[0]).isEqualTo(4.5);
  }

  @Test
  void tiesGoToFewerCachedBlocksFirst() {
    List<Candidate> cands = List.of(cand(1, 2, 2, 30), cand(2, 2, 2, 10), cand(3, 2, 2, 20));
    WorkerSelector s = WorkerSelector.costBased(1, 0, 7);
    for (int i = 0; i < 100; i++) {
      assertThat(pick(s, cands, new double[3])).isEqualTo(1);
    }
    // a strictly cheaper candidate wins whatever its cache size
    List<Candidate> cheaper = List.of(cand(1, 2, 1, 99), cand(2, 2, 2, 0));
    assertThat(pick(s, cheaper, new double[2])).isZero();
  }

  @Test
  void tiesAreSharedFairlyOverTenThousandDecisions() {
    for (int k : new int[] {2, 3, 4}) {
      List<Candidate> cands = new ArrayList<>();
      for (int i = 0; i < k; i++) cands.add(cand(i, 1, 4, 5));
      WorkerSelector s = WorkerSelector.costBased(1, 0, 12345);
      int n = 10_000;
      int[] counts = new int[k];
      double[] costs = new double[k];
      for (int i = 0; i < n; i++) counts[pick(s, cands, costs)]++;
      double expected = (double) n / k;
      // 5% of the fair share: 2.9 binomial sigmas at k = 4 (sigma = 43), more at k = 2, 3
      for (int i = 0; i < k; i++) {
        assertThat((double) counts[i])
            .as("k=%d worker %d of %s", k, i, Arrays.toString(counts))
            .isCloseTo(expected, within(0.05 * expected));
      }
    }
  }

  @Test
  void decisionsDependOnlyOnTheSeed() {
    List<Candidate> cands = List.of(cand(1, 1, 1, 0), cand(2, 1, 1, 0), cand(3, 1, 1, 0));
    List<Integer> a = picks(WorkerSelector.costBased(1, 0, 99), cands, 200);
    List<Integer> b = picks(WorkerSelector.costBased(1, 0, 99), cands, 200);
    List<Integer> c = picks(WorkerSelector.costBased(1, 0, 100), cands, 200);
    assertThat(a).isEqualTo(b);
    assertThat(a).isNotEqualTo(c);
    List<Integer> hot = picks(WorkerSelector.costBased(1, 0.5, 99), cands, 200);
    assertThat(hot).isEqualTo(picks(WorkerSelector.costBased(1, 0.5, 99), cands, 200));
  }

  private static List<Integer> picks(WorkerSelector s, List<Candidate> cands, int n) {
    List<Integer> out = new ArrayList<>();
    for (int i = 0; i < n; i++) out.add(s.select(in(cands), new double[cands.size()]));
    return out;
  }

  @Test
  void temperatureSamplesTheAnalyticSoftmax() {
    // costs 18, 10, 11 (the documented example)
    List<Candidate> cands = List.of(cand(1, 8, 10, 0), cand(2, 5, 5, 0), cand(3, 2, 9, 0));
    double[] c = {18, 10, 11};
    for (double t : new double[] {0.25, 1.0, 4.0}) {
      // p_i = exp(-(c_i - min)/(max - min)/T) / sum, computed here independently
      double[] p = new double[3];
      double sum = 0;
      for (int i = 0; i < 3; i++) sum += p[i] = Math.exp(-(c[i] - 10) / 8.0 / t);
      for (int i = 0; i < 3; i++) p[i] /= sum;

      WorkerSelector s = WorkerSelector.costBased(1, t, 2024);
      int n = 100_000;
      int[] counts = new int[3];
      double[] costs = new double[3];
      for (int i = 0; i < n; i++) counts[s.select(in(cands), costs)]++;
      assertThat(costs).containsExactly(18, 10, 11);
      for (int i = 0; i < 3; i++) {
        double sigma = Math.sqrt(p[i] * (1 - p[i]) / n);
        assertThat((double) counts[i] / n)
            .as("T=%s candidate %d (p=%.4f)", t, i, p[i])
            .isCloseTo(p[i], within(4 * sigma + 1e-12));
      }
    }
  }

  @Test
  void temperatureWithEqualCostsIsUniform() {
    List<Candidate> cands = List.of(cand(1, 3, 3, 0), cand(2, 3, 3, 50), cand(3, 3, 3, 9));
    WorkerSelector s = WorkerSelector.costBased(1, 1.0, 77);
    int n = 30_000;
    int[] counts = new int[3];
    for (int i = 0; i < n; i++) counts[s.select(in(cands), new double[3])]++;
    double p = 1.0 / 3;
    double sigma = Math.sqrt(p * (1 - p) / n);
    for (int i = 0; i < 3; i++) {
      assertThat((double) counts[i] / n).isCloseTo(p, within(4 * sigma));
    }
  }

  @Test
  void aTinyTemperatureStillPicksTheCheapest() {
    List<Candidate> cands = List.of(cand(1, 8, 10, 0), cand(2, 5, 5, 0), cand(3, 2, 9, 0));
    WorkerSelector s = WorkerSelector.costBased(1, 1e-6, 5);
    for (int i = 0; i < 1000; i++) assertThat(s.select(in(cands), new double[3])).isEqualTo(1);
  }

  /**
   * docs/routing.md's pressure term, from the Candidates: 4 prompt blocks; candidate 1 caches 1 of
   * them (3 new) and evicts at twice the mean, candidate 2 caches none (4 new) at 0.5, candidate 3
   * caches all 4 (none new) at 3.
   */
  @Test
  void thePressureTermPricesNewBlocksByRelativePressure() {
    List<Candidate> cands =
        List.of(
            new Candidate(Worker.of(1), 1, 1, 2, 4),
            new Candidate(Worker.of(2), 0, 0, 3, 4),
            new Candidate(Worker.of(3), 4, 9, 0, 6));
    Candidates in = Candidates.of(cands, 4, new double[] {2, 0.5, 3});
    assertThat(in.newBlocks(0)).isEqualTo(3);
    assertThat(in.newBlocks(1)).isEqualTo(4);
    assertThat(in.newBlocks(2)).isZero();
    double[] costs = new double[3];
    // 1 × 2 + 4 + 10 × 3 × 2 = 66; 1 × 3 + 4 + 10 × 4 × 0.5 = 27; 0 + 6 + 0 = 6
    assertThat(WorkerSelector.costBased(1, 10, 0, 0).select(in, costs)).isEqualTo(2);
    assertThat(costs).containsExactly(66, 27, 6);
    // weight 0, or the selector without the term: §6's cost only
    WorkerSelector.costBased(1, 0, 0, 0).select(in, costs);
    assertThat(costs).containsExactly(6, 7, 6);
    WorkerSelector.costBased(1, 0, 0).select(in, costs);
    assertThat(costs).containsExactly(6, 7, 6);
  }

  @Test
  void candidatesOfChecksItsArguments() {
    List<Candidate> one = List.of(cand(1, 1, 1, 0));
    assertThatThrownBy(() -> Candidates.of(List.of(), 0, new double[0]))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Candidates.of(one, 0, new double[2]))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Candidates.of(one, -1, new double[1]))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Candidates.of(one, 0, new double[] {Double.NaN}))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Candidates.of(one, 0, new double[] {-1}))
        .isInstanceOf(IllegalArgumentException.class);
    double[] p = {0.5};
    Candidates c = Candidates.of(one, 2, p);
    p[0] = 9; // copied
    assertThat(c.relativePressure(0)).isEqualTo(0.5);
    assertThat(c).containsExactlyElementsOf(one);
    assertThatThrownBy(() -> c.get(1)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> c.add(cand(2, 1, 1, 0)))
        .isInstanceOf(UnsupportedOperationException.class);
  }

  @Test
  void rejectsBadParameters() {
    assertThatThrownBy(() -> WorkerSelector.costBased(-1, 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> WorkerSelector.costBased(Double.NaN, 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> WorkerSelector.costBased(1, -0.1, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> WorkerSelector.costBased(1, Double.POSITIVE_INFINITY, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> WorkerSelector.costBased(1, -1, 0, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("pressureWeight must be finite and >= 0, got -1.0");
    // the router's builder checks with the same words
    assertThatThrownBy(() -> KvRouter.builder(4).pressureWeight(Double.NaN))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("pressureWeight must be finite and >= 0, got NaN");
  }
}
