package io.kvrouter.harness;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.report.TextReport;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.DoubleUnaryOperator;

/**
 * JSON results and the SVG plot (achieved vs offered block ops/s, log-log) of {@code bench trace}.
 */
final class BenchTraceReport {
  private static final String[] COLORS = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};

  private BenchTraceReport() {}

  /** What the replay was run with, as the JSON report's {@code config} names it. */
  public record Setup(
      int workers,
      int gpuBlocks,
      int blockSize,
      RemovedEvents removedEvents,
      int eventThreads,
      int replayThreads,
      int jumpSize,
      long seed,
      double loadAverageBefore) {}

  public static String json(
      String trace, Setup cmd, WorkerTimelines tl, List<TraceReplay.Result> results) {
    StringWriter w = new StringWriter();
    try (JsonGenerator g = new JsonFactory().createGenerator(w)) {
      g.useDefaultPrettyPrinter();
      g.writeStartObject();
      g.writeStringField("trace", trace);
      g.writeObjectFieldStart("config");
      g.writeNumberField("workers", cmd.workers());
      g.writeNumberField("gpu_blocks", cmd.gpuBlocks());
      g.writeNumberField("block_size", cmd.blockSize());
      g.writeStringField("removed_events", cmd.removedEvents().cliName());
      g.writeNumberField("event_threads", cmd.eventThreads());
      g.writeNumberField("replay_threads", cmd.replayThreads());
      g.writeNumberField("jump_size", cmd.jumpSize());
      g.writeNumberField("seed", cmd.seed());
      g.writeNumberField("cores", Runtime.getRuntime().availableProcessors());
      if (cmd.loadAverageBefore() >= 0) {
        g.writeNumberField("load_average", cmd.loadAverageBefore());
      }
      g.writeStringField("java", System.getProperty("java.vm.version"));
      g.writeEndObject();
      g.writeObjectFieldStart("timelines");
      g.writeNumberField("requests", tl.requests);
      g.writeNumberField("request_blocks", tl.requestBlocks);
      g.writeNumberField("events", tl.events);
      g.writeNumberField("stored_blocks", tl.storedBlocks);
      g.writeNumberField("removed_blocks", tl.removedBlocks);
      g.writeNumberField("ops", tl.ops());
      g.writeNumberField("block_ops", tl.blockOps());
      g.writeEndObject();
      Map<IndexKind, List<TraceReplay.Result>> byKind = byKind(results);
      g.writeObjectFieldStart("results");
      for (Map.Entry<IndexKind, List<TraceReplay.Result>> e : byKind.entrySet()) {
        g.writeArrayFieldStart(e.getKey().cliName());
        for (TraceReplay.Result r : e.getValue()) {
          g.writeStartObject();
          g.writeNumberField("duration_ms", r.durationMs());
          if (r.durationMs() > 0) {
            g.writeNumberField("offered_ops_per_s", r.offeredOps());
            g.writeNumberField("offered_block_ops_per_s", r.offeredBlockOps());
          }
          g.writeNumberField("achieved_ops_per_s", r.achievedOps());
          g.writeNumberField("achieved_block_ops_per_s", r.achievedBlockOps());
          g.writeNumberField("find_matches_p50_us", r.p50Us());
          g.writeNumberField("find_matches_p99_us", r.p99Us());
          g.writeNumberField("find_matches_p999_us", r.p999Us());
          g.writeNumberField("find_matches_max_us", r.maxUs());
          g.writeNumberField("wall_ms", r.wallNanos() / 1e6);
          g.writeNumberField("cpu_ms", r.cpuNanos() / 1e6);
          g.writeNumberField("ops_per_cpu_s", r.opsPerCpuSecond());
          if (r.replayCpuNanos() >= 0) {
            g.writeNumberField("replay_threads_cpu_ms", r.replayCpuNanos() / 1e6);
            g.writeNumberField("event_lanes_cpu_ms", r.laneCpuNanos() / 1e6);
          }
          if (r.durationMs() > 0) g.writeBooleanField("kept_up", r.keptUp());
          g.writeBooleanField("index_equals_caches", r.verification().ok());
          g.writeEndObject();
        }
        g.writeEndArray();
      }
      g.writeEndObject();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return w.toString();
  }

  private static Map<IndexKind, List<TraceReplay.Result>> byKind(List<TraceReplay.Result> rs) {
    Map<IndexKind, List<TraceReplay.Result>> m = new LinkedHashMap<>();
    for (TraceReplay.Result r : rs) m.computeIfAbsent(r.kind(), k -> new ArrayList<>()).add(r);
    return m;
  }

  /** Achieved vs offered ops/s, log-log, with the identity line; one series per kind. */
  public static String svg(List<TraceReplay.Result> results) {
    final int w = 820;
    final int h = 600;
    final int left = 90;
    final int right = 200;
    final int top = 40;
    final int bottom = 60;
    double lo = Double.POSITIVE_INFINITY;
    double hi = 0;
    for (TraceReplay.Result r : results) {
      if (r.durationMs() == 0) continue;
      lo = Math.min(lo, Math.min(r.offeredOps(), r.achievedOps()));
      hi = Math.max(hi, Math.max(r.offeredOps(), r.achievedOps()));
    }
    if (hi == 0) {
      lo = 1;
      hi = 10;
    }
    final double a = Math.pow(10, Math.floor(Math.log10(lo)));
    final double b = Math.pow(10, Math.ceil(Math.log10(hi)));
    DoubleUnaryOperator x =
        v ->
            left
                + (Math.log10(v) - Math.log10(a))
                    / (Math.log10(b) - Math.log10(a))
                    * (w - left - right);
    DoubleUnaryOperator y =
        v ->
            (h - bottom)
                - (Math.log10(v) - Math.log10(a))
                    / (Math.log10(b) - Math.log10(a))
                    * (h - top - bottom);
    StringBuilder s = new StringBuilder();
    s.append(
        f(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0"
                + " %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            w, h, w, h));
    s.append(f("<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", w, h));
    s.append(
        f(
            "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">kvrouter bench"
                + " trace: achieved vs offered throughput</text>\n",
            (left + w - right) / 2));
    for (double d = a; d <= b * 1.0001; d *= 10) {
      for (int m = 1; m < 10; m++) {
        double v = d * m;
        if (v > b * 1.0001) break;
        String col = m == 1 ? "#bbb" : "#eee";
        s.append(
            f(
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"%s\"/>\n",
                x.applyAsDouble(v), x.applyAsDouble(v), top, h - bottom, col));
        s.append(
            f(
                "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                left, w - right, y.applyAsDouble(v), y.applyAsDouble(v), col));
        if (m == 1) {
          s.append(
              f(
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                  x.applyAsDouble(v), h - bottom + 16, axisRate(v)));
          s.append(
              f(
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                  left - 6, y.applyAsDouble(v) + 4, axisRate(v)));
        }
      }
    }
    s.append(
        f(
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\""
                + " stroke-dasharray=\"6 4\"/>\n",
            x.applyAsDouble(a), y.applyAsDouble(a), x.applyAsDouble(b), y.applyAsDouble(b)));
    s.append(
        f(
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">offered ops/s (findMatches + events)</text>\n",
            (left + w - right) / 2, h - 20));
    s.append(
        f(
            "<text x=\"20\" y=\"%d\" transform=\"rotate(-90 20 %d)\" text-anchor=\"middle\">"
                + "achieved ops/s</text>\n",
            (top + h - bottom) / 2, (top + h - bottom) / 2));
    int i = 0;
    for (Map.Entry<IndexKind, List<TraceReplay.Result>> e : byKind(results).entrySet()) {
      String col = COLORS[i % COLORS.length];
      StringBuilder pts = new StringBuilder();
      for (TraceReplay.Result r : e.getValue()) {
        if (r.durationMs() == 0) continue;
        double px = x.applyAsDouble(r.offeredOps());
        double py = y.applyAsDouble(r.achievedOps());
        pts.append(f("%.1f,%.1f ", px, py));
        s.append(f("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", px, py, col));
      }
      s.append(
          f(
              "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n",
              col, pts.toString().trim()));
      int ly = top + 14 + 18 * i;
      s.append(
          f(
              "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                  + "<text x=\"%d\" y=\"%d\">%s</text>\n",
              w - right + 14,
              w - right + 34,
              ly,
              ly,
              col,
              w - right + 40,
              ly + 4,
              e.getKey().cliName()));
      i++;
    }
    return s.append("</svg>\n").toString();
  }

  /** A round axis label: 10 k, 1 M, 100 M, 1 G. */
  public static String axisRate(double v) {
    if (v >= 1e9) return round3(v / 1e9) + " G";
    if (v >= 1e6) return round3(v / 1e6) + " M";
    if (v >= 1e3) return round3(v / 1e3) + " k";
    return round3(v);
  }

  private static String round3(double v) {
    return TextReport.num(Math.round(v * 1000) / 1000.0);
  }

  private static String f(String fmt, Object... args) {
    return String.format(Locale.ROOT, fmt, args);
  }
}
