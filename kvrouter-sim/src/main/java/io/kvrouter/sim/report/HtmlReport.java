package io.kvrouter.sim.report;

import io.kvrouter.sim.HitSeries;
import io.kvrouter.sim.LoadSeries;
import io.kvrouter.sim.Policy;
import io.kvrouter.sim.PolicyResult;
import io.kvrouter.sim.SimConfig;
import io.kvrouter.sim.SimulationResult;
import io.kvrouter.sim.Verification;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The self-contained HTML report of a {@code simulate} run: the run's metadata, a summary, the
 * results table and inline SVG plots (hit rate per policy against the pooled ceiling, hit rate over
 * time, the TTFT distribution with p50/p90/p99 markers, and for every policy the load across its
 * ranks over time). No scripts, fonts or styles are fetched from anywhere.
 *
 * <pre>
 * Implementation notes
 *
 * Plain string building. Every plot is an SVG with a fixed viewBox of width W (it scales with the
 * page) and its own height, drawn in data coordinates mapped by the small Axis helper (linear or
 * log10); Frame holds one plot's height and margins. The TTFT CDF is drawn from at most 400
 * quantiles of each policy's sorted samples. The hit rate over time merges the simulation's
 * HitSeries buckets into windows of at least about 100 requests (at most 30 windows), and a window
 * with no prompt tokens is skipped. A load plot shows, per sample, the least and the most loaded
 * rank as a band and the median rank as a line; all load plots share one x and one y scale. Text that comes
 * from outside (the trace name, the command line, verification problems) is HTML-escaped.
 * </pre>
 */
public final class HtmlReport {
  private static final String[] POLICY_COLORS = {
    "#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"
  };
  private static final int W = 860;
  private static final Frame TALL = new Frame(360, 70, 150, 20, 50);
  private static final Frame SHORT = new Frame(230, 70, 150, 14, 44);
  private static final double[] MARKED_PERCENTILES = {50, 90, 99};

  private HtmlReport() {}

  /**
   * Where and how the report was made.
   *
   * @param version the kvrouter version (the jar's Implementation-Version), or null
   * @param commit the git commit (system property {@code kvrouter.commit}), or null
   * @param commandLine the command as typed, e.g. {@code kvrouter simulate --requests 3000}
   * @param date when the run finished, e.g. {@code 2026-12-01 10:30:00 UTC}
   */
  public record Meta(String version, String commit, String commandLine, String date) {
    /** This process's version and commit, the given subcommand arguments, and the time now. */
    public static Meta of(List<String> args) {
      StringBuilder cmd = new StringBuilder("kvrouter simulate");
      for (String a : args) cmd.append(' ').append(shellQuote(a));
      return new Meta(
          HtmlReport.class.getPackage().getImplementationVersion(),
          System.getProperty("kvrouter.commit"),
          cmd.toString(),
          ZonedDateTime.now(ZoneOffset.UTC)
              .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss 'UTC'", Locale.ROOT)));
    }
  }

  /** {@code s} as a shell word: as it is when it has no special characters, else single-quoted. */
  public static String shellQuote(String s) {
    if (!s.isEmpty() && s.matches("[A-Za-z0-9_@%+=:,./-]+")) return s;
    return "'" + s.replace("'", "'\\''") + "'";
  }

