package io.kvrouter.admission;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** TokenCost on hand-computed figures. */
class TokenCostTest {
  @Test
  void uncachedIsThePromptLessItsCachedBlocksAndNeverBelowZero() {
    assertThat(TokenCost.uncached(20_000, 1_187, 16)).isEqualTo(1_008); // 18,992 cached
    assertThat(TokenCost.uncached(100, 0, 16)).isEqualTo(100);
    assertThat(TokenCost.uncached(100, 7, 16)).isZero(); // a last partial block counted whole
  }

  @Test
  void aSettlementChargesTheReportedCostLessTheChargeAndKeepsThePredictionWhereNothingIsReported() {
    // charged 1,000 uncached + 200 decode; the engine found 300 more cached and wrote 50 tokens
    assertThat(TokenCost.settlement(2_000, 1_300, 50, 1_000, 200)).isEqualTo(-450);
    // more uncached than predicted: a debt
    assertThat(TokenCost.settlement(2_000, 0, 200, 1_000, 200)).isEqualTo(1_000);
    // cached_tokens not reported: the predicted uncached stands; completion reported
    assertThat(TokenCost.settlement(2_000, -1, 10, 1_000, 200)).isEqualTo(-190);
    // nothing reported: no change
    assertThat(TokenCost.settlement(-1, -1, -1, 1_000, 200)).isZero();
    // cached beyond the prompt (an engine's rounding): uncached 0, not negative
    assertThat(TokenCost.settlement(100, 128, 0, 100, 0)).isEqualTo(-100);
  }
}
