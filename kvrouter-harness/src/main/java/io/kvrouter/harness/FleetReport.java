package io.kvrouter.harness;

import static io.kvrouter.harness.Percentiles.pct;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvrouter.sim.trace.TracePrompts;
import java.io.PrintWriter;
import java.util.List;
import java.util.Locale;

/**
 * {@code bench fleet}'s results as a text table or a JSON document (the HTML report is {@link
 * FleetHtmlReport}).
 *
 * <pre>
 * Implementation notes
 *
 * Pure functions of the settings, the runs (read only) and simulate's JSON (or null without
 * --compare-simulate). The table: one row per policy (latencies in model time, event lags in wall
 * time), then per policy the sync figures (with synced gateways), index problems, the gateways'
 * failed attempts, error reasons and the first 20 failed requests; then live vs simulate. The
 * JSON: the setup, then one object per policy with every figure, latencies as p50/p90/p99/mean/
 * count, the engines' pids and simulate's result for the policy under "simulate". Field names
 * are what scripts read: keep them.
 * </pre>
 */
final class FleetReport {
  private static final ObjectMapper JSON = new ObjectMapper();

  private FleetReport() {}

  static void printTable(
      PrintWriter out, FleetBench.Settings s, List<PolicyRun> runs, JsonNode sim) {
    out.println();
    out.println(
        "times are model time (wall time x "
            + num(s.timeScale())
            + "), but the event lags are wall time: engine publish -> a subscriber beside the"
            + " router (p50/p99), and publish -> applied in the router (its mean)");
    out.printf(
        Locale.ROOT,
        "%-13s %6s %6s %9s %9s %9s %9s %9s %9s %9s %9s %8s %10s %9s %11s %11s %8s%n",
        "policy",
        "done",
        "errors",
        "hit rate",
        "predicted",
        "imbalance",
        "TTFT p50",
        "p90",
        "p99",
        "TPOT p50",
        "e2e p50",
        "req/s",
        "out tok/s",
        "events",
        "lag p50/p99",
        "router lag",
        "index");
    for (PolicyRun r : runs) {
      out.printf(
          Locale.ROOT,
          "%-13s %6d %6d %8.1f%% %8.1f%% %9.2f %9s %9s %9s %9s %9s %8.2f %,10.0f %,9d %11s %11s"
              + " %8s%n",
          r.policy,
          r.completed,
          r.errors,
          100 * r.hitRate(),
          100 * r.predictedRate(),
          r.imbalance,
          ms(pct(r.ttftMs, 50)),
          ms(pct(r.ttftMs, 90)),
          ms(pct(r.ttftMs, 99)),
          ms(pct(r.tpotMs, 50)),
          ms(pct(r.e2eMs, 50)),
          r.requestsPerSec(),
          r.outputTokensPerSec(),
          r.eventsApplied,
          String.format(Locale.ROOT, "%.0f/%.0f ms", pct(r.lagMs, 50), pct(r.lagMs, 99)),
          r.routerLagMs < 0 ? "n/a" : String.format(Locale.ROOT, "%.1f ms", r.routerLagMs),
          !r.indexChecked ? "n/a" : r.indexProblems.isEmpty() ? "equal" : "DIFFERS");
    }
    if (s.synced()) {
      for (PolicyRun r : runs) {
        out.printf(
            Locale.ROOT,
            "  %s: sequence sync applied %,d peer changes, mean lag %.1f ms (wall), %s%n",
            r.policy,
            r.syncApplied,
            r.syncLagMs,
            r.syncSettled
                ? "no peer request left at the end"
                : "PEER REQUESTS LEFT IN FLIGHT at the end");
      }
    }
    for (PolicyRun r : runs) {
      out.println(
          "  "
              + r.policy
              + ": kept up: "
              + keptUp(r)
              + (r.invalid.isEmpty() ? "" : "; INVALID RUN (its figures are the machine's):"));
      for (String why : r.invalid) out.println("    - " + why);
    }
    for (PolicyRun r : runs) {
      for (String p : r.indexProblems) out.println("  " + r.policy + ": " + p);
      if (!r.attemptFailures.isEmpty() || r.staleResends > 0) {
        out.println(
            "  "
                + r.policy
                + ": gateway: attempts failed before the first byte "
                + r.attemptFailures
                + ", requests resent after a pooled connection expired: "
                + r.staleResends);
      }
      r.errorReasons.forEach((why, n) -> out.println("  " + r.policy + ": " + n + " x " + why));
      for (int f = 0; f < Math.min(r.failed.size(), 20); f++) {
        out.println("    " + r.failed.get(f));
      }
      if (r.failed.size() > 20) out.println("    ... " + (r.failed.size() - 20) + " more (--json)");
    }
    if (sim != null) {
      out.println();
      out.println("live vs simulate (same trace, fleet and timing model):");
      out.printf(
          Locale.ROOT,
          "%-13s %18s %22s %22s %18s%n",
          "policy",
          "hit rate",
          "TTFT p50",
          "TTFT p90",
          "req/s");
      for (PolicyRun r : runs) {
        JsonNode p = SimulateComparison.policy(sim, r.policy);
        if (p == null) continue;
        out.printf(
            Locale.ROOT,
            "%-13s %7.1f%% / %5.1f%% %10s / %9s %10s / %9s %7.2f / %7.2f%n",
            r.policy,
            100 * r.hitRate(),
            100 * p.path("hit_rate").asDouble(),
            ms(pct(r.ttftMs, 50)),
            ms(p.path("ttft_ms").path("p50").asDouble()),
            ms(pct(r.ttftMs, 90)),
            ms(p.path("ttft_ms").path("p90").asDouble()),
            r.requestsPerSec(),
            p.path("requests_per_s").asDouble());
      }
    }
  }

