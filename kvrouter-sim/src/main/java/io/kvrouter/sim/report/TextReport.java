package io.kvrouter.sim.report;

import io.kvrouter.sim.Policy;
import io.kvrouter.sim.PolicyResult;
import io.kvrouter.sim.PooledCeiling;
import io.kvrouter.sim.SimConfig;
import io.kvrouter.sim.SimulationResult;
import io.kvrouter.sim.Verification;
import java.io.PrintWriter;
import java.util.Locale;

/**
 * The human-readable summary of a {@code simulate} run: one table row per policy, then verdicts.
 */
public final class TextReport {
  private TextReport() {}

  public static void print(SimulationResult s, PrintWriter out) {
    SimConfig c = s.config();
    out.printf(
        Locale.ROOT,
        "kvrouter simulate: %s, %,d requests over %s simulated (speedup %s)%n",
        s.trace(),
        s.requests(),
        duration(s.traceSpanSec()),
        num(c.speedup()));
    out.printf(
        Locale.ROOT,
        "fleet: %d workers%s x %,d KV blocks of %d tokens; prefill %s ms + %s ms per 1k uncached"
            + " tokens, decode %s ms/token, batch %d; event delay %s ms%s%s%n%n",
        c.workers(),
        c.dpSize() > 1 ? " x " + c.dpSize() + " dp ranks" : "",
        c.gpuBlocks(),
        c.blockSize(),
        num(c.timing().prefillBaseMs()),
        num(c.timing().prefillMsPer1kTokens()),
        num(c.timing().decodeMsPerToken()),
        c.timing().maxBatch(),
        num(c.eventDelayMs()),
        c.jsonEvents() ? " (as JSON)" : "",
        c.removedEvents().perBlock() ? "; one Removed event per evicted block" : "");
    out.printf(
        Locale.ROOT,
        "%-13s %8s %8s %9s %9s %9s %7s %8s %9s %8s %11s%n",
        "policy",
        "requests",
        "hit rate",
        "TTFT p50",
        "p90",
        "p99",
        "req/s",
        "out tok/s",
        "imbalance",
        "prefill",
        "events");
    for (PolicyResult r : s.policies()) {
      out.printf(
          Locale.ROOT,
          "%-13s %8s %7.1f%% %9s %9s %9s %7.2f %8.0f %9.2f %7.0f%% %,11d%n",
          r.policy().cliName(),
          String.format(Locale.ROOT, "%,d", r.completed()),
          100 * r.hitRate(),
          ms(r.ttftPercentile(50)),
          ms(r.ttftPercentile(90)),
          ms(r.ttftPercentile(99)),
          r.requestsPerSec(),
          r.outputTokensPerSec(),
          r.imbalance(),
          100 * r.meanPrefillUtilisation(),
          r.eventsApplied());
    }
    if (c.hybrid()) prediction(s, out);
    PooledCeiling p = s.pooled();
    out.printf(
        Locale.ROOT,
        "%-13s %8s %7.1f%%   (one LRU cache of %,d blocks, all ranks' capacity, in arrival order)%n",
        "pooled",
        "",
        100 * p.hitRate(),
        p.capacityBlocks());
    out.println();
    out.println(
        "hit rate = prompt tokens found in the chosen rank's cache / prompt tokens; TTFT in"
            + " simulated time; imbalance = busiest rank's mean requests in flight / the mean;"
            + " prefill = mean prefill-lane utilisation; events = KV events applied to the index.");
    for (PolicyResult r : s.policies()) {
      if (r.rejected() > 0) {
        out.printf(
            Locale.ROOT,
            "%s: %,d requests never fit a rank's %,d blocks and were dropped.%n",
            r.policy().cliName(),
            r.rejected(),
            c.gpuBlocks());
      }
    }
    PolicyResult kv = s.of(Policy.KV);
    if (kv != null) {
      StringBuilder sb = new StringBuilder();
      sb.append(
          String.format(
              Locale.ROOT,
              "kv reaches %.1f%% of the pooled ceiling's hit rate at load imbalance %.2f",
              p.hitRate() == 0 ? 100.0 : 100 * kv.hitRate() / p.hitRate(),
              kv.imbalance()));
      PolicyResult rr = s.of(Policy.ROUND_ROBIN);
      if (rr != null) {
        sb.append(
            String.format(
                Locale.ROOT,
                "; its p90 TTFT is %.1fx lower than round-robin's (%s vs %s)",
                rr.ttftPercentile(90) / kv.ttftPercentile(90),
                ms(kv.ttftPercentile(90)),
                ms(rr.ttftPercentile(90))));
      }
      out.println(sb.append('.'));
    }
    for (PolicyResult r : s.policies()) {
      Verification v = r.verification();
      if (!v.ok()) {
        out.printf(
            Locale.ROOT,
            "index %s caches: MISMATCH for %s:%n",
            c.maxBlocks() > 0 ? "within" : "equals",
            r.policy().cliName());
        for (String problem : v.problems()) out.println("  " + problem);
      }
    }
    if (s.verified() && !s.policies().isEmpty() && c.maxBlocks() > 0) {
      Verification v = s.policies().get(0).verification();
      out.printf(
          Locale.ROOT,
          "index within caches (--max-blocks %d): yes, for every policy (%d ranks each: no block"
              + " a cache lacks, and %,d prompts never over-counted on any rank).%n",
          c.maxBlocks(),
          v.ranks(),
          v.prompts());
    } else if (s.verified() && !s.policies().isEmpty()) {
      Verification v = s.policies().get(0).verification();
      out.printf(
          Locale.ROOT,
          "index equals caches: yes, for every policy (%d ranks each: same blocks per rank,"
              + " and %,d prompts scored exactly on every rank).%n",
          v.ranks(),
          v.prompts());
    }
  }

