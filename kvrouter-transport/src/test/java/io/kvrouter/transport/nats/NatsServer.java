package io.kvrouter.transport.nats;

import io.kvrouter.transport.TestWaits;
import io.nats.client.Connection;
import io.nats.client.Nats;
import io.nats.client.Options;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code nats-server} with JetStream for the tests (test support): started on a free
 * loopback port with its store in a temporary directory, killed and its directory removed on {@link
 * #close()}.
 *
 * <p>The binary is looked up on {@code PATH}, then in {@code /usr/sbin}, {@code /usr/bin} and
 * {@code /usr/local/bin}. Without it the test fails (it does not skip): CI installs it ({@code
 * .ci/run}), locally run {@code apt-get install -y nats-server}.
 *
 * <p>Public for kvrouter-server's tests (through this module's test jar).
 */
public final class NatsServer implements AutoCloseable {
  private static final Duration START_TIMEOUT = TestWaits.WAIT;

  private final String binary;
  private final Path storeDir;
  private final Path store;
  private final Path log;
  private final int port;
  private Process process;

  private NatsServer(String binary, Path storeDir, Path store, Path log, int port) {
    this.binary = binary;
    this.storeDir = storeDir;
    this.store = store;
    this.log = log;
    this.port = port;
  }

  /** Starts a server and waits (up to 10 s) until it accepts connections. */
  public static NatsServer start() {
    String binary = binary();
    try {
      Path dir = Files.createTempDirectory("kvrouter-nats-");
      Path store = Files.createDirectory(dir.resolve("store"));
      Path log = dir.resolve("server.log");
      NatsServer server = new NatsServer(binary, dir, store, log, freePort());
      server.launch();
      return server;
    } catch (IOException e) {
      throw new UncheckedIOException("could not start " + binary, e);
    }
  }

  /**
   * Stops the server and starts it again on the same port with the same store (JetStream state
   * survives), waiting until it accepts connections; clients reconnect by themselves.
   */
  public void restart() {
    stop();
    try {
      launch();
    } catch (IOException e) {
      throw new UncheckedIOException("could not restart " + binary, e);
    }
  }

  /** Stops the server (an outage); {@link #startAgain()} brings it back with the same store. */
  public void pause() {
    stop();
  }

  /** Starts a {@link #pause() paused} server again on the same port with the same store. */
  public void startAgain() {
    try {
      launch();
    } catch (IOException e) {
      throw new UncheckedIOException("could not restart " + binary, e);
    }
  }

  private void launch() throws IOException {
    process =
        new ProcessBuilder(
                binary,
                "-a",
                "127.0.0.1",
                "-p",
                Integer.toString(port),
                "-js",
                "-sd",
                store.toString())
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
            .start();
    awaitListening();
  }

  /** The client URL. */
  public String url() {
    return "nats://127.0.0.1:" + port;
  }

  /** A new connection (the caller closes it). */
  public Connection connect() {
    try {
      return Nats.connect(
          new Options.Builder()
              .server(url())
              .connectionTimeout(Duration.ofSeconds(5))
              .maxReconnects(-1)
              .reconnectWait(Duration.ofMillis(100))
              .build());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    stop();
    try (Stream<Path> files = Files.walk(storeDir)) {
      for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(f);
      }
    } catch (IOException e) {
      // a temp directory left behind is not a test failure
    }
  }

  private void stop() {
    process.destroy();
    try {
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  private void awaitListening() throws IOException {
    long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IllegalStateException(
            "nats-server exited with " + process.exitValue() + ":\n" + Files.readString(log));
      }
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress("127.0.0.1", port), 200);
        return;
      } catch (IOException notYet) {
        try {
          Thread.sleep(20);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException(e);
        }
      }
    }
    stop();
    throw new IllegalStateException(
        "nats-server did not listen on port " + port + " within " + START_TIMEOUT);
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  /** The nats-server binary; fails with installation advice when there is none. */
  static String binary() {
    List<String> dirs = new ArrayList<>();
    String path = System.getenv("PATH");
    if (path != null) dirs.addAll(List.of(path.split(File.pathSeparator)));
    dirs.addAll(List.of("/usr/sbin", "/usr/bin", "/usr/local/bin"));
    for (String d : dirs) {
      if (d.isEmpty()) continue;
      File f = new File(d, "nats-server");
      if (f.isFile() && f.canExecute()) return f.getPath();
    }
    throw new AssertionError(
        "nats-server not found on PATH or in /usr/sbin, /usr/bin, /usr/local/bin. The NATS tests"
            + " need a real server: install it with `apt-get install -y nats-server` (.ci/run does"
            + " this in CI) or put a nats-server binary (2.9 or newer) on PATH.");
  }
}
