package io.kvrouter.cli;

import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.gateway.AdmissionConfig;
import io.kvrouter.sim.AdmissionSimulation;
import io.kvrouter.sim.TenantRule;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Option;

/**
 * The flags of an admission comparison, shared by {@code simulate --admission} and {@code bench
 * fleet --admission} (docs/SIMULATION.md, "Admission and fair shares"): the tenants and priorities
 * {@link TenantRule} assigns, and the admission's limits ({@link AdmissionSimulation.Settings}).
 * Times are model seconds: simulated time in simulate, wall time x --time-scale in bench fleet. A
 * picocli mixin.
 */
final class AdmissionCompareOptions {
  @Option(
      names = "--tenants",
      paramLabel = "N",
      defaultValue = "4",
      description =
          "Admission: tenants; a conversation (a trace request's second hash_id) goes to one,"
              + " by a seeded draw (default: ${DEFAULT-VALUE}).")
  int tenants;

  @Option(
      names = "--heavy-tenant-factor",
      paramLabel = "F",
      defaultValue = "1",
      description =
          "Admission: tenant t0 sends F times as much as each other tenant; above 1 each mode"
              + " runs again without its excess (default: ${DEFAULT-VALUE}).")
  double heavyTenantFactor;

  @Option(
      names = "--cached-tenant",
      description =
          "Admission: tenant t0 is every request whose prompt is mostly cached (at least half its"
              + " hash_ids appeared earlier in the trace); the others share the rest.")
  boolean cachedTenant;

  @Option(
      names = "--cached-tenant-prefix",
      paramLabel = "BLOCKS[:PROMPTS[:OWN]]",
      description =
          "Admission: tenant t0 (drawn by conversation, equal shares) sends each request behind"
              + " one of PROMPTS (default 4) shared system prompts of BLOCKS trace blocks (512"
              + " tokens each), a seeded draw per conversation; its own blocks are renamed under"
              + " that prompt; with OWN, only its first OWN blocks are kept behind it"
              + " (docs/SIMULATION.md, \"Admission and fair shares\").")
  String cachedTenantPrefix;

  @Option(
      names = "--high-priority-share",
      paramLabel = "S",
      defaultValue = "0.2",
      description =
          "Admission: this share of requests (a seeded draw per request) is high priority; bench"
              + " fleet sends them with priority -1, the others with 0 (default:"
              + " ${DEFAULT-VALUE}).")
  double highPriorityShare;

  @Option(
      names = "--busy-requests",
      paramLabel = "N",
      defaultValue = "16",
      description =
          "Admission: a rank with N requests in flight is busy; a model whose every rank is busy"
              + " queues requests (the gateway's rule) (default: ${DEFAULT-VALUE}).")
  int busyRequests;

  @Option(
      names = "--busy-prefill-tokens",
      paramLabel = "N",
      defaultValue = "8192",
      description =
          "Admission: a rank with more than N prefill tokens in flight (not yet through their"
              + " prefill) is busy too; -1: no limit (default: ${DEFAULT-VALUE}).")
  long busyPrefillTokens;

  @Option(
      names = "--holder-wait",
      negatable = true,
      defaultValue = "true",
      fallbackValue = "true",
      description =
          "Admission: a request may wait for the busy rank that holds its prefix when that is"
              + " cheaper in prefill tokens than starting cold on a rank with room (docs/routing.md,"
              + " \"Admission\"); --no-holder-wait: never (default: ${DEFAULT-VALUE}).")
  boolean holderWait;

  @Option(
      names = "--max-queue-time",
      paramLabel = "SECONDS",
      defaultValue = "30",
      description =
          "Admission: the longest a request waits, in model seconds (simulate: simulated); then"
              + " 429 (default: ${DEFAULT-VALUE}).")
  double maxQueueTime;

  @Option(
      names = "--max-queue-depth",
      paramLabel = "N",
      defaultValue = "1024",
      description =
          "Admission: requests that may wait at once; one more is refused with 429 (default:"
              + " ${DEFAULT-VALUE}).")
  int maxQueueDepth;

  @Option(
      names = "--ttft-slo-ms",
      paramLabel = "MS",
      defaultValue = "2000",
      description =
          "Admission: goodput counts requests answered within this TTFT, model ms (default:"
              + " ${DEFAULT-VALUE}).")
  double ttftSloMs;

  @Option(
      names = "--tenant-token-rate",
      paramLabel = "[NAME=]TOKENS_PER_S",
      description =
          "Admission: the gateway's token-rate limit (docs/gateway.md, \"Token-rate limits\"),"
              + " tenants named t0, t1, ...: TOKENS_PER_S alone is every tenant's rate,"
              + " NAME=TOKENS_PER_S one tenant's, per model second; a request costs its uncached"
              + " prompt tokens (as the router predicts them) plus its output tokens, settled when"
              + " it finishes; one over its tenant's rate is refused at once with 429. Not in the"
              + " unloaded baseline; bench fleet gives it to its gateway, per wall second x"
              + " --time-scale. Repeatable (default: no limit).")
  List<String> tenantTokenRates = new ArrayList<>();