  /**
   * A hybrid model's prediction table: what each kv policy's router expected (at routing, and for
   * the chosen rank at admission) against what the engines served, as shares of prompt tokens.
   */
  private static void prediction(SimulationResult s, PrintWriter out) {
    out.printf(
        Locale.ROOT,
        "%nKV cache groups %s: predicted vs engine-reported hits (shares of prompt tokens)%n",
        s.config().kvGroups());
    out.printf(
        Locale.ROOT,
        "%-13s %9s %9s %12s %12s %12s%n",
        "policy",
        "hit rate",
        "routed",
        "|routed-hit|",
        "at admission",
        "|adm.-hit|");
    for (PolicyResult r : s.policies()) {
      PolicyResult.Prediction pr = r.prediction();
      if (pr == null || (r.policy() != Policy.KV && r.policy() != Policy.KV_MAIN)) continue;
      double prompt = Math.max(1, r.promptTokens());
      out.printf(
          Locale.ROOT,
          "%-13s %8.2f%% %8.2f%% %11.2f%% %11.2f%% %11.2f%%%n",
          r.policy().cliName(),
          100 * r.hitRate(),
          100 * r.routedHitRate(),
          100 * pr.routedErrorTokens() / prompt,
          100 * pr.admissionPredictedTokens() / prompt,
          100 * pr.admissionErrorTokens() / prompt);
    }
    out.println(
        "routed = the overlap the router expected when routing; at admission = what it scored the"
            + " chosen rank when the engine admitted the request; |x-hit| = the sum over requests"
            + " of the difference from the tokens the engine served.");
    out.println();
  }

  public static String ms(double ms) {
    if (Double.isNaN(ms)) return "-";
    if (ms < 1000) return String.format(Locale.ROOT, "%.0f ms", ms);
    if (ms < 100_000) return String.format(Locale.ROOT, "%.2f s", ms / 1000);
    return String.format(Locale.ROOT, "%.0f s", ms / 1000);
  }

  public static String num(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e15
        ? Long.toString((long) v)
        : String.format(Locale.ROOT, "%s", v);
  }

  public static String duration(double sec) {
    if (sec < 120) return String.format(Locale.ROOT, "%.0f s", sec);
    return String.format(Locale.ROOT, "%.1f min", sec / 60);
  }
}
