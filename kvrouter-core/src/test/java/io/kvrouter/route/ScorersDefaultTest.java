package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The default composition of scorers is the cost the router had before scorers existed, bit for
 * bit: {@link OldSelector} is that selector as it was (commit 12c33c4's CostBasedSelector, the
 * formula and the choice), run side by side with {@code WorkerSelector.scored(Scorers.defaults)} on
 * seeded random candidates and weights; every cost must have the same bits and every choice must be
 * the same (both draw from a SplittableRandom of the same seed, so one extra or missing draw
 * shows).
 */
class ScorersDefaultTest {

  /** The selector before scorers, kept verbatim as the reference. */
  private static final class OldSelector {
    private final double overlapWeight;
    private final double pressureWeight;
    private final double temperature;
    private final SplittableRandom random;

    OldSelector(double overlapWeight, double pressureWeight, double temperature, long seed) {
      this.overlapWeight = overlapWeight;
      this.pressureWeight = pressureWeight;
      this.temperature = temperature;
      this.random = new SplittableRandom(seed);
    }

    int select(Candidates candidates, double[] costs) {
      final int n = candidates.size();
      final double w = overlapWeight;
      final double pw = pressureWeight;
      for (int i = 0; i < n; i++) {
        costs[i] = w * candidates.prefillBlocks(i) + candidates.decodeBlocks(i);
        if (pw > 0) costs[i] += pw * candidates.newBlocks(i) * candidates.relativePressure(i);
      }
      if (n == 1) return 0;
      return temperature == 0 ? cheapest(candidates, costs, n) : sample(costs, n);
    }

    private int cheapest(Candidates candidates, double[] costs, int n) {
      double best = Double.POSITIVE_INFINITY;
      int bestCached = Integer.MAX_VALUE;
      int ties = 0;
      for (int i = 0; i < n; i++) {
        double c = costs[i];
        int cached = candidates.cachedBlocks(i);
        if (c < best || (c == best && cached < bestCached)) {
          best = c;
          bestCached = cached;
          ties = 1;
        } else if (c == best && cached == bestCached) {
          ties++;
        }
      }
      int pick = ties == 1 ? 0 : random.nextInt(ties);
      for (int i = 0; i < n; i++) {
        if (costs[i] == best && candidates.cachedBlocks(i) == bestCached && pick-- == 0) return i;
      }
      throw new IllegalStateException("unreachable");
    }

    private int sample(double[] costs, int n) {
      double min = Double.POSITIVE_INFINITY;
      double max = Double.NEGATIVE_INFINITY;
      for (int i = 0; i < n; i++) {
        min = Math.min(min, costs[i]);
        max = Math.max(max, costs[i]);
      }
      if (max == min) return random.nextInt(n);
      double[] weights = new double[n];
      final double scale = 1.0 / ((max - min) * temperature);
      double sum = 0;
      for (int i = 0; i < n; i++) {
        double p = Math.exp(-(costs[i] - min) * scale);
        weights[i] = p;
        sum += p;
      }
      double u = random.nextDouble() * sum;
      int last = 0;
      for (int i = 0; i < n; i++) {
        double p = weights[i];
        if (p > 0) last = i;
        u -= p;
        if (u < 0) return i;
      }
      return last;
    }
  }

  private static double weight(SplittableRandom r) {
    return switch (r.nextInt(5)) {
      case 0 -> 0.0;
      case 1 -> 1.0;
      case 2 -> KvRouter.DEFAULT_PRESSURE_WEIGHT;
      case 3 -> r.nextDouble() * 50;
      default -> r.nextDouble();
    };
  }

  private static Candidates randomCandidates(SplittableRandom r) {
    int n = 1 + r.nextInt(12);
    int promptBlocks = r.nextInt(200);
    List<Candidate> cands = new ArrayList<>();
    double[] pressure = new double[n];
    for (int i = 0; i < n; i++) {
      int overlap = r.nextInt(promptBlocks + 1);
      // few distinct values so that ties (and their random draws) happen often
      double prefill = r.nextBoolean() ? r.nextInt(8) : r.nextDouble() * 1000 / 7;
      int decode = r.nextBoolean() ? r.nextInt(8) : r.nextInt(100_000);
      int cached = r.nextInt(3);
      cands.add(new Candidate(Worker.of(i + 1), overlap, cached, prefill, decode));
      pressure[i] = r.nextInt(4) == 0 ? 0 : r.nextDouble() * 3;
    }
    return Candidates.of(cands, promptBlocks, pressure);
  }

  @Test
  void theDefaultCompositionIsTheOldCostBitForBit() {
    long seed = new SplittableRandom().nextLong();
    SplittableRandom r = new SplittableRandom(seed);
    for (int round = 0; round < 200; round++) {
      double w = weight(r);
      double pw = weight(r);
      double temperature = r.nextInt(3) == 0 ? r.nextDouble() * 2 : 0;
      long selectorSeed = r.nextLong();
      OldSelector old = new OldSelector(w, pw, temperature, selectorSeed);
      WorkerSelector composed =
          WorkerSelector.scored(Scorers.defaults(w, pw), temperature, selectorSeed);
      WorkerSelector viaCostBased = WorkerSelector.costBased(w, pw, temperature, selectorSeed);
      for (int d = 0; d < 50; d++) {
        Candidates c = randomCandidates(r);
        double[] oldCosts = new double[c.size()];
        double[] newCosts = new double[c.size()];
        double[] viaCosts = new double[c.size()];
        int oldChoice = old.select(c, oldCosts);
        int newChoice = composed.select(c, newCosts);
        int viaChoice = viaCostBased.select(c, viaCosts);
        String where =
            "seed " + seed + ", round " + round + ", decision " + d + ", w=" + w + ", pw=" + pw;
        for (int i = 0; i < c.size(); i++) {
          assertThat(Double.doubleToRawLongBits(newCosts[i]))
              .as("cost %d (%s vs %s), %s", i, newCosts[i], oldCosts[i], where)
              .isEqualTo(Double.doubleToRawLongBits(oldCosts[i]));
          assertThat(Double.doubleToRawLongBits(viaCosts[i]))
              .as("costBased cost %d, %s", i, where)
              .isEqualTo(Double.doubleToRawLongBits(oldCosts[i]));
        }
        assertThat(newChoice).as("choice, %s", where).isEqualTo(oldChoice);
        assertThat(viaChoice).as("costBased choice, %s", where).isEqualTo(oldChoice);
      }
    }
  }

