package io.kvrouter.sim.report;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.sim.AdmissionComparison;
import io.kvrouter.sim.AdmissionResult;
import io.kvrouter.sim.AdmissionSimulation;
import io.kvrouter.sim.TenantRule;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** {@code simulate --admission}'s results ({@link AdmissionComparison}) as a table or as JSON. */
public final class AdmissionReport {
  private AdmissionReport() {}

  public static void print(AdmissionComparison c, PrintWriter out) {
    print(c, out, "kvrouter simulate --admission", "simulated");
  }

  /**
   * The table under the title {@code command}, its times called {@code clock} seconds ({@code bench
   * fleet --admission} prints live runs in model time).
   */
  public static void print(AdmissionComparison c, PrintWriter out, String command, String clock) {
    TenantRule rule = c.rule();
    AdmissionSimulation.Settings s = c.settings();
    AdmissionResult first = c.runs().get(0);
    out.printf(
        Locale.ROOT,
        "%s: %s, %,d requests, %s (speedup %.2f); unloaded baseline:"
            + " fifo at load factor %s (speedup %.2f)%n",
        command,
        c.trace(),
        first.sent(),
        Double.isNaN(c.loadFactor())
            ? "load set by --speedup"
            : "load factor " + num(c.loadFactor()),
        first.speedup(),
        num(AdmissionComparison.UNLOADED_FACTOR),
        c.unloaded().speedup());
    int[] sent = first.sentPerTenant();
    StringBuilder shares = new StringBuilder();
    for (int t = 0; t < sent.length; t++) {
      shares.append(t == 0 ? "" : ", ").append("t").append(t).append(' ').append(sent[t]);
    }
    out.printf(
        Locale.ROOT,
        "tenants: %d (%s)%s%s; high priority: %s of requests; admission: --busy-requests %d,"
            + " --max-queue-time %ss, --max-queue-depth %d%s; goodput: TTFT <= %s ms%n%n",
        rule.tenants(),
        shares,
        rule.cachedTenant()
            ? ", t0 = the mostly-cached requests"
            : rule.sharedPrefix()
                ? String.format(
                    Locale.ROOT,
                    ", t0 behind %d shared prompts of %d blocks",
                    rule.prefixPrompts(),
                    rule.prefixBlocks())
                : rule.heavyFactor() > 1 ? ", t0 heavy x" + num(rule.heavyFactor()) : "",
        s.heavyWeight() != 1 ? ", t0 weight " + num(s.heavyWeight()) : "",
        num(rule.highPriorityShare()),
        s.busyRequests(),
        num(s.maxQueueTimeSec()),
        s.maxQueueDepth(),
        rates(s.rates())
            + (s.maxEvictions() > 0
                ? ", --evict-lower-bands --max-evictions " + s.maxEvictions()
                : "")
            + (s.excessFactor() > 0 ? ", --tenant-excess-factor " + num(s.excessFactor()) : ""),
        num(s.ttftSloMs()));
    StringBuilder head =
        new StringBuilder(
            String.format(
                Locale.ROOT,
                "%-22s %24s %8s %8s %8s %7s %7s",
                "mode",
                "high TTFT p50/p90/p99 s",
                "x unld",
                "429",
                "waited",
                "Jain",
                "good/s"));
    for (int t = 0; t < rule.tenants(); t++)
      head.append(String.format(Locale.ROOT, " %7s", "t" + t + " p90"));
    head.append(String.format(Locale.ROOT, " %6s %5s", "hit", "lost"));
    out.println(head);
    List<AdmissionResult> all = new ArrayList<>();
    all.add(c.unloaded());
    all.addAll(c.runs());
    all.addAll(c.noHeavy());
    for (AdmissionResult r : all) {
      StringBuilder line =
          new StringBuilder(
              String.format(
                  Locale.ROOT,
                  "%-22s %24s %8s %8d %8d %7.3f %7.2f",
                  r.label(),
                  String.format(
                      Locale.ROOT,
                      "%s / %s / %s",
                      sec(r.highTtft(50)),
                      sec(r.highTtft(90)),
                      sec(r.highTtft(99))),
                  r == c.unloaded() ? "1" : num2(c.highP90OverUnloaded(r)),
                  r.refused(),
                  r.waited(),
                  r.jain(),
                  r.goodput()));
      for (int t = 0; t < rule.tenants(); t++) {
        line.append(String.format(Locale.ROOT, " %7s", sec(r.tenantTtft(t, 90))));
      }
      line.append(String.format(Locale.ROOT, " %5.1f%% %5d", 100 * r.hitRate(), r.lost()));
      out.println(line);
    }
    out.println();
    out.println(
        "TTFT in "
            + clock
            + " seconds, answered requests only (a 429 has none); x unld = high"
            + " priority p90 TTFT over the unloaded run's; 429 = refused (queue full, waited"
            + " --max-queue-time, or over --tenant-token-rate); Jain = Jain's index of the tenants' served cost ((prompt -"
            + " cached) + output tokens finished within the arrival span); good/s = requests"
            + " answered within the TTFT SLO per second of the arrival span; lost = neither"
            + " answered nor refused.");
    for (AdmissionResult r : c.runs()) {
      double raise = c.heavyRaise(r);
      if (!Double.isNaN(raise)) {
        out.printf(
            Locale.ROOT,
            "%s: the heavy tenant raises another tenant's p90 TTFT by at most %+.1f%%%n",
            r.mode().label,
            100 * raise);
      }
    }
    if (rule.heavyFactor() > 1) {
      // the high band without the heavy tenant's requests, against the same in the unloaded run
      double base = c.unloaded().otherHighTtft(90);
      for (AdmissionResult r : c.runs()) {
        double p90 = r.otherHighTtft(90);
        if (Double.isNaN(p90) || Double.isNaN(base)) continue;
        out.printf(
            Locale.ROOT,
            "%s: high priority without t0's requests: p90 %s s, %.2f x unloaded (%s s)%n",
            r.mode().label,
            sec(p90),
            p90 / base,
            sec(base));
      }
    }
    if (c.settings().rates().on()) {
      List<AdmissionResult> limited = new ArrayList<>(c.runs());
      limited.addAll(c.noHeavy());
      for (AdmissionResult r : limited) {
        StringBuilder line =
            new StringBuilder(r.label()).append(": over the token rate (high/normal):");
        for (int t = 0; t < rule.tenants(); t++) {
          line.append(
              String.format(
                  Locale.ROOT, " t%d %d/%d", t, r.rateRefused(t, 0), r.rateRefused(t, 1)));
        }
        out.println(line);
      }
    }
    List<AdmissionResult> evicting = new ArrayList<>(c.runs());
    evicting.addAll(c.noHeavy());
    for (AdmissionResult r : evicting) {
      AdmissionResult.Evictions e = r.evictions();
      if (e == AdmissionResult.Evictions.NONE) continue;
      StringBuilder line =
          new StringBuilder(
              String.format(
                  Locale.ROOT,
                  "%s: evicted %d times (%d requests: %d answered, %d refused), %,d prefill tokens"
                      + " wasted; per tenant (high/normal):",
                  r.label(),
                  e.total(),
                  e.requests(),
                  e.answered(),
                  e.refused(),
                  e.wastedPrefillTokens()));
      for (int t = 0; t < rule.tenants(); t++) {
        line.append(String.format(Locale.ROOT, " t%d %d/%d", t, e.of(t, 0), e.of(t, 1)));
      }
      out.println(line);
    }
    if (!Double.isNaN(c.protectedDemand()[0])) {
      out.printf(
          Locale.ROOT,
          "the light tenants and t0's high priority ask %.1f%% of the fleet's prefill time with"
              + " every reusable prefix cached, %.1f%% with none%n",
          100 * c.protectedDemand()[0],
          100 * c.protectedDemand()[1]);
    }
    out.printf(
        Locale.ROOT,
        "nothing lost: %s (every request answered or refused with 429)%n",
        c.nothingLost() ? "yes" : "NO");
    out.printf(Locale.ROOT, "wall time: %.1f s%n", c.wallNanos() / 1e9);
  }

