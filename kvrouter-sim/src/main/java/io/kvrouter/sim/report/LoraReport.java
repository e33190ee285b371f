package io.kvrouter.sim.report;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.kvrouter.sim.LoraSimulation;
import io.kvrouter.sim.SimConfig;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.Locale;

/** {@code simulate --lora-adapters}: the comparison as a table or as JSON. */
public final class LoraReport {
  private LoraReport() {}

  public static void print(LoraSimulation.Comparison c, PrintWriter out) {
    SimConfig cfg = c.cfg();
    LoraSimulation.Mix m = c.mix();
    int top = 0;
    int total = 0;
    for (int n : c.requestsPerAdapter()) {
      top = Math.max(top, n);
      total += n;
    }
    out.printf(
        Locale.ROOT,
        "kvrouter simulate --lora-adapters: %s, %,d requests, %d engines x %d rank(s) of %,d"
            + " blocks, speedup %.2f%n",
        c.trace(),
        c.aware().requests(),
        cfg.workers(),
        cfg.dpSize(),
        cfg.gpuBlocks(),
        cfg.speedup());
    out.printf(
        Locale.ROOT,
        "adapters: %d, Zipf s=%s (most requested: %.1f%% of requests), --max-loras %d, load %s ms;"
            + " placement cost: load %s, eviction %s%n%n",
        m.adapters(),
        num(m.zipf()),
        total == 0 ? 0.0 : 100.0 * top / total,
        m.maxLoras(),
        num(m.loadMs()),
        num(m.cost().loadCost()),
        num(m.cost().evictionCost()));
    out.printf(
        Locale.ROOT,
        "%-14s %9s %9s %14s %10s %10s %10s%n",
        "routing",
        "completed",
        "hit rate",
        "loads/1k req",
        "TTFT mean",
        "TTFT p50",
        "TTFT p99");
    for (LoraSimulation.Result r : new LoraSimulation.Result[] {c.aware(), c.blind()}) {
      out.printf(
          Locale.ROOT,
          "%-14s %9d %8.1f%% %14.1f %8.0fms %8.0fms %8.0fms%n",
          r.label(),
          r.completed(),
          100 * r.hitRate(),
          r.loadsPer1000(),
          r.meanTtftMs(),
          r.ttftQuantileMs(0.5),
          r.ttftQuantileMs(0.99));
    }
    out.printf(
        Locale.ROOT,
        "%nadapter loads: %s fewer with lora-aware routing (%d vs %d)%n",
        Double.isInfinite(c.loadReduction())
            ? "all"
            : String.format(Locale.ROOT, "%.1fx", c.loadReduction()),
        c.aware().adapterLoads(),
        c.blind().adapterLoads());
    out.printf(
        Locale.ROOT,
        "wall time: %.1f s + %.1f s%n",
        c.aware().wallNanos() / 1e9,
        c.blind().wallNanos() / 1e9);
  }

  public static String json(LoraSimulation.Comparison c) {
    StringWriter w = new StringWriter();
    try (JsonGenerator g = new JsonFactory().createGenerator(w)) {
      g.useDefaultPrettyPrinter();
      g.writeStartObject();
      g.writeStringField("trace", c.trace());
      g.writeNumberField("workers", c.cfg().workers());
      g.writeNumberField("speedup", c.cfg().speedup());
      LoraSimulation.Mix m = c.mix();
      g.writeObjectFieldStart("lora");
      g.writeNumberField("adapters", m.adapters());
      g.writeNumberField("zipf", m.zipf());
      g.writeNumberField("max_loras", m.maxLoras());
      g.writeNumberField("load_ms", m.loadMs());
      g.writeNumberField("load_cost", m.cost().loadCost());
      g.writeNumberField("eviction_cost", m.cost().evictionCost());
      g.writeArrayFieldStart("requests_per_adapter");
      for (int n : c.requestsPerAdapter()) g.writeNumber(n);
      g.writeEndArray();
      g.writeEndObject();
      g.writeArrayFieldStart("runs");
      for (LoraSimulation.Result r : new LoraSimulation.Result[] {c.aware(), c.blind()}) {
        g.writeStartObject();
        g.writeStringField("routing", r.label());
        g.writeNumberField("requests", r.requests());
        g.writeNumberField("completed", r.completed());
        g.writeNumberField("hit_rate", r.hitRate());
        g.writeNumberField("adapter_loads", r.adapterLoads());
        g.writeNumberField("loads_per_1000", r.loadsPer1000());
        g.writeNumberField("ttft_mean_ms", r.meanTtftMs());
        g.writeNumberField("ttft_p50_ms", r.ttftQuantileMs(0.5));
        g.writeNumberField("ttft_p99_ms", r.ttftQuantileMs(0.99));
        g.writeNumberField("wall_s", r.wallNanos() / 1e9);
        g.writeEndObject();
      }
      g.writeEndArray();
      double red = c.loadReduction();
      if (Double.isInfinite(red)) g.writeNullField("load_reduction");
      else g.writeNumberField("load_reduction", red);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return w.toString();
  }

  private static String num(double v) {
    return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
  }
}