  public static String render(SimulationResult s, Meta meta) {
    StringBuilder b = new StringBuilder(1 << 16);
    SimConfig c = s.config();
    b.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
        .append("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        .append("<title>kvrouter simulate report</title>\n<style>\n")
        .append(
            "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px"
                + " auto;max-width:980px;color:#222;padding:0 16px}\n")
        .append("h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:32px}\n")
        .append("h3{font-size:14px;margin:18px 0 4px}\n")
        .append(".sub{color:#555;font-size:14px;line-height:1.5}\n")
        .append(
            ".meta{font-size:13px;color:#555;margin:6px 0 10px}"
                + ".meta td,.meta th{border:0;padding:1px 10px 1px 0;text-align:left}"
                + ".meta th{background:none;font-weight:normal;color:#777}\n")
        .append(
            "table{border-collapse:collapse;font-size:13px;margin-top:8px}"
                + "td,th{padding:4px 7px;border-bottom:1px solid #ddd;text-align:right;"
                + "white-space:nowrap}"
                + "th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\n")
        .append(".swatch{display:inline-block;width:10px;height:10px;margin-right:6px}\n")
        .append(".ok{color:#1a7f37;font-weight:600}.bad{color:#c62828;font-weight:600}\n")
        .append("svg{width:100%;height:auto;background:#fff;border:1px solid #eee}\n")
        .append("svg text{font-family:inherit;font-size:12px;fill:#333}\n")
        .append("code{font-size:12px}.note{font-size:13px;color:#555}\n</style></head><body>\n");
    b.append("<h1>kvrouter simulate</h1>\n");
    meta(b, meta);
    b.append("<div class=\"sub\">")
        .append(esc(s.trace()))
        .append(
            fmt(
                ", %,d requests over %s of simulated time (trace time / %s).<br>",
                s.requests(), TextReport.duration(s.traceSpanSec()), TextReport.num(c.speedup())))
        .append(
            fmt(
                "Fleet: %d worker%s%s, each rank with a prefix cache of %,d KV blocks of %d tokens."
                    + " Timing model: prefill %s ms + %s ms per 1,000 uncached tokens (one"
                    + " prefill at a time per rank), decode %s ms per output token, at most %d"
                    + " requests admitted per rank. KV events reach the index after %s ms%s%s."
                    + " Seed %d.",
                c.workers(),
                c.workers() == 1 ? "" : "s",
                c.dpSize() > 1 ? " × " + c.dpSize() + " dp ranks" : "",
                c.gpuBlocks(),
                c.blockSize(),
                TextReport.num(c.timing().prefillBaseMs()),
                TextReport.num(c.timing().prefillMsPer1kTokens()),
                TextReport.num(c.timing().decodeMsPerToken()),
                c.timing().maxBatch(),
                TextReport.num(c.eventDelayMs()),
                c.jsonEvents() ? ", encoded as Dynamo JSON and decoded" : "",
                c.removedEvents().perBlock() ? ", one Removed event per evicted block" : "",
                c.seed()))
        .append("</div>\n");

    summary(b, s);
    table(b, s);

    b.append("<h2 id=\"hit-rate\">Prefix-cache hit rate per policy</h2>\n");
    b.append(hitRateChart(s));
    b.append(
        "<p class=\"note\">Prompt tokens found in the chosen rank's cache at admission, over all"
            + " prompt tokens. The dashed line is the pooled ceiling: one LRU cache with every"
            + " rank's capacity serving the trace in arrival order.</p>\n");

    b.append("<h2 id=\"hit-rate-over-time\">Hit rate over time</h2>\n");
    HitWindows windows = HitWindows.of(s);
    b.append(hitRateOverTimeChart(s, windows));
    b.append(
        fmt(
            "<p class=\"note\">The hit rate of the requests that arrived in each window of %s"
                + " (simulated time; about %,d requests a window), by arrival. The caches start"
                + " empty, so every policy climbs at first; the dashed line is the pooled"
                + " ceiling over the same windows.</p>\n",
            TextReport.ms(windows.widthSec * 1000),
            Math.round((double) s.requests() / Math.max(1, windows.count))));

    b.append("<h2 id=\"ttft\">Time to first token</h2>\n");
    b.append(ttftChart(s));
    b.append(
        "<p class=\"note\">Cumulative distribution of TTFT (arrival to end of prefill, simulated"
            + " time), log scale; further left is better. The dots on each curve mark its p50,"
            + " p90 and p99 (their values are in the results table).</p>\n");

    b.append("<h2 id=\"load\">Load across ranks over time</h2>\n");
    b.append(
        fmt(
            "<p class=\"note\">Requests waiting or running on each rank, sampled every %s of"
                + " simulated time. The band spans the least to the most loaded rank at each"
                + " sample, the line is the median rank; a narrow band is an even spread. All"
                + " plots share their scales. Load imbalance = the busiest rank's time-averaged load"
                + " / the mean over ranks.</p>\n",
            s.policies().isEmpty() ? "-" : sampleStep(s.policies().get(0).load())));
    int maxLoad = 1;
    double tEnd = 1e-9;
    for (PolicyResult r : s.policies()) {
      for (int[] row : r.load().inFlight()) for (int v : row) maxLoad = Math.max(maxLoad, v);
      double[] t = r.load().timesSec();
      if (t.length > 0) tEnd = Math.max(tEnd, t[t.length - 1]);
    }
    for (PolicyResult r : s.policies()) {
      b.append(
          fmt(
              "<h3 class=\"load\" id=\"load-%s\">%s: load imbalance %.2f</h3>\n",
              r.policy().cliName(), r.policy().cliName(), r.imbalance()));
      b.append(loadChart(r, maxLoad, tEnd));
    }
    b.append(
        "<p class=\"note\">Generated by <code>./kvrouter simulate</code>; see"
            + " docs/SIMULATION.md for the model and the definitions.</p>\n");
    b.append("</body></html>\n");
    return b.toString();
  }

  private static void meta(StringBuilder b, Meta m) {
    b.append("<table class=\"meta\" id=\"run\">\n");
    b.append("<tr><th>kvrouter</th><td>")
        .append(m.version() == null ? "development build" : esc(m.version()))
        .append(
            m.commit() == null || m.commit().isBlank()
                ? ""
                : ", commit <code>" + esc(m.commit()) + "</code>")
        .append("</td></tr>\n");
    b.append("<tr><th>command</th><td><code>")
        .append(esc(m.commandLine()))
        .append("</code></td></tr>\n");
    b.append("<tr><th>date</th><td>").append(esc(m.date())).append("</td></tr>\n");
    b.append("</table>\n");
  }

  private static void summary(StringBuilder b, SimulationResult s) {
    b.append("<h2 id=\"summary\">Summary</h2>\n<p class=\"sub\">");
    PolicyResult kv = s.of(Policy.KV);
    PolicyResult rr = s.of(Policy.ROUND_ROBIN);
    double pooled = s.pooled().hitRate();
    if (kv != null) {
      b.append(
          fmt(
              "<b>kv</b> reaches %.1f%% of the pooled ceiling's hit rate (%.1f%% of %.1f%%) at"
                  + " load imbalance %.2f",
              pooled == 0 ? 100.0 : 100 * kv.hitRate() / pooled,
              100 * kv.hitRate(),
              100 * pooled,
              kv.imbalance()));
      if (rr != null) {
        b.append(
            fmt(
                "; its p90 TTFT is %.1f× lower than round-robin's (%s vs %s)",
                rr.ttftPercentile(90) / kv.ttftPercentile(90),
                TextReport.ms(kv.ttftPercentile(90)),
                TextReport.ms(rr.ttftPercentile(90))));
      }
      b.append(". ");
    }
    List<PolicyResult> ok = new ArrayList<>();
    List<PolicyResult> bad = new ArrayList<>();
    for (PolicyResult r : s.policies()) (r.verification().ok() ? ok : bad).add(r);
    boolean bounded = s.config().maxBlocks() > 0;
    if (!ok.isEmpty()) {
      long minBlocks = Long.MAX_VALUE;
      long maxBlocks = 0;
      for (PolicyResult r : ok) {
        minBlocks = Math.min(minBlocks, r.verification().blocks());
        maxBlocks = Math.max(maxBlocks, r.verification().blocks());
      }
      Verification v = ok.get(0).verification();
      String who =
          bad.isEmpty()
              ? (ok.size() == 1 ? "the policy" : "every policy (" + ok.size() + ")")
              : names(ok);
      String blocks =
          minBlocks == maxBlocks ? fmt("%,d", minBlocks) : fmt("%,d–%,d", minBlocks, maxBlocks);
      if (bounded) {
        b.append(
            fmt(
                "<span class=\"ok\">Index within caches</span> for %s: after each run the"
                    + " bounded index (--max-blocks %d) held no block the caches lack on %s"
                    + " (the caches held %s blocks) and never over-counted any of %,d"
                    + " prompts.",
                who, s.config().maxBlocks(), ranks(v.ranks()), blocks, v.prompts()));
      } else {
        b.append(
            fmt(
                "<span class=\"ok\">Index equals caches</span> for %s: after each run the"
                    + " router's index held the same blocks as the engines' caches on %s"
                    + " (%s cached blocks compared one by one) and scored %,d prompts"
                    + " exactly on every rank.",
                who, ranks(v.ranks()), blocks, v.prompts()));
      }
    }
    b.append("</p>\n");
    for (PolicyResult r : bad) {
      b.append("<p class=\"sub\"><span class=\"bad\">Index differs from the caches</span> for ")
          .append(r.policy().cliName())
          .append(":</p>\n<ul class=\"sub\">");
      for (String p : r.verification().problems()) {
        b.append("<li>").append(esc(p)).append("</li>");
      }
      b.append("</ul>\n");
    }
  }

  private static String ranks(int n) {
    return n == 1 ? "its one rank" : fmt("all %d ranks", n);
  }

  private static String names(List<PolicyResult> rs) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < rs.size(); i++) {
      if (i > 0) b.append(i == rs.size() - 1 ? " and " : ", ");
      b.append(rs.get(i).policy().cliName());
    }
    return b.toString();
  }

