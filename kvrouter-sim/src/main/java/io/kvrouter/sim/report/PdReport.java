package io.kvrouter.sim.report;

import io.kvrouter.sim.PdSimulation;
import java.io.PrintWriter;
import java.util.List;
import java.util.Locale;

/** The disaggregation comparison ({@link PdSimulation}) as a table or as JSON. */
public final class PdReport {
  private PdReport() {}

  public static void print(
      String traceName, PdSimulation.Config c, List<PdSimulation.Result> results, PrintWriter out) {
    out.printf(
        Locale.ROOT,
        "trace: %s, %d requests, speedup %s; aggregated: %d engines; disaggregated and"
            + " conditional: %d prefill + %d decode engines%n",
        traceName,
        results.get(0).requests(),
        num(c.speedup()),
        c.prefillWorkers() + c.decodeWorkers(),
        c.prefillWorkers(),
        c.decodeWorkers());
    out.printf(
        Locale.ROOT,
        "transfer: %s ms + %s ms per block pulled; conditional rule: fewer than %d uncached"
            + " tokens on the best decode engine -> served whole there%n%n",
        num(c.transferBaseMs()),
        num(c.transferMsPerBlock()),
        c.minUncachedTokens());
    out.printf(
        Locale.ROOT,
        "%-14s %9s %27s %27s %12s %8s %9s%n",
        "fleet",
        "handed",
        "TTFT p50 / p90 / p99 ms",
        "ITL mean / p90 / p99 ms",
        "tokens/s",
        "hit",
        "pulled");
    for (PdSimulation.Result r : results) {
      out.printf(
          Locale.ROOT,
          "%-14s %8.1f%% %27s %27s %12.0f %7.1f%% %9d%n",
          r.mode().label,
          100.0 * r.handedOver() / Math.max(1, r.requests()),
          String.format(Locale.ROOT, "%.0f / %.0f / %.0f", r.ttft(50), r.ttft(90), r.ttft(99)),
          String.format(Locale.ROOT, "%.1f / %.1f / %.1f", r.itlMean(), r.itl(90), r.itl(99)),
          r.throughput(),
          100 * r.hitRate(),
          r.pulledBlocks());
    }
    out.println();
    out.println(
        "handed: requests prefilled on a prefill engine and handed over; hit: prompt tokens"
            + " cached on the engine that prefilled them; pulled: KV blocks moved to decode"
            + " engines. Every router index was checked against its engines' caches.");
  }

  public static String json(
      String traceName, PdSimulation.Config c, List<PdSimulation.Result> results) {
    StringBuilder b = new StringBuilder();
    b.append("{\"trace\":\"").append(traceName.replace("\\", "\\\\").replace("\"", "\\\""));
    b.append("\",\"prefill_workers\":").append(c.prefillWorkers());
    b.append(",\"decode_workers\":").append(c.decodeWorkers());
    b.append(",\"transfer_base_ms\":").append(num(c.transferBaseMs()));
    b.append(",\"transfer_ms_per_block\":").append(num(c.transferMsPerBlock()));
    b.append(",\"min_uncached_tokens\":").append(c.minUncachedTokens());
    b.append(",\"fleets\":[");
    for (int i = 0; i < results.size(); i++) {
      PdSimulation.Result r = results.get(i);
      if (i > 0) b.append(',');
      b.append("{\"fleet\":\"").append(r.mode().label).append('"');
      b.append(",\"requests\":").append(r.requests());
      b.append(",\"completed\":").append(r.completed());
      b.append(",\"rejected\":").append(r.rejected());
      b.append(",\"handed_over\":").append(r.handedOver());
      b.append(",\"ttft_ms\":{\"p50\":").append(num(r.ttft(50)));
      b.append(",\"p90\":").append(num(r.ttft(90)));
      b.append(",\"p99\":").append(num(r.ttft(99))).append('}');
      b.append(",\"itl_ms\":{\"mean\":").append(num(r.itlMean()));
      b.append(",\"p90\":").append(num(r.itl(90)));
      b.append(",\"p99\":").append(num(r.itl(99))).append('}');
      b.append(",\"output_tokens_per_s\":").append(num(r.throughput()));
      b.append(",\"hit_rate\":").append(num(r.hitRate()));
      b.append(",\"pulled_blocks\":").append(r.pulledBlocks());
      b.append(",\"makespan_s\":").append(num(r.makespanSec()));
      b.append(",\"verified\":").append(r.verification().ok());
      b.append('}');
    }
    return b.append("]}").toString();
  }

  private static String num(double v) {
    if (Double.isNaN(v) || Double.isInfinite(v)) return "null";
    return String.format(Locale.ROOT, "%.4f", v).replaceAll("0+$", "").replaceAll("\\.$", "");
  }
}
