package io.kvrouter.discovery;

import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** Waits for a condition by polling it, with a deadline long enough for a loaded machine. */
final class Await {
  static final Duration DEADLINE = Duration.ofSeconds(90);

  private Await() {}

  /**
   * Returns once {@code condition} holds; fails with {@code what} and the last state after the
   * deadline.
   */
  static void until(String what, BooleanSupplier condition, Supplier<Object> state) {
    long end = System.nanoTime() + DEADLINE.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - end > 0) {
        throw new AssertionError(
            "not within " + DEADLINE + ": " + what + "; last state: " + state.get());
      }
      LockSupport.parkNanos(Duration.ofMillis(10).toNanos());
    }
  }
}
