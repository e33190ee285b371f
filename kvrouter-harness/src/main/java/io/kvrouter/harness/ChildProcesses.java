package io.kvrouter.harness;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Every child process {@code bench fleet} started in this JVM and has not reaped yet: the mock
 * engines' JVMs ({@link ChildEngine}) and nats-server ({@link NatsProcess}).
 *
 * <pre>
 * Implementation notes
 *
 * One list, LIVE, guarded by its own monitor. start() adds a process in the same critical section
 * that starts it, so no process exists unregistered, even when the shutdown hook runs between the
 * two; end() destroys a process forcibly, waits for it (bounded), then removes it. The JVM
 * shutdown hook (Ctrl-C, SIGTERM; registered when this class loads, that is with the first child)
 * takes the whole list, destroys every process at once, then waits for each. Readers: count(),
 * for the test that no child outlives a run.
 * </pre>
 */
final class ChildProcesses {
  private static final List<Process> LIVE = new ArrayList<>();

  static {
    Runtime.getRuntime()
        .addShutdownHook(new Thread(ChildProcesses::killAll, "bench-fleet-children"));
  }

  private ChildProcesses() {}

  /** Starts {@code pb}'s process, registered before anyone can wait on it. */
  static Process start(ProcessBuilder pb) throws IOException {
    synchronized (LIVE) {
      Process p = pb.start();
      LIVE.add(p);
      return p;
    }
  }

  /** Ends {@code p} forcibly, waits up to {@code waitSeconds} for it, and forgets it. */
  static void end(Process p, long waitSeconds) {
    reap(p, waitSeconds);
    synchronized (LIVE) {
      LIVE.remove(p);
    }
  }

  /** Processes started and not ended yet. */
  static int count() {
    synchronized (LIVE) {
      return LIVE.size();
    }
  }

  private static void reap(Process p, long waitSeconds) {
    p.destroyForcibly();
    try {
      p.waitFor(waitSeconds, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void killAll() {
    List<Process> ps;
    synchronized (LIVE) {
      ps = new ArrayList<>(LIVE);
      LIVE.clear();
    }
    for (Process p : ps) p.destroyForcibly();
    for (Process p : ps) reap(p, 30);
  }
}
