package io.kvrouter.server;

import java.util.function.IntConsumer;

/**
 * Ends the process when the JVM runs out of memory, so that a supervisor restarts it, instead of
 * leaving a server whose listener or timer threads died of the error and that no longer answers.
 * The {@code serve} command calls {@link #install()}; its launcher also passes {@code
 * -XX:+ExitOnOutOfMemoryError}, which covers every thread, also those whose errors are caught
 * (Helidon catches every Throwable of a connection and answers 500). A server embedded in another
 * application without {@link #install()} leaves the choice to that application.
 *
 * <pre>
 * Implementation notes
 *
 * install() sets the JVM's default uncaught-exception handler (chaining the one before it for
 * every other throwable) and marks the process as wanting the exit: HttpPlumbing asks
 * exitIfInstalled() when an endpoint throws OutOfMemoryError, since Helidon would catch it before
 * any uncaught handler. The exit is Runtime.halt(EXIT_CODE): no shutdown hooks, which could
 * themselves need memory or wait on the threads that died. The message is built before it is
 * needed. installed is a volatile flag written once.
 * </pre>
 */
public final class OutOfMemoryExit {
  /** The exit status, as the JVM's own -XX:+ExitOnOutOfMemoryError uses. */
  public static final int EXIT_CODE = 3;

  private static final String MESSAGE =
      "kvrouter: java.lang.OutOfMemoryError: ending the process (exit status "
          + EXIT_CODE
          + ") so that it can be restarted";

  private static volatile boolean installed;

  private OutOfMemoryExit() {}

  /** Makes an OutOfMemoryError anywhere in this JVM end the process. Idempotent. */
  public static synchronized void install() {
    if (installed) return;
    Thread.setDefaultUncaughtExceptionHandler(
        handler(Thread.getDefaultUncaughtExceptionHandler(), Runtime.getRuntime()::halt));
    installed = true;
  }

  /** Whether {@link #install()} was called. */
  public static boolean installed() {
    return installed;
  }

  /** Ends the process if {@link #install()} was called; returns otherwise. */
  static void exitIfInstalled(OutOfMemoryError e) {
    if (installed) exit(Runtime.getRuntime()::halt);
  }

  /**
   * The handler {@link #install()} sets: {@code halt} on an OutOfMemoryError, else {@code next} (or
   * the JVM's default printing when null).
   */
  static Thread.UncaughtExceptionHandler handler(
      Thread.UncaughtExceptionHandler next, IntConsumer halt) {
    return (thread, e) -> {
      if (e instanceof OutOfMemoryError) {
        exit(halt);
      } else if (next != null) {
        next.uncaughtException(thread, e);
      } else {
        System.err.print("Exception in thread \"" + thread.getName() + "\" ");
        e.printStackTrace();
      }
    };
  }

  private static void exit(IntConsumer halt) {
    try {
      System.err.println(MESSAGE);
      System.err.flush();
    } catch (Throwable ignored) {
      // out of memory even for that: halt anyway
    }
    halt.accept(EXIT_CODE);
  }
}