  private static void table(StringBuilder b, SimulationResult s) {
    double pooled = s.pooled().hitRate();
    boolean bounded = s.config().maxBlocks() > 0;
    b.append("<h2 id=\"results\">Results</h2>\n<table class=\"results\">\n<tr><th>policy</th>")
        .append("<th>requests</th><th>hit rate</th><th>of ceiling</th>")
        .append("<th>TTFT p50</th><th>p90</th><th>p99</th><th>req/s</th><th>out tok/s</th>")
        .append("<th>imbalance</th><th>prefill</th><th>events</th>")
        .append("<th>index</th></tr>\n");
    for (PolicyResult r : s.policies()) {
      b.append(
          fmt(
              "<tr><td><span class=\"swatch\" style=\"background:%s\"></span>%s</td><td>%,d</td>"
                  + "<td>%.1f%%</td><td>%.0f%%</td><td>%s</td><td>%s</td><td>%s</td>"
                  + "<td>%.2f</td><td>%,.0f</td><td>%.2f</td><td>%.0f%%</td><td>%,d</td>"
                  + "<td>%s</td></tr>\n",
              color(r.policy()),
              r.policy().cliName(),
              r.completed(),
              100 * r.hitRate(),
              pooled == 0 ? 100.0 : 100 * r.hitRate() / pooled,
              TextReport.ms(r.ttftPercentile(50)),
              TextReport.ms(r.ttftPercentile(90)),
              TextReport.ms(r.ttftPercentile(99)),
              r.requestsPerSec(),
              r.outputTokensPerSec(),
              r.imbalance(),
              100 * r.meanPrefillUtilisation(),
              r.eventsApplied(),
              r.verification().ok()
                  ? "<span class=\"ok\">" + (bounded ? "within" : "equal") + "</span>"
                  : "<span class=\"bad\">differs</span>"));
    }
    b.append(
        fmt(
            "<tr><td>pooled ceiling</td><td></td><td>%.1f%%</td><td>100%%</td>"
                + "<td colspan=\"9\" style=\"text-align:left\">one LRU cache of %,d blocks, all"
                + " ranks' capacity, in arrival order</td></tr>\n",
            100 * pooled, s.pooled().capacityBlocks()));
    b.append("</table>\n");
    b.append(
        "<p class=\"note\">hit rate = prompt tokens found in the chosen rank's cache / prompt"
            + " tokens; of ceiling = hit rate / the pooled ceiling's; TTFT in simulated time;"
            + " imbalance = load imbalance (below); prefill = mean share of the time a rank's"
            + " prefill lane worked; events = KV events applied to the index; index = the"
            + " end-of-run check of the index against the engines' caches.</p>\n");
  }

