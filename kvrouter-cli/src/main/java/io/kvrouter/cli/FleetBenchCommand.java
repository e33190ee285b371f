package io.kvrouter.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvrouter.gateway.EngineSpec;
import io.kvrouter.gateway.Gateway;
import io.kvrouter.gateway.GatewayConfig;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.sim.BaselineSelectors;
import io.kvrouter.sim.trace.TracePrompts;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

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
 * simulate's at --speedup, run K times faster in wall time. Every time this command prints is
 * model time (wall time × K), comparable with simulate's; the JSON holds time_scale.
 *
 * Load. One platform thread paces the arrivals (sleeping until each request's due time); each
 * request then takes one of --clients permits (a Semaphore) and runs on its own virtual thread
 * with one shared java.net.http.HttpClient (HTTP/1.1). A request that waits for a permit is late:
 * its TTFT and end-to-end latency count from its due time, so client-side queueing is measured,
 * not hidden. Each request's results go to its own slot of plain arrays (one writer per slot);
 * the executor's awaitTermination orders those writes before the reads.
 *
 * Children. Every engine process is registered in CHILDREN before anything waits on it; a JVM
 * shutdown hook (Ctrl-C, SIGTERM) and the finally of every policy destroy them forcibly and wait
 * for them. Ports: each engine binds port 0 and ZMQ tcp://127.0.0.1:* and prints the bound
 * addresses on its first stdout line, which this command parses (no port is guessed).
 *
 * End check. After the last answer, for each engine: its /mock/cache (engine_block_hashes,
 * last_event_seq); wait until the router's /workers shows that sequence for the rank (the router
 * dealt with every batch), then the router's /dump's stored blocks of that worker must equal the
 * engine's blocks, hash for hash.
 *
 * Gateways. --gateways N starts N Gateways in this JVM, each registering every engine with its
 * ZMQ endpoints (each subscribes to every engine itself); request i goes to gateway i mod N. With
 * --sync on (and N > 1) they share their requests in flight over a nats-server child process
 * (NatsProcess, core NATS, in CHILDREN like the engines); every gateway's /ready must be 200
 * before the replay, and the end check runs against every gateway. Imbalance: each answered
 * request counts on its engine (x-kvrouter-worker) from when it was sent to its [DONE]; the
 * busiest engine's sum over the mean.
 *
 * Policies are KvRouterServer.Config settings of a fresh gateway: a WorkerSelector supplier
 * (round-robin, random, least-loaded; one selector per index, called under the router's lock) or
 * approximate mode (approx: engines registered without ZMQ endpoints, no end check). The event
 * lag comes from LagProbe, a SUB socket per engine beside the router's, on its own platform
 * thread; its list of lags is the only state it shares (synchronized).
 * </pre>
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
public final class FleetBenchCommand implements Callable<Integer> {
  static final String MODEL = "trace";
  private static final ObjectMapper JSON = new ObjectMapper();

  // held, so that their levels stay set (java.util.logging keeps loggers weakly)
  private static final Logger QUIET_HELIDON = Logger.getLogger("io.helidon");
  private static final Logger QUIET_KVROUTER = Logger.getLogger("io.kvrouter");
  // the prediction warning: this command reports predicted against engine-reported hits itself
  private static final Logger QUIET_PREDICTION = Logger.getLogger("io.kvrouter.gateway.prediction");

  /** Every engine process started and not yet reaped; the shutdown hook ends them. */
  static final List<Process> CHILDREN = new ArrayList<>();

  static {
    Runtime.getRuntime()
        .addShutdownHook(new Thread(FleetBenchCommand::killAll, "bench-fleet-children"));
  }

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
      names = "--report",
      paramLabel = "FILE",
      defaultValue = "kvrouter-fleet-report.html",
      description = "Self-contained HTML report with plots (default: ${DEFAULT-VALUE}).")
  Path report;

  @Option(names = "--no-report", description = "Write no HTML report.")
  boolean noReport;

  @Override
  public Integer call() throws Exception {
    Level[] before = {
      QUIET_HELIDON.getLevel(), QUIET_KVROUTER.getLevel(), QUIET_PREDICTION.getLevel()
    };
    QUIET_HELIDON.setLevel(Level.WARNING);
    QUIET_KVROUTER.setLevel(Level.WARNING);
    QUIET_PREDICTION.setLevel(Level.SEVERE);
    try {
      return bench();
    } finally {
      // an embedding JVM (the tests) gets its logging back
      QUIET_HELIDON.setLevel(before[0]);
      QUIET_KVROUTER.setLevel(before[1]);
      QUIET_PREDICTION.setLevel(before[2]);
    }
  }

  private int bench() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    TracePrompts prompts;
    try {
      check(requests >= 1, "--requests must be >= 1");
      check(engines >= 1, "--engines must be >= 1");
      check(clients >= 1, "--clients must be >= 1");
      check(speedup > 0 && timeScale > 0, "--speedup and --time-scale must be > 0");
      check(maxOutputTokens >= 0, "--max-output-tokens must be >= 0");
      check(gateways >= 1, "--gateways must be >= 1");
      check(sync.equals("on") || sync.equals("off"), "--sync must be on or off");
      for (String p : policies) selector(p, 0);
      prompts = TracePrompts.load(trace, requests);
    } catch (IllegalArgumentException e) {
      err.println("kvrouter bench fleet: " + e.getMessage());
      return 2;
    }
    if (!json) {
      out.printf(
          Locale.ROOT,
          "kvrouter bench fleet: %s, %,d requests (speedup %s, time scale %s), %d %s engines x"
              + " %,d KV blocks of %d tokens, %s%n",
          prompts.name(),
          prompts.size(),
          num(speedup),
          num(timeScale),
          engines,
          inProcess ? "in-process" : "process",
          gpuBlocks,
          blockSize,
          gatewaysLabel());
      out.flush();
    }
    List<PolicyRun> runs = new ArrayList<>();
    for (String p : policies) {
      runs.add(runPolicy(p, prompts));
      if (!json) {
        out.println(
            "  " + p + " done in " + String.format(Locale.ROOT, "%.1f s", runs.getLast().wallSec));
        out.flush();
      }
    }
    JsonNode sim = compareSimulate ? simulate(prompts) : null;
    if (json) {
      out.println(
          JSON.writerWithDefaultPrettyPrinter().writeValueAsString(toJson(prompts, runs, sim)));
    } else {
      printTable(out, runs, sim);
    }
    if (!noReport) {
      Path target = report.toAbsolutePath();
      try {
        List<String> args = spec.commandLine().getParseResult().originalArgs();
        int at = args.indexOf(spec.name());
        String line = String.join(" ", at < 0 ? args : args.subList(at + 1, args.size()));
        String setup =
            String.format(
                Locale.ROOT,
                "%s, %,d requests (speedup %s, time scale %s, output capped at %s), %d %s mock"
                    + " engines x %,d KV blocks of %d tokens",
                prompts.name(),
                prompts.size(),
                num(speedup),
                num(timeScale),
                maxOutputTokens > 0 ? Integer.toString(maxOutputTokens) : "none",
                engines,
                inProcess ? "in-process" : "process",
                gpuBlocks,
                blockSize);
        java.nio.file.Files.writeString(
            target, FleetHtmlReport.render(runs, sim, setup, line, timeScale));
        (json ? err : out).println("report: " + target);
      } catch (java.io.IOException e) {
        err.println("kvrouter bench fleet: cannot write the report " + report + ": " + e);
        return 1;
      }
    }
    out.flush();
    boolean ok = runs.stream().allMatch(r -> r.indexProblems.isEmpty());
    if (!ok) {
      err.println("kvrouter bench fleet: a router index does not equal its engine's cache");
      return 1;
    }
    if (!runs.stream().allMatch(r -> r.syncSettled)) {
      err.println("kvrouter bench fleet: a gateway still counts peer requests after every free");
      return 1;
    }
    return 0;
  }

  private String gatewaysLabel() {
    if (gateways == 1) return "1 gateway";
    return gateways + " gateways, round-robin, sequence sync " + sync;
  }

  private boolean synced() {
    return gateways > 1 && sync.equals("on");
  }

  private static void check(boolean ok, String message) {
    if (!ok) throw new IllegalArgumentException(message);
  }

  // ---- one policy on a fresh fleet ----

  /** What one policy's run measured. Times in model milliseconds. */
  static final class PolicyRun {
    String policy;
    int sent;
    int completed;
    int errors;
    double[] ttftMs;
    double[] itlMs;
    double[] e2eMs;
    long promptTokens;
    long cachedTokens;
    long predictedTokens;
    long outputTokens;
    double makespanSec;
    long eventsApplied;
    double settleMs;
    double[] lagMs = new double[0];

    /** The router's own mean event lag, publish to applied (its /metrics), -1 when unknown. */
    double routerLagMs = -1;

    /** Busiest engine's time-averaged requests in flight over the mean (client-side times). */
    double imbalance = Double.NaN;

    /** Sequence sync: changes the gateways applied from their peers, and the mean lag. */
    long syncApplied = -1;

    double syncLagMs = -1;

    /** Whether every gateway's count of peer requests in flight went back to 0 at the end. */
    boolean syncSettled = true;

    double wallSec;
    List<String> indexProblems = new ArrayList<>();
    Map<String, Integer> errorReasons = new java.util.TreeMap<>();

    /** Each failed request: its id, when it was due and sent, how long it ran, and why. */
    List<String> failed = new ArrayList<>();

    /** The gateways' attempts that failed before the first byte, by reason (their /metrics). */
    Map<String, Long> attemptFailures = new java.util.TreeMap<>();

    /** Requests the gateways sent again because a pooled connection expired as it was taken. */
    long staleResends;

    List<Long> pids = new ArrayList<>();
    long blocksCompared;
    boolean indexChecked = true;
  }

  private PolicyRun runPolicy(String policy, TracePrompts prompts) throws Exception {
    long wall0 = System.nanoTime();
    PolicyRun run = new PolicyRun();
    run.policy = policy;
    // approx: the router takes no events (its engines are registered without their ZMQ
    // endpoints) and predicts caches from its own decisions; there is no event-fed index to check
    boolean approx = policy.trim().equals("approx");
    List<Engine> fleet = new ArrayList<>();
    List<Gateway> gws = new ArrayList<>();
    NatsProcess nats = null;
    try {
      fleet.addAll(startEngines());
      for (Engine e : fleet) run.pids.add(e.pid());
      if (synced()) nats = NatsProcess.start();
      GatewayConfig gc =
          GatewayConfig.builder()
              .model(MODEL, null)
              .maxAttempts(1)
              .engineTimeout(Duration.ofSeconds(600))
              .build();
      for (int k = 0; k < gateways; k++) {
        KvRouterServer.Config sc =
            KvRouterServer.Config.builder()
                .port(0)
                .seed(seed)
                .requestExpiry(Duration.ofDays(1))
                .shutdownGrace(Duration.ofSeconds(1))
                .selector(selector(policy, seed))
                .approximate(approx)
                .sync(nats == null ? KvRouterServer.Config.SYNC_OFF : nats.url())
                .replicaId("gw-" + (k + 1))
                .build();
        Gateway g = Gateway.start(sc, gc);
        gws.add(g);
        for (int i = 0; i < fleet.size(); i++) {
          Engine e = fleet.get(i);
          g.register(
              new EngineSpec(
                  e.url(),
                  MODEL,
                  blockSize,
                  i + 1,
                  0,
                  approx ? null : e.events(),
                  approx ? null : e.replay(),
                  null),
              blockSize);
        }
      }
      List<String> urls = new ArrayList<>();
      for (Gateway g : gws) {
        awaitReady(g.url());
        urls.add(g.url());
      }
      try (LagProbe lag = new LagProbe(fleet)) {
        replay(urls, prompts, run);
        long s0 = System.nanoTime();
        if (approx) run.indexChecked = false;
        else for (String u : urls) checkIndex(u, fleet, run);
        run.settleMs = (System.nanoTime() - s0) / 1e6;
        run.lagMs = lag.sortedLags();
      }
      if (!approx) {
        run.eventsApplied = eventsApplied(urls.getFirst());
        run.routerLagMs = routerLagMs(urls.getFirst());
      }
      if (nats != null) syncFigures(urls, run);
      gatewayFailures(urls, run);
    } finally {
      for (Gateway g : gws) g.close();
      if (nats != null) nats.close();
      for (Engine e : fleet) e.close();
    }
    run.wallSec = (System.nanoTime() - wall0) / 1e9;
    return run;
  }

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

  // ---- load ----

  private final java.net.http.HttpClient http =
      java.net.http.HttpClient.newBuilder()
          .version(java.net.http.HttpClient.Version.HTTP_1_1)
          .executor(Executors.newVirtualThreadPerTaskExecutor())
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  private void replay(List<String> gatewayUrls, TracePrompts prompts, PolicyRun run)
      throws InterruptedException {
    int n = prompts.size();
    long[] sentAt = new long[n];
    long[] endedAt = new long[n];
    long[] worker = new long[n];
    long[] ttft = new long[n];
    long[] e2e = new long[n];
    long[] finish = new long[n];
    long[][] itl = new long[n][];
    int[] prompt = new int[n];
    int[] cached = new int[n];
    int[] predicted = new int[n];
    int[] output = new int[n];
    boolean[] ok = new boolean[n];
    String[] why = new String[n];
    String[] detail = new String[n];
    Semaphore slots = new Semaphore(clients);
    double scale = speedup * timeScale;
    long t0 = System.nanoTime() + 50_000_000L;
    java.net.URI[] uris = new java.net.URI[gatewayUrls.size()];
    for (int g = 0; g < uris.length; g++) {
      uris[g] = java.net.URI.create(gatewayUrls.get(g) + "/v1/completions");
    }
    try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
      for (int i = 0; i < n; i++) {
        long due = due(prompts, i, t0, scale);
        long wait = due - System.nanoTime();
        if (wait > 0) TimeUnit.NANOSECONDS.sleep(wait);
        slots.acquire();
        int k = i;
        pool.execute(
            () -> {
              try {
                sentAt[k] = System.nanoTime();
                one(
                    uris[k % uris.length],
                    prompts,
                    k,
                    due,
                    ttft,
                    e2e,
                    finish,
                    itl,
                    prompt,
                    cached,
                    predicted,
                    output,
                    worker,
                    ok,
                    why,
                    detail);
              } finally {
                endedAt[k] = System.nanoTime();
                slots.release();
              }
            });
      }
      pool.shutdown();
      pool.awaitTermination(1, TimeUnit.DAYS);
    }
    double k = timeScale;
    List<Double> t = new ArrayList<>();
    List<Double> e = new ArrayList<>();
    long itlCount = 0;
    for (long[] a : itl) if (a != null) itlCount += a.length;
    double[] itlMs = new double[(int) itlCount];
    int at = 0;
    long last = t0;
    for (int i = 0; i < n; i++) {
      run.sent++;
      if (!ok[i]) {
        run.errors++;
        run.errorReasons.merge(why[i] == null ? "unknown" : why[i], 1, Integer::sum);
        run.failed.add(
            String.format(
                Locale.ROOT,
                "fleet-%d (due at %.1f s, sent %.0f ms late, ended %.0f ms after sending, wall): %s",
                i,
                (due(prompts, i, t0, scale) - t0) / 1e9,
                Math.max(0, sentAt[i] - due(prompts, i, t0, scale)) / 1e6,
                (endedAt[i] - sentAt[i]) / 1e6,
                detail[i] != null ? detail[i] : why[i] == null ? "unknown" : why[i]));
        continue;
      }
      run.completed++;
      t.add(ttft[i] * k / 1e6);
      e.add(e2e[i] * k / 1e6);
      for (long g : itl[i]) itlMs[at++] = g * k / 1e6;
      run.promptTokens += prompt[i];
      run.cachedTokens += cached[i];
      run.predictedTokens += Math.min(predicted[i], prompt[i]);
      run.outputTokens += output[i];
      last = Math.max(last, finish[i]);
    }
    run.ttftMs = sorted(t);
    run.e2eMs = sorted(e);
    Arrays.sort(itlMs, 0, at);
    run.itlMs = Arrays.copyOf(itlMs, at);
    run.makespanSec = (last - t0) * k / 1e9;
    run.imbalance = imbalance(ok, worker, sentAt, finish);
  }

  /**
   * The busiest engine's time-averaged requests in flight over the mean across engines, as
   * simulate's imbalance: each answered request counts on its engine from when it was sent to its
   * [DONE]; every engine counts, also one that served nothing.
   */
  private double imbalance(boolean[] ok, long[] worker, long[] sentAt, long[] finish) {
    double[] busy = new double[engines];
    for (int i = 0; i < ok.length; i++) {
      int w = (int) worker[i] - 1;
      if (ok[i] && w >= 0 && w < engines) busy[w] += finish[i] - sentAt[i];
    }
    double max = 0;
    double sum = 0;
    for (double b : busy) {
      max = Math.max(max, b);
      sum += b;
    }
    return sum == 0 ? Double.NaN : max / (sum / engines);
  }

  /** Waits (up to 60 s) until the gateway's /ready is 200. */
  private void awaitReady(String gateway) throws Exception {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (true) {
      var r =
          http.send(
              java.net.http.HttpRequest.newBuilder(java.net.URI.create(gateway + "/ready")).build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() == 200) return;
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(gateway + " not ready within 60 s: " + r.body());
      }
      Thread.sleep(20);
    }
  }

  /**
   * Sequence sync figures summed over the gateways' /metrics, read once every gateway counts no
   * peer request in flight any more (every request was freed where it was routed, so a peer request
   * left over would be a stuck load: run.syncSettled stays false after 30 s).
   */
  private void syncFigures(List<String> gateways, PolicyRun run) throws Exception {
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!(run.syncSettled = metricSum(gateways, "kvrouter_sync_peer_requests{") == 0)
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    run.syncApplied = (long) metricSum(gateways, "kvrouter_sync_changes_applied_total{");
    double lagSum = metricSum(gateways, "kvrouter_sync_lag_seconds_sum{");
    double lagCount = metricSum(gateways, "kvrouter_sync_lag_seconds_count{");
    run.syncLagMs = lagCount == 0 ? -1 : lagSum / lagCount * 1000;
  }

  /** The gateways' failed attempts by reason and their stale-connection resends. */
  private void gatewayFailures(List<String> gateways, PolicyRun run) throws Exception {
    String failures = "kvrouter_gateway_attempt_failures_total{";
    for (String g : gateways) {
      var r =
          http.send(
              java.net.http.HttpRequest.newBuilder(java.net.URI.create(g + "/metrics")).build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());
      for (String line : r.body().split("\n")) {
        if (!line.startsWith(failures)) continue;
        int at = line.indexOf("reason=\"");
        if (at < 0) continue;
        String reason = line.substring(at + 8, line.indexOf('"', at + 8));
        long v = (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        if (v > 0) run.attemptFailures.merge(reason, v, Long::sum);
      }
    }
    run.staleResends =
        (long) metricSum(gateways, "kvrouter_gateway_stale_connection_resends_total");
  }

  /** The sum over the gateways' /metrics of the samples whose line starts with {@code prefix}. */
  private double metricSum(List<String> gateways, String prefix) throws Exception {
    double sum = 0;
    for (String g : gateways) {
      var r =
          http.send(
              java.net.http.HttpRequest.newBuilder(java.net.URI.create(g + "/metrics")).build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());
      for (String line : r.body().split("\n")) {
        double v;
        try {
          v = Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        } catch (RuntimeException notANumber) {
          continue;
        }
        if (line.startsWith(prefix)) sum += v;
      }
    }
    return sum;
  }

  /**
   * A nats-server child process for sequence sync (core NATS, no JetStream), on a free loopback
   * port; found on PATH or in /usr/sbin, /usr/bin, /usr/local/bin (.ci/run installs it).
   */
  static final class NatsProcess implements AutoCloseable {
    private final Process p;
    private final int port;

    private NatsProcess(Process p, int port) {
      this.p = p;
      this.port = port;
    }

    static NatsProcess start() throws Exception {
      String bin = null;
      List<String> dirs = new ArrayList<>();
      String path = System.getenv("PATH");
      if (path != null) dirs.addAll(Arrays.asList(path.split(java.io.File.pathSeparator)));
      dirs.addAll(List.of("/usr/sbin", "/usr/bin", "/usr/local/bin"));
      for (String d : dirs) {
        Path c = Path.of(d, "nats-server");
        if (java.nio.file.Files.isExecutable(c)) {
          bin = c.toString();
          break;
        }
      }
      if (bin == null) {
        throw new IllegalStateException(
            "--sync on needs nats-server (apt-get install -y nats-server), or run with --sync off");
      }
      int port;
      try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
        port = s.getLocalPort();
      }
      Process p;
      synchronized (CHILDREN) {
        p =
            new ProcessBuilder(bin, "-a", "127.0.0.1", "-p", Integer.toString(port))
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .start();
        CHILDREN.add(p);
      }
      NatsProcess n = new NatsProcess(p, port);
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (true) {
        try (java.net.Socket s = new java.net.Socket("127.0.0.1", port)) {
          return n;
        } catch (java.io.IOException notYet) {
          if (!p.isAlive() || System.nanoTime() > deadline) {
            n.close();
            throw new IllegalStateException("nats-server did not start on port " + port);
          }
          Thread.sleep(20);
        }
      }
    }

    String url() {
      return "nats://127.0.0.1:" + port;
    }

    @Override
    public void close() {
      p.destroyForcibly();
      try {
        p.waitFor(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      synchronized (CHILDREN) {
        CHILDREN.remove(p);
      }
    }
  }

  /** When request i is due (System.nanoTime scale). */
  private static long due(TracePrompts prompts, int i, long t0, double scale) {
    return t0 + Math.round(prompts.offsetMs(i) * 1e6 / scale);
  }

  private void one(
      java.net.URI uri,
      TracePrompts prompts,
      int i,
      long due,
      long[] ttft,
      long[] e2e,
      long[] finish,
      long[][] itl,
      int[] prompt,
      int[] cached,
      int[] predicted,
      int[] output,
      long[] worker,
      boolean[] ok,
      String[] why,
      String[] detail) {
    int[] tokens = prompts.liveTokens(i);
    int max = prompts.outputLength(i);
    if (maxOutputTokens > 0) max = Math.min(max, maxOutputTokens);
    max = Math.max(1, max);
    StringBuilder b = new StringBuilder(tokens.length * 11 + 160);
    b.append("{\"model\":\"")
        .append(MODEL)
        .append("\",\"stream\":true,")
        .append("\"stream_options\":{\"include_usage\":true},\"ignore_eos\":true,\"max_tokens\":")
        .append(max)
        .append(",\"prompt\":[");
    for (int k = 0; k < tokens.length; k++) {
      if (k > 0) b.append(',');
      b.append(tokens[k]);
    }
    b.append("]}");
    try {
      java.net.http.HttpResponse<java.util.stream.Stream<String>> r =
          http.send(
              java.net.http.HttpRequest.newBuilder(uri)
                  .header("Content-Type", "application/json")
                  .header("x-request-id", "fleet-" + i)
                  .POST(java.net.http.HttpRequest.BodyPublishers.ofString(b.toString()))
                  .build(),
              java.net.http.HttpResponse.BodyHandlers.ofLines());
      try (java.util.stream.Stream<String> lines = r.body()) {
        if (r.statusCode() != 200) {
          // the gateway's refusal is OpenAI-shaped: its code names the cause (engine_timeout ...)
          StringBuilder body = new StringBuilder();
          lines.forEach(l -> body.append(l).append('\n'));
          String code = null;
          String message = body.toString().strip();
          try {
            JsonNode err = JSON.readTree(message).path("error");
            if (err.hasNonNull("code")) code = err.get("code").asText();
            if (err.hasNonNull("message")) message = err.get("message").asText();
          } catch (Exception x) {
            // not JSON: keep the body as it is
          }
          why[i] = "status " + r.statusCode() + (code == null ? "" : " " + code);
          detail[i] =
              why[i]
                  + r.headers()
                      .firstValue("x-kvrouter-attempts")
                      .map(a -> ", attempts " + a)
                      .orElse("")
                  + ": "
                  + (message.length() > 300 ? message.substring(0, 300) + "..." : message);
          return;
        }
        predicted[i] = (int) r.headers().firstValueAsLong("x-kvrouter-overlap-tokens").orElse(0);
        worker[i] = r.headers().firstValueAsLong("x-kvrouter-worker").orElse(-1);
        long[] gaps = new long[Math.max(1, max)];
        int[] st = new int[2]; // [0] tokens seen, [1] 1 once usage and [DONE] are in, 2 on error
        long[] lastAt = new long[1];
        boolean[] done = new boolean[1];
        lines.forEach(
            line -> {
              if (!line.startsWith("data: ") || done[0]) return;
              String d = line.substring(6);
              long now = System.nanoTime();
              if (d.equals("[DONE]")) {
                done[0] = true;
                e2e[i] = now - due;
                finish[i] = now;
                return;
              }
              if (d.contains("\"choices\":[]")) {
                try {
                  JsonNode u = JSON.readTree(d).path("usage");
                  prompt[i] = u.path("prompt_tokens").asInt();
                  cached[i] = u.path("prompt_tokens_details").path("cached_tokens").asInt(0);
                  output[i] = u.path("completion_tokens").asInt();
                  st[1] = 1;
                } catch (Exception x) {
                  st[1] = 2;
                }
                return;
              }
              if (d.startsWith("{\"error\"")) {
                st[1] = 2;
                detail[i] = "error event in the stream: " + d;
                return;
              }
              if (st[0] == 0) ttft[i] = now - due;
              else if (st[0] - 1 < gaps.length) gaps[st[0] - 1] = now - lastAt[0];
              st[0]++;
              lastAt[0] = now;
            });
        if (done[0] && st[1] == 1 && st[0] > 0) {
          itl[i] = Arrays.copyOf(gaps, Math.min(gaps.length, st[0] - 1));
          ok[i] = true;
        } else {
          why[i] =
              st[1] == 2
                  ? "error event in the stream"
                  : !done[0] ? "stream ended without [DONE]" : st[1] == 0 ? "no usage" : "no token";
        }
      }
    } catch (Exception x) {
      if (x instanceof InterruptedException) Thread.currentThread().interrupt();
      why[i] = x.getClass().getSimpleName() + (x.getMessage() == null ? "" : ": " + x.getMessage());
    }
  }

  private static double[] sorted(List<Double> v) {
    double[] a = new double[v.size()];
    for (int i = 0; i < a.length; i++) a[i] = v.get(i);
    Arrays.sort(a);
    return a;
  }

  /** Nearest-rank percentile, as simulate's. */
  static double pct(double[] sorted, double p) {
    if (sorted.length == 0) return Double.NaN;
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }

  // ---- end check and router figures ----

  private JsonNode getJson(String url) throws Exception {
    var r =
        http.send(
            java.net.http.HttpRequest.newBuilder(java.net.URI.create(url)).build(),
            java.net.http.HttpResponse.BodyHandlers.ofByteArray());
    if (r.statusCode() != 200) throw new IllegalStateException(url + ": " + r.statusCode());
    return JSON.readTree(r.body());
  }

  private void checkIndex(String gateway, List<Engine> fleet, PolicyRun run) throws Exception {
    List<TreeSet<String>> expected = new ArrayList<>();
    List<Long> seqs = new ArrayList<>();
    for (Engine e : fleet) {
      JsonNode d = getJson(e.url() + "/mock/cache");
      TreeSet<String> s = new TreeSet<>();
      d.path("engine_block_hashes").forEach(h -> s.add(h.asText()));
      expected.add(s);
      seqs.add(d.path("last_event_seq").asLong());
    }
    long deadline = System.nanoTime() + 30_000_000_000L;
    for (int i = 0; i < fleet.size(); i++) {
      long id = i + 1;
      long want = seqs.get(i);
      while (lastSequence(gateway, id) != want) {
        if (System.nanoTime() > deadline) {
          run.indexProblems.add(
              "engine " + id + ": the router never reached the engine's last batch " + want);
          break;
        }
        Thread.sleep(20);
      }
    }
    Map<Long, TreeSet<String>> indexed = new LinkedHashMap<>();
    for (JsonNode index : getJson(gateway + "/dump").path("indexes")) {
      for (JsonNode e : index.path("events")) {
        JsonNode stored = e.at("/event/data/stored");
        if (stored.isMissingNode()) continue;
        TreeSet<String> s =
            indexed.computeIfAbsent(e.path("worker_id").asLong(), k -> new TreeSet<>());
        for (JsonNode b : stored.path("blocks")) s.add(b.path("block_hash").asText());
      }
    }
    for (int i = 0; i < fleet.size(); i++) {
      TreeSet<String> got = indexed.getOrDefault((long) i + 1, new TreeSet<>());
      TreeSet<String> want = expected.get(i);
      run.blocksCompared += want.size();
      if (!got.equals(want)) {
        TreeSet<String> missing = new TreeSet<>(want);
        missing.removeAll(got);
        TreeSet<String> extra = new TreeSet<>(got);
        extra.removeAll(want);
        run.indexProblems.add(
            String.format(
                Locale.ROOT,
                "engine %d: router holds %d blocks, engine %d (%d missing, %d extra)",
                i + 1,
                got.size(),
                want.size(),
                missing.size(),
                extra.size()));
      }
    }
  }

  private long lastSequence(String gateway, long instance) throws Exception {
    for (JsonNode w : getJson(gateway + "/workers")) {
      if (w.path("instance_id").asLong() != instance) continue;
      for (JsonNode r : w.path("ranks")) return r.path("zmq").path("last_sequence").asLong(-2);
    }
    return -2;
  }

  /**
   * The router's mean event lag, publish (the batch's ts) to applied, over all its ZMQ listeners:
   * kvrouter_zmq_event_lag_microseconds_total over kvrouter_zmq_event_lag_batches_total.
   */
  private double routerLagMs(String gateway) throws Exception {
    var r =
        http.send(
            java.net.http.HttpRequest.newBuilder(java.net.URI.create(gateway + "/metrics")).build(),
            java.net.http.HttpResponse.BodyHandlers.ofString());
    double micros = 0, batches = 0;
    for (String line : r.body().split("\n")) {
      if (line.startsWith("kvrouter_zmq_event_lag_microseconds_total{")) {
        micros += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      } else if (line.startsWith("kvrouter_zmq_event_lag_batches_total{")) {
        batches += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return batches == 0 ? -1 : micros / batches / 1000;
  }

  private long eventsApplied(String gateway) throws Exception {
    long sum = 0;
    for (JsonNode w : getJson(gateway + "/workers")) {
      for (JsonNode r : w.path("ranks")) sum += r.path("zmq").path("events_applied").asLong();
    }
    return sum;
  }

  /**
   * Event lag: a ZMQ SUB of its own on every engine's PUB socket, beside the router's, takes each
   * batch's {@code ts} (the engine's wall clock at publish, in milliseconds as the mock engine
   * writes it) from the receive time. The router's own subscriber sees the same messages on the
   * same path; applying a batch adds microseconds.
   */
  static final class LagProbe implements AutoCloseable {
    private final org.zeromq.ZContext ctx = new org.zeromq.ZContext(1);
    private final List<Thread> threads = new ArrayList<>();
    private final List<Double> lagsMs = java.util.Collections.synchronizedList(new ArrayList<>());
    private volatile boolean stop;

    LagProbe(List<Engine> fleet) {
      for (Engine e : fleet) {
        org.zeromq.ZMQ.Socket sub = ctx.createSocket(org.zeromq.SocketType.SUB);
        sub.setReceiveTimeOut(100);
        sub.setRcvHWM(0);
        sub.subscribe(new byte[0]);
        sub.connect(e.events());
        threads.add(Thread.ofPlatform().daemon().name("bench-fleet-lag").start(() -> loop(sub)));
      }
    }

    private void loop(org.zeromq.ZMQ.Socket sub) {
      while (!stop) {
        org.zeromq.ZMsg m;
        try {
          m = org.zeromq.ZMsg.recvMsg(sub);
        } catch (RuntimeException closed) {
          return;
        }
        if (m == null || m.size() < 3) continue;
        double now = java.time.Instant.now().toEpochMilli();
        byte[] payload = m.getLast().getData();
        try (var u = org.msgpack.core.MessagePack.newDefaultUnpacker(payload)) {
          u.unpackArrayHeader();
          double ts = u.unpackDouble();
          lagsMs.add(now - ts * 1000.0);
        } catch (java.io.IOException | RuntimeException ignored) {
          // not a batch this probe understands: not counted
        }
      }
      sub.close();
    }

    /** The lags seen so far, sorted. */
    double[] sortedLags() {
      synchronized (lagsMs) {
        return sorted(lagsMs);
      }
    }

    @Override
    public void close() {
      stop = true;
      for (Thread t : threads) {
        try {
          t.join(2000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      ctx.close();
    }
  }

  // ---- engines ----

  /** A mock engine of the fleet, in this JVM or a child process. */
  interface Engine extends AutoCloseable {
    String url();

    String events();

    String replay();

    /** The process id (this JVM's for an in-process engine). */
    long pid();

    @Override
    void close();
  }

  private List<Engine> startEngines() throws Exception {
    List<Engine> out = new ArrayList<>();
    try {
      if (inProcess) {
        for (int i = 0; i < engines; i++)
          out.add(new InProcess(MockEngineServer.start(engineConfig(i))));
      } else {
        List<ChildEngine> started = new ArrayList<>();
        for (int i = 0; i < engines; i++) {
          ChildEngine c = ChildEngine.start(childArgs(i));
          started.add(c);
          out.add(c);
        }
        for (ChildEngine c : started) c.awaitReady(Duration.ofSeconds(60));
      }
      return out;
    } catch (Exception e) {
      for (Engine x : out) x.close();
      throw e;
    }
  }

  private MockEngineServer.Config engineConfig(int i) {
    return MockEngineServer.Config.builder()
        .servedModelName(MODEL)
        .blockSize(blockSize)
        .numGpuBlocks(gpuBlocks)
        .maxNumSeqs(maxBatch)
        .prefillBaseMs(prefillBaseMs)
        .prefillMsPer1kTokens(prefillMsPer1k)
        .decodeMsPerToken(decodeMsPerToken)
        .speedup(timeScale)
        .enablePromptTokensDetails(true)
        .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
        .seed(seed + i)
        .build();
  }

  private List<String> childArgs(int i) {
    List<String> a = new ArrayList<>();
    a.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    a.add("-Xmx384m");
    a.add("-XX:+UseSerialGC");
    a.add("-Xss512k");
    if (Runtime.version().feature() >= 24) a.add("--sun-misc-unsafe-memory-access=allow");
    a.add("-cp");
    a.add(System.getProperty("java.class.path"));
    a.add(Main.class.getName());
    a.add("mock-engine");
    a.add("--exit-with-parent"); // no engine outlives this command, even a SIGKILL of it
    a.addAll(
        List.of(
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--served-model-name",
            MODEL,
            "--block-size",
            Integer.toString(blockSize),
            "--num-gpu-blocks",
            Integer.toString(gpuBlocks),
            "--max-num-seqs",
            Integer.toString(maxBatch),
            "--prefill-base-ms",
            Double.toString(prefillBaseMs),
            "--prefill-ms-per-1k-tokens",
            Double.toString(prefillMsPer1k),
            "--decode-ms-per-token",
            Double.toString(decodeMsPerToken),
            "--speedup",
            Double.toString(timeScale),
            "--seed",
            Long.toString(seed + i),
            "--enable-prompt-tokens-details",
            "--kv-events-config",
            "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\","
                + "\"endpoint\":\"tcp://127.0.0.1:*\",\"replay_endpoint\":\"tcp://127.0.0.1:*\"}"));
    return a;
  }

  private record InProcess(MockEngineServer s) implements Engine {
    @Override
    public String url() {
      return s.url();
    }

    @Override
    public String events() {
      return s.zmqEndpoint();
    }

    @Override
    public String replay() {
      return s.replayEndpoint();
    }

    @Override
    public long pid() {
      return ProcessHandle.current().pid();
    }

    @Override
    public void close() {
      s.close();
    }
  }

  /** A {@code kvrouter mock-engine} child JVM; its addresses come from its first stdout line. */
  static final class ChildEngine implements Engine {
    private static final java.util.regex.Pattern BANNER =
        java.util.regex.Pattern.compile(
            "on (http://\\S+), KV events on (tcp://\\S+) \\(replay (tcp://[^)\\s]+)\\)");
    private final Process p;
    private final java.util.concurrent.CompletableFuture<String[]> ready =
        new java.util.concurrent.CompletableFuture<>();
    private final StringBuffer output = new StringBuffer();
    private String[] addr;

    private ChildEngine(Process p) {
      this.p = p;
    }

    static ChildEngine start(List<String> command) throws java.io.IOException {
      ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
      Process p;
      synchronized (CHILDREN) {
        p = pb.start();
        CHILDREN.add(p);
      }
      ChildEngine c = new ChildEngine(p);
      Thread.ofVirtual().name("bench-fleet-child-" + p.pid()).start(c::drain);
      return c;
    }

    private void drain() {
      try (var r =
          new java.io.BufferedReader(
              new java.io.InputStreamReader(
                  p.getInputStream(), java.nio.charset.StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          if (output.length() < 8192) output.append(line).append('\n');
          var m = BANNER.matcher(line);
          if (!ready.isDone() && m.find()) {
            ready.complete(new String[] {m.group(1), m.group(2), m.group(3)});
          }
        }
      } catch (java.io.IOException ignored) {
        // the process ended
      }
      ready.completeExceptionally(
          new IllegalStateException("mock-engine process ended before it served: " + output));
    }

    void awaitReady(Duration timeout) throws Exception {
      try {
        addr = ready.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        throw new IllegalStateException(
            "mock-engine process " + p.pid() + " did not start within " + timeout + ": " + output);
      } catch (java.util.concurrent.ExecutionException e) {
        throw new IllegalStateException(e.getCause().getMessage(), e.getCause());
      }
    }

    @Override
    public String url() {
      return addr[0];
    }

    @Override
    public String events() {
      return addr[1];
    }

    @Override
    public String replay() {
      return addr[2];
    }

    @Override
    public long pid() {
      return p.pid();
    }

    @Override
    public void close() {
      reap(p);
      synchronized (CHILDREN) {
        CHILDREN.remove(p);
      }
    }
  }

  private static void reap(Process p) {
    p.destroyForcibly();
    try {
      p.waitFor(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static void killAll() {
    List<Process> ps;
    synchronized (CHILDREN) {
      ps = new ArrayList<>(CHILDREN);
      CHILDREN.clear();
    }
    for (Process p : ps) p.destroyForcibly();
    for (Process p : ps) reap(p);
  }

  // ---- simulate, side by side ----

  private JsonNode simulate(TracePrompts prompts) throws Exception {
    List<String> a = new ArrayList<>();
    Path capped = null;
    if (maxOutputTokens > 0) {
      // simulate replays the same requests with the same cap
      capped = java.nio.file.Files.createTempFile("kvrouter-fleet-trace", ".jsonl");
      prompts.writeCapped(capped, maxOutputTokens);
      a.addAll(List.of("--trace", capped.toString()));
    } else if (trace != null) {
      a.addAll(List.of("--trace", trace.toString()));
    }
    a.addAll(
        List.of(
            "--requests",
            Integer.toString(requests),
            "--policies",
            String.join(",", policies),
            "--workers",
            Integer.toString(engines),
            "--gpu-blocks",
            Integer.toString(gpuBlocks),
            "--block-size",
            Integer.toString(blockSize),
            "--speedup",
            Double.toString(speedup),
            "--prefill-base-ms",
            Double.toString(prefillBaseMs),
            "--prefill-ms-per-1k-tokens",
            Double.toString(prefillMsPer1k),
            "--decode-ms-per-token",
            Double.toString(decodeMsPerToken),
            "--max-batch",
            Integer.toString(maxBatch),
            "--seed",
            Long.toString(seed),
            "--json",
            "--no-report",
            "--quiet"));
    StringWriter so = new StringWriter();
    StringWriter se = new StringWriter();
    List<String> full = new ArrayList<>();
    full.add("simulate");
    full.addAll(a);
    int rc;
    try {
      rc = Main.run(new PrintWriter(so), new PrintWriter(se), full.toArray(String[]::new));
    } finally {
      if (capped != null) java.nio.file.Files.deleteIfExists(capped);
    }
    if (rc != 0 && so.toString().isBlank()) {
      throw new IllegalStateException("simulate failed (" + rc + "): " + se);
    }
    return JSON.readTree(so.toString());
  }

  /** simulate's result for {@code policy}, or null. */
  private static JsonNode simPolicy(JsonNode sim, String policy) {
    if (sim == null) return null;
    for (JsonNode p : sim.path("policies")) {
      if (policy.equals(p.path("policy").asText())) return p;
    }
    return null;
  }

  // ---- output ----

  static double hitRate(PolicyRun r) {
    return r.promptTokens == 0 ? 0 : (double) r.cachedTokens / r.promptTokens;
  }

  static double predictedRate(PolicyRun r) {
    return r.promptTokens == 0 ? 0 : (double) r.predictedTokens / r.promptTokens;
  }

  private void printTable(PrintWriter out, List<PolicyRun> runs, JsonNode sim) {
    out.println();
    out.println(
        "times are model time (wall time x "
            + num(timeScale)
            + "), but the event lags are wall time: engine publish -> a subscriber beside the"
            + " router (p50/p99), and publish -> applied in the router (its mean)");
    out.printf(
        Locale.ROOT,
        "%-13s %6s %6s %9s %9s %9s %9s %9s %9s %9s %9s %8s %10s %9s %11s %11s %8s%n",
        "policy",
        "done",
        "errors",
        "hit rate",
        "predicted",
        "imbalance",
        "TTFT p50",
        "p90",
        "p99",
        "ITL p50",
        "e2e p50",
        "req/s",
        "out tok/s",
        "events",
        "lag p50/p99",
        "router lag",
        "index");
    for (PolicyRun r : runs) {
      out.printf(
          Locale.ROOT,
          "%-13s %6d %6d %8.1f%% %8.1f%% %9.2f %9s %9s %9s %9s %9s %8.2f %,10.0f %,9d %11s %11s"
              + " %8s%n",
          r.policy,
          r.completed,
          r.errors,
          100 * hitRate(r),
          100 * predictedRate(r),
          r.imbalance,
          ms(pct(r.ttftMs, 50)),
          ms(pct(r.ttftMs, 90)),
          ms(pct(r.ttftMs, 99)),
          ms(pct(r.itlMs, 50)),
          ms(pct(r.e2eMs, 50)),
          r.completed / r.makespanSec,
          r.outputTokens / r.makespanSec,
          r.eventsApplied,
          String.format(Locale.ROOT, "%.0f/%.0f ms", pct(r.lagMs, 50), pct(r.lagMs, 99)),
          r.routerLagMs < 0 ? "n/a" : String.format(Locale.ROOT, "%.1f ms", r.routerLagMs),
          !r.indexChecked ? "n/a" : r.indexProblems.isEmpty() ? "equal" : "DIFFERS");
    }
    if (synced()) {
      for (PolicyRun r : runs) {
        out.printf(
            Locale.ROOT,
            "  %s: sequence sync applied %,d peer changes, mean lag %.1f ms (wall), %s%n",
            r.policy,
            r.syncApplied,
            r.syncLagMs,
            r.syncSettled
                ? "no peer request left at the end"
                : "PEER REQUESTS LEFT IN FLIGHT at the end");
      }
    }
    for (PolicyRun r : runs) {
      for (String p : r.indexProblems) out.println("  " + r.policy + ": " + p);
      if (!r.attemptFailures.isEmpty() || r.staleResends > 0) {
        out.println(
            "  "
                + r.policy
                + ": gateway: attempts failed before the first byte "
                + r.attemptFailures
                + ", requests resent after a pooled connection expired: "
                + r.staleResends);
      }
      r.errorReasons.forEach((why, n) -> out.println("  " + r.policy + ": " + n + " x " + why));
      for (int f = 0; f < Math.min(r.failed.size(), 20); f++) {
        out.println("    " + r.failed.get(f));
      }
      if (r.failed.size() > 20) out.println("    ... " + (r.failed.size() - 20) + " more (--json)");
    }
    if (sim != null) {
      out.println();
      out.println("live vs simulate (same trace, fleet and timing model):");
      out.printf(
          Locale.ROOT,
          "%-13s %18s %22s %22s %18s%n",
          "policy",
          "hit rate",
          "TTFT p50",
          "TTFT p90",
          "req/s");
      for (PolicyRun r : runs) {
        JsonNode s = simPolicy(sim, r.policy);
        if (s == null) continue;
        out.printf(
            Locale.ROOT,
            "%-13s %7.1f%% / %5.1f%% %10s / %9s %10s / %9s %7.2f / %7.2f%n",
            r.policy,
            100 * hitRate(r),
            100 * s.path("hit_rate").asDouble(),
            ms(pct(r.ttftMs, 50)),
            ms(s.path("ttft_ms").path("p50").asDouble()),
            ms(pct(r.ttftMs, 90)),
            ms(s.path("ttft_ms").path("p90").asDouble()),
            r.completed / r.makespanSec,
            s.path("requests_per_s").asDouble());
      }
    }
  }

  private ObjectNode toJson(TracePrompts prompts, List<PolicyRun> runs, JsonNode sim) {
    ObjectNode root = JSON.createObjectNode();
    root.put("trace", prompts.name());
    root.put("requests", prompts.size());
    root.put("engines", engines);
    root.put("in_process", inProcess);
    root.put("gpu_blocks", gpuBlocks);
    root.put("block_size", blockSize);
    root.put("speedup", speedup);
    root.put("time_scale", timeScale);
    root.put("max_output_tokens", maxOutputTokens);
    root.put("gateways", gateways);
    root.put("sync", synced());
    ArrayNode ps = root.putArray("policies");
    for (PolicyRun r : runs) {
      ObjectNode o = ps.addObject();
      o.put("policy", r.policy);
      o.put("sent", r.sent);
      o.put("completed", r.completed);
      o.put("errors", r.errors);
      ObjectNode reasons = o.putObject("error_reasons");
      r.errorReasons.forEach(reasons::put);
      ArrayNode failed = o.putArray("failed_requests");
      r.failed.forEach(failed::add);
      ObjectNode af = o.putObject("gateway_attempt_failures");
      r.attemptFailures.forEach(af::put);
      o.put("gateway_stale_connection_resends", r.staleResends);
      o.put("prompt_tokens", r.promptTokens);
      o.put("cached_tokens", r.cachedTokens);
      o.put("hit_rate", hitRate(r));
      o.put("predicted_hit_rate", predictedRate(r));
      o.put("load_imbalance", r.imbalance);
      if (synced()) {
        o.put("sync_changes_applied", r.syncApplied);
        o.put("sync_lag_mean_wall_ms", r.syncLagMs);
        o.put("sync_settled", r.syncSettled);
      }
      o.put("output_tokens", r.outputTokens);
      pcts(o.putObject("ttft_ms"), r.ttftMs);
      pcts(o.putObject("itl_ms"), r.itlMs);
      pcts(o.putObject("e2e_ms"), r.e2eMs);
      o.put("requests_per_sec", r.completed / r.makespanSec);
      o.put("output_tokens_per_sec", r.outputTokens / r.makespanSec);
      o.put("events_applied", r.eventsApplied);
      pcts(o.putObject("event_lag_wall_ms"), r.lagMs);
      if (r.routerLagMs >= 0) o.put("router_event_lag_mean_wall_ms", r.routerLagMs);
      else o.putNull("router_event_lag_mean_wall_ms");
      o.put("index_settle_wall_ms", r.settleMs);
      o.put("index_checked", r.indexChecked);
      o.put("index_equal", r.indexChecked && r.indexProblems.isEmpty());
      o.put("blocks_compared", r.blocksCompared);
      ArrayNode pr = o.putArray("index_problems");
      r.indexProblems.forEach(pr::add);
      ArrayNode pids = o.putArray("engine_pids");
      r.pids.forEach(pids::add);
      o.put("wall_seconds", r.wallSec);
      JsonNode s = simPolicy(sim, r.policy);
      if (s != null) o.set("simulate", s);
    }
    return root;
  }

  private static void pcts(ObjectNode o, double[] sorted) {
    o.put("p50", pct(sorted, 50));
    o.put("p90", pct(sorted, 90));
    o.put("p99", pct(sorted, 99));
    double sum = 0;
    for (double v : sorted) sum += v;
    o.put("mean", sorted.length == 0 ? Double.NaN : sum / sorted.length);
    o.put("count", sorted.length);
  }

  private static String ms(double v) {
    if (Double.isNaN(v)) return "-";
    return v >= 1000
        ? String.format(Locale.ROOT, "%.2f s", v / 1000)
        : String.format(Locale.ROOT, "%.0f ms", v);
  }

  private static String num(double v) {
    return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
  }
}
