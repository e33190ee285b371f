package io.kvrouter.gateway;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * What the gateway's periodic rounds over its engines share (EngineHealth's health checks,
 * EngineQueueWatch's reads of the engines' queues): one virtual thread per engine, joined, and the
 * stop of a round's thread.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless static helpers, called on a round's own thread. eachEngine() returns when every task
 * has ended, or at once when the calling thread is interrupted (the round is being stopped: its
 * tasks end on their own, bounded by their read timeouts).
 * </pre>
 */
final class EngineRounds {
  private EngineRounds() {}

  /**
   * Runs {@code task} for each base URL on a virtual thread of its own and waits for them all.
   *
   * @return false when interrupted while waiting (the interrupt flag is set again)
   */
  static boolean eachEngine(Collection<String> urls, Consumer<String> task) {
    List<Thread> threads = new ArrayList<>(urls.size());
    for (String u : urls) threads.add(Thread.ofVirtual().start(() -> task.accept(u)));
    for (Thread t : threads) {
      try {
        t.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  /** Interrupts a round's thread (null: never started) and waits for it, at most 5 s. */
  static void stop(@Nullable Thread t) {
    if (t == null) return;
    t.interrupt();
    try {
      t.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
