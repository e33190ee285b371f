package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.harness.FleetBench;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvrouter bench fleet} at CI size: 250 requests (50 conversations of 5 turns), 3 mock
 * engines behind the gateway, kv and round-robin (and approx, in-process), once in-process and once
 * as child processes. Each run must answer every request, kv must beat round-robin on the hit rate
 * the engines report ({@code cached_tokens}), every router index must equal its engine's cache at
 * the end, and no engine process may be left alive.
 *
 * <p>Each turn of a conversation repeats the previous prompt and adds two trace blocks; the
 * conversations come back in a new (seeded) order every turn, so round-robin sends a turn to the
 * engine of the conversation's previous turn about one time in three, whatever the arrival order's
 * jitter; kv follows the cached prefix. Measured: kv 55 % and round-robin 43 % in-process, 50 % and
 * 43 % as processes (the engines' JVMs start cold). Prefill is made cheap and the timing scaled 4x,
 * so a policy takes a few seconds and the fleet stays far from saturation on two shared cores.
 */
class FleetBenchTest {
  @TempDir static Path dir;
  static Path trace;

  @BeforeAll
  static void writeTrace() throws Exception {
    int conversations = 50;
    int turns = 5;
    List<String> lines = new ArrayList<>();
    long nextId = 1;
    List<List<Long>> ids = new ArrayList<>();
    for (int c = 0; c < conversations; c++) ids.add(new ArrayList<>(List.of(0L)));
    Random rnd = new Random(1);
    for (int t = 0; t < turns; t++) {
      List<Integer> order = new ArrayList<>();
      for (int c = 0; c < conversations; c++) order.add(c);
      Collections.shuffle(order, rnd);
      for (int k = 0; k < conversations; k++) {
        List<Long> h = ids.get(order.get(k));
        h.add(nextId++);
        h.add(nextId++);
        int input = h.size() * 512 - 412;
        lines.add(
            "{\"timestamp\":"
                + (t * 3000 + k * 60)
                + ",\"input_length\":"
                + input
                + ",\"output_length\":4,\"hash_ids\":"
                + h.toString().replace(" ", "")
                + "}");
      }
    }
    trace = dir.resolve("conversations.jsonl");
    Files.write(trace, lines);
  }

  private static JsonNode run(String policies, String... extra) throws Exception {
    List<String> args =
        new ArrayList<>(
            List.of(
                "bench",
                "fleet",
                "--trace",
                trace.toString(),
                "--engines",
                "3",
                "--policies",
                policies,
                "--speedup",
                "1",
                "--time-scale",
                "4",
                "--prefill-ms-per-1k-tokens",
                "10",
                "--json"));
    args.addAll(List.of(extra));
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int rc = Main.run(new PrintWriter(out), new PrintWriter(err), args.toArray(String[]::new));
    assertThat(rc).as("exit code; stderr: %s; stdout: %s", err, out).isZero();
    return new ObjectMapper().readTree(out.toString());
  }

  private static JsonNode policy(JsonNode r, String name) {
    for (JsonNode p : r.path("policies")) if (name.equals(p.path("policy").asText())) return p;
    throw new AssertionError("no policy " + name + " in " + r);
  }

  private static void checkRun(JsonNode r) {
    for (JsonNode p : r.path("policies")) {
      String name = p.path("policy").asText();
      assertThat(p.path("completed").asInt())
          .as(name + " completed; failed: " + p.path("failed_requests"))
          .isEqualTo(250);
      assertThat(p.path("errors").asInt()).as(name + " errors").isZero();
      assertThat(p.path("ttft_ms").path("count").asInt()).isEqualTo(250);
      // whether the run kept up is said, with its reasons when it did not (a busy machine may
      // not keep up: the test checks the verdict is consistent, not that it is yes)
      assertThat(p.path("valid").isBoolean()).as(name + " valid").isTrue();
      assertThat(p.path("invalid_reasons").isEmpty())
          .as(name + " reasons " + p.path("invalid_reasons"))
          .isEqualTo(p.path("valid").asBoolean());
      assertThat(p.path("sent_late_wall_ms").path("count").asInt()).isEqualTo(250);
      assertThat(p.path("tpot_ms").path("count").asInt()).isPositive();
      assertThat(p.path("tpot_ms").path("p50").asDouble()).as(name + " TPOT").isPositive();
      if (name.equals("approx")) {
        // no events reach an approximate router: nothing to check against the caches
        assertThat(p.path("index_checked").asBoolean()).isFalse();
        assertThat(p.path("events_applied").asLong()).isZero();
        assertThat(p.path("predicted_hit_rate").asDouble()).as("approx predicts").isPositive();
        continue;
      }
      assertThat(p.path("index_equal").asBoolean())
          .as(name + " index equals caches: " + p.path("index_problems"))
          .isTrue();
      assertThat(p.path("blocks_compared").asLong()).as(name + " blocks compared").isPositive();
      assertThat(p.path("events_applied").asLong()).as(name + " events applied").isPositive();
      assertThat(p.path("event_lag_wall_ms").path("count").asInt()).as(name + " lags").isPositive();
      // the router's own lag, publish to applied: measured, and never negative
      assertThat(p.path("router_event_lag_mean_wall_ms").isNumber())
          .as(name + " router lag")
          .isTrue();
      assertThat(p.path("router_event_lag_mean_wall_ms").asDouble()).isGreaterThanOrEqualTo(0);
    }
    double kv = policy(r, "kv").path("hit_rate").asDouble();
    double rr = policy(r, "round-robin").path("hit_rate").asDouble();
    System.out.printf(
        "bench fleet (in_process %s): hit rate kv %.3f, round-robin %.3f%n",
        r.path("in_process").asBoolean(), kv, rr);
    // a run the bench judged invalid (a busy machine: requests sent or read late) measured the
    // machine as much as the policy, routing quality included (RunValidity): kv must still beat
    // round-robin, by the margin only when both runs were valid
    boolean valid =
        policy(r, "kv").path("valid").asBoolean()
            && policy(r, "round-robin").path("valid").asBoolean();
    assertThat(kv)
        .as("kv hit rate %.3f vs round-robin %.3f (runs valid: %s)", kv, rr, valid)
        .isGreaterThan(valid ? rr + 0.03 : rr);
  }

  @Test
  void inProcessKvBeatsRoundRobinAndIndexesEqualCaches() throws Exception {
    Path report = dir.resolve("fleet.html");
    checkRun(run("kv,round-robin,approx", "--in-process", "--report", report.toString()));
    String html = Files.readString(report);
    assertThat(html).startsWith("<!DOCTYPE html>").doesNotContain("<script").contains("<svg");
    // one hit-rate bar and one TTFT curve per policy
    assertThat(html.split("<rect class=\"bar\"", -1)).hasSize(4);
    assertThat(html.split("<polyline class=\"cdf\"", -1)).hasSize(4);
  }

  @Test
  void engineProcessesKvBeatsRoundRobinAndNoProcessIsLeft() throws Exception {
    JsonNode r = run("kv,round-robin", "--no-report");
    checkRun(r);
    long self = ProcessHandle.current().pid();
    int pids = 0;
    for (JsonNode p : r.path("policies")) {
      for (JsonNode pid : p.path("engine_pids")) {
        pids++;
        assertThat(pid.asLong()).as("an engine in its own process").isNotEqualTo(self);
        assertThat(ProcessHandle.of(pid.asLong()).map(ProcessHandle::isAlive).orElse(false))
            .as("engine process " + pid + " still alive")
            .isFalse();
      }
    }
    assertThat(pids).isEqualTo(6);
    assertThat(FleetBench.processesLeft()).isZero();
  }

  /**
   * Two gateways sharing their requests in flight over a nats-server the command starts: every
   * request answered, both indexes equal to the engines' caches, every change of one gateway
   * applied once by the other (routed, prefill completed, freed: 3 per request), and no peer
   * request left in flight at the end.
   */
  @Test
  void twoSyncedGatewaysShareEveryRequestOnce() throws Exception {
    JsonNode r =
        run(
            "kv",
            "--in-process",
            "--gateways",
            "2",
            "--sync",
            "on",
            "--requests",
            "100",
            "--no-report");
    assertThat(r.path("gateways").asInt()).isEqualTo(2);
    assertThat(r.path("sync").asBoolean()).isTrue();
    JsonNode kv = policy(r, "kv");
    assertThat(kv.path("completed").asInt()).isEqualTo(100);
    assertThat(kv.path("index_equal").asBoolean())
        .as(kv.path("index_problems").toString())
        .isTrue();
    assertThat(kv.path("sync_settled").asBoolean()).isTrue();
    assertThat(kv.path("sync_changes_applied").asLong()).isEqualTo(3 * 100);
    assertThat(kv.path("load_imbalance").asDouble()).isGreaterThanOrEqualTo(1.0);
  }
}
