package io.kvrouter.sim;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The self-contained HTML report of a {@code simulate} run: the results table and three inline SVG
 * plots (hit rate per policy against the pooled ceiling, the TTFT distribution per policy, load per
 * rank over time). No scripts, fonts or styles are fetched from anywhere.
 *
 * <pre>
 * Implementation notes
 *
 * Plain string building. Every plot is an SVG with a fixed viewBox (it scales with the page),
 * drawn in data coordinates mapped by the small Axis helper (linear or log10). The TTFT CDF is
 * drawn from at most 400 quantiles of each policy's sorted samples; load series are drawn as
 * they were sampled (about 200 points per rank). Text that comes from outside (the trace name,
 * verification problems) is HTML-escaped.
 * </pre>
 */
final class HtmlReport {
  private static final String[] POLICY_COLORS = {
    "#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"
  };
  private static final String[] RANK_COLORS = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf"
  };
  private static final int W = 860;
  private static final int H = 360;
  private static final int LEFT = 70;
  private static final int RIGHT = 150;
  private static final int TOP = 20;
  private static final int BOTTOM = 50;

  private HtmlReport() {}

  static String render(SimulationResult s) {
    StringBuilder b = new StringBuilder(1 << 16);
    SimConfig c = s.config();
    b.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
        .append("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        .append("<title>kvrouter simulate report</title>\n<style>\n")
        .append(
            "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px"
                + " auto;max-width:980px;color:#222;padding:0 16px}\n")
        .append("h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:32px}\n")
        .append(".sub{color:#555;font-size:14px;line-height:1.5}\n")
        .append(
            "table{border-collapse:collapse;font-size:13px;margin-top:8px}"
                + "td,th{padding:4px 9px;border-bottom:1px solid #ddd;text-align:right}"
                + "th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\n")
        .append(".ok{color:#1a7f37;font-weight:600}.bad{color:#c62828;font-weight:600}\n")
        .append("svg{width:100%;height:auto;background:#fff;border:1px solid #eee}\n")
        .append("svg text{font-family:inherit;font-size:12px;fill:#333}\n")
        .append(".note{font-size:13px;color:#555}\n</style></head><body>\n");
    b.append("<h1>kvrouter simulate</h1>\n<div class=\"sub\">")
        .append(esc(s.trace()))
        .append(
            fmt(
                ", %,d requests over %s of simulated time (trace time / %s).<br>",
                s.requests(), TextReport.duration(s.traceSpanSec()), TextReport.num(c.speedup())))
        .append(
            fmt(
                "Fleet: %d workers%s, each rank with a prefix cache of %,d KV blocks of %d tokens."
                    + " Timing model: prefill %s ms + %s ms per 1,000 uncached tokens (one"
                    + " prefill at a time per rank), decode %s ms per output token, at most %d"
                    + " requests admitted per rank. KV events reach the index after %s ms%s."
                    + " Seed %d.",
                c.workers(),
                c.dpSize() > 1 ? " × " + c.dpSize() + " dp ranks" : "",
                c.gpuBlocks(),
                c.blockSize(),
                TextReport.num(c.timing().prefillBaseMs()),
                TextReport.num(c.timing().prefillMsPer1kTokens()),
                TextReport.num(c.timing().decodeMsPerToken()),
                c.timing().maxBatch(),
                TextReport.num(c.eventDelayMs()),
                c.jsonEvents() ? ", encoded as Dynamo JSON and decoded" : "",
                c.seed()))
        .append("</div>\n");

    verdicts(b, s);
    table(b, s);

    b.append("<h2>Prefix-cache hit rate per policy</h2>\n");
    b.append(hitRateChart(s));
    b.append(
        "<p class=\"note\">Prompt tokens found in the chosen rank's cache at admission, over all"
            + " prompt tokens. The dashed line is the pooled ceiling: one LRU cache with every"
            + " rank's capacity serving the trace in arrival order.</p>\n");

    b.append("<h2>Time to first token</h2>\n");
    b.append(ttftChart(s));
    b.append(
        "<p class=\"note\">Cumulative distribution of TTFT (arrival to end of prefill, simulated"
            + " time), log scale. Further left is better.</p>\n");

    List<PolicyResult> loads = new ArrayList<>();
    for (Policy p : new Policy[] {Policy.KV, Policy.ROUND_ROBIN}) {
      if (s.of(p) != null) loads.add(s.of(p));
    }
    if (loads.isEmpty() && !s.policies().isEmpty()) loads.add(s.policies().get(0));
    int maxLoad = 1;
    for (PolicyResult r : loads) {
      for (int[] row : r.load().inFlight()) for (int v : row) maxLoad = Math.max(maxLoad, v);
    }
    for (PolicyResult r : loads) {
      b.append("<h2>Load per rank over time: ").append(r.policy().cliName()).append("</h2>\n");
      b.append(loadChart(r, maxLoad));
      b.append(
          fmt(
              "<p class=\"note\">Requests waiting or running on each rank, sampled every %s."
                  + " Load imbalance (busiest rank's time-averaged load / mean): %.2f.</p>\n",
              sampleStep(r.load()), r.imbalance()));
    }
    b.append(
        "<p class=\"note\">Generated by <code>./kvrouter simulate</code>; see"
            + " docs/SIMULATION.md for the model and the definitions.</p>\n");
    b.append("</body></html>\n");
    return b.toString();
  }

  private static void verdicts(StringBuilder b, SimulationResult s) {
    b.append("<h2>Summary</h2>\n<ul class=\"sub\">\n");
    PolicyResult kv = s.of(Policy.KV);
    PolicyResult rr = s.of(Policy.ROUND_ROBIN);
    double pooled = s.pooled().hitRate();
    if (kv != null) {
      b.append(
          fmt(
              "<li><b>kv</b> hit rate %.1f%%, %.1f%% of the pooled ceiling (%.1f%%), at load"
                  + " imbalance %.2f.</li>\n",
              100 * kv.hitRate(),
              pooled == 0 ? 100.0 : 100 * kv.hitRate() / pooled,
              100 * pooled,
              kv.imbalance()));
      if (rr != null) {
        b.append(
            fmt(
                "<li><b>kv</b> p90 TTFT %s vs round-robin %s: %.1f× lower.</li>\n",
                TextReport.ms(kv.ttftPercentile(90)),
                TextReport.ms(rr.ttftPercentile(90)),
                rr.ttftPercentile(90) / kv.ttftPercentile(90)));
      }
    }
    for (PolicyResult r : s.policies()) {
      Verification v = r.verification();
      if (v.ok()) {
        b.append(
            fmt(
                "<li><span class=\"ok\">index equals caches</span> for %s: %d ranks, %,d cached"
                    + " blocks compared one by one, %,d prompts scored on every rank.</li>\n",
                r.policy().cliName(), v.ranks(), v.blocks(), v.prompts()));
      } else {
        b.append("<li><span class=\"bad\">index differs from the caches</span> for ")
            .append(r.policy().cliName())
            .append(":<ul>");
        for (String p : v.problems()) b.append("<li>").append(esc(p)).append("</li>");
        b.append("</ul></li>\n");
      }
    }
    b.append("</ul>\n");
  }

  private static void table(StringBuilder b, SimulationResult s) {
    b.append("<h2>Results</h2>\n<table>\n<tr><th>policy</th><th>requests</th><th>hit rate</th>")
        .append("<th>TTFT p50</th><th>p90</th><th>p99</th><th>req/s</th><th>out tok/s</th>")
        .append("<th>load imbalance</th><th>prefill util.</th><th>events applied</th></tr>\n");
    for (PolicyResult r : s.policies()) {
      b.append(
          fmt(
              "<tr><td>%s</td><td>%,d</td><td>%.1f%%</td><td>%s</td><td>%s</td><td>%s</td>"
                  + "<td>%.2f</td><td>%,.0f</td><td>%.2f</td><td>%.0f%%</td><td>%,d</td></tr>\n",
              r.policy().cliName(),
              r.completed(),
              100 * r.hitRate(),
              TextReport.ms(r.ttftPercentile(50)),
              TextReport.ms(r.ttftPercentile(90)),
              TextReport.ms(r.ttftPercentile(99)),
              r.requestsPerSec(),
              r.outputTokensPerSec(),
              r.imbalance(),
              100 * r.meanPrefillUtilisation(),
              r.eventsApplied()));
    }
    b.append(
        fmt(
            "<tr><td>pooled ceiling</td><td></td><td>%.1f%%</td><td colspan=\"8\""
                + " style=\"text-align:left\">one LRU cache of %,d blocks</td></tr>\n",
            100 * s.pooled().hitRate(), s.pooled().capacityBlocks()));
    b.append("</table>\n");
  }

  private static String hitRateChart(SimulationResult s) {
    List<PolicyResult> rs = s.policies();
    double pooled = s.pooled().hitRate();
    double max = pooled;
    for (PolicyResult r : rs) max = Math.max(max, r.hitRate());
    Axis y = Axis.linear(0, niceCeil(max * 100 * 1.1), H - BOTTOM, TOP);
    StringBuilder g = svgOpen("Hit rate per policy");
    yGrid(g, y, "%");
    int n = Math.max(1, rs.size());
    double slot = (W - LEFT - RIGHT) / (double) n;
    double bar = Math.min(90, slot * 0.6);
    for (int i = 0; i < rs.size(); i++) {
      PolicyResult r = rs.get(i);
      double x = LEFT + slot * i + (slot - bar) / 2;
      double top = y.map(100 * r.hitRate());
      g.append(
          fmt(
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
              x, top, bar, (H - BOTTOM) - top, color(r.policy())));
      g.append(
          fmt(
              "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f%%</text>\n",
              x + bar / 2, top - 5, 100 * r.hitRate()));
      g.append(
          fmt(
              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
              x + bar / 2, H - BOTTOM + 18, r.policy().cliName()));
    }
    double py = y.map(100 * pooled);
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#000\""
                + " stroke-dasharray=\"6 4\"/>\n",
            LEFT, W - RIGHT, py, py));
    g.append(
        fmt(
            "<text x=\"%d\" y=\"%.1f\">pooled ceiling</text>\n<text x=\"%d\" y=\"%.1f\">%.1f%%"
                + "</text>\n",
            W - RIGHT + 6, py - 2, W - RIGHT + 6, py + 13, 100 * pooled));
    g.append(
        fmt(
            "<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\">"
                + "hit rate</text>\n",
            (H - BOTTOM + TOP) / 2, (H - BOTTOM + TOP) / 2));
    return g.append("</svg>\n").toString();
  }

  private static String ttftChart(SimulationResult s) {
    double lo = Double.POSITIVE_INFINITY;
    double hi = 0;
    for (PolicyResult r : s.policies()) {
      double[] t = r.ttftMs();
      if (t.length == 0) continue;
      lo = Math.min(lo, Math.max(1, t[0]));
      hi = Math.max(hi, t[t.length - 1]);
    }
    if (hi == 0) {
      lo = 1;
      hi = 10;
    }
    double loDecade = Math.pow(10, Math.floor(Math.log10(lo)));
    double hiDecade = Math.pow(10, Math.ceil(Math.log10(Math.max(hi, loDecade * 10))));
    Axis x = Axis.log(loDecade, hiDecade, LEFT, W - RIGHT);
    long decades = Math.round(Math.log10(hiDecade / loDecade));
    Axis y = Axis.linear(0, 100, H - BOTTOM, TOP);
    StringBuilder g = svgOpen("TTFT distribution per policy");
    yGrid(g, y, "%");
    for (double d = loDecade; d <= hiDecade * 1.0001; d *= 10) {
      for (int m : new int[] {1, 2, 5}) {
        double v = d * m;
        if (v > hiDecade * 1.0001) break;
        double px = x.map(v);
        g.append(
            fmt(
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"%s\"/>\n",
                px, px, TOP, H - BOTTOM, m == 1 ? "#ccc" : "#eee"));
        if (m == 1 || decades <= 3) {
          g.append(
              fmt(
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                  px, H - BOTTOM + 16, tickMs(v)));
        }
      }
    }
    g.append(
        fmt(
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">TTFT (log scale)</text>\n",
            (LEFT + W - RIGHT) / 2, H - 12));
    g.append(
        fmt(
            "<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\">"
                + "requests with TTFT ≤ x</text>\n",
            (H - BOTTOM + TOP) / 2, (H - BOTTOM + TOP) / 2));
    int li = 0;
    for (PolicyResult r : s.policies()) {
      double[] t = r.ttftMs();
      if (t.length > 0) {
        StringBuilder pts = new StringBuilder();
        int points = Math.min(400, t.length);
        for (int k = 0; k <= points; k++) {
          int idx = (int) Math.min(t.length - 1, (long) k * (t.length - 1) / points);
          double v = Math.max(loDecade, t[idx]);
          pts.append(fmt("%.1f,%.1f ", x.map(v), y.map(100.0 * (idx + 1) / t.length)));
        }
        g.append(
            fmt(
                "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n",
                color(r.policy()), pts.toString().trim()));
      }
      legend(g, li++, r.policy().cliName(), color(r.policy()));
    }
    return g.append("</svg>\n").toString();
  }

  private static String loadChart(PolicyResult r, int maxLoad) {
    LoadSeries l = r.load();
    double[] t = l.timesSec();
    double tEnd = t.length == 0 ? 1 : Math.max(t[t.length - 1], 1e-9);
    boolean minutes = tEnd > 300;
    double scale = minutes ? 60 : 1;
    Axis x = Axis.linear(0, tEnd / scale, LEFT, W - RIGHT);
    Axis y = Axis.linear(0, niceCeil(maxLoad), H - BOTTOM, TOP);
    StringBuilder g = svgOpen("Load per rank over time, " + r.policy().cliName());
    yGrid(g, y, "");
    for (double v : ticks(x.hi)) {
      double px = x.map(v);
      g.append(
          fmt(
              "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n",
              px, px, TOP, H - BOTTOM));
      g.append(
          fmt(
              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
              px, H - BOTTOM + 16, TextReport.num(v)));
    }
    g.append(
        fmt(
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">simulated time (%s)</text>\n",
            (LEFT + W - RIGHT) / 2, H - 12, minutes ? "min" : "s"));
    g.append(
        fmt(
            "<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\">"
                + "requests in flight</text>\n",
            (H - BOTTOM + TOP) / 2, (H - BOTTOM + TOP) / 2));
    int ranks = l.ranks().size();
    for (int k = 0; k < ranks; k++) {
      StringBuilder pts = new StringBuilder();
      for (int i = 0; i < t.length; i++) {
        pts.append(fmt("%.1f,%.1f ", x.map(t[i] / scale), y.map(l.inFlight()[i][k])));
      }
      String col = RANK_COLORS[k % RANK_COLORS.length];
      g.append(
          fmt(
              "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.3\" stroke-opacity=\"0.85\""
                  + " points=\"%s\"/>\n",
              col, pts.toString().trim()));
      if (k < 20) legend(g, k, l.ranks().get(k), col);
    }
    return g.append("</svg>\n").toString();
  }

  /** A short axis label for a time in ms: 5 ms, 200 ms, 1 s, 20 s, 10 min. */
  static String tickMs(double ms) {
    if (ms < 1000) return TextReport.num(Math.round(ms * 1000) / 1000.0) + " ms";
    if (ms < 600_000) return TextReport.num(Math.round(ms) / 1000.0) + " s";
    return TextReport.num(Math.round(ms / 60_000.0)) + " min";
  }

  private static String sampleStep(LoadSeries l) {
    double[] t = l.timesSec();
    if (t.length < 2) return "-";
    return TextReport.ms((t[1] - t[0]) * 1000);
  }

  private static StringBuilder svgOpen(String title) {
    return new StringBuilder()
        .append(
            fmt(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" role=\"img\">"
                    + "<title>%s</title>\n",
                W, H, esc(title)));
  }

  private static void yGrid(StringBuilder g, Axis y, String unit) {
    for (double v : ticks(y.hi)) {
      double py = y.map(v);
      g.append(
          fmt(
              "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n",
              LEFT, W - RIGHT, py, py));
      g.append(
          fmt(
              "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s%s</text>\n",
              LEFT - 6, py + 4, TextReport.num(v), unit));
    }
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#666\"/>\n",
            LEFT, W - RIGHT, H - BOTTOM, H - BOTTOM));
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#666\"/>\n",
            LEFT, LEFT, TOP, H - BOTTOM));
  }

  private static void legend(StringBuilder g, int i, String label, String color) {
    int x = W - RIGHT + 16;
    int y = TOP + 10 + i * 16;
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                + "<text x=\"%d\" y=\"%d\">%s</text>\n",
            x, x + 18, y, y, color, x + 24, y + 4, esc(label)));
  }

  /** Up to about 6 round ticks from 0 to hi (inclusive). */
  static double[] ticks(double hi) {
    double step = niceStep(hi / 5);
    int n = (int) Math.floor(hi / step + 1e-9);
    double[] out = new double[n + 1];
    for (int i = 0; i <= n; i++) out[i] = i * step;
    return out;
  }

  private static double niceStep(double raw) {
    if (raw <= 0) return 1;
    double mag = Math.pow(10, Math.floor(Math.log10(raw)));
    double f = raw / mag;
    double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    return nice * mag;
  }

  /** The smallest multiple of a nice step that is ≥ v (at least 1). */
  static double niceCeil(double v) {
    if (v <= 1) return 1;
    double step = niceStep(v / 5);
    return Math.ceil(v / step - 1e-9) * step;
  }

  private static String color(Policy p) {
    return POLICY_COLORS[p.ordinal() % POLICY_COLORS.length];
  }

  static String esc(String s) {
    StringBuilder b = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); i++) {
      char ch = s.charAt(i);
      switch (ch) {
        case '<' -> b.append("&lt;");
        case '>' -> b.append("&gt;");
        case '&' -> b.append("&amp;");
        case '"' -> b.append("&quot;");
        default -> b.append(ch);
      }
    }
    return b.toString();
  }

  private static String fmt(String f, Object... args) {
    return String.format(Locale.ROOT, f, args);
  }

  /** Maps data values to SVG coordinates, linearly or by log10. */
  private record Axis(double lo, double hi, double from, double to, boolean log) {
    static Axis linear(double lo, double hi, double from, double to) {
      return new Axis(lo, hi, from, to, false);
    }

    static Axis log(double lo, double hi, double from, double to) {
      return new Axis(lo, hi, from, to, true);
    }

    double map(double v) {
      double f =
          log
              ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))
              : (v - lo) / (hi - lo);
      return from + f * (to - from);
    }
  }
}
