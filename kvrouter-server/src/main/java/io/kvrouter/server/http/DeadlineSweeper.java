package io.kvrouter.server.http;

import com.google.errorprone.annotations.concurrent.GuardedBy;

/**
 * The background thread of a connection deadline ({@link ReadDeadline}, {@link WriteDeadline}):
 * every period it runs its owner's sweep, which interrupts the threads whose deadline passed.
 *
 * <pre>
 * Implementation notes
 *
 * One daemon platform thread, started lazily by start() (so a server whose port cannot be bound
 * leaves no thread behind) and stopped by close(), which interrupts and joins it. thread and
 * stopped are guarded by this object's monitor; once closed, start() does nothing. The sweep runs
 * on the thread only; what it reads (the owner's armed set, each watch under its own monitor) is
 * the owner's business.
 * </pre>
 */
final class DeadlineSweeper implements AutoCloseable {
  private final String name;
  private final long periodMillis;
  private final Runnable sweep;

  @GuardedBy("this")
  private Thread thread;

  @GuardedBy("this")
  private boolean stopped;

  DeadlineSweeper(String name, long periodMillis, Runnable sweep) {
    this.name = name;
    this.periodMillis = periodMillis;
    this.sweep = sweep;
  }

  /** Starts the thread unless it runs or this was closed. */
  synchronized void start() {
    if (thread != null || stopped) return;
    thread = Thread.ofPlatform().daemon().name(name).start(this::loop);
  }

  /** Whether the thread runs (tests). */
  synchronized boolean running() {
    return thread != null;
  }

  /** Stops the thread (waits for it); no sweep runs afterwards. Idempotent. */
  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      stopped = true;
      t = thread;
      thread = null;
    }
    if (t == null) return;
    t.interrupt();
    try {
      t.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void loop() {
    while (true) {
      try {
        Thread.sleep(periodMillis);
      } catch (InterruptedException e) {
        return;
      }
      sweep.run();
    }
  }
}
