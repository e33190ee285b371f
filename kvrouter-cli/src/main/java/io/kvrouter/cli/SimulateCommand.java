package io.kvrouter.cli;

import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.route.LoraCost;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.sim.AdmissionComparison;
import io.kvrouter.sim.AdmissionSimulation;
import io.kvrouter.sim.LoadFactor;
import io.kvrouter.sim.LoraSimulation;
import io.kvrouter.sim.PdSimulation;
import io.kvrouter.sim.Policy;
import io.kvrouter.sim.Progress;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.SimConfig;
import io.kvrouter.sim.SimNats;
import io.kvrouter.sim.SimulationResult;
import io.kvrouter.sim.TenantRule;
import io.kvrouter.sim.report.AdmissionReport;
import io.kvrouter.sim.report.HtmlReport;
import io.kvrouter.sim.report.JsonReport;
import io.kvrouter.sim.report.LoraReport;
import io.kvrouter.sim.report.PdReport;
import io.kvrouter.sim.report.TextReport;
import io.kvrouter.sim.trace.TraceFormatException;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceSource;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvrouter simulate}: replays a trace through simulated engines under several policies. */
@Command(
    name = "simulate",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Replay a real request trace through a simulated fleet of engines under several routing"
          + " policies, each on a fresh fleet, and compare prefix-cache hit rate, TTFT and load.",
      "",
      "Engines run in simulated time (nothing sleeps): each rank holds a prefix cache of"
          + " --gpu-blocks KV blocks and publishes KV events into the router's index; it admits"
          + " requests FIFO up to --max-batch, prefills one at a time (prefill = --prefill-base-ms"
          + " + --prefill-ms-per-1k-tokens per 1,000 tokens its cache did not hold), then decodes"
          + " (--decode-ms-per-token per output token). TTFT = prefill end - arrival.",
      "At the end every router index is checked against the engines' caches; a mismatch exits"
          + " with 1. Bad input exits with 2.",
      ""
    })
