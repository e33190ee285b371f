package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvrouter bench fleet --admission fifo,fair-cost} on a tiny in-process fleet: one engine,
 * 24 requests of two tenants, half of them high priority, arriving within a few wall milliseconds
 * while each takes the engine 50 wall ms of prefill (400 model ms at time scale 8). fifo sends
 * every request at once; fair-cost lets one request in flight (--busy-requests 1) and two wait
 * (--max-queue-depth 2), so the burst is mostly refused with 429 queue_full.
 *
 * <p>Checked: the table's structure, every request answered or refused (nothing lost), fifo never
 * waits nor refuses, and the tenants and priorities reached the gateway: its 429 counters by band
 * and tenant (its /metrics) equal what the client saw refused, request by request, from the tenant
 * and priority it sent.
 */
class FleetAdmissionBenchTest {
  @TempDir static Path dir;
  static Path trace;

  @BeforeAll
  static void writeTrace() throws Exception {
    List<String> lines = new ArrayList<>();
    for (int i = 0; i < 24; i++) {
      lines.add(
          "{\"timestamp\":"
              + (i * 10)
              + ",\"input_length\":1024,\"output_length\":4,\"hash_ids\":[0,"
              + (i + 1)
              + "]}");
    }
    trace = dir.resolve("burst.jsonl");
    Files.write(trace, lines);
  }

  private static JsonNode run(String... extra) throws Exception {
    List<String> args =
        new ArrayList<>(
            List.of(
                "bench",
                "fleet",
                "--admission",
                "fifo,fair-cost",
                "--trace",
                trace.toString(),
                "--engines",
                "1",
                "--in-process",
                "--speedup",
                "1",
                "--time-scale",
                "8",
                "--prefill-base-ms",
                "400",
                "--prefill-ms-per-1k-tokens",
                "10",
                "--tenants",
                "2",
                "--high-priority-share",
                "0.5",
                "--busy-requests",
                "1",
                "--busy-prefill-tokens",
                "-1",
                "--max-queue-depth",
                "2",
                "--json"));
    args.addAll(List.of(extra));
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int rc = Main.run(new PrintWriter(out), new PrintWriter(err), args.toArray(String[]::new));
    assertThat(rc).as("exit code; stderr: %s; stdout: %s", err, out).isZero();
    return new ObjectMapper().readTree(out.toString());
  }

  private static void checkRun(JsonNode m) {
    String label = m.path("label").asText();
    assertThat(m.path("sent").asInt()).as(label).isEqualTo(24);
    assertThat(m.path("lost").asInt()).as(label + " lost").isZero();
    assertThat(m.path("nothing_lost").asBoolean()).as(label).isTrue();
    assertThat(m.path("answered").asInt() + m.path("refused_429").asInt())
        .as(label + " answered + 429")
        .isEqualTo(24);
    JsonNode tenants = m.path("tenants");
    assertThat(tenants).as(label + " tenants").hasSize(2);
    int sent = 0;
    int answered = 0;
    for (JsonNode t : tenants) {
      sent += t.path("sent").asInt();
      answered += t.path("answered").asInt();
      assertThat(t.path("served_cost").asDouble()).isGreaterThanOrEqualTo(0);
    }
    assertThat(sent).isEqualTo(24);
    assertThat(answered).isEqualTo(m.path("answered").asInt());
    JsonNode high = m.path("high_priority_ttft_ms");
    assertThat(high.path("p50").asDouble()).as(label + " high p50").isPositive();
    assertThat(high.path("p90").asDouble()).isGreaterThanOrEqualTo(high.path("p50").asDouble());
    assertThat(high.path("p99").asDouble()).isGreaterThanOrEqualTo(high.path("p90").asDouble());
    assertThat(m.path("jain_served_cost").asDouble()).as(label + " Jain").isBetween(0.5, 1.0);
    assertThat(m.path("goodput_per_s").asDouble()).isGreaterThanOrEqualTo(0);
  }

