package io.kvrouter.harness;

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

/**
 * One llama.cpp {@code llama-server} child process of {@code bench fleet --engine-kind llama-cpp}
 * (engines/llama-cpp/install.sh builds it and the tiny Qwen3 model): one thread ({@code -t 1}), one
 * slot ({@code -np 1}) of {@code ctx} tokens, no host prompt cache ({@code --cache-ram 0}, so the
 * slot's KV cache is the whole cache), greedy sampling ({@code --temp 0}), on a free port.
 *
 * <pre>
 * Implementation notes
 *
 * start() picks a free port (bind port 0, release it), starts the process through ChildProcesses
 * (the JVM's shutdown hook ends it) with stdout and stderr going to a temporary log file, and
 * returns at once; awaitReady() polls GET /health until it answers 200 (the model is loaded),
 * failing with the log's tail when the process ends first or the time is up. close() ends the
 * process forcibly (a bounded wait) and deletes the log. Written and read on the bench's thread.
 * </pre>
 */
final class LlamaServer implements AutoCloseable {
  private final Process p;
  private final int port;
  private final Path log;

  private LlamaServer(Process p, int port, Path log) {
    this.p = p;
    this.port = port;
    this.log = log;
  }

  /** The command line of a server on {@code port}. */
  static List<String> command(Path server, Path model, String alias, int port, int ctx) {
    return new ArrayList<>(
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
            Integer.toString(ctx),
            "-np",
            "1",
            "-t",
            "1",
            "--cache-ram",
            "0",
            "--temp",
            "0",
            "--no-webui"));
  }

  /** Starts a server; it is serving once {@link #awaitReady} returns. */
  static LlamaServer start(Path server, Path model, String alias, int ctx) throws IOException {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    Path log = Files.createTempFile("kvrouter-llama-server-" + port + "-", ".log");
    Process p =
        ChildProcesses.start(
            new ProcessBuilder(command(server, model, alias, port, ctx))
                .redirectErrorStream(true)
                .redirectOutput(log.toFile()));
    return new LlamaServer(p, port, log);
  }

  /** Waits until /health answers 200; throws with the server's log when it does not. */
  void awaitReady(HttpClient http, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    HttpRequest health =
        HttpRequest.newBuilder(URI.create(url() + "/health"))
            .timeout(Duration.ofSeconds(2))
            .build();
    while (true) {
      if (!p.isAlive()) {
        throw new IllegalStateException(
            "llama-server on port " + port + " exited (" + p.exitValue() + "): " + logTail());
      }
      try {
        if (http.send(health, HttpResponse.BodyHandlers.ofString()).statusCode() == 200) return;
      } catch (IOException notYet) {
        // not listening yet
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "llama-server on port " + port + " did not load within " + timeout + ": " + logTail());
      }
      Thread.sleep(100); // polling a process that is loading: there is nothing to wait on
    }
  }

  private String logTail() {
    try {
      String s = Files.readString(log);
      return s.length() > 2000 ? "..." + s.substring(s.length() - 2000) : s;
    } catch (IOException e) {
      return "(log " + log + " unreadable: " + e + ")";
    }
  }

  String url() {
    return "http://127.0.0.1:" + port;
  }

  long pid() {
    return p.pid();
  }

  @Override
  public void close() {
    ChildProcesses.end(p, 30);
    try {
      Files.deleteIfExists(log);
    } catch (IOException ignored) {
      // a temporary file
    }
  }
}
