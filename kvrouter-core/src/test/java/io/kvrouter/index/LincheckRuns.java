package io.kvrouter.index;

import io.kvrouter.TestBudget;
import java.time.Duration;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.StressOptions;

/**
 * The budget and the options every Lincheck test here starts from (test support): how many random
 * scenarios, and a per-invocation deadline that a busy machine does not reach.
 *
 * <pre>
 * Implementation notes
 *
 * Budget: by default (./mvnw verify, CI) model checking explores 3 random scenarios and 100
 * interleavings per scenario, stress runs 10 random scenarios; under -Pthorough 100 scenarios
 * each and 200 interleavings. -Dkvrouter.lincheck.iterations=N and -Dkvrouter.lincheck
 * .invocations=N set them for one run. The hand-written scenarios (the known bugs) run in both
 * forms, and the runs per stress scenario are the same (the tests set them). Model checking is
 * where the time goes (its hand-written scenarios on the compressed tree alone took 54 s at 200
 * interleavings and 36 s at 100, load about 10), so it runs fewer; the known mutants still fail
 * the short form: the single-threaded radixTree() both modes, a clear applied block by block
 * model checking (already at 50 interleavings), a thread pool whose writes skip flush() stress.
 * Stress has no hand-written scenarios: at 3 random ones it missed both of its mutants, at 10
 * (its budget since before the profile) both fail.
 *
 * Deadline: Lincheck 3.7 gives every invocation 30 s of wall-clock time (CTestConfiguration
 * .DEFAULT_TIMEOUT_MS), after which it fails the test with "The execution has hung, see the
 * thread dump". An invocation is milliseconds of work, but the first one of each check() also
 * retransforms the classes it meets (the agent's lazy instrumentation, JVMTI retransformClasses),
 * and on a loaded 2-core machine that alone passed 30 s once (issue 35: the thread dump showed
 * retransformClasses0). INVOCATION_TIMEOUT raises the deadline to 10 minutes, well beyond any
 * load, so it still ends a real deadlock, just later. The model checker's own hang detection
 * (spin loops, active locks) counts steps, not time, and is left as it is. The only setter is
 * Kotlin-internal (Options.invocationTimeout, compiled to the public invocationTimeout$lincheck);
 * should a Lincheck upgrade drop it, these two factories stop compiling, which is where to look.
 * </pre>
 */
final class LincheckRuns {
  /** Random scenarios of model checking: 3 by default, 100 under -Pthorough. */
  static final int MODEL_CHECKING_ITERATIONS =
      TestBudget.count("kvrouter.lincheck.iterations", 3, 100);

  /** Random scenarios of stress: 10 by default, 100 under -Pthorough. */
  static final int STRESS_ITERATIONS = TestBudget.count("kvrouter.lincheck.iterations", 10, 100);

  /** Interleavings model checking explores per scenario: 100 by default, 200 under -Pthorough. */
  static final int MODEL_CHECKING_INVOCATIONS =
      TestBudget.count("kvrouter.lincheck.invocations", 100, 200);

  /** Wall-clock time one invocation may take before Lincheck calls it hung. */
  static final Duration INVOCATION_TIMEOUT = Duration.ofMinutes(10);

  private LincheckRuns() {}

  /** Model checking with the patient deadline. */
  static ModelCheckingOptions modelChecking() {
    return new ModelCheckingOptions().invocationTimeout$lincheck(INVOCATION_TIMEOUT.toMillis());
  }

  /** Stress with the patient deadline. */
  static StressOptions stress() {
    return new StressOptions().invocationTimeout$lincheck(INVOCATION_TIMEOUT.toMillis());
  }
}
