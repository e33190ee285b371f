package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.admission.TokenBucket;
import io.kvrouter.admission.TokenRateConfig;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@link TenantRates} and {@link TokenRateConfig} without a server. */
class TenantRatesTest {
  @Test
  void clientChosenTenantNamesKeepAtMostMaxTenantsBuckets() {
    TenantRates r =
        new TenantRates(new TokenRateConfig(50, Map.of(), Duration.ofSeconds(10), 100), () -> 0);
    for (int i = 0; i < 10_000; i++) {
      assertThat(r.bucket("tenant-" + i)).isNotNull();
    }
    assertThat(r.tenants()).isLessThanOrEqualTo(100);
  }

  @Test
  void aTenantKeepsItsBucketAndItsOwnRate() {
    TenantRates r =
        new TenantRates(
            new TokenRateConfig(50, Map.of("vip", 400.0), Duration.ofSeconds(2), 100), () -> 0);
    TokenBucket a = r.bucket("a");
    assertThat(r.bucket("a")).isSameAs(a);
    assertThat(a.burst()).isEqualTo(100.0); // 2 s of 50/s
    assertThat(r.bucket("vip").burst()).isEqualTo(800.0);
  }

  @Test
  void retryAfterRoundsUpToWholeSecondsAtLeastOne() {
    assertThat(TenantRates.retryAfterSeconds(1)).isEqualTo(1);
    assertThat(TenantRates.retryAfterSeconds(1_000_000_000L)).isEqualTo(1);
    assertThat(TenantRates.retryAfterSeconds(1_000_000_001L)).isEqualTo(2);
    assertThat(TenantRates.retryAfterSeconds(4_600_000_000L)).isEqualTo(5);
  }

  @Test
  void badRatesAreRefusedWithTheTenantNamed() {
    assertThatThrownBy(
            () -> new TokenRateConfig(0, Map.of("acme", 0.0), Duration.ofSeconds(10), 10))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("acme");
    assertThatThrownBy(() -> new TokenRateConfig(-1, Map.of(), Duration.ofSeconds(10), 10))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new TokenRateConfig(1, Map.of(), Duration.ZERO, 10))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(TokenRateConfig.OFF.on()).isFalse();
  }
}