  public static String json(AdmissionComparison c) {
    StringWriter w = new StringWriter();
    try (JsonGenerator g = new JsonFactory().createGenerator(w)) {
      g.useDefaultPrettyPrinter();
      g.writeStartObject();
      g.writeStringField("trace", c.trace());
      if (!Double.isNaN(c.loadFactor())) g.writeNumberField("load_factor", c.loadFactor());
      g.writeNumberField("unloaded_load_factor", AdmissionComparison.UNLOADED_FACTOR);
      TenantRule rule = c.rule();
      g.writeObjectFieldStart("tenants");
      g.writeNumberField("count", rule.tenants());
      g.writeNumberField("heavy_factor", rule.heavyFactor());
      g.writeBooleanField("cached_tenant", rule.cachedTenant());
      if (rule.sharedPrefix()) {
        g.writeObjectFieldStart("cached_tenant_prefix");
        g.writeNumberField("blocks", rule.prefixBlocks());
        g.writeNumberField("prompts", rule.prefixPrompts());
        g.writeNumberField("own_blocks", rule.prefixOwn());
        g.writeEndObject();
      }
      g.writeNumberField("high_priority_share", rule.highPriorityShare());
      g.writeNumberField("seed", rule.seed());
      g.writeEndObject();
      AdmissionSimulation.Settings s = c.settings();
      g.writeObjectFieldStart("admission");
      g.writeNumberField("busy_requests", s.busyRequests());
      g.writeNumberField("max_queue_time_s", s.maxQueueTimeSec());
      g.writeNumberField("max_queue_depth", s.maxQueueDepth());
      g.writeNumberField("ttft_slo_ms", s.ttftSloMs());
      g.writeNumberField("share_slack", s.shareSlack());
      g.writeNumberField("heavy_tenant_weight", s.heavyWeight());
      g.writeNumberField("max_evictions", s.maxEvictions());
      g.writeNumberField("tenant_excess_factor", s.excessFactor());
      if (s.rates().on()) {
        g.writeObjectFieldStart("tenant_token_rate");
        g.writeNumberField("default", s.rates().defaultRate());
        for (Map.Entry<String, Double> e : s.rates().tenantRates().entrySet()) {
          g.writeNumberField(e.getKey(), e.getValue());
        }
        g.writeNumberField("burst_s", s.rates().burst().toNanos() / 1e9);
        g.writeEndObject();
      }
      g.writeEndObject();
      g.writeFieldName("unloaded");
      run(g, c, c.unloaded());
      g.writeArrayFieldStart("modes");
      for (AdmissionResult r : c.runs()) run(g, c, r);
      g.writeEndArray();
      g.writeArrayFieldStart("no_heavy");
      for (AdmissionResult r : c.noHeavy()) run(g, c, r);
      g.writeEndArray();
      g.writeObjectFieldStart("protected_prefill_share");
      field(g, "ideal_cache", c.protectedDemand()[0]);
      field(g, "no_cache", c.protectedDemand()[1]);
      g.writeEndObject();
      g.writeBooleanField("nothing_lost", c.nothingLost());
      g.writeNumberField("wall_s", c.wallNanos() / 1e9);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return w.toString();
  }

  private static void run(JsonGenerator g, AdmissionComparison c, AdmissionResult r)
      throws IOException {
    g.writeStartObject();
    g.writeStringField("label", r.label());
    g.writeStringField("mode", r.mode().label);
    g.writeNumberField("speedup", r.speedup());
    g.writeNumberField("sent", r.sent());
    g.writeNumberField("answered", r.answered());
    g.writeNumberField("refused_429", r.refused());
    g.writeNumberField("refused_queue_full", r.refusedFull());
    g.writeNumberField("refused_queue_timeout", r.refusedTimeout());
    g.writeNumberField("refused_rate_limit", r.refusedRate());
    g.writeNumberField("engine_rejected", r.engineRejected());
    g.writeNumberField("lost", r.lost());
    g.writeBooleanField("nothing_lost", r.nothingLost());
    g.writeNumberField("waited", r.waited());
    g.writeObjectFieldStart("high_priority_ttft_ms");
    field(g, "p50", r.highTtft(50));
    field(g, "p90", r.highTtft(90));
    field(g, "p99", r.highTtft(99));
    g.writeEndObject();
    if (r != c.unloaded()) {
      field(g, "high_priority_p90_over_unloaded", c.highP90OverUnloaded(r));
    }
    field(g, "high_priority_p90_without_t0_ms", r.otherHighTtft(90));
    g.writeArrayFieldStart("tenants");
    for (int t = 0; t < r.sentPerTenant().length; t++) {
      g.writeStartObject();
      g.writeStringField("tenant", "t" + t);
      g.writeNumberField("sent", r.sentPerTenant()[t]);
      g.writeNumberField("answered", r.tenantTtftMs()[t].length);
      field(g, "ttft_p90_ms", r.tenantTtft(t, 90));
      g.writeNumberField("served_cost", r.servedCost()[t]);
      g.writeNumberField("hit_rate", r.tenantHitRate()[t]);
      g.writeNumberField("rate_refused_high", r.rateRefused(t, 0));
      g.writeNumberField("rate_refused_normal", r.rateRefused(t, 1));
      g.writeEndObject();
    }
    g.writeEndArray();
    field(g, "jain_served_cost", r.jain());
    g.writeNumberField("good", r.good());
    g.writeNumberField("goodput_per_s", r.goodput());
    if (!c.noHeavy().isEmpty() && c.runs().contains(r)) {
      field(g, "heavy_raise_of_other_p90", c.heavyRaise(r));
    }
    g.writeNumberField("hit_rate", r.hitRate());
    AdmissionResult.Evictions e = r.evictions();
    if (e != AdmissionResult.Evictions.NONE) {
      g.writeObjectFieldStart("evictions");
      g.writeNumberField("total", e.total());
      g.writeNumberField("requests", e.requests());
      g.writeNumberField("answered", e.answered());
      g.writeNumberField("refused", e.refused());
      g.writeNumberField("wasted_prefill_tokens", e.wastedPrefillTokens());
      g.writeArrayFieldStart("tenants");
      for (int t = 0; t < e.perTenantBand().length; t++) {
        g.writeStartObject();
        g.writeStringField("tenant", "t" + t);
        g.writeNumberField("high", e.of(t, 0));
        g.writeNumberField("normal", e.of(t, 1));
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
    }
    g.writeNumberField("arrival_span_s", r.arrivalSpanSec());
    g.writeNumberField("makespan_s", r.makespanSec());
    g.writeNumberField("wall_s", r.wallNanos() / 1e9);
    g.writeEndObject();
  }

  /** The token-rate limits as flags, "" when off. */
  private static String rates(TokenRateConfig r) {
    if (!r.on()) return "";
    StringBuilder b = new StringBuilder();
    if (r.defaultRate() > 0) b.append(", --tenant-token-rate ").append(num(r.defaultRate()));
    r.tenantRates().entrySet().stream()
        .sorted(Map.Entry.comparingByKey())
        .forEach(
            e ->
                b.append(", --tenant-token-rate ")
                    .append(e.getKey())
                    .append('=')
                    .append(num(e.getValue())));
    return b.append(", --tenant-token-burst ")
        .append(num(r.burst().toNanos() / 1e9))
        .append('s')
        .toString();
  }

  /** A number, or null when there is none (NaN: no request to measure). */
  private static void field(JsonGenerator g, String name, double v) throws IOException {
    if (Double.isFinite(v)) g.writeNumberField(name, v);
    else g.writeNullField(name);
  }

  private static String sec(double ms) {
    return Double.isNaN(ms) ? "-" : String.format(Locale.ROOT, "%.2f", ms / 1000);
  }

  private static String num2(double v) {
    return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.2f", v);
  }

  private static String num(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e15
        ? Long.toString((long) v)
        : String.format(Locale.ROOT, "%s", v);
  }
}
