package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The prediction check compares at each engine's own granularity (PredictionCheck's notes): whole
 * blocks for vLLM, tokens for llama.cpp, which reuses the longest common token prefix and
 * re-evaluates the last token of a prompt it holds whole.
 */
class PredictionGranularityTest {
  static final int BS = 16;

  static String outcome(long predicted, long prompt, int granule, long reported) {
    long expected = PredictionCheck.expected(predicted, prompt, granule);
    return switch (PredictionCheck.outcome(reported, expected, BS)) {
      case -1 -> "engine_fewer";
      case 0 -> "exact";
      default -> "engine_more";
    };
  }

  @Test
  void blockEnginesReportWholeBlocksBelowTheLastToken() {
    // vLLM, 16-token blocks: a 40-token prompt whose 2 blocks were predicted
    assertThat(outcome(32, 40, 16, 32)).isEqualTo("exact");
    assertThat(outcome(32, 40, 16, 16)).isEqualTo("engine_fewer");
    assertThat(outcome(16, 40, 16, 32)).isEqualTo("engine_more");
    // a 32-token prompt held whole: its last token is recomputed, so its last block is not cached
    assertThat(outcome(32, 32, 16, 16)).isEqualTo("exact");
    // an engine with blocks of 32 behind a router of 16
    assertThat(outcome(48, 70, 32, 32)).isEqualTo("exact");
    assertThat(outcome(48, 70, 32, 64)).isEqualTo("engine_more");
  }

  @Test
  void llamaCppReportsTokensAndOneLessOnAFullMatch() {
    // the turn before was 40 tokens: its 2 full blocks were predicted; llama.cpp matched all 40
    assertThat(outcome(32, 61, 1, 40)).isEqualTo("exact");
    assertThat(outcome(32, 61, 1, 32)).isEqualTo("exact");
    assertThat(outcome(32, 61, 1, 31)).isEqualTo("engine_fewer");
    assertThat(outcome(32, 61, 1, 48)).as("a whole block more").isEqualTo("engine_more");
    // the same 32-token prompt again: llama.cpp reports 31, which is all it can
    assertThat(outcome(32, 32, 1, 31)).isEqualTo("exact");
    // nothing predicted, one shared leading token (<|im_start|>): not a block
    assertThat(outcome(0, 50, 1, 1)).isEqualTo("exact");
    // the same reports judged in 16-token blocks would have warned on correct routing
    assertThat(outcome(32, 32, 16, 31)).isEqualTo("exact");
    assertThat(PredictionCheck.expected(32, 61, 16)).isEqualTo(32);
    assertThat(Long.compare(40, PredictionCheck.expected(32, 61, 16))).isPositive();
  }
}
