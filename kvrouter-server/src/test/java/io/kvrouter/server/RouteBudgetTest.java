package io.kvrouter.server;

import static io.kvrouter.server.HostileRoundThreeTest.series;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Issue 31, #2: the blocks routed requests hold in flight are bounded; past the bound {@code POST
 * /route} is a 429 with Retry-After, and freeing a request makes room again.
 */
class RouteBudgetTest {
  private static final String REFUSED =
      "kvrouter_route_rejections_total{model_name=\"m\",reason=\"held_blocks\",routing_group=\"default\"}";

  /** A /route of {@code blocks} blocks of 4 tokens, distinct from every other id's. */
  private static String route(String id, int blocks, int first) {
    StringBuilder t = new StringBuilder();
    for (int i = 0; i < blocks * 4; i++) t.append(i == 0 ? "" : ",").append(first + i);
    return "{\"request_id\":\"" + id + "\",\"model_name\":\"m\",\"token_ids\":[" + t + "]}";
  }

  @Test
  void routesPastTheBudgetAreA429UntilOneIsFreed() {
    try (HttpFixture http = new HttpFixture(KvRouterServer.Config.builder().maxRoutedBlocks(8))) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      assertThat(http.post("/route", route("a", 4, 0)).status()).isEqualTo(200);
      assertThat(http.post("/route", route("b", 4, 100)).status()).isEqualTo(200);
      // 8 blocks held: one more is past the bound
      HttpFixture.Reply full = http.post("/route", route("c", 1, 200));
      assertThat(full.status()).as(full.toString()).isEqualTo(429);
      assertThat(full.header("Retry-After")).isEqualTo("1");
      assertThat(full.body())
          .startsWith("{\"error\":")
          .contains("hold 8 blocks and this one 1")
          .contains("--max-routed-blocks 8");
      // nothing was recorded for c: freeing it is a 404
      assertThat(http.post("/requests/c/free", "").status()).isEqualTo(404);
      assertThat(series(http.get("/metrics").body(), REFUSED)).isEqualTo(1.0);

      assertThat(http.post("/requests/a/free", "").status()).isEqualTo(200);
      assertThat(http.post("/route", route("c", 1, 200)).status()).isEqualTo(200);
      // 5 held: a request of 4 more is past it, one of 3 fits
      assertThat(http.post("/route", route("d", 4, 300)).status()).isEqualTo(429);
      assertThat(http.post("/route", route("e", 3, 400)).status()).isEqualTo(200);
      assertThat(series(http.get("/metrics").body(), REFUSED)).isEqualTo(2.0);
    }
  }
}
