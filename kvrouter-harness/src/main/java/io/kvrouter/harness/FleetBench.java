package io.kvrouter.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.gateway.AdmissionConfig;
import io.kvrouter.gateway.EngineSpec;
import io.kvrouter.gateway.Gateway;
import io.kvrouter.gateway.GatewayConfig;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.sim.BaselineSelectors;
import io.kvrouter.sim.trace.TracePrompts;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.http.HttpClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * {@code kvrouter bench fleet}: the live version of {@code simulate}. Mock engines (child JVMs by
 * default, in this JVM with {@code --in-process}) behind a gateway with the chosen policy, and the
 * trace replayed through the gateway as streamed {@code /v1/completions} with token-id prompts.
 * Each policy runs on a fresh fleet and gateway. docs/SIMULATION.md, "The live fleet".
 *
 * <pre>
 * Implementation notes
 *
 * Time scale. The engines' timing model is simulate's divided by --time-scale K (the mock
 * engine's --speedup), and the trace's arrivals are divided by --speedup × K: the fleet is
 * simulate's at --speedup, run K times faster in wall time. Every time the bench prints is model
 * time (wall time × K), comparable with simulate's; the JSON holds time_scale.
 *
 * One policy, on the calling thread (runPolicy): EngineLauncher starts the engines (in this JVM
 * or child JVMs, which ChildProcesses tracks so that a shutdown hook and every policy's finally
 * end them); with --gateways N > 1 and --sync on, a NatsProcess; then N Gateways in this JVM,
 * each registering every engine with its ZMQ endpoints (each subscribes to every engine itself),
 * every one's /ready 200 before the load. FleetLoad replays the trace (request i to gateway
 * i mod N) while a LagProbe listens beside the routers; EndCheck then compares every gateway's
 * index with every engine's cache; FleetReads collects the routers' figures. Everything started
 * is closed in the finally, gateways first. The results of a run go into one PolicyRun, which
 * FleetReport (text, JSON) and FleetHtmlReport only read.
 *
 * bench fleet --admission (AdmissionFleetBench) runs runPolicy("kv", ...) with a LiveAdmission:
 * the gateway's admission queue and the router's busy limits (none for fifo), its token-rate
 * limits (also in fifo), the tenant and
 * priority each request carries, and the gateway's queue figures read after the load
 * (FleetReads.queueFigures).
 *
 * Policies are KvRouterServer.Config settings of a fresh gateway: a WorkerSelector supplier
 * (round-robin, random, least-loaded; one selector per index, called under the router's lock) or
 * approximate mode (approx: engines registered without ZMQ endpoints, no end check).
 *
 * The command line the bench runs under (Cli) gives the main class a child engine JVM runs and
 * runs simulate for --compare-simulate; the bench does not depend on it. The java.util.logging
 * levels of io.helidon and io.kvrouter are raised for the run and restored after it (the loggers
 * are held in static fields: the JDK keeps loggers weakly). Exit codes: 0; 1 when a router's
 * index differs from its engine's cache, a gateway still counts peer requests, or the report
 * cannot be written; 2 for bad settings.
 * </pre>
 */
public final class FleetBench {
  static final String MODEL = "trace";
  private static final ObjectMapper JSON = new ObjectMapper();

  // held, so that their levels stay set (java.util.logging keeps loggers weakly)
  private static final Logger QUIET_HELIDON = Logger.getLogger("io.helidon");
  private static final Logger QUIET_KVROUTER = Logger.getLogger("io.kvrouter");
  // the prediction warning: this bench reports predicted against engine-reported hits itself
  private static final Logger QUIET_PREDICTION = Logger.getLogger("io.kvrouter.gateway.prediction");

  /**
   * The flags of {@code kvrouter bench fleet}.
   *
   * @param trace the trace, or null for the bundled one
   * @param report the HTML report to write, or null for none
   * @param commandLine the bench's arguments as given, for the report's header
   */
  public record Settings(
      Path trace,
      int requests,
      List<String> policies,
      int engines,
      boolean inProcess,
      int gpuBlocks,
      int blockSize,
      double speedup,
      double timeScale,
      double prefillBaseMs,
      double prefillMsPer1k,
      double decodeMsPerToken,
      int maxBatch,
      int maxOutputTokens,
      int clients,
      long seed,
      int gateways,
      String sync,
      boolean compareSimulate,
      boolean json,
      Path report,
      String commandLine) {
    public Settings {
      policies = List.copyOf(policies);
    }

    /** These settings at another {@code --speedup} (bench fleet --admission's load factors). */
    public Settings withSpeedup(double v) {
      return new Settings(
          trace,
          requests,
          policies,
          engines,
          inProcess,
          gpuBlocks,
          blockSize,
          v,
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
          report,
          commandLine);
    }

    /** Whether the gateways share their requests in flight (--gateways > 1 and --sync on). */
    boolean synced() {
      return gateways > 1 && sync.equals("on");
    }
  }

  /**
   * The command line the bench runs under: a child engine JVM runs its main class with {@code
   * mock-engine} and that command's flags; {@code --compare-simulate} runs its {@code simulate}.
   */
  public interface Cli {
    /** The main class of the command line (the child engines' JVMs run it). */
    String mainClass();

    /** Runs one command of the command line in this JVM; returns its exit code. */
    int run(PrintWriter out, PrintWriter err, String... args);
  }

  private final Settings s;
  private final Cli cli;
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .executor(Executors.newVirtualThreadPerTaskExecutor())
          .connectTimeout(Duration.ofSeconds(5))
          .build();
  private final FleetReads reads = new FleetReads(http);

  public FleetBench(Settings settings, Cli cli) {
    this.s = settings;
    this.cli = cli;
  }

  /**
   * Child processes (engines, nats-server) started in this JVM and not ended yet: 0 after a run.
   */
  public static int processesLeft() {
    return ChildProcesses.count();
  }

  /** Runs every policy and prints the results; returns the exit code (0, 1, or 2). */
  public int run(PrintWriter out, PrintWriter err) throws Exception {
    return quietly(() -> bench(out, err));
  }

  /** Runs {@code body} with the logging of io.helidon and io.kvrouter raised, restored after. */
  static int quietly(Callable<Integer> body) throws Exception {
    Level[] before = {
      QUIET_HELIDON.getLevel(), QUIET_KVROUTER.getLevel(), QUIET_PREDICTION.getLevel()
    };
    QUIET_HELIDON.setLevel(Level.WARNING);
    QUIET_KVROUTER.setLevel(Level.WARNING);
    QUIET_PREDICTION.setLevel(Level.SEVERE);
    try {
      return body.call();
    } finally {
      // an embedding JVM (the tests) gets its logging back
      QUIET_HELIDON.setLevel(before[0]);
      QUIET_KVROUTER.setLevel(before[1]);
      QUIET_PREDICTION.setLevel(before[2]);
    }
  }

  private int bench(PrintWriter out, PrintWriter err) throws Exception {
    TracePrompts prompts;
    try {
      for (String p : s.policies()) selector(p, 0);
      prompts = validate(s);
    } catch (IllegalArgumentException e) {
      err.println("kvrouter bench fleet: " + e.getMessage());
      return 2;
    }
    if (!s.json()) {
      out.printf(
          Locale.ROOT,
          "kvrouter bench fleet: %s, %,d requests (speedup %s, time scale %s), %d %s engines x"
              + " %,d KV blocks of %d tokens, %s%n",
          prompts.name(),
          prompts.size(),
          FleetReport.num(s.speedup()),
          FleetReport.num(s.timeScale()),
          s.engines(),
          s.inProcess() ? "in-process" : "process",
          s.gpuBlocks(),
          s.blockSize(),
          gatewaysLabel());
      out.flush();
    }
    List<PolicyRun> runs = new ArrayList<>();
    for (String p : s.policies()) {
      runs.add(runPolicy(p, prompts, null));
      if (!s.json()) {
        out.println(
            "  " + p + " done in " + String.format(Locale.ROOT, "%.1f s", runs.getLast().wallSec));
        out.flush();
      }
    }
    JsonNode sim = s.compareSimulate() ? SimulateComparison.run(s, prompts, cli) : null;
    if (s.json()) {
      out.println(
          JSON.writerWithDefaultPrettyPrinter()
              .writeValueAsString(FleetReport.toJson(s, prompts, runs, sim)));
    } else {
      FleetReport.printTable(out, s, runs, sim);
    }
    if (s.report() != null) {
      Path target = s.report().toAbsolutePath();
      try {
        Files.writeString(
            target,
            FleetHtmlReport.render(runs, sim, setup(prompts), s.commandLine(), s.timeScale()));
        (s.json() ? err : out).println("report: " + target);
      } catch (IOException e) {
        err.println("kvrouter bench fleet: cannot write the report " + s.report() + ": " + e);
        return 1;
      }
    }
    out.flush();
    for (PolicyRun r : runs) {
      for (String why : r.invalid) {
        err.println("kvrouter bench fleet: WARNING: the " + r.policy + " run is invalid: " + why);
      }
    }
    err.flush();
    if (!runs.stream().allMatch(r -> r.indexProblems.isEmpty())) {
      err.println("kvrouter bench fleet: a router index does not equal its engine's cache");
      return 1;
    }
    if (!runs.stream().allMatch(r -> r.syncSettled)) {
      err.println("kvrouter bench fleet: a gateway still counts peer requests after every free");
      return 1;
    }
    return 0;
  }

  /** The report's line about the run's setup. */
  private String setup(TracePrompts prompts) {
    return String.format(
        Locale.ROOT,
        "%s, %,d requests (speedup %s, time scale %s, output capped at %s), %d %s mock"
            + " engines x %,d KV blocks of %d tokens",
        prompts.name(),
        prompts.size(),
        FleetReport.num(s.speedup()),
        FleetReport.num(s.timeScale()),
        s.maxOutputTokens() > 0 ? Integer.toString(s.maxOutputTokens()) : "none",
        s.engines(),
        s.inProcess() ? "in-process" : "process",
        s.gpuBlocks(),
        s.blockSize());
  }

  private String gatewaysLabel() {
    if (s.gateways() == 1) return "1 gateway";
    return s.gateways() + " gateways, round-robin, sequence sync " + s.sync();
  }

  /**
   * Checks the fleet's settings and loads the trace.
   *
   * @throws IllegalArgumentException with the message to print
   */
  static TracePrompts validate(Settings s) {
    check(s.requests() >= 1, "--requests must be >= 1");
    check(s.engines() >= 1, "--engines must be >= 1");
    check(s.clients() >= 1, "--clients must be >= 1");
    check(s.speedup() > 0 && s.timeScale() > 0, "--speedup and --time-scale must be > 0");
    check(s.maxOutputTokens() >= 0, "--max-output-tokens must be >= 0");
    check(s.gateways() >= 1, "--gateways must be >= 1");
    check(s.sync().equals("on") || s.sync().equals("off"), "--sync must be on or off");
    return TracePrompts.load(s.trace(), s.requests());
  }

  static void check(boolean ok, String message) {
    if (!ok) throw new IllegalArgumentException(message);
  }

  /**
   * One policy on a fresh fleet and fresh gateways; with {@code admission}, the gateways queue by
   * its settings and each request carries its tenant and priority (AdmissionFleetBench).
   */
  PolicyRun runPolicy(String policy, TracePrompts prompts, LiveAdmission admission)
      throws Exception {
    long wall0 = System.nanoTime();
    PolicyRun run = new PolicyRun();
    run.policy = policy;
    // approx: the router takes no events (its engines are registered without their ZMQ
    // endpoints) and predicts caches from its own decisions; there is no event-fed index to check
    boolean approx = policy.trim().equals("approx");
    List<FleetEngine> fleet = new ArrayList<>();
    List<Gateway> gws = new ArrayList<>();
    NatsProcess nats = null;
    try {
      fleet.addAll(new EngineLauncher(s, cli.mainClass()).start());
      for (FleetEngine e : fleet) run.pids.add(e.pid());
      if (s.synced()) nats = NatsProcess.start();
      GatewayConfig.Builder gcb =
          GatewayConfig.builder()
              .model(MODEL, null)
              .maxAttempts(1)
              .engineTimeout(Duration.ofSeconds(600));
      RoutingSettings routing =
          RoutingSettings.DEFAULTS
              .withSeed(s.seed())
              .withRequestExpiry(Duration.ofDays(1))
              .withApproximate(approx);
      if (admission != null && admission.queue() != null) {
        gcb.admission(admission.queue().withTokenRates(admission.rates()));
        routing =
            routing
                .withBusyRequests(admission.busyRequests())
                .withBusyPrefillTokens(admission.busyPrefillTokens());
      }
      if (admission != null && admission.queue() == null && admission.rates().on()) {
        // fifo with token-rate limits: no busy limit, so nothing ever waits; only the rates act
        gcb.admission(AdmissionConfig.DEFAULTS.withTokenRates(admission.rates()));
      }
      if (admission != null) gcb.holderWait(admission.holderWait());
      GatewayConfig gc = gcb.build();
      for (int k = 0; k < s.gateways(); k++) {
        KvRouterServer.Config sc =
            KvRouterServer.Config.builder()
                .port(0)
                .routing(routing)
                .shutdownGrace(Duration.ofSeconds(1))
                .selector(selector(policy, s.seed()))
                .sync(nats == null ? KvRouterServer.Config.SYNC_OFF : nats.url())
                .replicaId("gw-" + (k + 1))
                .build();
        Gateway g = Gateway.start(sc, gc);
        gws.add(g);
        for (int i = 0; i < fleet.size(); i++) {
          FleetEngine e = fleet.get(i);
          g.register(
              new EngineSpec(
                  e.url(),
                  MODEL,
                  s.blockSize(),
                  i + 1,
                  0,
                  approx ? null : e.events(),
                  approx ? null : e.replay(),
                  null),
              s.blockSize());
        }
      }
      List<String> urls = new ArrayList<>();
      for (Gateway g : gws) {
        reads.awaitReady(g.url());
        urls.add(g.url());
      }
      try (LagProbe lag = new LagProbe(fleet)) {
        CpuSample cpu0 = CpuSample.read();
        new FleetLoad(http, s).replay(urls, prompts, run, admission);
        run.cpu = CpuSample.between(cpu0, CpuSample.read());
        long s0 = System.nanoTime();
        if (approx) run.indexChecked = false;
        else for (String u : urls) new EndCheck(reads).check(u, fleet, run);
        run.settleMs = (System.nanoTime() - s0) / 1e6;
        run.lagMs = lag.sortedLags();
      }
      if (!approx) {
        run.eventsApplied = reads.eventsApplied(urls.getFirst());
        run.routerLagMs = reads.routerLagMs(urls.getFirst());
        run.replaysAbandoned = (long) reads.metricSum(urls, "kvrouter_zmq_replay_failures_total");
        run.eventsLost = (long) reads.metricSum(urls, "kvrouter_zmq_lost_messages_total");
      }
      if (nats != null) reads.syncFigures(urls, run);
      reads.gatewayFailures(urls, run);
      if (admission != null) reads.queueFigures(urls, run);
    } finally {
      for (Gateway g : gws) g.close();
      if (nats != null) nats.close();
      for (FleetEngine e : fleet) e.close();
    }
    run.wallSec = (System.nanoTime() - wall0) / 1e9;
    RunValidity.judge(run);
    return run;
  }

  /** The selector supplier of a policy (null: the router's own cost); unknown names throw. */
  static Supplier<WorkerSelector> selector(String policy, long seed) {
    return switch (policy.trim()) {
      case "kv" -> null;
      case "least-loaded" -> () -> WorkerSelector.costBased(0.0, 0.0, 0.0, seed);
      case "round-robin" -> BaselineSelectors::roundRobin;
      case "random" -> () -> BaselineSelectors.random(seed);
      case "approx" -> null; // the default cost, in approximate mode (KvRouterServer.Config)
      default ->
          throw new IllegalArgumentException(
              "unknown policy '"
                  + policy
                  + "'; known policies: kv, round-robin, random, least-loaded, approx");
    };
  }
}
