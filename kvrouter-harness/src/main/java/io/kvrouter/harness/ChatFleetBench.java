package io.kvrouter.harness;

import io.kvrouter.gateway.EngineSpec;
import io.kvrouter.gateway.Gateway;
import io.kvrouter.gateway.GatewayConfig;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.server.KvRouterServer;
import java.io.PrintWriter;
import java.net.http.HttpClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * {@code kvrouter bench fleet --engine-kind llama-cpp}: the live benchmark on real compute. Real
 * llama.cpp servers (engines/llama-cpp) behind a gateway in this JVM, registered without KV events
 * (the gateway tracks them by predictions), and a multi-turn chat workload with shared system
 * prompts (ChatWorkload) sent as streamed {@code /v1/chat/completions}; per policy the
 * engine-reported hit rate and the TTFT measured at the client. docs/gateway.md, "A live
 * benchmark".
 *
 * <pre>
 * Implementation notes
 *
 * One policy run, on the calling thread (runOnce): start every llama-server (LlamaServer: one
 * thread, one slot, --cache-ram 0, --temp 0), wait for each; start a Gateway with the policy's
 * selector (FleetBench.selector: kv is the router's own cost on predictions, round-robin,
 * least-loaded, random) and engine-delegated tokenization (the engines' /apply-template and
 * /tokenize: nothing to install beside the engine); register each engine with no event source
 * (kv_source predicted); wait for /ready; ChatLoad sends the workload; everything is closed in
 * the finally, gateway first. Each run starts new processes, so every policy meets cold caches.
 * With --repeats R the policies run in alternation (kv, round-robin, ..., kv, round-robin, ...),
 * and each policy's results are pooled in one ChatRun.
 *
 * The workload is generated once, before any engine starts. Exit codes: 0; 1 when a request was
 * not answered (the reasons are printed); 2 for bad settings (a missing llama-server or model
 * says how to get them).
 * </pre>
 */
public final class ChatFleetBench {
  static final String MODEL = "qwen3-tiny";
  static final int BLOCK_SIZE = 16;

  private static final Logger QUIET_HELIDON = Logger.getLogger("io.helidon");
  private static final Logger QUIET_KVROUTER = Logger.getLogger("io.kvrouter");

  /**
   * The flags of {@code kvrouter bench fleet --engine-kind llama-cpp}.
   *
   * @param llamaServer llama-server, or null for $KVROUTER_LLAMA_SERVER
   * @param llamaModel the GGUF model, or null for $KVROUTER_LLAMA_MODEL
   * @param ctx each engine's context (its one slot), tokens
   * @param repeats how many times each policy runs, in alternation
   * @param maxTokens max_tokens of every request
   * @param clients requests in flight at most
   * @param commandLine the bench's arguments as given, for the report
   */
  public record Settings(
      Path llamaServer,
      Path llamaModel,
      int engines,
      int ctx,
      List<String> policies,
      int repeats,
      int conversations,
      int turns,
      int systemPrompts,
      int systemPromptWords,
      int maxTokens,
      int clients,
      long seed,
      boolean json,
      String commandLine) {
    public Settings {
      policies = policies.stream().map(String::trim).toList();
    }
  }

  private final Settings s;
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .executor(Executors.newVirtualThreadPerTaskExecutor())
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  public ChatFleetBench(Settings settings) {
    this.s = settings;
  }

  /** Runs every policy and prints the results; returns the exit code (0, 1 or 2). */
  public int run(PrintWriter out, PrintWriter err) throws Exception {
    Level[] before = {QUIET_HELIDON.getLevel(), QUIET_KVROUTER.getLevel()};
    QUIET_HELIDON.setLevel(Level.WARNING);
    QUIET_KVROUTER.setLevel(Level.SEVERE);
    try {
      return bench(out, err);
    } finally {
      QUIET_HELIDON.setLevel(before[0]);
      QUIET_KVROUTER.setLevel(before[1]);
    }
  }

