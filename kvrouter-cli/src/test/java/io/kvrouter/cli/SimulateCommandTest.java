package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.sim.report.HtmlReport;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code kvrouter simulate} end to end: exit codes, messages, JSON and the HTML report. */
class SimulateCommandTest {
  @TempDir Path tmp;

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    return Main.run(new PrintWriter(out, true), new PrintWriter(err, true), args);
  }

  @Test
  void anUnknownPolicyListsTheKnownOnes() {
    assertThat(run("simulate", "--policies", "kv,fastest", "--no-report")).isEqualTo(2);
    assertThat(err.toString())
        .contains(
            "unknown policy 'fastest'; known policies: kv, round-robin, random, least-loaded,"
                + " approx, kv-device");
  }

  @Test
  void aMalformedTraceNamesTheLineAndTheField() throws IOException {
    Path trace = tmp.resolve("bad.jsonl");
    Files.writeString(
        trace,
        """
        {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}
        {"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [1]}
        {"timestamp": 9, "input_length": 10, "output_length": "many", "hash_ids": [2]}
        """);
    assertThat(run("simulate", "--trace", trace.toString(), "--no-report")).isEqualTo(2);
    assertThat(err.toString())
        .contains("bad.jsonl, line 3, field 'output_length': expected an integer");
    assertThat(run("simulate", "--trace", tmp.resolve("none.jsonl").toString())).isEqualTo(2);
    assertThat(err.toString()).contains("none.jsonl: no such file");
  }

  @Test
  void jsonOutputParsesAndTheReportIsSelfContained() throws IOException {
    Path report = tmp.resolve("r.html");
    int code =
        run(
            "simulate",
            "--requests",
            "150",
            "--workers",
            "2",
            "--gpu-blocks",
            "4096",
            "--json",
            "--quiet",
            "--report",
            report.toString());
    assertThat(code).as(err.toString()).isZero();
    String json = out.toString();
    Map<String, Object> top = topLevelScalars(json.substring(0, json.lastIndexOf('}') + 1));
    assertThat(top).containsEntry("requests", 150L).containsEntry("verified", true);
    assertThat(json).contains("\"policy\" : \"kv\"").contains("\"policy\" : \"approx\"");
    assertThat(err.toString()).contains("report: " + report.toAbsolutePath());

    String html = Files.readString(report);
    assertThat(html).startsWith("<!DOCTYPE html>").contains("<svg").contains("pooled ceiling");
    assertThat(html).doesNotContain("<script").doesNotContain("https://").doesNotContain("src=");
    // the run's metadata: version (none outside the jar), the command as typed, the date
    assertThat(html)
        .contains("<th>kvrouter</th><td>development build</td>")
        .contains(
            "<code>kvrouter simulate --requests 150 --workers 2 --gpu-blocks 4096 --json --quiet"
                + " --report "
                + HtmlReport.esc(HtmlReport.shellQuote(report.toString()))
                + "</code>")
        .containsPattern("<th>date</th><td>\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC</td>");
    // every policy's load, percentile markers on the TTFT plot, the hit rate over time
    for (String policy : new String[] {"kv", "round-robin", "random", "least-loaded", "approx"}) {
      assertThat(html)
          .contains("id=\"load-" + policy + "\"")
          .contains("<title>" + policy + " p99: ");
    }
    assertThat(html).contains("<svg class=\"hit-rate-over-time\"");
  }

  @Test
  void theTableSaysWhetherTheIndexEqualsTheCaches() {
    int code =
        run(
            "simulate",
            "--requests",
            "100",
            "--workers",
            "2",
            "--policies",
            "kv,round-robin",
            "--event-delay-ms",
            "20",
            "--no-report");
    assertThat(code).as(err.toString()).isZero();
    assertThat(out.toString())
        .contains("kv reaches")
        .contains("index equals caches: yes, for every policy")
        .containsPattern("(?m)^kv +100 ")
        .containsPattern("(?m)^round-robin +100 ");
  }

  @Test
  void aBoundedIndexIsCheckedForNoOverCount() {
    int code =
        run(
            "simulate",
            "--requests",
            "100",
            "--workers",
            "2",
            "--policies",
            "kv",
            "--max-blocks",
            "40",
            "--no-report");
    assertThat(code).as(err.toString()).isZero();
    assertThat(out.toString())
        .contains("index within caches (--max-blocks 40): yes, for every policy")
        .doesNotContain("index equals caches");
  }

  @Test
  void aBoundBelowOneIsRefusedWithItsValue() {
    assertThat(run("simulate", "--requests", "10", "--max-blocks", "0", "--no-report"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("kvrouter simulate: --max-blocks must be >= 1, got 0");
  }

  @Test
  void threadsBelowOneAreRefusedWithTheirValue() {
    assertThat(run("simulate", "--requests", "10", "--threads", "0", "--no-report")).isEqualTo(2);
    assertThat(err.toString()).contains("kvrouter simulate: --threads must be >= 1, got 0");
  }

  @Test
  void oneThreadAndThreeGiveTheSameJson() {
    String[] args = {"simulate", "--requests", "300", "--gpu-blocks", "2048", "--json", "--quiet"};
    assertThat(run(concat(args, "--threads", "1"))).isEqualTo(0);
    String one = out.toString().replaceAll("\"wall_s\" : [0-9.E-]+", "");
    out.getBuffer().setLength(0);
    assertThat(run(concat(args, "--threads", "3"))).isEqualTo(0);
    String three = out.toString().replaceAll("\"wall_s\" : [0-9.E-]+", "");
    assertThat(one).contains("\"policy\" : \"approx\"").doesNotContain("wall_s");
    assertThat(three).isEqualTo(one);
  }

  private static String[] concat(String[] a, String... b) {
    String[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  @Test
  void admissionComparesTheModesAndLosesNothing() throws IOException {
    assertThat(
            run(
                "simulate",
                "--admission",
                "fifo,fair-cost,fair-tokens",
                "--requests",
                "300",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--tenants",
                "2",
                "--heavy-tenant-factor",
                "10",
                "--busy-requests",
                "8",
                "--max-queue-time",
                "5",
                "--heavy-tenant-weight",
                "0.5",
                "--json",
                "--quiet"))
        .isEqualTo(0);
    JsonNode j = new ObjectMapper().readTree(out.toString());
    assertThat(j.get("nothing_lost").asBoolean()).isTrue();
    assertThat(j.get("admission").get("heavy_tenant_weight").asDouble()).isEqualTo(0.5);
    JsonNode demand = j.get("protected_prefill_share");
    assertThat(demand.get("ideal_cache").asDouble()).isPositive();
    assertThat(demand.get("no_cache").asDouble())
        .isGreaterThanOrEqualTo(demand.get("ideal_cache").asDouble());
    assertThat(j.get("modes")).hasSize(3);
    assertThat(j.get("no_heavy")).hasSize(3);
    for (JsonNode m : j.get("modes")) {
      assertThat(m.get("answered").asInt() + m.get("refused_429").asInt())
          .isEqualTo(m.get("sent").asInt());
      assertThat(m.get("tenants")).hasSize(2);
    }
    assertThat(j.get("modes").get(0).get("refused_429").asInt()).isZero(); // fifo
    assertThat(j.get("modes").get(1).get("mode").asText()).isEqualTo("fair-cost");
  }

  @Test
  void admissionTakesSharedPromptsAndTokenRates() throws IOException {
    assertThat(
            run(
                "simulate",
                "--admission",
                "fifo,fair-cost",
                "--requests",
                "300",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--tenants",
                "2",
                "--cached-tenant-prefix",
                "8:2",
                "--tenant-token-rate",
                "t0=2000",
                "--tenant-token-burst",
                "2s",
                "--json",
                "--quiet"))
        .isEqualTo(0);
    JsonNode j = new ObjectMapper().readTree(out.toString());
    assertThat(j.get("nothing_lost").asBoolean()).isTrue();
    assertThat(j.get("tenants").get("cached_tenant_prefix").get("blocks").asInt()).isEqualTo(8);
    assertThat(j.get("tenants").get("cached_tenant_prefix").get("prompts").asInt()).isEqualTo(2);
    assertThat(j.get("admission").get("tenant_token_rate").get("t0").asDouble()).isEqualTo(2000);
    assertThat(j.get("admission").get("tenant_token_rate").get("burst_s").asDouble()).isEqualTo(2);
    // the unloaded baseline has no limit; every loaded run refuses some of t0's and none of t1's
    assertThat(j.get("unloaded").get("refused_rate_limit").asInt()).isZero();
    for (JsonNode m : j.get("modes")) {
      assertThat(m.get("refused_rate_limit").asInt()).isPositive();
      JsonNode t1 = m.get("tenants").get(1);
      assertThat(t1.get("rate_refused_high").asInt() + t1.get("rate_refused_normal").asInt())
          .isZero();
      JsonNode t0 = m.get("tenants").get(0);
      assertThat(t0.get("rate_refused_high").asInt() + t0.get("rate_refused_normal").asInt())
          .isEqualTo(m.get("refused_rate_limit").asInt());
      assertThat(m.get("answered").asInt() + m.get("refused_429").asInt())
          .isEqualTo(m.get("sent").asInt());
    }
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "10",
                "--cached-tenant-prefix",
                "8:x"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--cached-tenant-prefix 8:x");
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "10",
                "--tenant-token-rate",
                "fast"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--tenant-token-rate fast");
    // a tenant the simulation does not have would be limited nowhere: refused, not ignored
    for (String name : new String[] {"t2", "T0", "alice", "t01"}) {
      assertThat(
              run(
                  "simulate",
                  "--admission",
                  "fair-cost",
                  "--requests",
                  "10",
                  "--tenants",
                  "2",
                  "--tenant-token-rate",
                  name + "=100"))
          .as(name)
          .isEqualTo(2);
      assertThat(err.toString())
          .contains(
              "--tenant-token-rate " + name + "=...: the simulated tenants are named t0 .. t1");
    }
  }

  @Test
  void admissionEvictsLowerBandsWhenAskedAndSaysSo() throws IOException {
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "300",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--tenants",
                "2",
                "--busy-requests",
                "8",
                "--high-priority-share",
                "0.3",
                "--evict-lower-bands",
                "--max-evictions",
                "2",
                "--json",
                "--quiet"))
        .isEqualTo(0);
    JsonNode j = new ObjectMapper().readTree(out.toString());
    assertThat(j.get("nothing_lost").asBoolean()).isTrue();
    assertThat(j.get("admission").get("max_evictions").asInt()).isEqualTo(2);
    assertThat(j.get("unloaded").has("evictions")).isFalse(); // fifo: no queue, no eviction
    JsonNode e = j.get("modes").get(0).get("evictions");
    int high = 0;
    int normal = 0;
    for (JsonNode t : e.get("tenants")) {
      high += t.get("high").asInt();
      normal += t.get("normal").asInt();
    }
    assertThat(high).isZero(); // nothing is below the normal band's waiters to take the high's
    assertThat(normal).isEqualTo(e.get("total").asInt());
    assertThat(e.get("answered").asInt() + e.get("refused").asInt())
        .isEqualTo(e.get("requests").asInt());
    assertThat(e.get("total").asInt())
        .isBetween(e.get("requests").asInt(), 2 * e.get("requests").asInt());
    // without the flag, no evictions object
    out.getBuffer().setLength(0);
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "50",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--json",
                "--quiet"))
        .isEqualTo(0);
    assertThat(new ObjectMapper().readTree(out.toString()).get("modes").get(0).has("evictions"))
        .isFalse();
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "10",
                "--evict-lower-bands",
                "--max-evictions",
                "0"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--max-evictions must be >= 1, got 0");
  }

  @Test
  void admissionTakesTheExcessFactorAndSaysSo() throws IOException {
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "300",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--tenants",
                "3",
                "--heavy-tenant-factor",
                "10",
                "--tenant-excess-factor",
                "4",
                "--json",
                "--quiet"))
        .isEqualTo(0);
    JsonNode j = new ObjectMapper().readTree(out.toString());
    assertThat(j.get("nothing_lost").asBoolean()).isTrue();
    assertThat(j.get("admission").get("tenant_excess_factor").asDouble()).isEqualTo(4.0);
    assertThat(j.get("modes").get(0).has("high_priority_p90_without_t0_ms")).isTrue();
    out.getBuffer().setLength(0);
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "300",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--tenants",
                "3",
                "--heavy-tenant-factor",
                "10",
                "--tenant-excess-factor",
                "4",
                "--quiet"))
        .isEqualTo(0);
    assertThat(out.toString())
        .contains("--tenant-excess-factor 4")
        .contains("fair-cost: high priority without t0's requests: p90 ");
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "10",
                "--tenant-excess-factor",
                "0.5"))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains("--tenant-excess-factor must be 0 (off) or finite and >= 1, got 0.5");
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "10",
                "--tenant-excess-factor",
                "4",
                "--share-slack",
                "0"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("cannot be combined with --share-slack");
    // the default: 4, or off with --share-slack
    out.getBuffer().setLength(0);
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "50",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--json",
                "--quiet"))
        .isEqualTo(0);
    assertThat(
            new ObjectMapper()
                .readTree(out.toString())
                .get("admission")
                .get("tenant_excess_factor")
                .asDouble())
        .isEqualTo(4.0);
    out.getBuffer().setLength(0);
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "50",
                "--workers",
                "2",
                "--load-factor",
                "2",
                "--share-slack",
                "0",
                "--json",
                "--quiet"))
        .isEqualTo(0);
    assertThat(
            new ObjectMapper()
                .readTree(out.toString())
                .get("admission")
                .get("tenant_excess_factor")
                .asDouble())
        .isZero();
  }

  @Test
  void admissionRefusesAnUnknownModeAndLoadFactorWithSpeedup() {
    assertThat(run("simulate", "--admission", "lifo", "--requests", "10")).isEqualTo(2);
    assertThat(err.toString()).contains("unknown admission mode 'lifo'");
    assertThat(
            run(
                "simulate",
                "--admission",
                "fair-cost",
                "--requests",
                "10",
                "--heavy-tenant-weight",
                "0"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--heavy-tenant-weight must be finite and > 0, got 0");
    assertThat(
            run(
                "simulate",
                "--requests",
                "10",
                "--load-factor",
                "2",
                "--speedup",
                "3",
                "--no-report"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("give --load-factor or --speedup, not both");
  }

  @Test
  void aNegativePressureWeightIsRefusedWithItsValue() {
    assertThat(run("simulate", "--requests", "10", "--pressure-weight", "-1", "--no-report"))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains("kvrouter simulate: --pressure-weight must be finite and >= 0, got -1.0");
  }

  @Test
  void anUnknownRemovedEventsShapeIsRefusedAndPerBlockIsNamed() {
    assertThat(run("simulate", "--requests", "10", "--removed-events", "some", "--no-report"))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains(
            "kvrouter simulate: --removed-events must be per-block or per-eviction, got 'some'");
    assertThat(
            run(
                "simulate",
                "--requests",
                "200",
                "--policies",
                "kv",
                "--removed-events",
                "per-block",
                "--quiet",
                "--no-report"))
        .as(err.toString())
        .isZero();
    assertThat(out.toString())
        .contains("; one Removed event per evicted block")
        .contains("index equals caches: yes");
  }

  @Test
  void prefillAndDecodeWorkersCompareTheThreeFleets() throws IOException {
    assertThat(run("simulate", "--prefill-workers", "2", "--requests", "10")).isEqualTo(2);
    assertThat(err.toString()).contains("give both --prefill-workers and --decode-workers");
    assertThat(
            run(
                "simulate",
                "--prefill-workers",
                "2",
                "--decode-workers",
                "2",
                "--requests",
                "300",
                "--pd-min-uncached-tokens",
                "2000",
                "--json"))
        .as(err.toString())
        .isZero();
    String json = out.toString().trim();
    assertThat(topLevelScalars(json))
        .containsEntry("prefill_workers", 2L)
        .containsEntry("decode_workers", 2L)
        .containsEntry("min_uncached_tokens", 2000L);
    assertThat(json)
        .contains("\"fleet\":\"aggregated\",\"requests\":300,\"completed\":300,")
        .contains("\"fleet\":\"disaggregated\",\"requests\":300,\"completed\":300,")
        .contains("\"fleet\":\"conditional\",\"requests\":300,\"completed\":300,")
        .contains("\"handed_over\":300,")
        .doesNotContain("\"verified\":false");
    // the aggregated fleet hands nothing over
    assertThat(json)
        .contains(
            "\"fleet\":\"aggregated\",\"requests\":300,\"completed\":300,"
                + "\"rejected\":0,\"handed_over\":0,");
  }

  @Test
  void jsonConfigSaysEverySettingTheRunUsed() throws IOException {
    assertThat(
            run(
                "simulate",
                "--requests",
                "60",
                "--workers",
                "2",
                "--gpu-blocks",
                "1024",
                "--host-blocks",
                "2048",
                "--host-ms-per-block",
                "0.3",
                "--overlap-weight",
                "1.5",
                "--max-blocks",
                "100000",
                "--json",
                "--quiet"))
        .as(err.toString())
        .isZero();
    JsonNode config = new ObjectMapper().readTree(out.toString()).path("config");
    assertThat(config.path("workers").asInt()).isEqualTo(2);
    assertThat(config.path("gpu_blocks").asInt()).isEqualTo(1024);
    assertThat(config.path("host_blocks").asInt()).isEqualTo(2048);
    assertThat(config.path("host_ms_per_block").asDouble()).isEqualTo(0.3);
    assertThat(config.path("overlap_weight").asDouble()).isEqualTo(1.5);
    assertThat(config.path("max_blocks").asLong()).isEqualTo(100000);
    // the defaults are written too, so a script never has to know them
    for (String key :
        new String[] {
          "speedup",
          "max_batch",
          "removed_events",
          "approx_kv_blocks",
          "pressure_weight",
          "busy_prefill_tokens",
          "request_expiry_seconds",
          "max_tier_blocks",
          "host_tier_weight",
          "disk_tier_weight",
          "external_tier_weight",
          "seed"
        }) {
      assertThat(config.has(key)).as(key + " in " + config).isTrue();
    }
  }

  /** Parses a JSON document completely and returns its top-level scalar fields. */
  private static Map<String, Object> topLevelScalars(String json) throws IOException {
    Map<String, Object> out = new HashMap<>();
    try (JsonParser p = new JsonFactory().createParser(json)) {
      assertThat(p.nextToken()).isEqualTo(JsonToken.START_OBJECT);
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        switch (v) {
          case VALUE_NUMBER_INT -> out.put(name, p.getLongValue());
          case VALUE_NUMBER_FLOAT -> out.put(name, p.getDoubleValue());
          case VALUE_TRUE, VALUE_FALSE -> out.put(name, p.getBooleanValue());
          case VALUE_STRING -> out.put(name, p.getText());
          default -> p.skipChildren();
        }
      }
      assertThat(t).isEqualTo(JsonToken.END_OBJECT);
      assertThat(p.nextToken()).isNull();
    }
    return out;
  }
}
