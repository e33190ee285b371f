package io.kvrouter.harness;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A {@code kvrouter mock-engine} child JVM of {@code bench fleet}; its addresses come from its
 * first stdout line.
 *
 * <pre>
 * Implementation notes
 *
 * The process is started through ChildProcesses (registered at once, so the shutdown hook ends
 * it) with stderr merged into stdout. One virtual thread, drain(), reads that output to its end:
 * it keeps the first 8 KiB in output (a StringBuffer: the drainer writes, a failure message
 * reads) and completes ready with {url, events, replay} from the first line that matches BANNER
 * (the mock engine's "... on http://..., KV events on tcp://... (replay tcp://...)"); when the
 * output ends first, ready completes exceptionally with what the process printed. awaitReady()
 * is the one reader of ready and sets addr, which url(), events() and replay() read afterwards on
 * the same thread. close() ends the process (30 s bounded wait) and forgets it.
 * </pre>
 */
final class ChildEngine implements FleetEngine {
  static final Pattern BANNER =
      Pattern.compile("on (http://\\S+), KV events on (tcp://\\S+) \\(replay (tcp://[^)\\s]+)\\)");

  private final Process p;
  private final CompletableFuture<String[]> ready = new CompletableFuture<>();

  @SuppressWarnings("JdkObsolete") // written by the reader thread, read by others: synchronized
  private final StringBuffer output = new StringBuffer();

  private String[] addr;

  private ChildEngine(Process p) {
    this.p = p;
  }

  /**
   * Starts {@code command} (a JVM running the mock engine) and the thread that reads its output.
   */
  static ChildEngine start(List<String> command) throws IOException {
    Process p = ChildProcesses.start(new ProcessBuilder(command).redirectErrorStream(true));
    ChildEngine c = new ChildEngine(p);
    Thread.ofVirtual().name("bench-fleet-child-" + p.pid()).start(c::drain);
    return c;
  }

  /** The {url, events, replay} a mock engine's banner line names, or null for another line. */
  static String[] addresses(String line) {
    Matcher m = BANNER.matcher(line);
    return m.find() ? new String[] {m.group(1), m.group(2), m.group(3)} : null;
  }

  private void drain() {
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        if (output.length() < 8192) output.append(line).append('\n');
        String[] a = ready.isDone() ? null : addresses(line);
        if (a != null) ready.complete(a);
      }
    } catch (IOException ignored) {
      // the process ended
    }
    ready.completeExceptionally(
        new IllegalStateException("mock-engine process ended before it served: " + output));
  }

  /** Waits until the engine printed its addresses; throws with its output when it did not. */
  void awaitReady(Duration timeout) throws Exception {
    try {
      addr = ready.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      throw new IllegalStateException(
          "mock-engine process " + p.pid() + " did not start within " + timeout + ": " + output);
    } catch (ExecutionException e) {
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
    ChildProcesses.end(p, 30);
  }
}
