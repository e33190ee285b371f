package io.kvrouter;

import java.time.Duration;

/**
 * How long the core tests wait (test support), sized for a loaded machine rather than an idle one:
 * CI shares two cores with other builds, and a load of 8 or more stretches every step.
 *
 * <pre>
 * Implementation notes
 *
 * WAIT bounds a wait for work that should finish (a future, a latch, a thread's join): a passing
 * run returns as soon as the work is done, so only a failing run waits it out, and a generous
 * figure costs nothing. HANG_SECONDS is a test's JUnit @Timeout, a guard against a test that never
 * ends, not a measure of speed; it is above every WAIT, so a failing wait reports its own message
 * first. Neither is ever a threshold a passing run must beat.
 * </pre>
 */
public final class TestWaits {
  /** The deadline of a wait for work that should finish. */
  public static final Duration WAIT = Duration.ofMinutes(5);

  /** A test's JUnit {@code @Timeout}, in seconds: a hang guard. */
  public static final long HANG_SECONDS = 900;

  private TestWaits() {}
}
