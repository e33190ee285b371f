package io.kvrouter.transport;

/**
 * How much work the long transport tests (fuzzing, fault injection) do: a short form by default,
 * which {@code ./mvnw verify} and CI run, and a long form under the {@code thorough} profile
 * ({@code ./mvnw verify -Pthorough}, which sets {@code -Dkvrouter.thorough=true}), run before a
 * release (docs/testing.md). Both forms make the same claims with the same scenarios; the long one
 * runs more of them.
 *
 * <pre>
 * Implementation notes
 *
 * Read once, from system properties, when a test first asks. A test's own property (for example
 * -Dkvrouter.fuzz.inputs=5000000) wins over both forms, so one long run can be asked for
 * alone, with or without the profile. Budgets are counts (scenarios, operations, events), never
 * seconds: a slow or busy machine makes a run slower, never weaker.
 * </pre>
 */
public final class TestBudget {
  /** True under {@code -Pthorough} (or {@code -Dkvrouter.thorough=true}). */
  public static final boolean THOROUGH = Boolean.getBoolean("kvrouter.thorough");

  private TestBudget() {}

  /**
   * {@code property} if set, else {@code quick} by default and {@code thorough} under the profile.
   */
  public static int count(String property, int quick, int thorough) {
    return Integer.getInteger(property, THOROUGH ? thorough : quick);
  }

  /**
   * {@code property} if set, else {@code quick} by default and {@code thorough} under the profile.
   */
  public static long count(String property, long quick, long thorough) {
    return Long.getLong(property, THOROUGH ? thorough : quick);
  }
}