  static ObjectNode toJson(
      FleetBench.Settings s, TracePrompts prompts, List<PolicyRun> runs, JsonNode sim) {
    ObjectNode root = JSON.createObjectNode();
    root.put("trace", prompts.name());
    root.put("requests", prompts.size());
    root.put("engines", s.engines());
    root.put("in_process", s.inProcess());
    root.put("gpu_blocks", s.gpuBlocks());
    root.put("block_size", s.blockSize());
    root.put("speedup", s.speedup());
    root.put("time_scale", s.timeScale());
    root.put("max_output_tokens", s.maxOutputTokens());
    root.put("gateways", s.gateways());
    root.put("sync", s.synced());
    root.put("valid", runs.stream().allMatch(r -> r.invalid.isEmpty()));
    ArrayNode ps = root.putArray("policies");
    for (PolicyRun r : runs) {
      ObjectNode o = ps.addObject();
      o.put("policy", r.policy);
      o.put("sent", r.sent);
      o.put("completed", r.completed);
      o.put("errors", r.errors);
      ObjectNode reasons = o.putObject("error_reasons");
      r.errorReasons.forEach(reasons::put);
      ArrayNode failed = o.putArray("failed_requests");
      r.failed.forEach(failed::add);
      ObjectNode af = o.putObject("gateway_attempt_failures");
      r.attemptFailures.forEach(af::put);
      o.put("gateway_stale_connection_resends", r.staleResends);
      o.put("prompt_tokens", r.promptTokens);
      o.put("cached_tokens", r.cachedTokens);
      o.put("hit_rate", r.hitRate());
      o.put("predicted_hit_rate", r.predictedRate());
      o.put("load_imbalance", r.imbalance);
      if (s.synced()) {
        o.put("sync_changes_applied", r.syncApplied);
        o.put("sync_lag_mean_wall_ms", r.syncLagMs);
        o.put("sync_settled", r.syncSettled);
      }
      o.put("output_tokens", r.outputTokens);
      pcts(o.putObject("ttft_ms"), r.ttftMs);
      pcts(o.putObject("itl_ms"), r.itlMs);
      pcts(o.putObject("tpot_ms"), r.tpotMs);
      pcts(o.putObject("e2e_ms"), r.e2eMs);
      o.put("requests_per_sec", r.requestsPerSec());
      o.put("output_tokens_per_sec", r.outputTokensPerSec());
      o.put("events_applied", r.eventsApplied);
      pcts(o.putObject("event_lag_wall_ms"), r.lagMs);
      if (r.routerLagMs >= 0) o.put("router_event_lag_mean_wall_ms", r.routerLagMs);
      else o.putNull("router_event_lag_mean_wall_ms");
      o.put("index_settle_wall_ms", r.settleMs);
      o.put("index_checked", r.indexChecked);
      o.put("index_equal", r.indexChecked && r.indexProblems.isEmpty());
      o.put("blocks_compared", r.blocksCompared);
      ArrayNode pr = o.putArray("index_problems");
      r.indexProblems.forEach(pr::add);
      ArrayNode pids = o.putArray("engine_pids");
      r.pids.forEach(pids::add);
      o.put("wall_seconds", r.wallSec);
      o.put("valid", r.invalid.isEmpty());
      ArrayNode inv = o.putArray("invalid_reasons");
      r.invalid.forEach(inv::add);
      pcts(o.putObject("sent_late_wall_ms"), r.sendLateMs);
      o.put("token_gaps", r.tokenGaps);
      o.put("token_gaps_in_bursts", r.burstGaps);
      o.put("replays_abandoned", r.replaysAbandoned);
      o.put("event_batches_lost", r.eventsLost);
      if (r.cpu != null) {
        o.put("machine_cpu_busy", r.cpu.busy());
        o.put("machine_cpu_steal", r.cpu.steal());
      } else {
        o.putNull("machine_cpu_busy");
        o.putNull("machine_cpu_steal");
      }
      JsonNode p = SimulateComparison.policy(sim, r.policy);
      if (p != null) o.set("simulate", p);
    }
    return root;
  }