  @Option(
      names = "--tenant-token-burst",
      paramLabel = "TIME",
      description =
          "Admission: a tenant's bucket holds this long's worth of its rate (e.g. 10s, 500ms, 2m)"
              + " (default: 10s).")
  String tenantTokenBurst = "10s";

  @Option(
      names = "--evict-lower-bands",
      description =
          "Admission: when a request waits because every rank is busy, take back the place of one"
              + " request of a lower band that an engine holds but that has produced no token yet"
              + " (the lowest band, the one sent last); it is aborted and waits again, its wait"
              + " bound from its first arrival (docs/routing.md, \"Evicting lower-band work in"
              + " flight\"). Queue modes only (default: off).")
  boolean evictLowerBands;

  @Option(
      names = "--max-evictions",
      paramLabel = "N",
      defaultValue = "1",
      description =
          "Admission: with --evict-lower-bands, one request is evicted at most N times, then it"
              + " keeps its place (default: ${DEFAULT-VALUE}).")
  int maxEvictions;

  @Option(
      names = "--tenant-excess-factor",
      paramLabel = "K",
      description =
          "Admission: a waiting tenant that sent more than K times the mean of what the other"
              + " waiting tenants sent (requests per unit of weight over about --max-queue-time)"
              + " waits behind them in every band (the gateway's flag; docs/routing.md, \"A tenant"
              + " that sends far more than the others\"); 0: off, else >= 1. Queue modes only"
              + " (default: 4; 0 with simulate's --share-slack, which it cannot be combined"
              + " with).")
  @Nullable Double tenantExcessFactor;

  /** How often one request may be evicted: 0 without --evict-lower-bands; bad values throw. */
  int evictions() {
    if (maxEvictions < 1) {
      throw new IllegalArgumentException("--max-evictions must be >= 1, got " + maxEvictions);
    }
    return evictLowerBands ? maxEvictions : 0;
  }

  /** The token-rate limits, parsed as the gateway parses them (AdmissionOptions). */
  TokenRateConfig tokenRates() {
    TokenRateConfig c =
        AdmissionOptions.tokenRates(
            tenantTokenRates, tenantTokenBurst, TokenRateConfig.OFF.maxTenants());
    // the simulated tenants are t0 .. t{N-1}: another name would limit nobody, silently
    for (String name : c.tenantRates().keySet()) {
      if (!name.matches("t(0|[1-9][0-9]{0,8})") || Integer.parseInt(name.substring(1)) >= tenants) {
        throw new IllegalArgumentException(
            "--tenant-token-rate "
                + name
                + "=...: the simulated tenants are named t0 .. t"
                + (tenants - 1)
                + " (--tenants "
                + tenants
                + ")");
      }
    }
    return c;
  }

  /** The tenant and priority rule, seeded by {@code seed}; bad values throw. */
  TenantRule rule(long seed) {
    int blocks = 0;
    int prompts = DEFAULT_PREFIX_PROMPTS;
    int own = -1;
    if (cachedTenantPrefix != null) {
      String v = cachedTenantPrefix.trim();
      String[] parts = v.split(":", -1);
      try {
        if (parts.length > 3) throw new NumberFormatException();
        blocks = Integer.parseInt(parts[0]);
        if (parts.length > 1) prompts = Integer.parseInt(parts[1]);
        if (parts.length > 2) own = Integer.parseInt(parts[2]);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "--cached-tenant-prefix "
                + v
                + ": give BLOCKS, BLOCKS:PROMPTS or BLOCKS:PROMPTS:OWN, whole numbers");
      }
      if (blocks < 1) {
        throw new IllegalArgumentException(
            "--cached-tenant-prefix " + v + ": BLOCKS must be >= 1, got " + blocks);
      }
    }
    return new TenantRule(
        tenants, heavyTenantFactor, highPriorityShare, cachedTenant, seed, blocks, prompts, own);
  }

  /** Shared system prompts of --cached-tenant-prefix when PROMPTS is not given. */
  static final int DEFAULT_PREFIX_PROMPTS = 4;

  /** The admission's limits, tenant shares within each band; bad values throw. */
  AdmissionSimulation.Settings settings() {
    return settings(-1, 1);
  }

  /**
   * The admission's limits with simulate's --share-slack and --heavy-tenant-weight; bad values
   * throw.
   */
  AdmissionSimulation.Settings settings(double shareSlack, double heavyTenantWeight) {
    return new AdmissionSimulation.Settings(
        busyRequests,
        busyPrefillTokens,
        holderWait,
        maxQueueTime,
        maxQueueDepth,
        ttftSloMs,
        shareSlack,
        heavyTenantWeight,
        tokenRates(),
        evictions(),
        tenantExcessFactor != null
            ? tenantExcessFactor
            : shareSlack >= 0 ? 0 : AdmissionConfig.DEFAULT_EXCESS_FACTOR);
  }
}