  private int bench(PrintWriter out, PrintWriter err) throws Exception {
    Path server;
    Path model;
    ChatWorkload w;
    try {
      server = path(s.llamaServer(), "KVROUTER_LLAMA_SERVER", "--llama-server", "llama-server");
      model = path(s.llamaModel(), "KVROUTER_LLAMA_MODEL", "--llama-model", "the model");
      if (!Files.isExecutable(server))
        throw bad("llama-server " + server + " is not executable" + HOW);
      if (!Files.isRegularFile(model)) throw bad("the model " + model + " is not a file" + HOW);
      check(s.engines() >= 1, "--engines must be >= 1");
      check(s.ctx() >= 256, "--llama-ctx must be >= 256");
      check(s.repeats() >= 1, "--repeats must be >= 1");
      check(s.maxTokens() >= 1, "--max-output-tokens must be >= 1");
      check(s.clients() >= 1, "--clients must be >= 1");
      check(!s.policies().isEmpty(), "--policies must name at least one policy");
      for (String p : s.policies()) {
        check(!p.equals("approx"), "with --engine-kind llama-cpp, kv is already predicted: use kv");
        FleetBench.selector(p, 0);
      }
      w =
          ChatWorkload.generate(
              s.conversations(), s.turns(), s.systemPrompts(), s.systemPromptWords(), s.seed());
    } catch (IllegalArgumentException e) {
      err.println("kvrouter bench fleet: " + e.getMessage());
      return 2;
    }
    if (!s.json()) {
      out.println("kvrouter bench fleet: " + setup(w));
      out.flush();
    }
    Map<String, ChatRun> runs = new LinkedHashMap<>();
    for (String p : s.policies()) runs.putIfAbsent(p, new ChatRun(p));
    for (int rep = 0; rep < s.repeats(); rep++) {
      for (String p : s.policies()) {
        long t0 = System.nanoTime();
        ChatRun run = runs.get(p);
        ChatRun.Result[] results = runOnce(p, server, model, w, run);
        double wall = (System.nanoTime() - t0) / 1e9;
        run.add(results, wall);
        if (!s.json()) {
          int ok = 0;
          for (ChatRun.Result r : results) if (r.ok) ok++;
          out.printf(
              Locale.ROOT,
              "  %s%s: %d of %d answered in %.1f s%n",
              p,
              s.repeats() > 1 ? " (run " + (rep + 1) + ")" : "",
              ok,
              results.length,
              wall);
          out.flush();
        }
      }
    }
    List<ChatRun> all = new ArrayList<>(runs.values());
    if (s.json()) {
      out.println(ChatReport.json(s, w, all));
    } else {
      ChatReport.printTable(out, all);
    }
    out.flush();
    for (ChatRun r : all) {
      if (r.answered() < r.requests()) {
        err.println(
            "kvrouter bench fleet: "
                + (r.requests() - r.answered())
                + " "
                + r.policy
                + " request(s) not answered: "
                + r.errors());
        return 1;
      }
    }
    return 0;
  }

  /** The report's line about the setup. */
  String setup(ChatWorkload w) {
    return String.format(
        Locale.ROOT,
        "%d llama-server engines (1 thread, 1 slot of %d tokens, --cache-ram 0, --temp 0) behind"
            + " a gateway, engines without KV events (predicted); %d conversations x %d turns"
            + " (%d requests) on %d shared system prompts of %d words, max_tokens %d, %d in"
            + " flight, seed %d; policies %s, %d run(s) each on fresh engines",
        s.engines(),
        s.ctx(),
        s.conversations(),
        s.turns(),
        w.turns().size(),
        s.systemPrompts(),
        s.systemPromptWords(),
        s.maxTokens(),
        s.clients(),
        s.seed(),
        String.join(", ", s.policies()),
        s.repeats());
  }

  /** One policy on fresh engines and a fresh gateway; the results, one per turn. */
  private ChatRun.Result[] runOnce(
      String policy, Path server, Path model, ChatWorkload w, ChatRun run) throws Exception {
    List<LlamaServer> engines = new ArrayList<>();
    Gateway g = null;
    try {
      for (int i = 0; i < s.engines(); i++) {
        engines.add(LlamaServer.start(server, model, MODEL, s.ctx()));
      }
      for (LlamaServer e : engines) {
        e.awaitReady(http, Duration.ofSeconds(120));
        run.pids.add(e.pid());
      }
      g =
          Gateway.start(
              KvRouterServer.Config.builder()
                  .port(0)
                  .routing(
                      RoutingSettings.DEFAULTS
                          .withSeed(s.seed())
                          .withRequestExpiry(Duration.ofDays(1)))
                  .shutdownGrace(Duration.ofSeconds(1))
                  .selector(FleetBench.selector(policy, s.seed()))
                  .build(),
              GatewayConfig.builder()
                  .model(MODEL, null) // tokenized by the engines (/apply-template, /tokenize)
                  .maxAttempts(1)
                  .engineTimeout(Duration.ofSeconds(600))
                  .build());
      for (int i = 0; i < engines.size(); i++) {
        // as `--engine URL;model=NAME` would: no event source, so the router predicts
        g.register(
            new EngineSpec(engines.get(i).url(), MODEL, BLOCK_SIZE, i + 1, 0, null, null, null),
            BLOCK_SIZE);
      }
      new FleetReads(http).awaitReady(g.url());
      return new ChatLoad(http, MODEL, s.maxTokens(), s.clients()).run(g.url(), w);
    } finally {
      if (g != null) g.close();
      for (LlamaServer e : engines) e.close();
    }
  }

  private static Path path(Path flag, String env, String option, String what) {
    if (flag != null) return flag;
    String v = System.getenv(env);
    if (v != null && !v.isBlank()) return Path.of(v);
    throw bad(
        what
            + " not given: pass "
            + option
            + " PATH or set "
            + env
            + "; engines/llama-cpp/install.sh builds llama-server and the tiny Qwen3 model and"
            + " prints llama-server=PATH and model=PATH");
  }

  private static final String HOW =
      "; engines/llama-cpp/install.sh builds llama-server and the tiny Qwen3 model and prints"
          + " llama-server=PATH and model=PATH";

  private static IllegalArgumentException bad(String message) {
    return new IllegalArgumentException(message);
  }

  private static void check(boolean ok, String message) {
    if (!ok) throw bad(message);
  }
}
