package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Issue 31, #10: the series of a model or routing group leave {@code /metrics} when its last rank
 * is unregistered, so a scrape stays bounded by what is registered now.
 */
class MetricsSeriesBoundTest {
  private static final int MODELS = 40;

  private static String route(String id, String model) {
    return "{\"request_id\":\""
        + id
        + "\",\"model_name\":\""
        + model
        + "\",\"token_ids\":[1,2,3,4]}";
  }

  @Test
  void unregisteredModelsLeaveNoSeriesAndTheScrapeShrinksBack() {
    try (HttpFixture http = new HttpFixture()) {
      assertThat(http.register(1, 0, "kept", 4).status()).isEqualTo(201);
      assertThat(http.query("kept", new int[] {1, 2, 3, 4}).status()).isEqualTo(200);
      assertThat(http.post("/route", route("k", "kept")).status()).isEqualTo(200);
      // every endpoint of the loop below answered once before, so its HTTP series exist already
      assertThat(http.register(1, 0, "warm", 4).status()).isEqualTo(201);
      assertThat(http.post("/unregister", "{\"instance_id\":1,\"model_name\":\"warm\"}").status())
          .isEqualTo(200);
      assertThat(http.get("/metrics").status()).isEqualTo(200);
      int before = http.get("/metrics").body().length();

      for (int i = 0; i < MODELS; i++) {
        String model = "gone-model-" + i;
        assertThat(http.register(1, 0, model, 4).status()).isEqualTo(201);
        // every family that names a model: the index's, findMatches, route decisions
        assertThat(http.query(model, new int[] {1, 2, 3, 4}).status()).isEqualTo(200);
        assertThat(http.post("/route", route("r" + i, model)).status()).isEqualTo(200);
      }
      String full = http.get("/metrics").body();
      assertThat(full).contains("model_name=\"gone-model-39\"");
      int grown = full.length() - before;

      for (int i = 0; i < MODELS; i++) {
        String body = "{\"instance_id\":1,\"model_name\":\"gone-model-" + i + "\"}";
        assertThat(http.post("/unregister", body).status()).isEqualTo(200);
      }
      String after = http.get("/metrics").body();
      assertThat(after).doesNotContain("gone-model-");
      assertThat(after).contains("model_name=\"kept\"");
      // back within 2 KB of the size before (the JVM's values and the histograms' counts differ a
      // little), while the 40
      // models had added far more
      assertThat(grown).isGreaterThan(40 * 2048);
      assertThat(after.length()).isLessThan(before + 2048);
    }
  }
}
