package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** EdgeSettings: its defaults, validation, withers, and the server's Config that holds it. */
class EdgeSettingsTest {
  @Test
  void defaultsAreTheServersAndEachWitherReplacesOneSetting() {
    EdgeSettings d = EdgeSettings.defaults();
    assertThat(d.host()).isEqualTo("127.0.0.1");
    assertThat(d.port()).isEqualTo(8090);
    assertThat(d.maxBodyBytes()).isEqualTo(8L << 20);
    assertThat(d.maxInflightBodyBytes()).isZero();
    assertThat(d.authToken()).isNull();
    assertThat(d.shutdownGrace()).isEqualTo(Duration.ofSeconds(10));
    EdgeSettings e =
        d.withHost("0.0.0.0")
            .withPort(0)
            .withMaxBodyBytes(100)
            .withMaxInflightBodyBytes(1000)
            .withAuthToken("secret")
            .withReadTimeout(Duration.ofMillis(1500))
            .withShutdownGrace(Duration.ZERO);
    assertThat(e)
        .isEqualTo(
            new EdgeSettings(
                "0.0.0.0", 0, 100, 1000, "secret", Duration.ofMillis(1500), Duration.ZERO));
    assertThat(e.effectiveMaxInflightBodyBytes()).isEqualTo(1000);
    assertThat(e.toString()).doesNotContain("secret").contains("****** (set)");
    assertThat(d.withAuthToken("").authToken()).isNull();
  }

  @Test
  void badValuesAreRefusedByName() {
    EdgeSettings d = EdgeSettings.defaults();
    assertThatThrownBy(() -> d.withPort(65536)).hasMessage("port must be in 0..65535, got 65536");
    assertThatThrownBy(() -> d.withHost(" ")).hasMessage("host must not be blank");
    assertThatThrownBy(() -> d.withMaxBodyBytes(0)).hasMessage("maxBodyBytes must be >= 1, got 0");
    assertThatThrownBy(() -> d.withMaxInflightBodyBytes(-1))
        .hasMessage("maxInflightBodyBytes must be >= 1 (or 0 for the default), got -1");
    assertThatThrownBy(() -> d.withReadTimeout(Duration.ZERO))
        .hasMessage("readTimeout must be > 0, got PT0S");
    assertThatThrownBy(() -> d.withShutdownGrace(Duration.ofSeconds(-1)))
        .hasMessage("shutdownGrace must be >= 0, got PT-1S");
  }

  @Test
  void theConfigsBuilderSetsTheEdgeAndItsBannerShowsIt() {
    KvRouterServer.Config c =
        KvRouterServer.Config.builder().port(0).authToken("t").maxBodyBytes(4096).build();
    assertThat(c.edge().port()).isZero();
    assertThat(c.edge().maxBodyBytes()).isEqualTo(4096);
    assertThat(c.describe())
        .containsEntry("port", "0")
        .containsEntry("max-body-size", "4096")
        .containsEntry("auth-token", "****** (set)");
    KvRouterServer.Config open = c.withAuthToken(null);
    assertThat(open.edge().authToken()).isNull();
    assertThat(open.edge().port()).isZero();
    EdgeSettings other = EdgeSettings.defaults().withPort(1234);
    assertThat(KvRouterServer.Config.builder().edge(other).build().edge()).isEqualTo(other);
  }
}
