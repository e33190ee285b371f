package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.sim.report.HtmlReport;
import io.kvrouter.sim.trace.TracePrompts;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code bench fleet}'s reports from runs filled by hand: the JSON's figures and the table's rows,
 * sync lines only with synced gateways, the comparison with simulate, and the HTML's plots.
 */
class FleetReportTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static PolicyRun run(String policy, boolean equal) {
    PolicyRun r = new PolicyRun();
    r.policy = policy;
    r.sent = 4;
    r.completed = 3;
    r.errors = 1;
    r.errorReasons.put("status 504 engine_timeout", 1);
    r.failed.add("fleet-3 (due at 0.1 s ...): status 504 engine_timeout");
    r.ttftMs = new double[] {10, 20, 2000};
    r.itlMs = new double[] {1, 2};
    r.e2eMs = new double[] {30, 40, 2500};
    r.promptTokens = 400;
    r.cachedTokens = 100;
    r.predictedTokens = 80;
    r.outputTokens = 12;
    r.makespanSec = 3;
    r.eventsApplied = 9;
    r.lagMs = new double[] {1, 3};
    r.routerLagMs = 0.5;
    r.imbalance = 1.5;
    r.pids.add(42L);
    r.blocksCompared = 7;
    if (!equal)
      r.indexProblems.add("engine 1: router holds 1 blocks, engine 2 (1 missing, 0 extra)");
    return r;
  }

  @Test
  void theJsonHoldsEveryFigureOfEveryPolicy() throws Exception {
    FleetBench.Settings s = FleetPartsTest.settings(List.of("kv", "round-robin"), 4, 1, "on");
    TracePrompts prompts = TracePrompts.load(null, 4);
    JsonNode j =
        JSON.readTree(
            FleetReport.toJson(
                    s, prompts, List.of(run("kv", true), run("round-robin", false)), null)
                .toString());
    assertThat(j.path("requests").asInt()).isEqualTo(4);
    assertThat(j.path("time_scale").asDouble()).isEqualTo(4.0);
    assertThat(j.path("sync").asBoolean()).as("one gateway does not sync").isFalse();
    JsonNode kv = j.path("policies").get(0);
    assertThat(kv.path("policy").asText()).isEqualTo("kv");
    assertThat(kv.path("hit_rate").asDouble()).isEqualTo(0.25);
    assertThat(kv.path("predicted_hit_rate").asDouble()).isEqualTo(0.2);
    assertThat(kv.path("ttft_ms").path("p50").asDouble()).isEqualTo(20.0);
    assertThat(kv.path("ttft_ms").path("count").asInt()).isEqualTo(3);
    assertThat(kv.path("e2e_ms").path("mean").asDouble()).isEqualTo(2570.0 / 3);
    assertThat(kv.path("requests_per_sec").asDouble()).isEqualTo(1.0);
    assertThat(kv.path("output_tokens_per_sec").asDouble()).isEqualTo(4.0);
    assertThat(kv.path("error_reasons").path("status 504 engine_timeout").asInt()).isEqualTo(1);
    assertThat(kv.path("engine_pids").toString()).isEqualTo("[42]");
    assertThat(kv.path("index_equal").asBoolean()).isTrue();
    assertThat(kv.has("sync_changes_applied")).isFalse();
    assertThat(kv.has("simulate")).isFalse();
    assertThat(j.path("policies").get(1).path("index_equal").asBoolean()).isFalse();
    assertThat(j.path("valid").asBoolean()).isTrue();
    assertThat(kv.path("valid").asBoolean()).isTrue();
    assertThat(kv.path("invalid_reasons")).isEmpty();
  }

  @Test
  void anInvalidRunIsMarkedInEveryReport() throws Exception {
    FleetBench.Settings s = FleetPartsTest.settings(List.of("kv", "round-robin"), 4, 1, "on");
    PolicyRun kv = run("kv", true);
    kv.sendLateMs = new double[] {900};
    RunValidity.judge(kv);
    PolicyRun rr = run("round-robin", true);
    JsonNode j =
        JSON.readTree(
            FleetReport.toJson(s, TracePrompts.load(null, 4), List.of(kv, rr), null).toString());
    assertThat(j.path("valid").asBoolean()).isFalse();
    assertThat(j.path("policies").get(0).path("valid").asBoolean()).isFalse();
    assertThat(j.path("policies").get(0).path("invalid_reasons").get(0).asText())
        .contains("p99 900 ms behind the schedule");
    assertThat(j.path("policies").get(0).path("sent_late_wall_ms").path("p99").asDouble())
        .isEqualTo(900.0);
    assertThat(j.path("policies").get(1).path("valid").asBoolean()).isTrue();

    StringWriter w = new StringWriter();
    FleetReport.printTable(new PrintWriter(w), s, List.of(kv, rr), null);
    assertThat(w.toString())
        .contains("kv: kept up: sent late p99 900 ms")
        .contains("INVALID RUN")
        .contains("    - the client sent requests late");
    String html = FleetHtmlReport.render(List.of(kv, rr), null, "setup", "--policies kv", 4);
    assertThat(html).contains("NO (below)").contains("kv run invalid: the client sent requests");
  }

  @Test
  void theTableHasARowPerPolicyAndSaysWhatDiffers() {
    FleetBench.Settings s = FleetPartsTest.settings(List.of("kv", "round-robin"), 4, 2, "on");
    PolicyRun kv = run("kv", true);
    kv.syncApplied = 9;
    kv.syncLagMs = 1.25;
    StringWriter out = new StringWriter();
    FleetReport.printTable(
        new PrintWriter(out, true), s, List.of(kv, run("round-robin", false)), null);
    String t = out.toString();
    assertThat(t).contains("times are model time (wall time x 4)");
    assertThat(t)
        .containsPattern(
            "(?m)^kv +3 +1 +25\\.0% +20\\.0% +1\\.50 +20 ms +2\\.00 s +2\\.00 s .* equal$")
        .containsPattern("(?m)^round-robin .* DIFFERS$")
        .contains("  kv: sequence sync applied 9 peer changes, mean lag 1.3 ms (wall)")
        .contains("  round-robin: engine 1: router holds 1 blocks")
        .contains("  kv: 1 x status 504 engine_timeout")
        .doesNotContain("live vs simulate");
  }

  @Test
  void simulatesFiguresStandBesideTheLiveOnes() throws Exception {
    FleetBench.Settings s = FleetPartsTest.settings(List.of("kv"), 4, 1, "on");
    JsonNode sim =
        JSON.readTree(
            "{\"policies\":[{\"policy\":\"kv\",\"hit_rate\":0.5,\"requests_per_s\":2.0,"
                + "\"ttft_ms\":{\"p50\":15.0,\"p90\":30.0}}]}");
    StringWriter out = new StringWriter();
    FleetReport.printTable(new PrintWriter(out, true), s, List.of(run("kv", true)), sim);
    assertThat(out.toString())
        .contains("live vs simulate (same trace, fleet and timing model):")
        .containsPattern(
            "(?m)^kv +25\\.0% /  50\\.0% +20 ms / +15 ms +2\\.00 s / +30 ms +1\\.00 / +2\\.00$");
    String html = FleetHtmlReport.render(List.of(run("kv", true)), sim, "setup", "--engines 2", 4);
    assertThat(html)
        .startsWith("<!DOCTYPE html>")
        .contains("<code>kvrouter bench fleet --engines 2</code>")
        .contains("<th>simulate hit rate</th>")
        .doesNotContain("<script");
    assertThat(html.split("<polyline class=\"cdf\"", -1)).hasSize(2);
    // the axes say what they are, and kv has the colour simulate's report gives it
    assertThat(html)
        .contains(">TTFT (model time, log scale)</text>")
        .contains(">share of requests with TTFT ≤ x</text>")
        .contains(">prompt tokens the engines found cached</text>")
        .contains("stroke=\"" + HtmlReport.policyColor("kv") + "\"");
    assertThat(HtmlReport.policyColor("kv")).isEqualTo("#1f77b4");
    assertThat(HtmlReport.policyColor("round-robin")).isEqualTo("#d62728");
  }
}
