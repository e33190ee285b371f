package io.kvrouter.harness;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvrouter.sim.report.HtmlReport;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.Locale;

/**
 * The HTML report of {@code kvrouter bench fleet}: one self-contained file (inline SVG, no scripts,
 * nothing fetched) in the style of {@code simulate}'s: the run, the results table, the hit rate per
 * policy (live beside simulate's when compared) and the TTFT CDF per policy.
 *
 * <pre>
 * Implementation notes
 *
 * Pure function of the runs and the simulate JSON (or null) plus the metadata strings: builds
 * one String. Plots are drawn in fixed 720 x 300 viewBoxes; the CDF's x axis is log10 of model
 * milliseconds, clamped to at least 1 ms.
 * </pre>
 */
final class FleetHtmlReport {
  private FleetHtmlReport() {}

  /** A policy's colour: the one simulate's report gives it. */
  private static String color(String policy) {
    return HtmlReport.policyColor(policy);
  }

  static String render(
      List<PolicyRun> runs, JsonNode sim, String setup, String commandLine, double timeScale) {
    StringBuilder h = new StringBuilder(32_768);
    String version = FleetHtmlReport.class.getPackage().getImplementationVersion();
    h.append("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .append("<title>kvrouter bench fleet</title><style>")
        .append("body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1180px;")
        .append("padding:0 1em;color:#222}.wide{overflow-x:auto}")
        .append("table{border-collapse:collapse}td,th{padding:3px 6px;")
        .append("border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}")
        .append("td:first-child,th:first-child{text-align:left}")
        .append(".bad{color:#c62828;font-weight:600}svg{display:block;margin:1em 0;")
        .append("max-width:100%;height:auto}</style></head><body>");
    h.append("<h1>kvrouter bench fleet</h1><p>")
        .append(esc(version == null ? "development build" : "kvrouter " + version))
        .append(" &middot; <code>kvrouter bench fleet ")
        .append(esc(commandLine))
        .append("</code> &middot; ")
        .append(
            ZonedDateTime.now(ZoneOffset.UTC)
                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'", Locale.ROOT)))
        .append("</p><p>")
        .append(esc(setup))
        .append("</p><p>Times are model time (wall time &times; ")
        .append(fmt(timeScale))
        .append("); the event lag is wall time.</p>");

    h.append("<h2>Results</h2><div class=\"wide\"><table><tr><th>policy</th><th>valid</th>")
        .append("<th>done</th><th>errors</th>")
        .append("<th>hit rate</th><th>predicted</th>")
        .append(sim != null ? "<th>simulate hit rate</th>" : "")
        .append("<th>TTFT p50</th><th>p90</th><th>p99</th>")
        .append(sim != null ? "<th>simulate p90</th>" : "")
        .append("<th>TPOT p50</th><th>e2e p50</th><th>req/s</th><th>lag p50/p99</th>")
        .append("<th>index</th></tr>");
    for (PolicyRun r : runs) {
      JsonNode s = SimulateComparison.policy(sim, r.policy);
      h.append("<tr><td>").append(esc(r.policy)).append("</td><td>");
      h.append(r.invalid.isEmpty() ? "yes" : "<span class=\"bad\">NO (below)</span>");
      h.append("</td><td>").append(r.completed);
      h.append("</td><td>").append(r.errors).append("</td><td>");
      h.append(pctText(r.hitRate())).append("</td><td>");
      h.append(pctText(r.predictedRate())).append("</td>");
      if (sim != null) {
        h.append("<td>")
            .append(s == null ? "" : pctText(s.path("hit_rate").asDouble()))
            .append("</td>");
      }
      for (double p : new double[] {50, 90, 99}) {
        h.append("<td>").append(ms(Percentiles.pct(r.ttftMs, p))).append("</td>");
      }
      if (sim != null) {
        h.append("<td>")
            .append(s == null ? "" : ms(s.path("ttft_ms").path("p90").asDouble()))
            .append("</td>");
      }
      h.append("<td>").append(ms(Percentiles.pct(r.tpotMs, 50))).append("</td>");
      h.append("<td>").append(ms(Percentiles.pct(r.e2eMs, 50))).append("</td>");
      h.append("<td>")
          .append(String.format(Locale.ROOT, "%.2f", r.completed / r.makespanSec))
          .append("</td>");
      h.append("<td>")
          .append(
              String.format(
                  Locale.ROOT,
                  "%.0f/%.0f ms",
                  Percentiles.pct(r.lagMs, 50),
                  Percentiles.pct(r.lagMs, 99)))
          .append("</td>");
      h.append("<td>")
          .append(
              !r.indexChecked
                  ? "n/a"
                  : r.indexProblems.isEmpty()
                      ? "equal"
                      : "<span class=\"bad\">differs (below)</span>")
          .append("</td></tr>");
    }
    h.append("</table></div>");
    // what kept the run from being valid, and index differences: below, not in a cell
    h.append("<ul class=\"pace\">");
    for (PolicyRun r : runs) {
      h.append("<li>").append(esc(r.policy)).append(": kept up: ");
      h.append(esc(FleetReport.keptUp(r))).append("</li>");
      for (String why : r.invalid) {
        h.append("<li class=\"bad\">")
            .append(esc(r.policy))
            .append(" run invalid: ")
            .append(esc(why))
            .append("</li>");
      }
      for (String p : r.indexProblems) {
        h.append("<li class=\"bad\">")
            .append(esc(r.policy))
            .append(" index: ")
            .append(esc(p))
            .append("</li>");
      }
    }
    h.append("</ul>");

    // hit rate bars: live (solid), simulate (hatched lighter) beside it
    h.append("<h2>Hit rate per policy</h2>");
    double max = 0.01;
    for (PolicyRun r : runs) {
      max = Math.max(max, r.hitRate());
      JsonNode s = SimulateComparison.policy(sim, r.policy);
      if (s != null) max = Math.max(max, s.path("hit_rate").asDouble());
    }
    max *= 1.15;
    int w = 720;
    int ht = 300;
    int left = 50;
    int bottom = 40;
    svgOpen(h, "hit-bars", w, ht);
    double slot = (w - left - 10.0) / Math.max(1, runs.size());
    for (int i = 0; i < runs.size(); i++) {
      PolicyRun r = runs.get(i);
      double x = left + i * slot + slot * 0.15;
      double bw = slot * (sim != null ? 0.33 : 0.6);
      bar(h, x, bw, r.hitRate(), max, ht, bottom, color(r.policy), "live");
      JsonNode s = SimulateComparison.policy(sim, r.policy);
      if (s != null) {
        bar(h, x + bw + 2, bw, s.path("hit_rate").asDouble(), max, ht, bottom, "#bbb", "simulate");
      }
      h.append(text(x + slot * 0.35, ht - bottom + 18, r.policy, "middle"));
    }
    h.append("<line x1=\"").append(left).append("\" y1=\"").append(ht - bottom);
    h.append("\" x2=\"").append(w - 10).append("\" y2=\"").append(ht - bottom);
    h.append("\" stroke=\"#444\"/>");
    h.append(yTitle(ht, bottom, "prompt tokens the engines found cached"));
    if (sim != null) {
      h.append(text(w - 12, 16, "coloured: live, grey: simulate", "end"));
    }
    h.append("</svg>");

    // TTFT CDF, log x
    h.append("<h2>Time to first token</h2>");
    double lo = 1;
    double hi = 10;
    for (PolicyRun r : runs) {
      if (r.ttftMs.length > 0) hi = Math.max(hi, r.ttftMs[r.ttftMs.length - 1]);
    }
    double lmin = Math.log10(lo);
    double lmax = Math.log10(hi) + 0.05;
    svgOpen(h, "ttft-cdf", w, ht);
    double pw = w - left - 20.0;
    double ph = ht - bottom - 20.0;
    for (int dec = 0; dec <= (int) Math.ceil(lmax); dec++) {
      double x = left + (dec - lmin) / (lmax - lmin) * pw;
      if (x > left + pw) break;
      h.append("<line x1=\"").append(f(x)).append("\" y1=\"20\" x2=\"").append(f(x));
      h.append("\" y2=\"").append(f(20 + ph)).append("\" stroke=\"#eee\"/>");
      h.append(text(x, ht - bottom + 16, ms(Math.pow(10, dec)), "middle"));
    }
    for (int i = 0; i < runs.size(); i++) {
      double[] v = runs.get(i).ttftMs;
      if (v.length == 0) continue;
      StringBuilder pts = new StringBuilder();
      int step = Math.max(1, v.length / 300);
      for (int k = 0; k < v.length; k += step) {
        double x = left + (Math.log10(Math.max(lo, v[k])) - lmin) / (lmax - lmin) * pw;
        double y = 20 + ph - (k + 1.0) / v.length * ph;
        pts.append(f(x)).append(',').append(f(y)).append(' ');
      }
      double xl = left + (Math.log10(Math.max(lo, v[v.length - 1])) - lmin) / (lmax - lmin) * pw;
      pts.append(f(xl)).append(',').append(f(20));
      h.append("<polyline class=\"cdf\" fill=\"none\" stroke-width=\"2\" stroke=\"")
          .append(color(runs.get(i).policy))
          .append("\" points=\"")
          .append(pts)
          .append("\"><title>")
          .append(esc(runs.get(i).policy))
          .append("</title></polyline>");
      h.append(text(left + 8, 36 + 16 * i, runs.get(i).policy, "start", color(runs.get(i).policy)));
    }
    h.append("<line x1=\"").append(left).append("\" y1=\"").append(f(20 + ph));
    h.append("\" x2=\"").append(f(left + pw)).append("\" y2=\"").append(f(20 + ph));
    h.append("\" stroke=\"#444\"/>");
    h.append(text(left - 6, 24, "1", "end")).append(text(left - 6, 20 + ph, "0", "end"));
    h.append(text(left + pw / 2, ht - 6, "TTFT (model time, log scale)", "middle"));
    h.append(yTitle(ht, bottom, "share of requests with TTFT ≤ x"));
    h.append("</svg></body></html>\n");
    return h.toString();
  }

  /** A y-axis title, turned along the axis at the plot's left edge. */
  private static String yTitle(int ht, int bottom, String title) {
    double y = (ht - bottom) / 2.0 + 10;
    return "<text x=\"14\" y=\""
        + f(y)
        + "\" font-size=\"12\" text-anchor=\"middle\" fill=\"#222\" transform=\"rotate(-90 14 "
        + f(y)
        + ")\">"
        + esc(title)
        + "</text>";
  }

  private static void bar(
      StringBuilder h,
      double x,
      double bw,
      double v,
      double max,
      int ht,
      int bottom,
      String color,
      String what) {
    double top = 20;
    double hgt = v / max * (ht - bottom - top);
    double y = ht - bottom - hgt;
    h.append("<rect class=\"bar\" x=\"").append(f(x)).append("\" y=\"").append(f(y));
    h.append("\" width=\"").append(f(bw)).append("\" height=\"").append(f(hgt));
    h.append("\" fill=\"").append(color).append("\"><title>").append(what).append(' ');
    h.append(pctText(v)).append("</title></rect>");
    h.append(text(x + bw / 2, y - 4, pctText(v), "middle"));
  }

  /** Opens an {@code <svg>} of class {@code cls}, {@code w} by {@code ht} user units and pixels. */
  private static void svgOpen(StringBuilder h, String cls, int w, int ht) {
    h.append("<svg class=\"")
        .append(cls)
        .append("\" viewBox=\"0 0 ")
        .append(w)
        .append(' ')
        .append(ht)
        .append("\" width=\"")
        .append(w)
        .append("\" height=\"")
        .append(ht)
        .append("\">");
  }

  private static String text(double x, double y, String s, String anchor) {
    return text(x, y, s, anchor, "#222");
  }

  private static String text(double x, double y, String s, String anchor, String color) {
    return "<text x=\""
        + f(x)
        + "\" y=\""
        + f(y)
        + "\" font-size=\"12\" text-anchor=\""
        + anchor
        + "\" fill=\""
        + color
        + "\">"
        + esc(s)
        + "</text>";
  }

  private static String f(double v) {
    return String.format(Locale.ROOT, "%.1f", v);
  }

  private static String fmt(double v) {
    return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
  }

  private static String pctText(double v) {
    return String.format(Locale.ROOT, "%.1f %%", 100 * v);
  }

  private static String ms(double v) {
    if (Double.isNaN(v)) return "-";
    return v >= 1000
        ? String.format(Locale.ROOT, "%.2f s", v / 1000)
        : String.format(Locale.ROOT, "%.0f ms", v);
  }

  static String esc(String s) {
    return s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\"", "&quot;");
  }
}
