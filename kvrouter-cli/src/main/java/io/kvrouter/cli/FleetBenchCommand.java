package io.kvrouter.cli;

import io.kvrouter.harness.AdmissionFleetBench;
import io.kvrouter.harness.ChatFleetBench;
import io.kvrouter.harness.FleetBench;
import io.kvrouter.sim.AdmissionSimulation;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.Spec;

/**
 * {@code kvrouter bench fleet}: the live version of {@code simulate} (docs/SIMULATION.md, "The live
 * fleet"). The flags only; {@link FleetBench} (kvrouter-harness) runs the fleets, the load, the end
 * check and the reports. This command line is the bench's {@link FleetBench.Cli}: the engines'
 * child JVMs run {@link Main} {@code mock-engine}, and {@code --compare-simulate} runs {@code
 * simulate} through it.
 */
@Command(
    name = "fleet",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Live version of simulate: mock engines (separate processes by default) behind the gateway,"
          + " the trace replayed as streamed /v1/completions with token-id prompts, once per"
          + " policy on a fresh fleet. Prints client-side TTFT, inter-token and end-to-end"
          + " latency, the engines' hit rate (usage.prompt_tokens_details.cached_tokens), the"
          + " router's predicted hit rate and events, and checks that the router's index equals"
          + " every engine's cache at the end (exit 1 if not).",
      "Times are model time: the engines run simulate's timing model divided by --time-scale,"
          + " and arrivals are divided by --speedup x --time-scale.",
      ""
    })