  /** The run's pace figures in one line: sent late, streams read late, events, the machine. */
  static String keptUp(PolicyRun r) {
    return String.format(
            Locale.ROOT,
            "sent late p99 %.0f ms (wall), token gaps read in bursts %s, ",
            pct(r.sendLateMs, 99),
            r.tokenGaps == 0
                ? "-"
                : String.format(Locale.ROOT, "%.1f %%", 100.0 * r.burstGaps / r.tokenGaps))
        + (r.replaysAbandoned < 0
            ? "replays n/a"
            : r.replaysAbandoned + " replay(s) abandoned, " + r.eventsLost + " batch(es) lost")
        + (r.cpu == null
            ? ", machine CPU unknown"
            : String.format(
                Locale.ROOT,
                ", machine CPU %.0f %% busy, %.1f %% steal",
                100 * r.cpu.busy(),
                100 * r.cpu.steal()));
  }

  private static void pcts(ObjectNode o, double[] sorted) {
    o.put("p50", pct(sorted, 50));
    o.put("p90", pct(sorted, 90));
    o.put("p99", pct(sorted, 99));
    double sum = 0;
    for (double v : sorted) sum += v;
    o.put("mean", sorted.length == 0 ? Double.NaN : sum / sorted.length);
    o.put("count", sorted.length);
  }

  /** Milliseconds as the table shows them: "12 ms", "1.25 s", "-" for NaN. */
  static String ms(double v) {
    if (Double.isNaN(v)) return "-";
    return v >= 1000
        ? String.format(Locale.ROOT, "%.2f s", v / 1000)
        : String.format(Locale.ROOT, "%.0f ms", v);
  }

  /** A number as given on the command line: "2", "0.5". */
  static String num(double v) {
    return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
  }
}
