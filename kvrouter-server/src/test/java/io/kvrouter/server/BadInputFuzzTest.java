package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.transport.json.RouterEventJson;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Seeded random mutations of valid bodies sent to every POST endpoint: whatever comes in, the
 * answer is never a 5xx other than the routing 503s, and every refusal is {"error": ...}.
 */
class BadInputFuzzTest {
  private static final Set<Integer> ALLOWED = Set.of(200, 201, 400, 404, 409, 413);

  private static final String[] ENDPOINTS = {
    "/register", "/unregister", "/query", "/query_by_hash", "/route", "/events?model_name=m"
  };

  private static final String[] VALID = {
    "{\"instance_id\":5,\"model_name\":\"m\",\"block_size\":4,\"dp_rank\":1,\"endpoint\":null}",
    "{\"instance_id\":5,\"model_name\":\"m\",\"dp_rank\":1}",
    "{\"model_name\":\"m\",\"token_ids\":[0,1,2,3,4,5,6,7],\"lora_name\":null}",
    "{\"model_name\":\"m\",\"block_hashes\":[1,18446744073709551615,-5]}",
    "{\"request_id\":\"r\",\"model_name\":\"m\",\"token_ids\":[0,1,2,3],\"allowed_instances\":[1]}",
    null // the events batch, built below
  };

  private static final String[] REPLACEMENTS = {
    "null",
    "true",
    "-1",
    "1.5",
    "1e400",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "[[[[",
    "}",
    "]",
    ",",
    "18446744073709551616",
    "-9223372036854775809",
    "4294967296",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\u00e9",
    "0x10",
    "NaN",
    "\n"
  };

  @Test
  void noBadInputGetsA500() {
    long seed = new Random().nextLong();
    Random rnd = new Random(seed);
    try (HttpFixture http = new HttpFixture(KvRouterServer.Config.builder().maxBodyBytes(2048))) {
      http.register(1, 0, "m", 4);
      String[] valid = VALID.clone();
      valid[5] = RouterEventJson.writeEvents(List.of(stored(new Worker(1, 0), 0, range(0, 8), 4)));
      int sent = 0;
      for (int i = 0; i < 1200; i++) {
        int e = rnd.nextInt(ENDPOINTS.length);
        String body = mutate(valid[e], rnd);
        HttpFixture.Reply r = http.post(ENDPOINTS[e], body);
        String why = "seed " + seed + ", " + ENDPOINTS[e] + " " + body + " -> " + r;
        boolean routing503 = r.status() == 503 && ENDPOINTS[e].equals("/route");
        assertThat(ALLOWED.contains(r.status()) || routing503).as(why).isTrue();
        if (r.status() >= 400) assertThat(r.body()).as(why).startsWith("{\"error\":");
        if (r.status() == 200 && ENDPOINTS[e].equals("/route")) {
          http.post("/requests/r/free", ""); // keep the id reusable
        }
        sent++;
      }
      assertThat(sent).isEqualTo(1200);
      assertThat(http.get("/health").status()).isEqualTo(200);
      // the metrics agree: the only 5xx answers are routing 503s
      for (String line : http.get("/metrics").body().split("\n")) {
        if (line.startsWith("kvrouter_http_requests_total{") && line.contains("5xx")) {
          assertThat(line).as("seed " + seed).contains("endpoint=\"/route\"");
        }
      }
    }
  }

  private static String mutate(String valid, Random rnd) {
    StringBuilder sb = new StringBuilder(valid);
    int edits = 1 + rnd.nextInt(3);
    for (int k = 0; k < edits && sb.length() > 0; k++) {
      int at = rnd.nextInt(sb.length());
      switch (rnd.nextInt(6)) {
        case 0 -> sb.setLength(at); // truncate
        case 1 -> sb.deleteCharAt(at);
        case 2 -> sb.insert(at, REPLACEMENTS[rnd.nextInt(REPLACEMENTS.length)]);
        case 3 -> sb.setCharAt(at, (char) (32 + rnd.nextInt(95)));
        case 4 -> {
          // replace a value after a colon by something of another type
          int colon = sb.indexOf(":", at);
          if (colon < 0) colon = sb.indexOf(":");
          if (colon >= 0) {
            int end = colon + 1;
            while (end < sb.length() && ",}".indexOf(sb.charAt(end)) < 0) end++;
            sb.replace(colon + 1, end, REPLACEMENTS[rnd.nextInt(REPLACEMENTS.length)]);
          }
        }
        default -> sb.append("x".repeat(rnd.nextInt(3000))); // sometimes over the limit
      }
    }
    return sb.toString();
  }
}
