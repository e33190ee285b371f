package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The text report's eviction line of {@code bench fleet --admission} (hand-made figures). */
class AdmissionFleetBenchTest {
  @Test
  void anEvictionLineGivesTheTotalEachBandAndTenantAndTheHighBandsTtftInSeconds() {
    Map<String, Long> evicted = new TreeMap<>(Map.of("normal/t1", 7L, "normal/t0", 5L));
    assertThat(AdmissionFleetBench.evictionLine("fair-cost", evicted, 550, 1660, 4470))
        .isEqualTo(
            "fair-cost: evicted 12 (normal/t0 5, normal/t1 7); high TTFT p50 / p90 / p99"
                + " 0.55 / 1.66 / 4.47 s");
  }

  @Test
  void aRunWithoutEvictionsOrHighAnswersSaysSo() {
    assertThat(
            AdmissionFleetBench.evictionLine(
                "fifo", Map.of("normal/t0", 0L), Double.NaN, Double.NaN, Double.NaN))
        .isEqualTo("fifo: evicted 0; high TTFT p50 / p90 / p99 - / - / - s");
  }
}
