package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The disaggregation simulation on a two-request trace worked out by hand (docs/SIMULATION.md,
 * Prefill/decode disaggregation): prefill 1 ms per token, no base cost, 10 ms per output token,
 * block size 64, a hand-over costs 1 ms per block pulled. A: 512 tokens (block h1) at 0 ms, 11
 * output tokens; B: 1536 tokens (h1 h2 h3) at 550 ms, 2 output tokens. One prefill and one decode
 * engine; the aggregated fleet has two engines.
 */
class PdSimulationTest {
  static final List<TraceRequest> TRACE =
      List.of(
          new TraceRequest(1, 0, 512, 11, new long[] {1}),
          new TraceRequest(2, 550, 1536, 2, new long[] {1, 2, 3}));

  static PdSimulation.Config config(int minUncached) {
    return new PdSimulation.Config(
        1, 1, 1000, 64, 1, new TimingModel(0, 1000, 10, 8), 0, 1, minUncached, 1, 0, 10);
  }

  @Test
  void aggregatedAPrefillStallsTheDecodesOfItsEngine() {
    PdSimulation.Result r = PdSimulation.run(TRACE, config(600), PdSimulation.Mode.AGGREGATED);
    // B shares A's block, so it goes to A's engine (cost 16 + 24 against 24 + 24) and prefills
    // its 1024 uncached tokens from 550 to 1574 ms; A's decode (100 ms from 512) has run 38 ms
    // by then and ends 62 ms after: at 1636, ITL (1636 - 512) / 10
    assertThat(r.ttftMs()).containsExactly(512, 1024);
    assertThat(r.itlMs()[0]).isEqualTo(10, within(1e-9));
    assertThat(r.itlMs()[1]).isEqualTo(112.4, within(1e-9));
    assertThat(r.handedOver()).isZero();
    assertThat(r.cachedTokens()).isEqualTo(512);
    assertThat(r.makespanSec()).isEqualTo(1.636, within(1e-9));
    assertThat(r.verification().ok()).isTrue();
  }

  @Test
  void disaggregatedDecodesAreNotStalledAndTheTransferIsOnlyWhatTheDecodeEngineLacks() {
    PdSimulation.Result r = PdSimulation.run(TRACE, config(600), PdSimulation.Mode.DISAGGREGATED);
    // A: prefill 0..512, pull 8 blocks (8 ms), its last token computed there (1 ms): 521.
    // B: prefill of 1024 uncached tokens on the prefill engine 550..1574, pull the 16 blocks the
    // decode engine lacks (it holds A's block): 1590, one token: 1591, TTFT 1041
    assertThat(r.ttftMs()).containsExactly(521, 1041);
    assertThat(r.itlMs()).containsExactly(10, 10);
    assertThat(r.handedOver()).isEqualTo(2);
    assertThat(r.pulledBlocks()).isEqualTo(24);
    assertThat(r.verification().ok()).isTrue();
  }

  @Test
  void conditionalServesTheShortUncachedPromptWholeAndHandsTheLongOneOver() {
    PdSimulation.Result r = PdSimulation.run(TRACE, config(600), PdSimulation.Mode.CONDITIONAL);
    // A: 512 uncached < 600: whole on the decode engine, TTFT 512, decode 512..612.
    // B: 1024 not cached on the decode engine >= 600: prefilled whole (1536) on the prefill
    // engine 550..2086, 16 blocks pulled: 2102, one token: 2103, TTFT 1553
    assertThat(r.ttftMs()).containsExactly(512, 1553);
    assertThat(r.itlMs()).containsExactly(10, 10);
    assertThat(r.handedOver()).isEqualTo(1);
    assertThat(r.pulledBlocks()).isEqualTo(16);
    assertThat(r.verification().ok()).isTrue();
  }
}
