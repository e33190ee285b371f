package io.kvrouter.cli;

import java.util.concurrent.CountDownLatch;
import sun.misc.Signal;

/**
 * SIGTERM and SIGINT (Ctrl-C) as a request to stop: {@code serve} and {@code gateway} wait in
 * {@link #await()}, stop gracefully on their own thread and return 0, so the process exits 0, as
 * Kubernetes and systemd expect of a clean stop. A second signal while stopping ends the process at
 * once with 128 + the signal's number (143, 130).
 *
 * <pre>
 * Implementation notes
 *
 * The JVM's own handling of SIGTERM and SIGINT runs the shutdown hooks and then exits with 143 or
 * 130 whatever the hooks do (System.exit from a hook blocks). The only way the JDK offers to
 * handle the signals instead is sun.misc.Signal (module jdk.unsupported, exported, available with
 * --release 21; javac warns that it is internal API). install() replaces the JVM's handlers for
 * the process; the handler runs on a thread the JVM starts per signal: the first signal records
 * its name and counts the latch down, a later one halts (Runtime.halt: no hooks, the graceful
 * stop in progress is abandoned). received is written by the first handler before the countdown
 * and read after await() returns (the latch orders them).
 * </pre>
 */
final class Signals {
  private final CountDownLatch first = new CountDownLatch(1);
  private volatile String received;

  private Signals() {}

  /** Takes over SIGTERM and SIGINT for the rest of the process's life. */
  static Signals install() {
    Signals s = new Signals();
    for (String name : new String[] {"TERM", "INT"}) {
      Signal.handle(new Signal(name), s::handle);
    }
    return s;
  }

  private void handle(Signal sig) {
    synchronized (this) {
      if (received == null) {
        received = "SIG" + sig.getName();
        first.countDown();
        return;
      }
    }
    Runtime.getRuntime().halt(128 + sig.getNumber());
  }

  /** Waits for the first signal; returns its name ({@code SIGTERM}, {@code SIGINT}). */
  String await() throws InterruptedException {
    first.await();
    return received;
  }
}