final class FleetBenchCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(names = "--trace", paramLabel = "FILE", description = "Trace (default: the bundled one).")
  Path trace;

  @Option(
      names = "--requests",
      paramLabel = "N",
      defaultValue = "600",
      description = "Replay the first N requests (default: ${DEFAULT-VALUE}).")
  int requests;

  @Option(
      names = "--policies",
      split = ",",
      paramLabel = "LIST",
      defaultValue = "kv,round-robin,random,least-loaded",
      description =
          "Policies, one after another (default: ${DEFAULT-VALUE}); also approx (approximate"
              + " mode: the router takes no events).")
  List<String> policies;

  @Option(
      names = "--engines",
      paramLabel = "N",
      defaultValue = "4",
      description = "Mock engines (default: ${DEFAULT-VALUE}).")
  int engines;

  @Option(
      names = "--in-process",
      description = "Run the engines in this JVM instead of one child JVM each.")
  boolean inProcess;

  @Option(
      names = "--gpu-blocks",
      paramLabel = "N",
      defaultValue = "16384",
      description = "KV blocks per engine (default: ${DEFAULT-VALUE}).")
  int gpuBlocks;

  @Option(
      names = "--block-size",
      paramLabel = "TOKENS",
      defaultValue = "64",
      description = "Tokens per KV block (default: ${DEFAULT-VALUE}).")
  int blockSize;

  @Option(
      names = "--speedup",
      paramLabel = "X",
      defaultValue = "2",
      description =
          "Trace time compression, as simulate's (default: ${DEFAULT-VALUE}: 4 engines at 2 carry"
              + " the load per engine of simulate's defaults, 8 at 4).")
  double speedup;

  @Option(
      names = "--time-scale",
      paramLabel = "K",
      defaultValue = "4",
      description =
          "Run the model K times faster in wall time: engine timings and arrival gaps divided by K"
              + " (default: ${DEFAULT-VALUE}).")
  double timeScale;

  @Option(names = "--prefill-base-ms", defaultValue = "5", description = "As simulate's.")
  double prefillBaseMs;

  @Option(names = "--prefill-ms-per-1k-tokens", defaultValue = "50", description = "As simulate's.")
  double prefillMsPer1k;

  @Option(names = "--decode-ms-per-token", defaultValue = "20", description = "As simulate's.")
  double decodeMsPerToken;

  @Option(names = "--max-batch", defaultValue = "64", description = "As simulate's.")
  int maxBatch;

  @Option(
      names = "--max-output-tokens",
      paramLabel = "N",
      defaultValue = "64",
      description =
          "Cap every request's output length (default: ${DEFAULT-VALUE}; 0: the trace's). Fewer"
              + " streamed events for the client and gateway to carry; --compare-simulate replays"
              + " the same capped requests.")
  int maxOutputTokens;

  @Option(
      names = "--clients",
      paramLabel = "N",
      defaultValue = "512",
      description = "Requests in flight at most (virtual threads) (default: ${DEFAULT-VALUE}).")
  int clients;

  @Option(names = "--seed", defaultValue = "0", description = "Seed (default: ${DEFAULT-VALUE}).")
  long seed;

  @Option(
      names = "--gateways",
      paramLabel = "N",
      defaultValue = "1",
      description =
          "Gateways in front of the engines, each subscribed to every engine's KV events;"
              + " the client sends request i to gateway i mod N (default: ${DEFAULT-VALUE}).")
  int gateways;

  @Option(
      names = "--sync",
      paramLabel = "on|off",
      defaultValue = "on",
      description =
          "With --gateways > 1: share the gateways' requests in flight over a nats-server this"
              + " command starts (sequence sync), or not (default: ${DEFAULT-VALUE}).")
  String sync;

  @Option(
      names = "--compare-simulate",
      description = "Also run simulate on the same trace, fleet and timing; print both.")
  boolean compareSimulate;

  @Option(names = "--json", description = "Print the results as JSON.")
  boolean json;

  @Option(
      names = "--engine-kind",
      paramLabel = "mock|llama-cpp",
      defaultValue = "mock",
      description =
          "mock (default): kvrouter's mock engines replaying the trace; llama-cpp: real"
              + " llama-server processes (engines/llama-cpp/install.sh) registered without KV"
              + " events, a multi-turn chat workload with shared system prompts, TTFT at the"
              + " client. With llama-cpp the defaults become --engines 3, --clients 1,"
              + " --max-output-tokens 12, --policies kv,round-robin,least-loaded.")
  String engineKind;

  @Option(
      names = "--llama-server",
      paramLabel = "PATH",
      description =
          "llama-cpp: the llama-server binary (default: $KVROUTER_LLAMA_SERVER; install.sh"
              + " prints llama-server=PATH).")
  Path llamaServer;

  @Option(
      names = "--llama-model",
      paramLabel = "PATH",
      description =
          "llama-cpp: the GGUF model (default: $KVROUTER_LLAMA_MODEL; install.sh prints"
              + " model=PATH).")
  Path llamaModel;

  @Option(
      names = "--llama-ctx",
      paramLabel = "TOKENS",
      defaultValue = "4096",
      description = "llama-cpp: each engine's one slot, tokens (default: ${DEFAULT-VALUE}).")
  int llamaCtx;

  @Option(
      names = "--conversations",
      paramLabel = "N",
      defaultValue = "12",
      description = "llama-cpp: conversations (default: ${DEFAULT-VALUE}).")
  int conversations;

  @Option(
      names = "--turns",
      paramLabel = "N",
      defaultValue = "4",
      description = "llama-cpp: turns per conversation (default: ${DEFAULT-VALUE}).")
  int turns;

  @Option(
      names = "--system-prompts",
      paramLabel = "N",
      defaultValue = "3",
      description =
          "llama-cpp: shared system prompts; conversation c uses prompt c mod N (default:"
              + " ${DEFAULT-VALUE}).")
  int systemPrompts;

  @Option(
      names = "--system-prompt-words",
      paramLabel = "N",
      defaultValue = "1000",
      description =
          "llama-cpp: words per system prompt, about as many tokens (default: ${DEFAULT-VALUE}).")
  int systemPromptWords;

  @Option(
      names = "--repeats",
      paramLabel = "N",
      defaultValue = "1",
      description =
          "llama-cpp: run the policies N times, in alternation, each run on fresh engines"
              + " (default: ${DEFAULT-VALUE}).")
  int repeats;

  @Option(
      names = "--admission",
      split = ",",
      paramLabel = "MODES",
      description =
          "Compare admission modes instead of policies, as simulate --admission does, each on a"
              + " fresh fleet routing with kv: fifo (today's gateway: no busy limit, no queue) and"
              + " fair-cost (the gateway's admission queue, cost = uncached prefill + decode"
              + " tokens); each request carries its tenant (x-kvrouter-tenant) and priority; with"
              + " an unloaded fifo baseline and simulate's table (docs/SIMULATION.md, \"Admission"
              + " on the live fleet\"). Exit 1 when a request was neither answered nor refused"
              + " with 429.")
  List<String> admission;

  @Option(
      names = "--load-factor",
      paramLabel = "X",
      description =
          "With --admission: offer the trace at X times the fleet's capacity instead of"
              + " --speedup, as simulate's --load-factor.")
  Double loadFactor;

  @Mixin AdmissionCompareOptions compare = new AdmissionCompareOptions();

  @Mixin ReportOptions report = new ReportOptions("kvrouter-fleet-report.html");

  @Override
  public Integer call() throws Exception {
    if (admission != null && !engineKind.equals("mock")) {
      spec.commandLine()
          .getErr()
          .println("kvrouter bench fleet: --admission runs the mock engines (--engine-kind mock)");
      return 2;
    }
    if (engineKind.equals("llama-cpp")) return llamaCpp();
    if (!engineKind.equals("mock")) {
      spec.commandLine()
          .getErr()
          .println(
              "kvrouter bench fleet: unknown --engine-kind '"
                  + engineKind
                  + "'; known: mock, llama-cpp");
      return 2;
    }
    if (admission != null) return admission();
    FleetBench.Settings settings = fleetSettings();
    return new FleetBench(settings, CLI)
        .run(spec.commandLine().getOut(), spec.commandLine().getErr());
  }

  /** The fleet's flags. */
  private FleetBench.Settings fleetSettings() {
    return new FleetBench.Settings(
        trace,
        requests,
        policies,
        engines,
        inProcess,
        gpuBlocks,
        blockSize,
        speedup,
        timeScale,
        prefillBaseMs,
        prefillMsPer1k,
        decodeMsPerToken,
        maxBatch,
        maxOutputTokens,
        clients,
        seed,
        gateways,
        sync,
        compareSimulate,
        json,
        report.target(),
        String.join(" ", report.args()));
  }

  /** {@code --admission MODES}: simulate's admission comparison on the live fleet. */
  private int admission() throws Exception {
    PrintWriter err = spec.commandLine().getErr();
    ParseResult given = spec.commandLine().getParseResult();
    AdmissionFleetBench.Settings settings;
    try {
      if (given.hasMatchedOption("--policies")) {
        throw new IllegalArgumentException("--admission routes with kv: give no --policies");
      }
      if (given.hasMatchedOption("--report") || compareSimulate) {
        throw new IllegalArgumentException(
            "--admission prints a table or --json: no --report, no --compare-simulate (run"
                + " simulate --admission for the simulated side)");
      }
      if (loadFactor != null && given.hasMatchedOption("--speedup")) {
        throw new IllegalArgumentException("give --load-factor or --speedup, not both");
      }
      if (given.hasMatchedOption("--cached-tenant-prefix")) {
        throw new IllegalArgumentException(
            "--cached-tenant-prefix is simulated only (simulate --admission)");
      }
      if (loadFactor != null && !(loadFactor > 0)) {
        throw new IllegalArgumentException("--load-factor must be > 0, got " + loadFactor);
      }
      List<AdmissionSimulation.Mode> modes = new ArrayList<>();
      for (String m : admission) {
        AdmissionSimulation.Mode mode = AdmissionSimulation.Mode.parse(m);
        if (!modes.contains(mode)) modes.add(mode);
      }
      settings =
          new AdmissionFleetBench.Settings(
              fleetSettings(),
              modes,
              compare.rule(seed),
              compare.settings(),
              loadFactor != null ? loadFactor : Double.NaN);
    } catch (IllegalArgumentException e) {
      err.println("kvrouter bench fleet: " + e.getMessage());
      return 2;
    }
    return new AdmissionFleetBench(settings, CLI).run(spec.commandLine().getOut(), err);
  }

  /** {@code --engine-kind llama-cpp}: its own defaults where a flag was not given. */
  private int llamaCpp() throws Exception {
    ParseResult given = spec.commandLine().getParseResult();
    if (given.hasMatchedOption("--report") || given.hasMatchedOption("--trace")) {
      spec.commandLine()
          .getErr()
          .println(
              "kvrouter bench fleet: --report and --trace belong to the mock engines; with"
                  + " --engine-kind llama-cpp the workload is the chat one and there is no HTML"
                  + " report (--json for a file)");
      return 2;
    }
    ChatFleetBench.Settings settings =
        new ChatFleetBench.Settings(
            llamaServer,
            llamaModel,
            given.hasMatchedOption("--engines") ? engines : 3,
            llamaCtx,
            given.hasMatchedOption("--policies")
                ? policies
                : List.of("kv", "round-robin", "least-loaded"),
            repeats,
            conversations,
            turns,
            systemPrompts,
            systemPromptWords,
            given.hasMatchedOption("--max-output-tokens") ? maxOutputTokens : 12,
            given.hasMatchedOption("--clients") ? clients : 1,
            seed,
            json,
            String.join(" ", report.args()));
    return new ChatFleetBench(settings)
        .run(spec.commandLine().getOut(), spec.commandLine().getErr());
  }

  /** This command line, as the bench sees it. */
  private static final FleetBench.Cli CLI =
      new FleetBench.Cli() {
        @Override
        public String mainClass() {
          return Main.class.getName();
        }

        @Override
        public int run(PrintWriter out, PrintWriter err, String... args) {
          return Main.run(out, err, args);
        }
      };
}
