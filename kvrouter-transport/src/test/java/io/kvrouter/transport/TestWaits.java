package io.kvrouter.transport;

import java.time.Duration;

/**
 * How long the transport tests wait (test support), sized for a loaded machine rather than an idle
 * one: CI shares two cores with other builds, and a load of 8 or more stretches every step.
 *
 * <pre>
 * Implementation notes
 *
 * WAIT bounds a wait for something that should happen (a poll until a condition holds, a future,
 * a latch): a passing run returns as soon as the condition holds, so only a failing run waits it
 * out, and a generous figure costs nothing. HANG_SECONDS is the per-test JUnit @Timeout, a guard
 * against a test that never ends, not a measure of speed: above every WAIT a test chains, so a
 * failing wait reports its own message first. Neither is ever a threshold a passing run must
 * beat.
 * </pre>
 */
public final class TestWaits {
  /** The deadline of a wait for something that should happen. */
  public static final Duration WAIT = Duration.ofSeconds(60);

  /** A test's JUnit {@code @Timeout}, in seconds: a hang guard. */
  public static final long HANG_SECONDS = 600;

  private TestWaits() {}
}