  private static Set<String> keys(JsonNode o) {
    Set<String> out = new HashSet<>();
    for (Iterator<String> it = o.fieldNames(); it.hasNext(); ) out.add(it.next());
    return out;
  }

  @Test
  void fifoAndFairCostAnswerOrRefuseEveryRequestAndTheGatewaySeesTenantsAndPriorities()
      throws Exception {
    JsonNode r = run();
    assertThat(r.path("nothing_lost").asBoolean()).isTrue();
    assertThat(r.path("unloaded").path("label").asText()).isEqualTo("unloaded fifo");
    checkRun(r.path("unloaded"));
    assertThat(r.path("unloaded").path("answered").asInt()).isEqualTo(24);
    JsonNode modes = r.path("modes");
    assertThat(modes).hasSize(2);
    assertThat(modes.get(0).path("mode").asText()).isEqualTo("fifo");
    assertThat(modes.get(1).path("mode").asText()).isEqualTo("fair-cost");
    assertThat(r.path("no_heavy")).isEmpty();
    for (JsonNode m : modes) checkRun(m);
    JsonNode fifo = modes.get(0);
    assertThat(fifo.path("answered").asInt()).as("fifo answers all").isEqualTo(24);
    assertThat(fifo.path("waited").asInt()).as("fifo never queues").isZero();
    JsonNode fair = modes.get(1);
    assertThat(fair.path("waited").asInt()).as("fair-cost queued").isPositive();
    assertThat(fair.path("refused_429").asInt()).as("fair-cost refused the burst").isPositive();
    assertThat(fair.path("high_priority_p90_over_unloaded").isNumber()).isTrue();

    JsonNode live = r.path("live").path("runs");
    assertThat(live).hasSize(3);
    assertThat(live.get(2).path("label").asText()).isEqualTo("fair-cost");
    for (JsonNode run : live) {
      assertThat(run.path("index_equal").asBoolean()).isTrue();
      assertThat(run.path("gateway_refused_by_band_tenant"))
          .as(run.path("label").asText() + ": the gateway counts each refusal's band and tenant")
          .isEqualTo(run.path("client_refused_by_band_tenant"));
    }
    JsonNode fairLive = live.get(2);
    Set<String> possible = Set.of("high/t0", "high/t1", "normal/t0", "normal/t1");
    Set<String> refused = keys(fairLive.path("gateway_refused_by_band_tenant"));
    Set<String> queued = keys(fairLive.path("queued_by_band_tenant"));
    assertThat(refused).isNotEmpty().isSubsetOf(possible);
    assertThat(queued).isNotEmpty().isSubsetOf(possible);
    long refusedSum = 0;
    for (JsonNode v : fairLive.path("gateway_refused_by_band_tenant")) refusedSum += v.asLong();
    assertThat(refusedSum).isEqualTo(fair.path("refused_429").asLong());
  }

  @Test
  void withEvictionTheGatewayEvictsOnlyTheNormalBandAndLosesNothing() throws Exception {
    JsonNode r = run("--evict-lower-bands");
    assertThat(r.path("nothing_lost").asBoolean()).isTrue();
    assertThat(r.path("admission").path("max_evictions").asInt()).isEqualTo(1);
    JsonNode fair = r.path("modes").get(1);
    checkRun(fair);
    JsonNode live = r.path("live").path("runs");
    // fifo has no queue: nothing to evict for; fair-cost evicts (if at all, as the wall clock
    // has it) only normal-band requests, which the client then sees answered or refused
    assertThat(live.get(1).path("gateway_evicted_by_band_tenant")).isEmpty();
    assertThat(keys(live.get(2).path("gateway_evicted_by_band_tenant")))
        .isSubsetOf(Set.of("normal/t0", "normal/t1"));
  }