  @Test
  void termsAddedAtWeightZeroChangeNothing() {
    long seed = new SplittableRandom().nextLong();
    SplittableRandom r = new SplittableRandom(seed);
    Scorers plain = Scorers.defaults(1.0, 20.0);
    // the session term has weight 8 but no affinity: its figure is 0 everywhere
    Scorers more = plain.toBuilder().add(Scorers.QUEUE, 0).add(Scorers.SESSION, 8).build();
    for (int d = 0; d < 500; d++) {
      Candidates c = randomCandidates(r);
      double[] a = new double[c.size()];
      double[] b = new double[c.size()];
      plain.price(c, a);
      more.price(c, b);
      for (int i = 0; i < c.size(); i++) {
        assertThat(Double.doubleToRawLongBits(b[i]))
            .as("seed %d", seed)
            .isEqualTo(Double.doubleToRawLongBits(a[i]));
        assertThat(more.contribution(c, i, 3)).as("queue at weight 0").isZero();
        assertThat(more.contribution(c, i, 4)).as("session without affinity").isZero();
      }
    }
  }

  @Test
  void aDecisionReportsEachTermsContribution() {
    // one rank, an empty cache, 32 tokens of block size 16: prefill 2 blocks, decode 2 blocks
    KvRouter router =
        KvRouter.builder(16)
            .selector(
                WorkerSelector.scored(
                    Scorers.builder()
                        .add("prefill", 3)
                        .add("decode", 1)
                        .add("queue", 5)
                        .add("session", 7)
                        .build(),
                    0,
                    0))
            .build();
    router.registerWorker(1, 1, 16);
    router.registerWorker(2, 1, 16);
    int[] tokens = new int[32];
    for (int i = 0; i < tokens.length; i++) tokens[i] = i;
    RouteDecision.Routed first =
        (RouteDecision.Routed)
            router.route("a", tokens, RouteOptions.defaults().withAffinity(Worker.of(2)));
    assertThat(first.scorerNames()).containsExactly("prefill", "decode", "queue", "session");
    // worker 1 pays the session term (7), worker 2 does not: 2 is chosen
    assertThat(first.worker()).isEqualTo(Worker.of(2));
    assertThat(contributions(first, 0)).containsExactly(6.0, 2.0, 0.0, 7.0);
    assertThat(contributions(first, 1)).containsExactly(6.0, 2.0, 0.0, 0.0);
    assertThat(first.candidates().get(0).cost()).isEqualTo(15.0);
    // a second prompt: worker 2 now has one request and 2 blocks in flight
    for (int i = 0; i < tokens.length; i++) tokens[i] = 1000 + i;
    RouteDecision.Routed second = (RouteDecision.Routed) router.route("b", tokens);
    assertThat(contributions(second, 1)).containsExactly(12.0, 4.0, 5.0, 0.0);
    assertThat(second.worker()).isEqualTo(Worker.of(1));
  }

  private static List<Double> contributions(RouteDecision.Routed r, int candidate) {
    List<Double> out = new ArrayList<>();
    for (int j = 0; j < r.scorerNames().size(); j++) out.add(r.contribution(candidate, j));
    return out;
  }

  @Test
  void badCompositionsAreRefusedWithTheReason() {
    assertThatThrownBy(() -> Scorers.builder().add("latency", 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "unknown scorer 'latency'; the scorers are prefill, decode, pressure, queue, session");
    assertThatThrownBy(() -> Scorers.builder().add("decode", -1))
        .hasMessage("weight of scorer decode must be finite and >= 0, got -1.0");
    assertThatThrownBy(() -> Scorers.builder().add("Lora!", 1, (c, i) -> 0))
        .hasMessageStartingWith("scorer name 'Lora!' must be 1 to 32");
    assertThatThrownBy(() -> Scorers.builder().build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("a cost needs at least one scorer");
  }

  @Test
  void aScorerOfOnesOwnPlugsInUnderItsName() {
    // e.g. an adapter's residency: 1 on ranks that do not hold it
    Scorer notResident = (c, i) -> c.worker(i).workerId() == 2 ? 0 : 1;
    Scorers s = Scorers.defaults(1, 0).toBuilder().add("lora", 100, notResident).build();
    assertThat(s.names()).containsExactly("prefill", "decode", "pressure", "lora");
    Candidates c =
        Candidates.of(
            List.of(
                new Candidate(Worker.of(1), 0, 0, 1, 1), new Candidate(Worker.of(2), 0, 0, 50, 50)),
            0,
            new double[2]);
    double[] costs = new double[2];
    assertThat(WorkerSelector.scored(s, 0, 0).select(c, costs)).isEqualTo(1);
    assertThat(costs).containsExactly(102.0, 100.0);
    // a known name re-weighted keeps the scorer of its own
    assertThat(s.toBuilder().add("lora", 3).build().weight("lora")).isEqualTo(3);
  }
}
