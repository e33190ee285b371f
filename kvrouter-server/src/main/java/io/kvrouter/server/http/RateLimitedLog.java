package io.kvrouter.server.http;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import java.util.Locale;
import java.util.function.Supplier;
import java.util.logging.Logger;

/**
 * Logs one kind of event in one INFO line at most once per interval, with the count of those left
 * out since the last line; never a stack trace. HttpPlumbing keeps one per kind (refused requests,
 * client resets, write timeouts), so a flood of one kind costs a line a minute.
 *
 * <pre>
 * Implementation notes
 *
 * last, logged and unlogged are guarded by this object's monitor; note() builds its line only when
 * it logs. The first event is always logged; an event within the interval of the last line only
 * counts, and the next line says how many were left out.
 * </pre>
 */
final class RateLimitedLog {
  private final Logger log;
  private final long intervalNanos;

  @GuardedBy("this")
  private long last; // guarded by this

  @GuardedBy("this")
  private boolean logged; // guarded by this

  @GuardedBy("this")
  private long unlogged; // guarded by this

  RateLimitedLog(Logger log, long intervalNanos) {
    this.log = log;
    this.intervalNanos = intervalNanos;
  }

  /** Notes one event; logs {@code line} unless a line was logged within the interval. */
  synchronized boolean note(Supplier<String> line) {
    long now = System.nanoTime();
    if (logged && now - last < intervalNanos) {
      unlogged++;
      return false;
    }
    String more =
        unlogged == 0
            ? ""
            : String.format(Locale.ROOT, " (and %d more since the last such line)", unlogged);
    log.info(line.get() + more);
    logged = true;
    last = now;
    unlogged = 0;
    return true;
  }
}
