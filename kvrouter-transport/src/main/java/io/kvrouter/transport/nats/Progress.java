package io.kvrouter.transport.nats;

import java.time.Duration;
import java.util.Iterator;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * How far a replica has got (the last stream sequence applied, whether it is ready) and the threads
 * waiting for it to get somewhere: {@link #awaitApplied} and {@link #awaitReady} block on a future
 * that the writer completes, instead of polling.
 */
final class Progress {
  /*
   * Implementation notes
   *
   * One writer at a time (the caller's thread in start(), then the replica thread; stop() may
   * also come from close()), any number of readers and waiters. lastApplied, ready and stopped
   * are volatile. A waiter is a condition (applied through a sequence, or ready) with a
   * CompletableFuture<Boolean>, queued in a ConcurrentLinkedQueue.
   *
   * No lost wake-up: the writer stores the new value and then looks at the queue; a waiter
   * enqueues itself and then looks at the value. All of these are volatile accesses or CASes, so
   * in their one synchronization order either the writer sees the waiter or the waiter sees the
   * value (the waiter then dequeues itself and returns). The writer's cost when nobody waits is
   * one isEmpty() (a volatile read) after each store.
   *
   * A waiter whose future times out, or whose thread is interrupted, dequeues itself and answers
   * with the condition as it is then. stop() completes every waiter with its condition as it is
   * (false for ready: the replica sets ready to false before it stops); waits that start after it
   * return at once.
   */

  private static final class Waiter {
    final boolean forReady;
    final long sequence;
    final CompletableFuture<Boolean> done = new CompletableFuture<>();

    Waiter(boolean forReady, long sequence) {
      this.forReady = forReady;
      this.sequence = sequence;
    }
  }

  private final ConcurrentLinkedQueue<Waiter> waiters = new ConcurrentLinkedQueue<>();
  private volatile long lastApplied;
  private volatile boolean ready;
  private volatile boolean stopped;

  // ---------------------------------------------------------------- the writer

  /** The replica applied (or skipped as malformed) everything through {@code sequence}. */
  void applied(long sequence) {
    lastApplied = sequence;
    if (!waiters.isEmpty()) wake();
  }

  /** The replica is (or is no longer) ready. */
  void ready(boolean value) {
    ready = value;
    if (value && !waiters.isEmpty()) wake();
  }

  /** The replica stopped: every wait returns now, and later ones at once. */
  void stop() {
    stopped = true;
    for (Waiter w; (w = waiters.poll()) != null; ) {
      w.done.complete(holds(w));
    }
  }

  private void wake() {
    for (Iterator<Waiter> i = waiters.iterator(); i.hasNext(); ) {
      Waiter w = i.next();
      if (holds(w)) {
        i.remove();
        w.done.complete(true);
      }
    }
  }

  // ---------------------------------------------------------------- readers

  long lastApplied() {
    return lastApplied;
  }

  boolean ready() {
    return ready;
  }

  /** Waits until everything through {@code sequence} is applied; false on timeout or stop. */
  boolean awaitApplied(long sequence, Duration timeout) {
    return await(new Waiter(false, sequence), timeout);
  }

  /** Waits until ready; false on timeout or stop. */
  boolean awaitReady(Duration timeout) {
    return await(new Waiter(true, 0), timeout);
  }

  private boolean holds(Waiter w) {
    return w.forReady ? ready : lastApplied >= w.sequence;
  }

  private boolean await(Waiter w, Duration timeout) {
    if (holds(w)) return true;
    if (stopped) return false;
    waiters.add(w);
    try {
      if (holds(w) || stopped) return holds(w);
      return w.done.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      return holds(w);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return holds(w);
    } catch (ExecutionException e) {
      throw new IllegalStateException(e); // never: waiters are only completed normally
    } finally {
      waiters.remove(w);
    }
  }
}
