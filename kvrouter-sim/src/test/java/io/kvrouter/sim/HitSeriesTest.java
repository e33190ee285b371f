package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.mockengine.TimingModel;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The hit rate over time: buckets by arrival, and series that add up to the run's totals. */
class HitSeriesTest {
  @Test
  void aRequestCountsInTheBucketOfItsArrival() {
    HitSeries h = new HitSeries(1_000, 2_000, 4); // buckets of 250 ms from t = 1000 ms
    h.add(1_000, 10, 1); // first instant: bucket 0
    h.add(1_249, 20, 2);
    h.add(1_250, 30, 3); // bucket 1
    h.add(2_000, 40, 4); // the last arrival: the last bucket, not one past it
    assertThat(new int[] {h.requests(0), h.requests(1), h.requests(2), h.requests(3)})
        .containsExactly(2, 1, 0, 1);
    assertThat(h.promptTokens(0)).isEqualTo(30);
    assertThat(h.cachedTokens(1)).isEqualTo(3);
    assertThat(h.cachedTokens(3)).isEqualTo(4);
    HitSeries one = new HitSeries(5, 5, 3); // every arrival at one instant
    one.add(5, 7, 7);
    assertThat(one.requests(0)).isEqualTo(1);
  }

  @Test
  void everySeriesAddsUpToItsRunsTotals() {
    SimConfig cfg =
        SimConfig.builder()
            .workers(4)
            .gpuBlocks(512)
            .blockSize(64)
            .timing(new TimingModel(5, 50, 20, 16))
            .seed(7)
            .verifyPrompts(50)
            .loadSamples(40)
            .removedEvents(RemovedEvents.PER_BLOCK)
            .build();
    SimulationResult s =
        SimulationResult.run(
            "synthetic",
            SyntheticTrace.conversations(30, 5, 2_000),
            cfg,
            List.of(Policy.KV, Policy.ROUND_ROBIN),
            Progress.off());
    for (PolicyResult r : s.policies()) {
      HitSeries h = r.hits();
      assertThat(h.buckets()).isEqualTo(40);
      long requests = 0;
      long prompt = 0;
      long cached = 0;
      int nonEmpty = 0;
      for (int b = 0; b < h.buckets(); b++) {
        requests += h.requests(b);
        prompt += h.promptTokens(b);
        cached += h.cachedTokens(b);
        if (h.requests(b) > 0) nonEmpty++;
      }
      assertThat(requests).as(r.policy().cliName()).isEqualTo(r.completed());
      assertThat(prompt).isEqualTo(r.promptTokens());
      assertThat(cached).isEqualTo(r.cachedTokens()).isPositive();
      assertThat(nonEmpty).as("spread over the arrival span").isGreaterThan(20);
    }
    HitSeries p = s.pooled().hits();
    long prompt = 0;
    long cached = 0;
    for (int b = 0; b < p.buckets(); b++) {
      prompt += p.promptTokens(b);
      cached += p.cachedTokens(b);
    }
    assertThat(prompt).isEqualTo(s.pooled().promptTokens());
    assertThat(cached).isEqualTo(s.pooled().cachedTokens());
  }
}
