package io.kvrouter.harness;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A nats-server child process for {@code bench fleet --gateways N --sync on}: the gateways share
 * their requests in flight over it (core NATS, no JetStream), on a free loopback port; the binary
 * is found on PATH or in /usr/sbin, /usr/bin, /usr/local/bin (.ci/run installs it).
 *
 * <pre>
 * Implementation notes
 *
 * The port is one the kernel just handed out for a ServerSocket and closed again; the process is
 * started through ChildProcesses (registered at once, output discarded). start() returns once a
 * TCP connection to the port succeeds, polling every 20 ms for at most 10 s; when the process
 * died or the time ran out, it ends the process and throws. Immutable after start(); close()
 * ends the process (10 s bounded wait) and forgets it.
 * </pre>
 */
final class NatsProcess implements AutoCloseable {
  private final Process p;
  private final int port;

  private NatsProcess(Process p, int port) {
    this.p = p;
    this.port = port;
  }

  @SuppressWarnings("try") // the socket is opened only to see whether nats-server accepts yet
  static NatsProcess start() throws Exception {
    String bin = binary();
    if (bin == null) {
      throw new IllegalStateException(
          "--sync on needs nats-server (apt-get install -y nats-server), or run with --sync off");
    }
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    Process p =
        ChildProcesses.start(
            new ProcessBuilder(bin, "-a", "127.0.0.1", "-p", Integer.toString(port))
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD));
    NatsProcess n = new NatsProcess(p, port);
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (true) {
      try (Socket s = new Socket("127.0.0.1", port)) {
        return n;
      } catch (IOException notYet) {
        if (!p.isAlive() || System.nanoTime() > deadline) {
          n.close();
          throw new IllegalStateException("nats-server did not start on port " + port);
        }
        Thread.sleep(20);
      }
    }
  }

  /** The nats-server executable on PATH or in the usual directories, or null. */
  private static String binary() {
    List<String> dirs = new ArrayList<>();
    String path = System.getenv("PATH");
    if (path != null) dirs.addAll(Arrays.asList(path.split(File.pathSeparator)));
    dirs.addAll(List.of("/usr/sbin", "/usr/bin", "/usr/local/bin"));
    for (String d : dirs) {
      Path c = Path.of(d, "nats-server");
      if (Files.isExecutable(c)) return c.toString();
    }
    return null;
  }

  String url() {
    return "nats://127.0.0.1:" + port;
  }

  @Override
  public void close() {
    ChildProcesses.end(p, 10);
  }
}