  private static String hitRateChart(SimulationResult s) {
    Frame f = TALL;
    List<PolicyResult> rs = s.policies();
    double pooled = s.pooled().hitRate();
    double max = pooled;
    for (PolicyResult r : rs) max = Math.max(max, r.hitRate());
    Axis y = Axis.linear(0, Math.min(100, niceCeil(max * 100 * 1.12)), f.bottomY(), f.top);
    StringBuilder g = svgOpen("Hit rate per policy", f, "hit-rate");
    yGrid(g, f, y, "%");
    yLabel(g, f, "hit rate");
    int n = Math.max(1, rs.size());
    double slot = (f.rightX() - f.left) / (double) n;
    double bar = Math.min(90, slot * 0.6);
    double py = y.map(100 * pooled);
    for (int i = 0; i < rs.size(); i++) {
      PolicyResult r = rs.get(i);
      double x = f.left + slot * i + (slot - bar) / 2;
      double top = y.map(100 * r.hitRate());
      g.append(
          fmt(
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
              x, top, bar, f.bottomY() - top, color(r.policy())));
      // the value goes above the bar, unless the ceiling line runs through it there
      double labelY = top - 5;
      String fill = "#333";
      if (labelY + 3 > py - 1 && labelY - 13 < py + 1) {
        if (f.bottomY() - top >= 24) {
          labelY = top + 16; // inside the bar, under its top
          fill = "#fff";
        } else {
          labelY = py - 5; // a short bar just under the line: above the line
        }
      }
      g.append(
          fmt(
              "<text class=\"value\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\""
                  + " style=\"fill:%s\">%.1f%%</text>\n",
              x + bar / 2, labelY, fill, 100 * r.hitRate()));
      g.append(
          fmt(
              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
              x + bar / 2, f.bottomY() + 18, r.policy().cliName()));
    }
    g.append(
        fmt(
            "<line class=\"ceiling\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#000\""
                + " stroke-dasharray=\"6 4\"/>\n",
            f.left, f.rightX(), py, py));
    g.append(
        fmt(
            "<text x=\"%d\" y=\"%.1f\">pooled ceiling</text>\n<text x=\"%d\" y=\"%.1f\">%.1f%%"
                + "</text>\n",
            f.rightX() + 6, py - 2, f.rightX() + 6, py + 13, 100 * pooled));
    return g.append("</svg>\n").toString();
  }

