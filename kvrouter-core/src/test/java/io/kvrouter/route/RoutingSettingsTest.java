package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.index.TieredIndex;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The shared routing settings value: its checks, its copies, and the router it builds. */
class RoutingSettingsTest {
  private static final RoutingSettings D = RoutingSettings.DEFAULTS;

  @Test
  void theDefaultsAreTheDocumentedOnes() {
    assertThat(D.overlapWeight()).isEqualTo(1.0);
    assertThat(D.pressureWeight()).isEqualTo(20.0);
    assertThat(D.temperature()).isZero();
    assertThat(D.seed()).isZero();
    assertThat(D.busyPrefillTokens()).isEqualTo(-1);
    assertThat(D.busyBlockFraction()).isZero();
    assertThat(D.requestExpiry()).isEqualTo(Duration.ofSeconds(300));
    assertThat(D.approximate()).isFalse();
    assertThat(D.maxBlocks()).isZero();
    assertThat(D.maxTierBlocks()).isZero();
    assertThat(D.tierWeights()).isEqualTo(TierWeights.DEFAULTS);
  }

  @Test
  void everyInvalidValueIsRefusedWithItsName() {
    assertThatThrownBy(() -> D.withOverlapWeight(-1)).hasMessageContaining("overlapWeight");
    assertThatThrownBy(() -> D.withOverlapWeight(Double.NaN)).hasMessageContaining("overlapWeight");
    assertThatThrownBy(() -> D.withPressureWeight(-0.5)).hasMessageContaining("pressureWeight");
    assertThatThrownBy(() -> D.withTemperature(-1)).hasMessageContaining("temperature");
    assertThatThrownBy(() -> D.withBusyPrefillTokens(-2)).hasMessageContaining("busyPrefillTokens");
    assertThatThrownBy(() -> D.withBusyBlockFraction(-0.1))
        .hasMessageContaining("busyBlockFraction");
    assertThatThrownBy(() -> D.withBusyBlockFraction(Double.POSITIVE_INFINITY))
        .hasMessageContaining("busyBlockFraction");
    assertThatThrownBy(() -> D.withRequestExpiry(Duration.ZERO))
        .hasMessageContaining("requestExpiry");
    assertThatThrownBy(() -> D.withRequestExpiry(null)).hasMessageContaining("requestExpiry");
    assertThatThrownBy(() -> D.withMaxBlocks(-1)).hasMessageContaining("maxBlocks");
    assertThatThrownBy(() -> D.withMaxTierBlocks(-1)).hasMessageContaining("maxTierBlocks");
  }

  @Test
  void eachCopyChangesOnlyItsOwnComponent() {
    RoutingSettings s =
        D.withOverlapWeight(2)
            .withPressureWeight(3)
            .withTemperature(0.5)
            .withSeed(9)
            .withBusyPrefillTokens(100)
            .withBusyBlockFraction(0.9)
            .withRequestExpiry(Duration.ofSeconds(7))
            .withApproximate(true)
            .withMaxBlocks(1000)
            .withMaxTierBlocks(50)
            .withTierWeights(new TierWeights(0.5, 0.25, 0.125));
    assertThat(s)
        .isEqualTo(
            new RoutingSettings(
                2,
                3,
                0.5,
                9,
                100,
                0.9,
                Duration.ofSeconds(7),
                true,
                1000,
                50,
                new TierWeights(0.5, 0.25, 0.125),
                0));
    assertThat(s.withSeed(1))
        .isEqualTo(
            new RoutingSettings(
                2,
                3,
                0.5,
                1,
                100,
                0.9,
                Duration.ofSeconds(7),
                true,
                1000,
                50,
                new TierWeights(0.5, 0.25, 0.125),
                0));
  }

  @Test
  void describeNamesTheFlagsAndSaysNever() {
    assertThat(D.describe())
        .containsEntry("overlap-weight", "1.0")
        .containsEntry("busy-prefill-tokens", "(never)")
        .containsEntry("busy-block-fraction", "(never)")
        .containsEntry("request-expiry-seconds", "300");
    assertThat(D.withBusyPrefillTokens(64).withBusyBlockFraction(0.8).describe())
        .containsEntry("busy-prefill-tokens", "64")
        .containsEntry("busy-block-fraction", "0.8");
  }

  @Test
  void theRouterItBuildsHasTheModeAndIndexItSays() {
    try (KvRouter events = D.newRouter(16, null);
        KvRouter approx = D.withApproximate(true).newRouter(16, null)) {
      assertThat(events.isApproximate()).isFalse();
      assertThat(events.index()).isInstanceOf(TieredIndex.class);
      assertThat(approx.isApproximate()).isTrue();
      assertThat(events.blockSize()).isEqualTo(16);
    }
  }

  @Test
  void theBusyLimitReachesTheRouter() {
    // one rank, a limit of 20 prefill tokens: a 32-token request is routed (nothing in flight
    // yet), the next finds the only rank busy; without the limit it is routed too
    int[] prompt = new int[32];
    for (int i = 0; i < prompt.length; i++) prompt[i] = i + 1;
    try (KvRouter limited = D.withBusyPrefillTokens(20).newRouter(16, null);
        KvRouter open = D.newRouter(16, null)) {
      for (KvRouter r : new KvRouter[] {limited, open}) r.registerWorker(1, 1, 16, 1000);
      assertThat(limited.route("a", prompt)).isInstanceOf(RouteDecision.Routed.class);
      assertThat(limited.route("b", prompt)).isInstanceOf(RouteDecision.AllBusy.class);
      assertThat(open.route("a", prompt)).isInstanceOf(RouteDecision.Routed.class);
      assertThat(open.route("b", prompt)).isInstanceOf(RouteDecision.Routed.class);
    }
  }
}
