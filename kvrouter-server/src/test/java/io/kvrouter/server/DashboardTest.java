package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.list;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.util.Arrays;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** GET /dashboard and /dashboard/data on serve (docs/observability.md, "Dashboard"). */
class DashboardTest {
  static final int BS = 4;
  private HttpFixture http;

  @AfterEach
  void stop() {
    if (http != null) http.close();
  }

  /** A prompt: the 16 tokens both engines' caches start with, then 4 of its own. */
  private static int[] prompt(int i) {
    int[] p = Arrays.copyOf(range(0, 16), 20);
    for (int k = 0; k < 4; k++) p[16 + k] = 1000 + 4 * i + k;
    return p;
  }

  private void route(String id, int[] tokens) {
    HttpFixture.Reply r =
        http.post(
            "/route",
            "{\"request_id\":\""
                + id
                + "\",\"model_name\":\"m\",\"token_ids\":"
                + HttpFixture.json(tokens)
                + "}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    assertThat(r.body()).contains("\"instance_id\":2,").contains("\"overlap_tokens\":16,");
    assertThat(http.post("/requests/" + id + "/free", "").status()).isEqualTo(200);
  }

  /** The sum of one series of one engine rank (dp rank 0) in a /dashboard/data answer. */
  private static double seriesSum(String json, String instance, String field) {
    Matcher e =
        Pattern.compile(
                "\\{\"instance_id\":\""
                    + instance
                    + "\",\"dp_rank\":0,\"role\".*?\"series\":\\{(.*?)\\}\\}")
            .matcher(json);
    assertThat(e.find()).as("engine " + instance + " with series in " + json).isTrue();
    Matcher f = Pattern.compile("\"" + field + "\":\\[([^\\]]*)\\]").matcher(e.group(1));
    assertThat(f.find()).as(field).isTrue();
    double sum = 0;
    for (String v : f.group(1).split(",")) {
      if (!v.isEmpty() && !v.equals("null")) sum += Double.parseDouble(v);
    }
    return sum;
  }

  @Test
  void dataShowsEveryRankItsLoadRoutedTokensAndTheHotPrefixWithWhoHoldsIt() {
    http = new HttpFixture();
    http.register(1, 0, "m", BS);
    http.register(2, 0, "m", BS);
    http.events("m", list(stored(new Worker(2, 0), 0, range(0, 16), BS)));
    http.events("m", list(stored(new Worker(1, 0), 0, range(0, 8), BS)));
    DashboardSampler sampler = http.server.dashboard().sampler();
    sampler.sample(1_000);
    for (int i = 0; i < 3; i++) route("r" + i, prompt(i));
    sampler.sample(3_000);

    HttpFixture.Reply r = http.get("/dashboard/data");
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.header("Content-Type")).startsWith("application/json");
    String json = r.body();
    assertThat(json).contains("\"model\":\"m\"", "\"block_size\":4", "\"queue_depth\":null");
    // three requests of 20 tokens routed to rank 2, each with 16 tokens predicted cached
    assertThat(seriesSum(json, "2", "routed_prompt_tokens")).isEqualTo(60);
    assertThat(seriesSum(json, "2", "routed_overlap_tokens")).isEqualTo(48);
    assertThat(seriesSum(json, "1", "routed_prompt_tokens")).isZero();
    assertThat(json).contains("\"instance_id\":\"1\",\"dp_rank\":0,\"role\":\"both\"");
    assertThat(json).contains("\"kv_blocks\":4,").contains("\"kv_blocks\":2,");
    // the hottest shared prefix is the 16 tokens: rank 2 holds all of it, rank 1 half
    String hash =
        Long.toHexString(
            SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(range(0, 16)))[3]);
    assertThat(json)
        .contains(
            "\"hot_prefixes\":[{\"hash\":\""
                + hash
                + "\",\"tokens\":16,\"prompts\":3,\"window\":3,\"holders\":["
                + "{\"instance_id\":\"2\",\"dp_rank\":0,\"tokens\":16},"
                + "{\"instance_id\":\"1\",\"dp_rank\":0,\"tokens\":8}]}]");
  }

  @Test
  void ringsAreBoundedAndRanksThatLeaveAreDropped() {
    http = new HttpFixture();
    http.register(1, 0, "m", BS);
    http.register(2, 0, "m", BS);
    DashboardSampler sampler = http.server.dashboard().sampler();
    sampler.sample(0);
    assertThat(sampler.seriesCount()).isEqualTo(2);
    assertThat(http.post("/unregister", "{\"instance_id\":1,\"model_name\":\"m\"}").status())
        .isEqualTo(200);
    for (int i = 1; i <= DashboardSampler.CAPACITY + 10; i++) sampler.sample(i * 1000L);
    assertThat(sampler.seriesCount()).isEqualTo(1);
    String json = http.get("/dashboard/data").body();
    Matcher times = Pattern.compile("\"times_ms\":\\[([^\\]]*)\\]").matcher(json);
    assertThat(times.find()).isTrue();
    String[] t = times.group(1).split(",");
    // the last CAPACITY samples, oldest first, whatever the background sampler added meanwhile
    assertThat(t).hasSize(DashboardSampler.CAPACITY);
    assertThat(Long.parseLong(t[t.length - 1])).isGreaterThanOrEqualTo(160_000L);
    assertThat(json).doesNotContain("\"instance_id\":\"1\"");
  }

  @Test
  void thePageIsSelfContainedAndTheDataNeedsTheTokenWhenOneIsSet() {
    http = new HttpFixture(KvRouterServer.Config.builder().authToken("s3cret"));
    HttpFixture.Reply page = http.get("/dashboard");
    assertThat(page.status()).isEqualTo(200);
    assertThat(page.header("Content-Type")).startsWith("text/html");
    assertThat(page.body()).contains("<script>", "dashboard/data", "#1f77b4");
    // nothing fetched from elsewhere: no external script, style, font or image
    assertThat(page.body()).doesNotContain("src=", "href=", "@import", "url(");
    assertThat(page.body().replace("http://www.w3.org/2000/svg", "")).doesNotContain("://");
    HttpFixture.Reply refused = http.get("/dashboard/data");
    assertThat(refused.status()).isEqualTo(401);
    assertThat(refused.header("WWW-Authenticate")).startsWith("Bearer");
    http.token = "s3cret";
    assertThat(http.get("/dashboard/data").status()).isEqualTo(200);
  }
}
