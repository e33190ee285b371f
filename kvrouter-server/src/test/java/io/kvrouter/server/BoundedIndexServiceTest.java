package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.list;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import io.kvrouter.route.RoutingSettings;
import org.junit.jupiter.api.Test;

/** {@code --max-blocks} in the service: the bound holds and evictions are exported. */
class BoundedIndexServiceTest {
  private static final int BS = 4;

  @Test
  void theIndexStaysWithinTheBoundAndCountsWhatItDropped() {
    try (HttpFixture http =
        new HttpFixture(
            KvRouterServer.Config.builder().routing(RoutingSettings.DEFAULTS.withMaxBlocks(3)))) {
      http.register(1, 0, "m", BS);
      // eight blocks of one chain: the bound keeps the first three
      assertThat(http.events("m", list(stored(new Worker(1, 0), 0, range(0, 32), BS))).status())
          .isEqualTo(200);
      assertThat(http.query("m", range(0, 32)).body())
          .startsWith("{\"scores\":{\"1\":{\"0\":12}},\"blocks\":{\"1\":{\"0\":3}}");
      String metrics = http.get("/metrics").body();
      assertThat(metrics)
          .contains(
              "kvrouter_blocks_indexed{model_name=\"m\",routing_group=\"default\"} 3.0",
              "kvrouter_index_evicted_blocks_total{model_name=\"m\",routing_group=\"default\"}"
                  + " 5.0");
    }
  }

  @Test
  void withoutABoundNothingIsEvicted() {
    try (HttpFixture http = new HttpFixture()) {
      http.register(1, 0, "m", BS);
      http.events("m", list(stored(new Worker(1, 0), 0, range(0, 32), BS)));
      assertThat(http.get("/metrics").body())
          .contains(
              "kvrouter_blocks_indexed{model_name=\"m\",routing_group=\"default\"} 8.0",
              "kvrouter_index_evicted_blocks_total{model_name=\"m\",routing_group=\"default\"}"
                  + " 0.0");
    }
  }

  @Test
  void aNegativeBoundIsRefused() {
    assertThatThrownBy(
            () ->
                KvRouterServer.Config.builder()
                    .routing(RoutingSettings.DEFAULTS.withMaxBlocks(-1))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("maxBlocks must be >= 1 (or 0 for no bound), got -1");
  }
}