  /** The HitSeries buckets of a run merged into plotting windows (same for every policy). */
  private record HitWindows(int per, int count, double widthSec) {
    public static HitWindows of(SimulationResult s) {
      int buckets = s.pooled().hits().buckets();
      int per = Math.max(1, (int) Math.ceil(buckets / 30.0));
      per = Math.max(per, (int) Math.ceil(100.0 * buckets / Math.max(1, s.requests())));
      per = Math.min(per, buckets);
      int count = (buckets + per - 1) / per;
      return new HitWindows(per, count, s.traceSpanSec() * per / buckets);
    }

    /** Per window: {x in simulated seconds at its middle, hit rate in %}, or null if empty. */
    public double[][] points(HitSeries h, double spanSec) {
      double[][] out = new double[count][];
      int buckets = h.buckets();
      for (int w = 0; w < count; w++) {
        long prompt = 0;
        long cached = 0;
        int from = w * per;
        int to = Math.min(buckets, from + per);
        for (int k = from; k < to; k++) {
          prompt += h.promptTokens(k);
          cached += h.cachedTokens(k);
        }
        if (prompt > 0) {
          double mid = (from + to) / 2.0 / buckets * spanSec;
          out[w] = new double[] {mid, 100.0 * cached / prompt};
        }
      }
      return out;
    }
  }

