package io.kvrouter.sim;

import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.jspecify.annotations.Nullable;

/**
 * {@code simulate --admission}: the admission modes on one trace, each on a fresh fleet, with the
 * baselines the targets compare against (docs/SIMULATION.md, "Admission and fair shares"):
 * an unloaded run (fifo at {@link #UNLOADED_FACTOR} of capacity, same tenants and priorities) and,
 * with a heavy tenant, every mode again on the trace without the heavy tenant's excess ({@link
 * TenantRule#withoutHeavy}). Token-rate limits ({@link TokenRateConfig}) apply to every run but the
 * unloaded one, which is today's gateway. Runs go on up to {@code threads} threads; each run is
 * deterministic, so the results do not depend on it.
 *
 * @param trace the trace's name
 * @param rule how tenants and priorities were assigned
 * @param settings the admission's limits
 * @param loadFactor the load factor of the runs, or NaN when --speedup set the rate
 * @param unloaded the unloaded fifo run
 * @param runs one run per mode, in the order asked
 * @param noHeavy the same modes without the heavy tenant's excess; empty without a heavy tenant
 * @param protectedDemand with a heavy tenant, the prefill time that the light tenants' requests and
 *     the heavy tenant's high-priority ones ask, over the fleet's (ranks × the loaded runs' arrival
 *     span): {@code [0]} with every reusable prefix cached (LoadFactor's ideal cache), {@code [1]}
 *     with nothing cached; the two targets that protect them ask that both be served promptly. NaN,
 *     NaN without a heavy tenant
 * @param wallNanos wall time of everything
 */
public record AdmissionComparison(
    String trace,
    TenantRule rule,
    AdmissionSimulation.Settings settings,
    double loadFactor,
    AdmissionResult unloaded,
    List<AdmissionResult> runs,
    List<AdmissionResult> noHeavy,
    double[] protectedDemand,
    long wallNanos) {

  /** The load factor of the unloaded baseline. */
  public static final double UNLOADED_FACTOR = 0.25;

  /** Runs the comparison; {@code cfg}'s speedup sets the loaded runs' rate. */
  public static AdmissionComparison run(
      String traceName,
      List<TraceRequest> trace,
      TenantRule rule,
      SimConfig cfg,
      AdmissionSimulation.Settings settings,
      List<AdmissionSimulation.Mode> modes,
      double loadFactor,
      int threads) {
    long start = System.nanoTime();
    TenantRule.Assignment all = rule.assign(trace);
    // the requests as sent: behind their shared prompts with TenantRule's prefix, else the trace
    List<TraceRequest> sent = all.requests();
    SimConfig unloadedCfg =
        cfg.withSpeedup(LoadFactor.speedup(sent, cfg.timing(), cfg.ranks(), UNLOADED_FACTOR));
    List<Job> jobs = new ArrayList<>();
    // the unloaded value of the targets is today's gateway's: no token-rate limits either
    jobs.add(
        new Job(
            all,
            unloadedCfg,
            settings.withRates(TokenRateConfig.OFF),
            AdmissionSimulation.Mode.FIFO,
            "unloaded fifo"));
    for (AdmissionSimulation.Mode m : modes) jobs.add(new Job(all, cfg, settings, m, m.label));
    TenantRule.Assignment light = rule.heavyFactor() > 1 ? rule.withoutHeavy(all) : null;
    if (light != null) {
      for (AdmissionSimulation.Mode m : modes) {
        jobs.add(new Job(light, cfg, settings, m, m.label + " no-heavy"));
      }
    }
    List<AdmissionResult> out = new ArrayList<>();
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, threads));
    try {
      List<Future<AdmissionResult>> fs = new ArrayList<>();
      for (Job j : jobs) {
        fs.add(
            pool.submit(
                () ->
                    new AdmissionSimulation(
                            j.assignment, rule.tenants(), j.cfg, j.settings, j.mode, j.label)
                        .run()));
      }
      for (Future<AdmissionResult> f : fs) out.add(f.get());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException re) throw re;
      throw new IllegalStateException(e.getCause());
    } finally {
      pool.shutdownNow();
    }
    int k = modes.size();
    double[] demand = {Double.NaN, Double.NaN};
    if (light != null) {
      boolean[] include = new boolean[sent.size()];
      for (int i = 0; i < include.length; i++) {
        include[i] = all.tenant()[i] != 0 || all.band()[i] == 0;
      }
      double[] asked = LoadFactor.prefillSeconds(sent, cfg.timing(), include);
      double fleet = cfg.ranks() * out.get(1).arrivalSpanSec();
      demand = new double[] {asked[0] / fleet, asked[1] / fleet};
    }
    return new AdmissionComparison(
        traceName,
        rule,
        settings,
        loadFactor,
        out.get(0),
        List.copyOf(out.subList(1, 1 + k)),
        light == null ? List.of() : List.copyOf(out.subList(1 + k, 1 + 2 * k)),
        demand,
        System.nanoTime() - start);
  }

  private record Job(
      TenantRule.Assignment assignment,
      SimConfig cfg,
      AdmissionSimulation.Settings settings,
      AdmissionSimulation.Mode mode,
      String label) {}

  /** The run of {@code m}, or null. */
  public @Nullable AdmissionResult of(AdmissionSimulation.Mode m) {
    for (AdmissionResult r : runs) if (r.mode() == m) return r;
    return null;
  }

  /** The no-heavy run of {@code m}, or null. */
  public @Nullable AdmissionResult noHeavyOf(AdmissionSimulation.Mode m) {
    for (AdmissionResult r : noHeavy) if (r.mode() == m) return r;
    return null;
  }

  /** High-priority p90 TTFT of {@code r} over the unloaded run's. */
  public double highP90OverUnloaded(AdmissionResult r) {
    return r.highTtft(90) / unloaded.highTtft(90);
  }

  /**
   * The most a light tenant's (1..N-1) p90 TTFT rose in {@code r}'s mode because of the heavy
   * tenant: max over them of p90 with it / p90 without its excess - 1; NaN without a heavy tenant.
   */
  public double heavyRaise(AdmissionResult r) {
    AdmissionResult base = noHeavyOf(r.mode());
    if (base == null) return Double.NaN;
    double worst = Double.NEGATIVE_INFINITY;
    for (int t = 1; t < rule.tenants(); t++) {
      worst = Math.max(worst, r.tenantTtft(t, 90) / base.tenantTtft(t, 90) - 1);
    }
    return worst;
  }

  /** Whether every run lost nothing. */
  public boolean nothingLost() {
    if (!unloaded.nothingLost()) return false;
    for (AdmissionResult r : runs) if (!r.nothingLost()) return false;
    for (AdmissionResult r : noHeavy) if (!r.nothingLost()) return false;
    return true;
  }
}
