package io.kvrouter.harness;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.gateway.AdmissionConfig;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.AdmissionComparison;
import io.kvrouter.sim.AdmissionResult;
import io.kvrouter.sim.AdmissionSimulation;
import io.kvrouter.sim.LoadFactor;
import io.kvrouter.sim.TenantRule;
import io.kvrouter.sim.report.AdmissionReport;
import io.kvrouter.sim.trace.TracePrompts;
import io.kvrouter.sim.trace.TraceRequest;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code kvrouter bench fleet --admission}: {@code simulate --admission}'s comparison on the live
 * fleet (docs/SIMULATION.md, "Admission on the live fleet"). The same runs (an unloaded fifo
 * baseline at {@link AdmissionComparison#UNLOADED_FACTOR}, each mode at the load asked and, with a
 * heavy tenant, each mode without its excess), the same tenants and priorities ({@link
 * TenantRule}), the same figures ({@link AdmissionResult}) and the same table ({@link
 * AdmissionReport}), measured at the client through a real gateway in front of mock engines.
 *
 * <pre>
 * Implementation notes
 *
 * Each run is one FleetBench.runPolicy("kv", ...) on a fresh fleet and gateway, one after
 * another on the calling thread, with a LiveAdmission: fifo is today's gateway (no busy limit, so
 * nothing ever waits); fair-cost sets the router's busy limits (--busy-requests,
 * --busy-prefill-tokens) and the gateway's admission queue (--max-queue-depth, --max-queue-time
 * divided by --time-scale: the bench's times are model times), tenants from the x-kvrouter-tenant
 * header. fair-tokens is simulate's alone: the gateway charges uncached prefill + decode tokens.
 * Request i carries tenant "t" + tenant[i] (the simulator's names) and priority -1 when the rule
 * puts it in the high band (the gateway's band for a negative vLLM priority), else 0.
 *
 * The requests are the trace's with their output capped at --max-output-tokens (the load factor's
 * capacity and the rule read them; the engines generate that many tokens). result() turns a run's
 * per-request figures (FleetLoad: TTFT in model ms, why not answered, served tokens, finish) into
 * an AdmissionResult, as AdmissionSimulation.result does in simulated time: a 429 queue_full,
 * queue_timeout or rate_limit_exceeded is refused (the last counted per tenant and band), any
 * other failure is lost; simulate's token-rate limits go to every gateway but the unloaded
 * baseline's, per wall second (wallRates); served cost counts answers that ended
 * within the arrival span; waited is the gateways' queued plus holder waits (their /metrics);
 * queue waits per tenant are not measured live (0). AdmissionComparison and AdmissionReport then
 * read them unchanged. Exit codes: 0; 1 when a request was neither answered nor refused, a router's
 * index differs from its engine's cache, or a gateway still counts peer requests; 2 for bad
 * settings.
 * </pre>
 */
public final class AdmissionFleetBench {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The flags of {@code bench fleet --admission}.
   *
   * @param fleet the fleet's flags (its policies are not used: admission routes with kv)
   * @param modes the admission modes, in the order asked
   * @param rule how requests get their tenant and priority
   * @param admission the admission's limits (simulate's; times in model seconds)
   * @param loadFactor offer the trace at this factor of the fleet's capacity; NaN: at --speedup
   */
  public record Settings(
      FleetBench.Settings fleet,
      List<AdmissionSimulation.Mode> modes,
      TenantRule rule,
      AdmissionSimulation.Settings admission,
      double loadFactor) {
    public Settings {
      modes = List.copyOf(modes);
    }
  }

  private final Settings s;
  private final FleetBench.Cli cli;

  public AdmissionFleetBench(Settings settings, FleetBench.Cli cli) {
    this.s = settings;
    this.cli = cli;
  }

  /** Runs the comparison and prints it; returns the exit code (0, 1, or 2). */
  public int run(PrintWriter out, PrintWriter err) throws Exception {
    return FleetBench.quietly(() -> bench(out, err));
  }

  private record Job(
      TenantRule.Assignment assignment,
      double speedup,
      AdmissionSimulation.Mode mode,
      String label) {}

  private int bench(PrintWriter out, PrintWriter err) throws Exception {
    FleetBench.Settings f = s.fleet();
    TracePrompts loaded;
    List<TraceRequest> trace;
    double speedup;
    double unloadedSpeedup;
    try {
      if (s.modes().isEmpty()) throw new IllegalArgumentException("--admission needs a mode");
      if (s.modes().contains(AdmissionSimulation.Mode.FAIR_TOKENS)) {
        throw new IllegalArgumentException(
            "--admission fair-tokens is simulate's alone: the gateway charges uncached prefill +"
                + " decode tokens (fair-cost)");
      }
      if (s.admission().shareSlack() >= 0) {
        throw new IllegalArgumentException("--share-slack is simulate's alone");
      }
      FleetBench.check(f.gateways() == 1, "--admission runs one gateway (--gateways 1)");
      loaded = FleetBench.validate(f);
      trace = loaded.requests(f.maxOutputTokens());
      TimingModel timing =
          new TimingModel(
              f.prefillBaseMs(), f.prefillMsPer1k(), f.decodeMsPerToken(), f.maxBatch());
      speedup =
          Double.isNaN(s.loadFactor())
              ? f.speedup()
              : LoadFactor.speedup(trace, timing, f.engines(), s.loadFactor());
      unloadedSpeedup =
          LoadFactor.speedup(trace, timing, f.engines(), AdmissionComparison.UNLOADED_FACTOR);
    } catch (IllegalArgumentException e) {
      err.println("kvrouter bench fleet: " + e.getMessage());
      return 2;
    }
    TenantRule rule = s.rule();
    TenantRule.Assignment all = rule.assign(trace);
    TenantRule.Assignment light = rule.heavyFactor() > 1 ? rule.withoutHeavy(all) : null;
    List<Job> jobs = new ArrayList<>();
    jobs.add(new Job(all, unloadedSpeedup, AdmissionSimulation.Mode.FIFO, "unloaded fifo"));
    for (AdmissionSimulation.Mode m : s.modes()) jobs.add(new Job(all, speedup, m, m.label));
    if (light != null) {
      for (AdmissionSimulation.Mode m : s.modes()) {
        jobs.add(new Job(light, speedup, m, m.label + " no-heavy"));
      }
    }
    if (!f.json()) {
      out.printf(
          Locale.ROOT,
          "kvrouter bench fleet --admission: %s, %,d requests, %d %s engines x %,d KV blocks of %d"
              + " tokens, time scale %s, output capped at %s; %d runs, one after another%n",
          loaded.name(),
          trace.size(),
          f.engines(),
          f.inProcess() ? "in-process" : "process",
          f.gpuBlocks(),
          f.blockSize(),
          FleetReport.num(f.timeScale()),
          f.maxOutputTokens() > 0 ? Integer.toString(f.maxOutputTokens()) : "none",
          jobs.size());
      out.flush();
    }
    long start = System.nanoTime();
    List<AdmissionResult> results = new ArrayList<>();
    List<PolicyRun> runs = new ArrayList<>();
    for (Job j : jobs) {
      TracePrompts prompts = TracePrompts.of(loaded.name(), j.assignment().requests());
      PolicyRun run =
          new FleetBench(f.withSpeedup(j.speedup()), cli)
              // the unloaded baseline (the first job) is today's gateway: no token-rate limit
              .runPolicy("kv", prompts, live(j.assignment(), j.mode(), j != jobs.get(0)));
      runs.add(run);
      results.add(result(j.label(), j.mode(), j.assignment(), prompts, run, j.speedup()));
      if (!f.json()) {
        out.printf(Locale.ROOT, "  %s done in %.1f s%n", j.label(), run.wallSec);
        out.flush();
      }
    }
    int k = s.modes().size();
    AdmissionComparison c =
        new AdmissionComparison(
            loaded.name(),
            rule,
            s.admission(),
            s.loadFactor(),
            results.get(0),
            List.copyOf(results.subList(1, 1 + k)),
            light == null ? List.of() : List.copyOf(results.subList(1 + k, 1 + 2 * k)),
            new double[] {Double.NaN, Double.NaN}, // the protected demand: simulate's alone
            System.nanoTime() - start);
    if (f.json()) {
      ObjectNode root = (ObjectNode) JSON.readTree(AdmissionReport.json(c));
      ObjectNode liveNode = root.putObject("live");
      liveNode.put("engines", f.engines());
      liveNode.put("in_process", f.inProcess());
      liveNode.put("time_scale", f.timeScale());
      liveNode.put("max_output_tokens", f.maxOutputTokens());
      ArrayNode arr = liveNode.putArray("runs");
      for (int i = 0; i < runs.size(); i++) {
        PolicyRun r = runs.get(i);
        ObjectNode o = arr.addObject();
        o.put("label", results.get(i).label());
        o.put("gateway_waits", r.gatewayWaits);
        ObjectNode q = o.putObject("queued_by_band_tenant");
        for (Map.Entry<String, Long> e : r.queuedByBandTenant.entrySet()) {
          q.put(e.getKey(), e.getValue());
        }
        ObjectNode gr = o.putObject("gateway_refused_by_band_tenant");
        for (Map.Entry<String, Long> e : r.refusedByBandTenant.entrySet()) {
          gr.put(e.getKey(), e.getValue());
        }
        ObjectNode ev = o.putObject("gateway_evicted_by_band_tenant");
        for (Map.Entry<String, Long> e : r.evictedByBandTenant.entrySet()) {
          ev.put(e.getKey(), e.getValue());
        }
        ObjectNode cr = o.putObject("client_refused_by_band_tenant");
        for (Map.Entry<String, Long> e : clientRefused(jobs.get(i).assignment(), r).entrySet()) {
          cr.put(e.getKey(), e.getValue());
        }
        ObjectNode grl = o.putObject("gateway_rate_limited_by_tenant");
        for (Map.Entry<String, Long> e : r.rateLimitedByTenant.entrySet()) {
          grl.put(e.getKey(), e.getValue());
        }
        ObjectNode why = o.putObject("not_answered_by_reason");
        for (Map.Entry<String, Integer> e : r.errorReasons.entrySet()) {
          why.put(e.getKey(), e.getValue());
        }
        o.put("index_equal", r.indexProblems.isEmpty());
        o.put("valid", r.invalid.isEmpty());
        ArrayNode reasons = o.putArray("invalid_reasons");
        for (String w : r.invalid) reasons.add(w);
      }
      out.println(JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root));
    } else {
      out.println();
      AdmissionReport.print(c, out, "kvrouter bench fleet --admission", "model");
      out.println();
      out.println(
          s.admission().maxEvictions() > 0
              ? "Evictions at the gateway (--evict-lower-bands, at most "
                  + s.admission().maxEvictions()
                  + " per request; kvrouter_gateway_queue_evictions_total by band/tenant),"
                  + " beside the high band's TTFT (model s, wall-clock on the machine's cores):"
              : "Evictions at the gateway: off (--evict-lower-bands not given); the high band's"
                  + " TTFT (model s, wall-clock on the machine's cores):");
      for (int i = 0; i < runs.size(); i++) {
        AdmissionResult r = results.get(i);
        out.println(
            "  "
                + evictionLine(
                    r.label(),
                    runs.get(i).evictedByBandTenant,
                    r.highTtft(50),
                    r.highTtft(90),
                    r.highTtft(99)));
      }
    }
    out.flush();
    int rc = 0;
    for (int i = 0; i < runs.size(); i++) {
      PolicyRun r = runs.get(i);
      String label = results.get(i).label();
      for (String why : r.invalid) {
        err.println("kvrouter bench fleet: WARNING: the " + label + " run is invalid: " + why);
      }
      if (!results.get(i).nothingLost()) {
        err.println(
            "kvrouter bench fleet: the "
                + label
                + " run has requests neither answered nor refused with 429: "
                + r.errorReasons);
        for (String line : r.failed) {
          if (!line.contains("status 429 queue_")) err.println("  " + line);
        }
        rc = 1;
      }
      if (!r.indexProblems.isEmpty()) {
        err.println(
            "kvrouter bench fleet: the "
                + label
                + " run's router index does not equal its engine's cache");
        rc = 1;
      }
      if (!r.syncSettled) {
        err.println(
            "kvrouter bench fleet: the " + label + " run's gateway still counts peer requests");
        rc = 1;
      }
    }
    err.flush();
    return rc;
  }

  /**
   * One run's line of the text report's evictions: the gateway's evictions by band/tenant (its
   * kvrouter_gateway_queue_evictions_total, in the map's order) and the high band's TTFT
   * percentiles, in model seconds ("-" when the band had no answer).
   */
  static String evictionLine(
      String label, Map<String, Long> evicted, double p50Ms, double p90Ms, double p99Ms) {
    long total = 0;
    StringBuilder per = new StringBuilder();
    for (Map.Entry<String, Long> e : evicted.entrySet()) {
      if (e.getValue() == 0) continue;
      total += e.getValue();
      per.append(per.isEmpty() ? " (" : ", ").append(e.getKey()).append(' ').append(e.getValue());
    }
    if (!per.isEmpty()) per.append(')');
    return String.format(
        Locale.ROOT,
        "%s: evicted %d%s; high TTFT p50 / p90 / p99 %s / %s / %s s",
        label,
        total,
        per,
        sec(p50Ms),
        sec(p90Ms),
        sec(p99Ms));
  }

  private static String sec(double ms) {
    return Double.isNaN(ms) ? "-" : String.format(Locale.ROOT, "%.2f", ms / 1000);
  }

  /**
   * The requests the client saw refused with 429 by the queue, by the gateway's band label and
   * their tenant ("high/t0"): what the gateway's rejection counters must show if every request's
   * tenant and priority reached it.
   */
  private static Map<String, Long> clientRefused(TenantRule.Assignment a, PolicyRun run) {
    Map<String, Long> out = new TreeMap<>();
    for (int i = 0; i < run.requestWhy.length; i++) {
      String why = run.requestWhy[i];
      if (why == null || !why.startsWith("status 429 queue_")) continue;
      out.merge((a.band()[i] == 0 ? "high" : "normal") + "/t" + a.tenant()[i], 1L, Long::sum);
    }
    return out;
  }

  /**
   * The gateway's admission and the requests' tenants and priorities of one run; with {@code
   * rateLimited}, simulate's token-rate limits too.
   */
  private LiveAdmission live(
      TenantRule.Assignment a, AdmissionSimulation.Mode mode, boolean rateLimited) {
    int n = a.requests().size();
    String[] tenants = new String[n];
    int[] priorities = new int[n];
    for (int i = 0; i < n; i++) {
      tenants[i] = "t" + a.tenant()[i];
      priorities[i] = a.band()[i] == 0 ? -1 : 0;
    }
    AdmissionSimulation.Settings as = s.admission();
    TokenRateConfig rates =
        rateLimited ? wallRates(as.rates(), s.fleet().timeScale()) : TokenRateConfig.OFF;
    if (mode == AdmissionSimulation.Mode.FIFO) {
      return new LiveAdmission(null, 0, -1, false, tenants, priorities, rates);
    }
    long wallNanos = Math.max(1, Math.round(as.maxQueueTimeSec() * 1e9 / s.fleet().timeScale()));
    AdmissionConfig queue =
        new AdmissionConfig(
            as.maxQueueDepth(),
            Duration.ofNanos(wallNanos),
            0,
            AdmissionConfig.TenantSource.HEADER,
            Map.of(),
            AdmissionConfig.DEFAULTS.defaultDecodeTokens(),
            Math.max(AdmissionConfig.DEFAULTS.maxTenantLabels(), s.rule().tenants()),
            TokenRateConfig.OFF,
            as.maxEvictions(),
            as.excessFactor());
    return new LiveAdmission(
        queue,
        as.busyRequests(),
        as.busyPrefillTokens(),
        as.holderWait(),
        tenants,
        priorities,
        rates);
  }

  /**
   * simulate's token-rate limits (model seconds) as the gateway's (wall seconds): a model second is
   * 1 / timeScale wall seconds, so a rate of r tokens per model second is r × timeScale per wall
   * second, and a burst of b model seconds b / timeScale wall seconds (the same tokens).
   */
  static TokenRateConfig wallRates(TokenRateConfig r, double timeScale) {
    if (!r.on()) return TokenRateConfig.OFF;
    Map<String, Double> tenants = new TreeMap<>();
    for (Map.Entry<String, Double> e : r.tenantRates().entrySet()) {
      tenants.put(e.getKey(), e.getValue() * timeScale);
    }
    long burstNanos = Math.max(1, Math.round(r.burst().toNanos() / timeScale));
    return new TokenRateConfig(
        r.defaultRate() * timeScale,
        tenants,
        Duration.ofNanos(burstNanos),
        TokenRateConfig.OFF.maxTenants());
  }

  /** A live run's figures as simulate's AdmissionResult (class notes). */
  private AdmissionResult result(
      String label,
      AdmissionSimulation.Mode mode,
      TenantRule.Assignment a,
      TracePrompts prompts,
      PolicyRun run,
      double speedup) {
    int n = a.requests().size();
    int tenants = s.rule().tenants();
    int answered = 0;
    int refusedFull = 0;
    int refusedTimeout = 0;
    int[][] rateRefused = new int[tenants][2];
    int lost = 0;
    int good = 0;
    int[] sent = new int[tenants];
    int[] perTenant = new int[tenants];
    double arrivalSpanSec = prompts.offsetMs(n - 1) / speedup / 1000;
    double[] servedCost = new double[tenants];
    long[] tenantPrompt = new long[tenants];
    long[] tenantCached = new long[tenants];
    for (int i = 0; i < n; i++) {
      int t = a.tenant()[i];
      sent[t]++;
      String why = run.requestWhy[i];
      if (why == null) {
        answered++;
        perTenant[t]++;
        tenantPrompt[t] += run.requestPromptTokens[i];
        tenantCached[t] += run.requestCachedTokens[i];
        if (run.requestTtftMs[i] <= s.admission().ttftSloMs()) good++;
        if (run.requestFinishSec[i] <= arrivalSpanSec) {
          servedCost[t] += run.requestServedTokens[i];
        }
      } else if (why.equals("status 429 queue_full")) {
        refusedFull++;
      } else if (why.equals("status 429 queue_timeout")) {
        refusedTimeout++;
      } else if (why.equals("status 429 rate_limit_exceeded")) {
        rateRefused[t][a.band()[i] == 0 ? 0 : 1]++;
      } else {
        lost++;
      }
    }
    double[] highTtft =
        AdmissionResult.highBandTtftMs(a, run.requestTtftMs, i -> run.requestWhy[i] == null, false);
    double[] otherHighTtft =
        AdmissionResult.highBandTtftMs(a, run.requestTtftMs, i -> run.requestWhy[i] == null, true);
    double[][] tenantTtft = new double[tenants][];
    for (int t = 0; t < tenants; t++) tenantTtft[t] = new double[perTenant[t]];
    int[] fill = new int[tenants];
    for (int i = 0; i < n; i++) {
      if (run.requestWhy[i] != null) continue;
      int t = a.tenant()[i];
      tenantTtft[t][fill[t]++] = run.requestTtftMs[i];
    }
    return new AdmissionResult(
        label,
        mode,
        n,
        answered,
        refusedFull,
        refusedTimeout,
        0,
        lost,
        (int) run.gatewayWaits,
        sent,
        highTtft,
        tenantTtft,
        servedCost,
        new double[tenants],
        good,
        arrivalSpanSec,
        run.makespanSec,
        run.hitRate(),
        tenantHitRate(tenantPrompt, tenantCached),
        speedup,
        rateRefused,
        Math.round(run.wallSec * 1e9),
        AdmissionResult.Evictions.NONE,
        otherHighTtft);
  }

  /** Each tenant's cached prompt tokens over its prompt tokens, answered requests (0: none). */
  private static double[] tenantHitRate(long[] prompt, long[] cached) {
    double[] out = new double[prompt.length];
    for (int t = 0; t < out.length; t++) {
      out[t] = prompt[t] == 0 ? 0 : (double) cached[t] / prompt[t];
    }
    return out;
  }
}