  private static String hitRateOverTimeChart(SimulationResult s, HitWindows win) {
    Frame f = TALL;
    double span = Math.max(s.traceSpanSec(), 1e-9);
    List<double[][]> series = new ArrayList<>();
    for (PolicyResult r : s.policies()) series.add(win.points(r.hits(), span));
    double[][] pooled = win.points(s.pooled().hits(), span);
    double max = 1;
    for (double[][] pts : series) max = Math.max(max, maxY(pts));
    max = Math.max(max, maxY(pooled));
    boolean minutes = span > 300;
    double scale = minutes ? 60 : 1;
    Axis x = Axis.linear(0, span / scale, f.left, f.rightX());
    Axis y = Axis.linear(0, Math.min(100, niceCeil(max * 1.05)), f.bottomY(), f.top);
    StringBuilder g = svgOpen("Hit rate over time per policy", f, "hit-rate-over-time");
    yGrid(g, f, y, "%");
    xTimeGrid(g, f, x, minutes ? "simulated arrival time (min)" : "simulated arrival time (s)");
    yLabel(g, f, "hit rate of the window's requests");
    for (int i = 0; i < series.size(); i++) {
      PolicyResult r = s.policies().get(i);
      g.append(
          fmt(
              "<polyline class=\"hits\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\""
                  + " points=\"%s\"/>\n",
              color(r.policy()), polyline(series.get(i), x, y, scale)));
      legend(g, f, i, r.policy().cliName(), color(r.policy()), false);
    }
    g.append(
        fmt(
            "<polyline class=\"hits-ceiling\" fill=\"none\" stroke=\"#000\" stroke-width=\"1.5\""
                + " stroke-dasharray=\"6 4\" points=\"%s\"/>\n",
            polyline(pooled, x, y, scale)));
    legend(g, f, series.size(), "pooled ceiling", "#000", true);
    return g.append("</svg>\n").toString();
  }

  private static double maxY(double[][] pts) {
    double m = 0;
    for (double[] p : pts) if (p != null) m = Math.max(m, p[1]);
    return m;
  }

  private static String polyline(double[][] pts, Axis x, Axis y, double scale) {
    StringBuilder b = new StringBuilder();
    for (double[] p : pts) {
      if (p != null) b.append(fmt("%.1f,%.1f ", x.map(p[0] / scale), y.map(p[1])));
    }
    return b.toString().trim();
  }

