package io.kvrouter.admission;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** {@link HolderWait}: hand-computed prices in prefill tokens. */
class HolderWaitTest {

  @Test
  void waitsWhenTheHoldersBacklogCostsLessThanRecomputingThePrefix() {
    // 10,000-token prompt; here: 0 cached, 2,000 in flight -> 12,000; the holder: 8,000 cached,
    // 6,000 in flight, 1,000 waiting for it -> 9,000
    assertThat(HolderWait.waitForHolder(10_000, 0, 2_000, 8_000, 6_000, 1_000, false)).isTrue();
    // 4,000 more waiting for the holder -> 13,000 > 12,000: start here
    assertThat(HolderWait.waitForHolder(10_000, 0, 2_000, 8_000, 6_000, 5_000, false)).isFalse();
    // a tie starts here: 2,000 + 10,000 against 10,000 + 0 + 2,000
    assertThat(HolderWait.waitForHolder(10_000, 0, 2_000, 8_000, 10_000, 0, false)).isFalse();
  }

  @Test
  void neverWaitsForAHolderAtItsRequestLimitNorForOneThatHoldsNoMore() {
    assertThat(HolderWait.waitForHolder(10_000, 0, 2_000, 8_000, 0, 0, true)).isFalse();
    // the holder holds no more than here
    assertThat(HolderWait.waitForHolder(10_000, 8_000, 5_000, 8_000, 0, 0, false)).isFalse();
    // an overlap past the prompt prices its prefill at 0, not below
    assertThat(HolderWait.waitForHolder(1_000, 0, 0, 2_000, 999, 0, false)).isTrue();
    assertThat(HolderWait.waitForHolder(1_000, 0, 0, 2_000, 1_000, 0, false)).isFalse();
  }
}