public final class SimulateCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Mixin CostOptions cost = new CostOptions();

  @Option(
      names = "--trace",
      paramLabel = "FILE",
      description =
          "Mooncake-format JSONL trace, plain or gzip (default: the bundled conversation trace,"
              + " data/conversation_trace.jsonl.gz).")
  Path trace;

  @Option(
      names = "--requests",
      paramLabel = "N",
      description = "Replay only the first N requests (default: all).")
  Integer requests;

  @Option(
      names = "--policies",
      split = ",",
      paramLabel = "LIST",
      description =
          "Policies to compare, comma-separated (default: all): kv, round-robin, random,"
              + " least-loaded, approx; kv-device with --host-blocks, kv-main with --kv-groups.")
  List<String> policies;

  @Option(
      names = "--workers",
      paramLabel = "N",
      defaultValue = "8",
      description = "Engines (default: ${DEFAULT-VALUE}).")
  int workers;

  @Option(
      names = "--dp-size",
      paramLabel = "N",
      defaultValue = "1",
      description = "Data-parallel ranks per engine (default: ${DEFAULT-VALUE}).")
  int dpSize;

  @Option(
      names = "--gpu-blocks",
      paramLabel = "N",
      defaultValue = "16384",
      description = "KV blocks per rank (default: ${DEFAULT-VALUE}).")
  int gpuBlocks;

  @Option(
      names = "--host-blocks",
      paramLabel = "N",
      defaultValue = "0",
      description =
          "A host tier (CPU offloading) of N KV blocks per rank: it receives the blocks the device"
              + " evicts (LRU) and serves the blocks that follow a prompt's device prefix at"
              + " --host-ms-per-block each, publishing host-tier events; adds the kv-device policy"
              + " (kv routing on device blocks alone) to compare (default: ${DEFAULT-VALUE}, none).")
  int hostBlocks;

  @Option(
      names = "--kv-groups",
      paramLabel = "GROUPS",
      description =
          "Simulate a hybrid model: its KV cache groups in the engine's order, comma-separated:"
              + " full, sliding:<window tokens>, state (or mamba), chunked:<chunk tokens>; e.g."
              + " full,sliding:4096. Each rank's --gpu-blocks pages are shared by the groups, each"
              + " caching and evicting as vLLM's allocator does; adds the kv-main policy (kv"
              + " scoring the full-attention group alone) and prints predicted vs engine-reported"
              + " hits (docs/SIMULATION.md, \"Hybrid models\"). Default: one full-attention group.")
  String kvGroups;

  @Option(
      names = "--host-ms-per-block",
      paramLabel = "MS",
      defaultValue = "0.6",
      description =
          "Time to load one block from the host tier (default: ${DEFAULT-VALUE}: an 8 MiB block"
              + " of 64 tokens of an 8B model at 14 GB/s, Dynamo's mocker's GPU-host bandwidth).")
  double hostMsPerBlock;

  @Option(
      names = "--block-size",
      paramLabel = "TOKENS",
      defaultValue = "64",
      description = "Tokens per KV block, engines and router (default: ${DEFAULT-VALUE}).")
  int blockSize;

  @Option(
      names = "--speedup",
      paramLabel = "X",
      defaultValue = "4",
      description =
          "Divide the trace's arrival times by X: X times the request rate (default:"
              + " ${DEFAULT-VALUE}). The run's wall time does not depend on it.")
  double speedup;

  @Option(
      names = "--prefill-base-ms",
      paramLabel = "MS",
      defaultValue = "5",
      description = "Fixed cost of every prefill (default: ${DEFAULT-VALUE}).")
  double prefillBaseMs;

  @Option(
      names = "--prefill-ms-per-1k-tokens",
      paramLabel = "MS",
      defaultValue = "50",
      description = "Prefill cost per 1,000 uncached prompt tokens (default: ${DEFAULT-VALUE}).")
  double prefillMsPer1k;

  @Option(
      names = "--decode-ms-per-token",
      paramLabel = "MS",
      defaultValue = "20",
      description = "Time per output token after the first (default: ${DEFAULT-VALUE}).")
  double decodeMsPerToken;

  @Option(
      names = "--max-batch",
      paramLabel = "N",
      defaultValue = "64",
      description = "Requests admitted at once per rank (default: ${DEFAULT-VALUE}).")
  int maxBatch;

  @Option(
      names = "--event-delay-ms",
      paramLabel = "MS",
      defaultValue = "0",
      description =
          "Simulated delay from an engine's KV event to its application to the index"
              + " (default: ${DEFAULT-VALUE}).")
  double eventDelayMs;

  @Option(
      names = "--events-as-json",
      description =
          "Send every KV event through Dynamo's JSON wire form (encode, decode) instead of"
              + " in-process objects.")
  boolean eventsAsJson;

  @Option(
      names = "--events",
      paramLabel = "URL",
      description =
          "nats://host:port: the engines publish their KV events to NATS JetStream (subject"
              + " kvrouter.events.simulate-<policy>.default of stream KVROUTER_EVENTS) and the"
              + " router's index follows it, so kvrouter serve --events replicas can follow the"
              + " simulated fleet (register model simulate-<policy>); a few hundred microseconds"
              + " per event: use with --requests (default: in-process).")
  String events;

  @Option(
      names = "--removed-events",
      paramLabel = "SHAPE",
      defaultValue = "per-eviction",
      description =
          "How the engines publish evictions: per-eviction (one Removed event naming all the"
              + " blocks of one eviction) or per-block (one Removed event per block, as vLLM and"
              + " SGLang publish them, deepest first as vLLM does; many more events, same"
              + " results) (default: ${DEFAULT-VALUE}).")
  String removedEvents;

  @Option(
      names = "--no-approx-correction",
      description =
          "The approx policy's router is not told the cached tokens each engine reports (by"
              + " default it is, when the request finishes, as the gateway does from usage:"
              + " KvRouter.observeCachedTokens).")
  boolean noApproxCorrection;

  @Option(
      names = "--approx-kv-blocks",
      paramLabel = "N",
      defaultValue = "-1",
      description =
          "KV blocks per rank the approx policy's router is registered with (default: the"
              + " engines' --gpu-blocks; 0: unknown, learned from the cached-token correction).")
  long approxKvBlocks;

  @Option(
      names = "--seed",
      paramLabel = "N",
      defaultValue = "0",
      description =
          "Seeds the random policy and KvRouter's tie-breaks (default: ${DEFAULT-VALUE}).")
  long seed;

  @Option(
      names = "--verify-prompts",
      paramLabel = "N",
      defaultValue = "2000",
      description =
          "Trace prompts scored against every cache in the final check (default:"
              + " ${DEFAULT-VALUE}; the block-by-block comparison always covers everything).")
  int verifyPrompts;

  @Option(
      names = "--prefill-workers",
      paramLabel = "N",
      description =
          "With --decode-workers: compare prefill/decode disaggregation instead of policies: an"
              + " aggregated fleet of N + M engines, a disaggregated one of N prefill and M decode"
              + " engines, and a conditional one (--pd-min-uncached-tokens), on TTFT,"
              + " inter-token latency and throughput (docs/SIMULATION.md).")
  Integer prefillWorkers;

  @Option(
      names = "--decode-workers",
      paramLabel = "M",
      description = "Decode engines of the disaggregation comparison (see --prefill-workers).")
  Integer decodeWorkers;

  @Option(
      names = "--transfer-ms-per-block",
      paramLabel = "MS",
      defaultValue = "0.3",
      description =
          "Disaggregation: time to pull one KV block from the prefill engine (default:"
              + " ${DEFAULT-VALUE}).")
  double transferMsPerBlock;

  @Option(
      names = "--transfer-base-ms",
      paramLabel = "MS",
      defaultValue = "1",
      description =
          "Disaggregation: fixed cost of a hand-over that pulls any block (default:"
              + " ${DEFAULT-VALUE}).")
  double transferBaseMs;

  @Option(
      names = "--pd-min-uncached-tokens",
      paramLabel = "N",
      defaultValue = "1000",
      description =
          "Disaggregation, conditional fleet: a request with fewer prompt tokens than this not"
              + " cached on the best decode engine is served whole there (default:"
              + " ${DEFAULT-VALUE}).")
  int pdMinUncachedTokens;

  @Option(
      names = "--load-factor",
      paramLabel = "X",
      description =
          "Offer the trace at X times the fleet's capacity instead of --speedup: the arrivals are"
              + " compressed so that X = 2 asks twice what the fleet serves when every prompt's"
              + " reusable prefix is cached (docs/SIMULATION.md, \"Admission and fair shares\");"
              + " real caches hold less, so the real load is at least X.")
  Double loadFactor;

  @Option(
      names = "--lora-adapters",
      paramLabel = "N",
      description =
          "Compare LoRA-aware with adapter-blind routing instead of policies: each conversation"
              + " of the trace uses one of N adapters (Zipf popularity, --lora-zipf, seeded by"
              + " --seed), each engine holds at most --max-loras adapters and loads a missing one"
              + " in --lora-load-ms (evicting the least recently used); a table or --json"
              + " (docs/SIMULATION.md, \"LoRA adapters\").")
  Integer loraAdapters;

  @Option(
      names = "--lora-zipf",
      paramLabel = "S",
      description = "Zipf exponent of the adapters' popularity (default: ${DEFAULT-VALUE}).")
  double loraZipf = 1.0;

  @Option(
      names = "--max-loras",
      paramLabel = "K",
      description =
          "Adapters an engine holds at once, vLLM's --max-loras (default: ${DEFAULT-VALUE}).")
  int maxLoras = 8;

  @Option(
      names = "--lora-load-ms",
      paramLabel = "MS",
      description = "Simulated time to load an adapter (default: ${DEFAULT-VALUE}).")
  double loraLoadMs = 100;

  @Option(
      names = "--lora-load-cost",
      paramLabel = "BLOCKS",
      description =
          "LoRA-aware routing's cost of loading an adapter, in blocks of prefill work (default:"
              + " ${DEFAULT-VALUE}).")
  double loraLoadCost = LoraCost.defaults().loadCost();

  @Option(
      names = "--lora-eviction-cost",
      paramLabel = "BLOCKS",
      description =
          "LoRA-aware routing's added cost when the load evicts another adapter (default:"
              + " ${DEFAULT-VALUE}).")
  double loraEvictionCost = LoraCost.defaults().evictionCost();

  @Option(
      names = "--admission",
      split = ",",
      paramLabel = "MODES",
      description =
          "Compare admission modes instead of policies, each routing with kv: fifo (no admission,"
              + " every request to the engines at once), fair-cost (the gateway's FairQueue,"
              + " cost = uncached prefill + expected decode tokens, corrected by the engine's"
              + " cached tokens), fair-tokens (FairQueue, cost = prompt + decode tokens); with"
              + " tenants, priorities, an unloaded baseline and, with a heavy tenant, each mode"
              + " without its excess (docs/SIMULATION.md, \"Admission and fair shares\"); a table"
              + " or --json, no HTML report.")
  List<String> admission;

  @Mixin AdmissionCompareOptions compare = new AdmissionCompareOptions();

  @Option(
      names = "--share-slack",
      paramLabel = "TOKENS",
      defaultValue = "-1",
      description =
          "Admission: with TOKENS >= 0 a tenant's share spans the priority bands: bands are"
              + " strict among the tenants whose served cost is at most TOKENS ahead of the least"
              + " served one waiting, a tenant further ahead waits whatever its band"
              + " (docs/routing.md, \"Admission\"); -1: shares within each band, strict bands"
              + " (default: ${DEFAULT-VALUE}).")
  double shareSlack;

  @Option(
      names = "--heavy-tenant-weight",
      paramLabel = "W",
      defaultValue = "1",
      description =
          "Admission: tenant t0's weight in the fair queue, every other tenant's being 1; a"
              + " small W serves t0 only with what the others leave (default: ${DEFAULT-VALUE}).")
  double heavyTenantWeight;

  @Mixin ReportOptions report = new ReportOptions("kvrouter-report.html");

  @Option(names = "--json", description = "Print the results as JSON on stdout instead of a table.")
  boolean json;

  @Option(
      names = "--threads",
      paramLabel = "N",
      description =
          "Run up to N policies (and the pooled ceiling) at once, each on its own thread; the"
              + " results do not depend on it, only the wall time (default: the machine's cores;"
              + " 1 with --events).")
  Integer threads;

  @Option(
      names = {"-q", "--quiet"},
      description = "No progress bar (it is shown only when stderr is a terminal anyway).")
  boolean quiet;

  @Override
  @SuppressWarnings("ClosingStandardOutputStreams") // Progress.close() leaves System.err open
  public Integer call() {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    if (prefillWorkers != null || decodeWorkers != null) return disaggregation(out, err);
    if (admission != null) return admission(out, err);
    if (loraAdapters != null) return lora(out, err);
    List<Policy> chosen;
    SimConfig cfg;
    try {
      cfg =
          SimConfig.builder()
              .workers(workers)
              .dpSize(dpSize)
              .gpuBlocks(gpuBlocks)
              .blockSize(blockSize)
              .speedup(speedup)
              .timing(new TimingModel(prefillBaseMs, prefillMsPer1k, decodeMsPerToken, maxBatch))
              .eventDelayMs(eventDelayMs)
              .jsonEvents(eventsAsJson)
              .routing(cost.applyTo(RoutingSettings.DEFAULTS.withSeed(seed)))
              .seed(seed)
              .verifyPrompts(verifyPrompts)
              .loadSamples(200)
              .removedEvents(RemovedEvents.parse(removedEvents))
              .approxCorrection(!noApproxCorrection)
              .approxKvBlocks(approxKvBlocks)
              .hostBlocks(hostBlocks)
              .hostMsPerBlock(hostMsPerBlock)
              .kvGroups(kvGroups == null ? null : KvCacheGroups.parse(kvGroups))
              .build();
      chosen = policies(cfg);
      if (requests != null && requests < 1) {
        throw new IllegalArgumentException("--requests must be >= 1, got " + requests);
      }
      if (threads != null && threads < 1) {
        throw new IllegalArgumentException("--threads must be >= 1, got " + threads);
      }
    } catch (IllegalArgumentException e) {
      err.println("kvrouter simulate: " + e.getMessage());
      return 2;
    }
    TraceSource.Loaded loaded = loadTrace(err);
    if (loaded == null) return 2;
    if (loadFactor != null) {
      try {
        cfg = cfg.withSpeedup(speedupFor(loaded, cfg));
      } catch (IllegalArgumentException e) {
        err.println("kvrouter simulate: " + e.getMessage());
        return 2;
      }
    }

    SimNats nats = null;
    if (events != null) {
      try {
        nats = SimNats.connect(events);
      } catch (IllegalArgumentException e) {
        err.println("kvrouter simulate: " + e.getMessage());
        return 2;
      } catch (IllegalStateException e) {
        err.println("kvrouter simulate: " + e.getMessage());
        return 1;
      }
    }
    SimulationResult result;
    try (Progress progress = Progress.onStderr(System.err, quiet)) {
      result =
          SimulationResult.run(
              loaded.name(),
              loaded.requests(),
              cfg,
              chosen,
              progress,
              nats,
              threads != null ? threads : Runtime.getRuntime().availableProcessors());
    } catch (RuntimeException e) {
      if (nats == null) throw e;
      err.println("kvrouter simulate: NATS (" + events + "): " + e.getMessage());
      return 1;
    } finally {
      if (nats != null) nats.close();
    }

    if (json) {
      out.println(JsonReport.write(result));
    } else {
      TextReport.print(result, out);
    }
    if (report.target() != null) {
      try {
        Path target = report.target().toAbsolutePath();
        Files.writeString(target, HtmlReport.render(result, reportMeta()));
        (json ? err : out).println("report: " + target);
      } catch (IOException e) {
        err.println("kvrouter simulate: cannot write the report " + report.report + ": " + e);
        return 1;
      }
    }
    out.flush();
    if (!result.verified()) {
      err.println(
          "kvrouter simulate: a router index does not equal the engines' caches (details above"
              + (json ? " in \"verification\"" : "")
              + ").");
      return 1;
    }
    return 0;
  }

  /** The --trace (its first --requests), or null after printing why it cannot be read. */
  private TraceSource.Loaded loadTrace(PrintWriter err) {
    try {
      return TraceSource.load(trace, requests == null ? Integer.MAX_VALUE : requests);
    } catch (TraceFormatException e) {
      err.println("kvrouter simulate: " + e.getMessage());
      return null;
    }
  }

  /** {@code --prefill-workers N --decode-workers M}: the three fleets, one table. */
  private int disaggregation(PrintWriter out, PrintWriter err) {
    PdSimulation.Config cfg;
    try {
      if (prefillWorkers == null || decodeWorkers == null) {
        throw new IllegalArgumentException("give both --prefill-workers and --decode-workers");
      }
      if (kvGroups != null) {
        throw new IllegalArgumentException(
            "--kv-groups with --prefill-workers/--decode-workers: not simulated");
      }
      if (requests != null && requests < 1) {
        throw new IllegalArgumentException("--requests must be >= 1, got " + requests);
      }
      if (threads != null && threads < 1) {
        throw new IllegalArgumentException("--threads must be >= 1, got " + threads);
      }
      cfg =
          new PdSimulation.Config(
              prefillWorkers,
              decodeWorkers,
              gpuBlocks,
              blockSize,
              speedup,
              new TimingModel(prefillBaseMs, prefillMsPer1k, decodeMsPerToken, maxBatch),
              transferBaseMs,
              transferMsPerBlock,
              pdMinUncachedTokens,
              cost.overlapWeight,
              seed,
              verifyPrompts);
    } catch (IllegalArgumentException e) {
      err.println("kvrouter simulate: " + e.getMessage());
      return 2;
    }
    TraceSource.Loaded loaded = loadTrace(err);
    if (loaded == null) return 2;
    List<PdSimulation.Result> results = new ArrayList<>();
    for (PdSimulation.Mode m : PdSimulation.Mode.values()) {
      results.add(PdSimulation.run(loaded.requests(), cfg, m));
    }
    if (json) out.println(PdReport.json(loaded.name(), cfg, results));
    else PdReport.print(loaded.name(), cfg, results, out);
    out.flush();
    for (PdSimulation.Result r : results) {
      if (!r.verification().ok()) {
        err.println(
            "kvrouter simulate: the router index of the "
                + r.mode().label
                + " fleet does not equal the engines' caches: "
                + r.verification().problems());
        return 1;
      }
    }
    return 0;
  }

  /** The speedup of --load-factor on {@code loaded}; refuses --speedup with it. */
  private double speedupFor(TraceSource.Loaded loaded, SimConfig cfg) {
    return speedupFor(loaded.requests(), cfg);
  }

  /** The speedup of --load-factor on the requests {@code sent}; refuses --speedup with it. */
  private double speedupFor(List<TraceRequest> sent, SimConfig cfg) {
    if (spec.commandLine().getParseResult().hasMatchedOption("--speedup")) {
      throw new IllegalArgumentException("give --load-factor or --speedup, not both");
    }
    return LoadFactor.speedup(sent, cfg.timing(), cfg.ranks(), loadFactor);
  }

  /** {@code --admission MODES}: the modes, the baselines, one table. */
  private int admission(PrintWriter out, PrintWriter err) {
    SimConfig cfg;
    TenantRule rule;
    AdmissionSimulation.Settings settings;
    List<AdmissionSimulation.Mode> modes = new ArrayList<>();
    try {
      if (policies != null) {
        throw new IllegalArgumentException("--admission routes with kv: give no --policies");
      }
      if (kvGroups != null || hostBlocks > 0 || events != null) {
        throw new IllegalArgumentException(
            "--admission with --kv-groups, --host-blocks or --events: not simulated");
      }
      for (String m : admission) {
        AdmissionSimulation.Mode mode = AdmissionSimulation.Mode.parse(m);
        if (!modes.contains(mode)) modes.add(mode);
      }
      if (requests != null && requests < 1) {
        throw new IllegalArgumentException("--requests must be >= 1, got " + requests);
      }
      if (threads != null && threads < 1) {
        throw new IllegalArgumentException("--threads must be >= 1, got " + threads);
      }
      rule = compare.rule(seed);
      settings = compare.settings(shareSlack, heavyTenantWeight);
      cfg =
          SimConfig.builder()
              .workers(workers)
              .dpSize(dpSize)
              .gpuBlocks(gpuBlocks)
              .blockSize(blockSize)
              .speedup(speedup)
              .timing(new TimingModel(prefillBaseMs, prefillMsPer1k, decodeMsPerToken, maxBatch))
              .routing(cost.applyTo(RoutingSettings.DEFAULTS.withSeed(seed)))
              .seed(seed)
              .removedEvents(RemovedEvents.parse(removedEvents))
              .build();
    } catch (IllegalArgumentException e) {
      err.println("kvrouter simulate: " + e.getMessage());
      return 2;
    }
    TraceSource.Loaded loaded = loadTrace(err);
    if (loaded == null) return 2;
    List<TraceRequest> sent;
    try {
      // the requests as sent (behind their shared prompts, if any); a trace the rule cannot
      // assign (e.g. a hash_id outside what --cached-tenant-prefix renames) is refused here
      sent = rule.assign(loaded.requests()).requests();
      if (loadFactor != null) cfg = cfg.withSpeedup(speedupFor(sent, cfg));
    } catch (IllegalArgumentException e) {
      err.println("kvrouter simulate: " + e.getMessage());
      return 2;
    }
    AdmissionComparison c =
        AdmissionComparison.run(
            loaded.name(),
            loaded.requests(),
            rule,
            cfg,
            settings,
            modes,
            loadFactor != null ? loadFactor : Double.NaN,
            threads != null ? threads : Runtime.getRuntime().availableProcessors());
    if (json) {
      out.println(AdmissionReport.json(c));
    } else {
      AdmissionReport.print(c, out);
      double perSec = LoadFactor.costCapacity(sent, cfg.timing(), cfg.ranks());
      out.printf(
          Locale.ROOT,
          "fleet capacity with the ideal cache: %.1f requests/s, %.0f tokens/s of uncached"
              + " prompt + output; a fair share of %d tenants: %.0f tokens/s%n",
          LoadFactor.capacity(sent, cfg.timing(), cfg.ranks()),
          perSec,
          rule.tenants(),
          perSec / rule.tenants());
    }
    out.flush();
    if (!c.nothingLost()) {
      err.println("kvrouter simulate: a request was neither answered nor refused.");
      return 1;
    }
    return 0;
  }

  /** {@code --lora-adapters N}: lora-aware and adapter-blind routing, one table. */
  private int lora(PrintWriter out, PrintWriter err) {
    SimConfig cfg;
    LoraSimulation.Mix mix;
    try {
      if (policies != null) {
        throw new IllegalArgumentException("--lora-adapters routes with kv: give no --policies");
      }
      if (kvGroups != null || hostBlocks > 0 || events != null) {
        throw new IllegalArgumentException(
            "--lora-adapters with --kv-groups, --host-blocks or --events: not simulated");
      }
      if (requests != null && requests < 1) {
        throw new IllegalArgumentException("--requests must be >= 1, got " + requests);
      }
      if (threads != null && threads < 1) {
        throw new IllegalArgumentException("--threads must be >= 1, got " + threads);
      }
      mix =
          new LoraSimulation.Mix(
              loraAdapters,
              loraZipf,
              maxLoras,
              loraLoadMs,
              new LoraCost(loraLoadCost, loraEvictionCost));
      cfg =
          SimConfig.builder()
              .workers(workers)
              .dpSize(dpSize)
              .gpuBlocks(gpuBlocks)
              .blockSize(blockSize)
              .speedup(speedup)
              .timing(new TimingModel(prefillBaseMs, prefillMsPer1k, decodeMsPerToken, maxBatch))
              .routing(cost.applyTo(RoutingSettings.DEFAULTS.withSeed(seed)))
              .seed(seed)
              .removedEvents(RemovedEvents.parse(removedEvents))
              .build();
    } catch (IllegalArgumentException e) {
      err.println("kvrouter simulate: " + e.getMessage());
      return 2;
    }
    TraceSource.Loaded loaded = loadTrace(err);
    if (loaded == null) return 2;
    try {
      if (loadFactor != null) cfg = cfg.withSpeedup(speedupFor(loaded, cfg));
    } catch (IllegalArgumentException e) {
      err.println("kvrouter simulate: " + e.getMessage());
      return 2;
    }
    LoraSimulation.Comparison c =
        LoraSimulation.compare(
            loaded.name(),
            loaded.requests(),
            cfg,
            mix,
            threads != null ? threads : Runtime.getRuntime().availableProcessors());
    if (json) out.println(LoraReport.json(c));
    else LoraReport.print(c, out);
    out.flush();
    return 0;
  }

  /** The HTML report's metadata: version, commit, this command line and the date. */
  private HtmlReport.Meta reportMeta() {
    return HtmlReport.Meta.of(report.args());
  }

  /** A --max-blocks value; the message names the flag. */
  static long checkMaxBlocks(long maxBlocks) {
    if (maxBlocks < 1) {
      throw new IllegalArgumentException("--max-blocks must be >= 1, got " + maxBlocks);
    }
    return maxBlocks;
  }

  private List<Policy> policies(SimConfig cfg) {
    if (policies == null || policies.isEmpty()) return Policy.defaults(cfg);
    EnumSet<Policy> seen = EnumSet.noneOf(Policy.class);
    List<Policy> out = new ArrayList<>();
    for (String name : policies) {
      Policy p = Policy.parse(name);
      if (seen.add(p)) out.add(p);
    }
    Policy.check(out, cfg);
    return out;
  }
}