  private static String ttftChart(SimulationResult s) {
    Frame f = TALL;
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
    Axis x = Axis.log(loDecade, hiDecade, f.left, f.rightX());
    long decades = Math.round(Math.log10(hiDecade / loDecade));
    Axis y = Axis.linear(0, 100, f.bottomY(), f.top);
    StringBuilder g = svgOpen("TTFT distribution per policy", f, "ttft");
    yGrid(g, f, y, "%");
    for (double d = loDecade; d <= hiDecade * 1.0001; d *= 10) {
      for (int m : new int[] {1, 2, 5}) {
        double v = d * m;
        if (v > hiDecade * 1.0001) break;
        double px = x.map(v);
        g.append(
            fmt(
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"%s\"/>\n",
                px, px, f.top, f.bottomY(), m == 1 ? "#ccc" : "#eee"));
        if (m == 1 || decades <= 3) {
          g.append(
              fmt(
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                  px, f.bottomY() + 16, tickMs(v)));
        }
      }
    }
    // the percentile guides: a dotted line across, named above its left end (p99's name reaches
    // into the top margin)
    for (double p : MARKED_PERCENTILES) {
      double py = y.map(p);
      g.append(
          fmt(
              "<line class=\"pguide\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\""
                  + " stroke-dasharray=\"2 3\"/>\n<text x=\"%d\" y=\"%.1f\" style=\"fill:#777\">"
                  + "p%s</text>\n",
              f.left, f.rightX(), py, py, f.left + 5, py - 3, fmtP(p)));
    }
    g.append(
        fmt(
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">TTFT (log scale)</text>\n",
            (f.left + f.rightX()) / 2, f.height - 12));
    yLabel(g, f, "requests with TTFT ≤ x");
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
        // approx predicts kv's cache and often routes as kv does: its curve is dashed so that
        // kv's shows beneath it where they coincide
        g.append(
            fmt(
                "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"%s\"/>\n",
                color(r.policy()),
                dashedCurve(r.policy()) ? " stroke-dasharray=\"6 4\"" : "",
                pts.toString().trim()));
        for (double p : MARKED_PERCENTILES) {
          double v = r.ttftPercentile(p);
          g.append(
              fmt(
                  "<circle class=\"pmark\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\""
                      + " stroke=\"#fff\" stroke-width=\"1.5\"><title>%s p%s: %s</title>"
                      + "</circle>\n",
                  x.map(Math.max(loDecade, v)),
                  y.map(p),
                  color(r.policy()),
                  r.policy().cliName(),
                  fmtP(p),
                  TextReport.ms(v)));
        }
      }
      legend(g, f, li++, r.policy().cliName(), color(r.policy()), dashedCurve(r.policy()));
    }
    return g.append("</svg>\n").toString();
  }

  private static String fmtP(double p) {
    return TextReport.num(p);
  }

  private static String loadChart(PolicyResult r, int maxLoad, double tEnd) {
    Frame f = SHORT;
    LoadSeries l = r.load();
    double[] t = l.timesSec();
    boolean minutes = tEnd > 300;
    double scale = minutes ? 60 : 1;
    Axis x = Axis.linear(0, tEnd / scale, f.left, f.rightX());
    Axis y = Axis.linear(0, niceCeil(maxLoad), f.bottomY(), f.top);
    StringBuilder g = svgOpen("Load across ranks over time, " + r.policy().cliName(), f, "load");
    yGrid(g, f, y, "");
    xTimeGrid(g, f, x, minutes ? "simulated time (min)" : "simulated time (s)");
    yLabel(g, f, "requests in flight");
    int n = t.length;
    double[] lo = new double[n];
    double[] mid = new double[n];
    double[] hi = new double[n];
    for (int i = 0; i < n; i++) {
      int[] row = l.inFlight()[i].clone();
      Arrays.sort(row);
      lo[i] = row.length == 0 ? 0 : row[0];
      hi[i] = row.length == 0 ? 0 : row[row.length - 1];
      mid[i] =
          row.length == 0
              ? 0
              : row.length % 2 == 1
                  ? row[row.length / 2]
                  : (row[row.length / 2 - 1] + row[row.length / 2]) / 2.0;
    }
    String col = color(r.policy());
    StringBuilder band = new StringBuilder();
    for (int i = 0; i < n; i++) band.append(fmt("%.1f,%.1f ", x.map(t[i] / scale), y.map(hi[i])));
    for (int i = n - 1; i >= 0; i--) {
      band.append(fmt("%.1f,%.1f ", x.map(t[i] / scale), y.map(lo[i])));
    }
    g.append(
        fmt(
            "<polygon class=\"band\" fill=\"%s\" fill-opacity=\"0.28\" stroke=\"none\""
                + " points=\"%s\"/>\n",
            col, band.toString().trim()));
    StringBuilder med = new StringBuilder();
    for (int i = 0; i < n; i++) med.append(fmt("%.1f,%.1f ", x.map(t[i] / scale), y.map(mid[i])));
    g.append(
        fmt(
            "<polyline class=\"median\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\""
                + " points=\"%s\"/>\n",
            col, med.toString().trim()));
    int lx = f.rightX() + 16;
    g.append(
        fmt(
            "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"12\" fill=\"%s\" fill-opacity=\"0.28\"/>"
                + "<text x=\"%d\" y=\"%d\">least to most</text><text x=\"%d\" y=\"%d\">loaded"
                + " of %d ranks</text>\n",
            lx, f.top + 4, col, lx + 24, f.top + 14, lx + 24, f.top + 29, l.ranks().size()));
    int my = f.top + 50;
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>"
                + "<text x=\"%d\" y=\"%d\">median rank</text>\n",
            lx, lx + 18, my, my, col, lx + 24, my + 4));
    return g.append("</svg>\n").toString();
  }

  /** Vertical grid lines and labels for a linear time axis starting at 0. */
  private static void xTimeGrid(StringBuilder g, Frame f, Axis x, String label) {
    for (double v : ticks(x.hi)) {
      double px = x.map(v);
      g.append(
          fmt(
              "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n",
              px, px, f.top, f.bottomY()));
      g.append(
          fmt(
              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
              px, f.bottomY() + 16, TextReport.num(v)));
    }
    g.append(
        fmt(
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
            (f.left + f.rightX()) / 2, f.height - 10, label));
  }

  private static void yLabel(StringBuilder g, Frame f, String label) {
    int cy = (f.bottomY() + f.top) / 2;
    g.append(
        fmt(
            "<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\">%s"
                + "</text>\n",
            cy, cy, esc(label)));
  }

  /** A short axis label for a time in ms: 5 ms, 200 ms, 1 s, 20 s, 10 min. */
  public static String tickMs(double ms) {
    if (ms < 1000) return TextReport.num(Math.round(ms * 1000) / 1000.0) + " ms";
    if (ms < 600_000) return TextReport.num(Math.round(ms) / 1000.0) + " s";
    return TextReport.num(Math.round(ms / 60_000.0)) + " min";
  }

  private static String sampleStep(LoadSeries l) {
    double[] t = l.timesSec();
    if (t.length < 2) return "-";
    return TextReport.ms((t[1] - t[0]) * 1000);
  }

  private static StringBuilder svgOpen(String title, Frame f, String cssClass) {
    return new StringBuilder()
        .append(
            fmt(
                "<svg class=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\""
                    + " role=\"img\"><title>%s</title>\n",
                cssClass, W, f.height, esc(title)));
  }

  private static void yGrid(StringBuilder g, Frame f, Axis y, String unit) {
    for (double v : ticks(y.hi)) {
      double py = y.map(v);
      g.append(
          fmt(
              "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n",
              f.left, f.rightX(), py, py));
      g.append(
          fmt(
              "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s%s</text>\n",
              f.left - 6, py + 4, TextReport.num(v), unit));
    }
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#666\"/>\n",
            f.left, f.rightX(), f.bottomY(), f.bottomY()));
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#666\"/>\n",
            f.left, f.left, f.top, f.bottomY()));
  }

  private static void legend(
      StringBuilder g, Frame f, int i, String label, String color, boolean dashed) {
    int x = f.rightX() + 16;
    int y = f.top + 10 + i * 16;
    g.append(
        fmt(
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%s\"%s/>"
                + "<text x=\"%d\" y=\"%d\">%s</text>\n",
            x,
            x + 18,
            y,
            y,
            color,
            dashed ? "1.5" : "3",
            dashed ? " stroke-dasharray=\"4 3\"" : "",
            x + 24,
            y + 4,
            esc(label)));
  }

  /** Up to about 6 round ticks from 0 to hi (inclusive). */
  public static double[] ticks(double hi) {
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

  /** Whether the policy's TTFT curve is dashed (approx: it often lies on kv's). */
  private static boolean dashedCurve(Policy p) {
    return p == Policy.APPROX;
  }

  /** The smallest multiple of a nice step that is ≥ v (at least 1). */
  public static double niceCeil(double v) {
    if (v <= 1) return 1;
    double step = niceStep(v / 5);
    return Math.ceil(v / step - 1e-9) * step;
  }

  private static String color(Policy p) {
    return POLICY_COLORS[p.ordinal() % POLICY_COLORS.length];
  }

  /**
   * The colour of a policy named as on the command line ({@code kv}, {@code round-robin} ...), the
   * same in every report (simulate's and bench fleet's); grey for a name that is no policy.
   */
  public static String policyColor(String cliName) {
    try {
      return color(Policy.parse(cliName));
    } catch (IllegalArgumentException unknown) {
      return "#7f7f7f";
    }
  }

  public static String esc(String s) {
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

  /** One plot's height and margins (its width is W). */
  private record Frame(int height, int left, int right, int top, int bottom) {
    public int rightX() {
      return W - right;
    }

    public int bottomY() {
      return height - bottom;
    }
  }

  /** Maps data values to SVG coordinates, linearly or by log10. */
  private record Axis(double lo, double hi, double from, double to, boolean log) {
    public static Axis linear(double lo, double hi, double from, double to) {
      return new Axis(lo, hi, from, to, false);
    }

    public static Axis log(double lo, double hi, double from, double to) {
      return new Axis(lo, hi, from, to, true);
    }

    public double map(double v) {
      double f =
          log
              ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))
              : (v - lo) / (hi - lo);
      return from + f * (to - from);
    }
  }
}
