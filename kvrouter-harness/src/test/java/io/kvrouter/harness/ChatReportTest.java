package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The llama-cpp bench's reports from hand-made results (no engine). */
class ChatReportTest {
  static ChatRun.Result ok(long worker, int prompt, int cached, double ttft) {
    ChatRun.Result r = new ChatRun.Result(0, 0, 0);
    r.ok = true;
    r.worker = worker;
    r.prompt = prompt;
    r.cached = cached;
    r.ttftMs = ttft;
    return r;
  }

  static ChatRun run(String policy, ChatRun.Result... rs) {
    ChatRun r = new ChatRun(policy);
    r.add(rs, 1.5);
    return r;
  }

  static final ChatFleetBench.Settings S =
      new ChatFleetBench.Settings(
          null, null, 2, 4096, List.of("kv", "round-robin"), 1, 2, 2, 1, 100, 12, 1, 5, true, "x");

  @Test
  void hitRateTtftPercentilesAndTheRatio() throws Exception {
    ChatRun kv = run("kv", ok(1, 1000, 900, 100), ok(1, 1000, 800, 200), ok(2, 1000, 0, 1000));
    ChatRun.Result failed = new ChatRun.Result(1, 1, 0);
    failed.why = "status 502: engine_error boom";
    ChatRun rr = run("round-robin", ok(1, 1000, 0, 900), ok(2, 1000, 100, 800), failed);
    ChatWorkload w = ChatWorkload.generate(2, 2, 1, 100, 5);
    JsonNode j = new ObjectMapper().readTree(ChatReport.json(S, w, List.of(kv, rr)));
    assertThat(j.path("engine_kind").asText()).isEqualTo("llama-cpp");
    assertThat(j.path("workload").path("requests").asInt()).isEqualTo(4);
    JsonNode k = j.path("policies").path(0);
    assertThat(k.path("policy").asText()).isEqualTo("kv");
    assertThat(k.path("requests").asInt()).isEqualTo(3);
    assertThat(k.path("answered").asInt()).isEqualTo(3);
    assertThat(k.path("hit_rate").asDouble()).isEqualTo(1700.0 / 3000);
    assertThat(k.path("ttft_ms").path("p50").asDouble()).isEqualTo(200);
    assertThat(k.path("ttft_ms").path("p90").asDouble()).isEqualTo(1000);
    assertThat(k.path("requests_per_engine").path("1").asInt()).isEqualTo(2);
    JsonNode r = j.path("policies").path(1);
    assertThat(r.path("answered").asInt()).isEqualTo(2);
    assertThat(r.path("errors").asInt()).isEqualTo(1);
    assertThat(r.path("error_reasons").path("status 502: engine_error boom").asInt()).isEqualTo(1);
    assertThat(r.path("hit_rate").asDouble()).isEqualTo(0.05);
    // nearest rank over the two answered: p50 is the lower one
    assertThat(r.path("ttft_ms").path("p50").asDouble()).isEqualTo(800);
    assertThat(j.path("ttft_p50_over_kv").path("round-robin").asDouble()).isEqualTo(4.0);

    StringWriter sw = new StringWriter();
    ChatReport.printTable(new PrintWriter(sw), List.of(kv, rr));
    assertThat(sw.toString())
        .containsPattern("kv +3 +3 +0 +1000 +56\\.7% ")
        .contains("TTFT p50 round-robin / kv: 4.00x")
        .contains("56.7%")
        .contains("status 502: engine_error boom");
  }
}