  @Test
  void theGatewayRefusesATenantOverItsTokenRateAndCountsWhatTheClientSaw() throws Exception {
    // t0's bucket holds 1 token: its first request (1,024 prompt tokens) passes and leaves it
    // 1,000+ tokens in debt, which at 1 token per model second (a few per wall second) outlasts
    // the trace by minutes of wall time even on a loaded machine, so every later t0 request is
    // refused at once; t1 is not limited
    JsonNode r = run("--tenant-token-rate", "t0=1", "--tenant-token-burst", "1s");
    assertThat(r.path("admission").path("tenant_token_rate").path("t0").asDouble()).isEqualTo(1);
    JsonNode unloaded = r.path("unloaded");
    checkRun(unloaded);
    assertThat(unloaded.path("refused_rate_limit").asInt()).isZero();
    JsonNode liveRuns = r.path("live").path("runs");
    int i = 1;
    for (JsonNode m : r.path("modes")) {
      checkRun(m);
      String label = m.path("label").asText();
      JsonNode t0 = m.path("tenants").get(0);
      JsonNode t1 = m.path("tenants").get(1);
      int t0Refused = t0.path("rate_refused_high").asInt() + t0.path("rate_refused_normal").asInt();
      // an answered request is settled, not given back: the debt outlasts the trace, so t0 is
      // answered at most once
      assertThat(t0.path("answered").asInt()).as(label).isLessThanOrEqualTo(1);
      if (label.equals("fifo")) {
        // no queue: the first request passes and is answered, every later one is refused
        assertThat(t0Refused).as(label).isEqualTo(t0.path("sent").asInt() - 1);
        assertThat(t0.path("answered").asInt()).as(label).isEqualTo(1);
      } else {
        // a request the queue refuses gets its charge back, so the next one may pass the bucket
        // (and wait in turn): how many the rate refuses depends on the queue's timing. When none
        // of t0's requests is among the few the queue takes in (busy machine: the burst's order
        // shifts), every one of them is refused queue_full and the rate refuses none; so only
        // the bound is fixed here, and the gateway's own count must equal the client's (below)
        assertThat(t0Refused)
            .as(label)
            .isBetween(0, t0.path("sent").asInt() - t0.path("answered").asInt());
      }
      assertThat(t1.path("rate_refused_high").asInt() + t1.path("rate_refused_normal").asInt())
          .as(label)
          .isZero();
      assertThat(m.path("refused_rate_limit").asInt()).as(label).isEqualTo(t0Refused);
      // the gateway counted the same refusals, under the same tenant
      JsonNode live = liveRuns.get(i++);
      assertThat(live.path("label").asText()).isEqualTo(label);
      assertThat(live.path("gateway_rate_limited_by_tenant").path("t0").asLong())
          .as(label)
          .isEqualTo(t0Refused);
      assertThat(live.path("gateway_rate_limited_by_tenant").has("t1")).as(label).isFalse();
    }
  }

  @Test
  void fairTokensAndPoliciesAreRefusedBeforeAnythingStarts() {
    for (String[] bad :
        List.of(
            new String[] {"--admission", "fair-tokens"},
            new String[] {"--admission", "fifo", "--policies", "kv"},
            new String[] {"--admission", "fifo", "--load-factor", "2", "--speedup", "3"},
            new String[] {"--admission", "lifo"},
            // simulated only: the live bench refuses them rather than ignore them
            new String[] {"--admission", "fifo", "--cached-tenant-prefix", "8"})) {
      List<String> args = new ArrayList<>(List.of("bench", "fleet", "--in-process"));
      args.addAll(List.of(bad));
      StringWriter out = new StringWriter();
      StringWriter err = new StringWriter();
      int rc = Main.run(new PrintWriter(out), new PrintWriter(err), args.toArray(String[]::new));
      assertThat(rc).as(String.join(" ", bad) + ": " + err).isEqualTo(2);
      assertThat(err.toString()).startsWith("kvrouter bench fleet: ");
    }
  }
}
