package io.kvrouter.sim;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import java.io.Console;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A one-line progress bar on stderr, redrawn at most ten times a second; does nothing when disabled
 * (stderr is not a terminal, or {@code --quiet}).
 *
 * <pre>
 * Implementation notes
 *
 * Whether stderr is a terminal: on Linux, /proc/self/fd/2 links to /dev/pts/N or /dev/ttyN
 * exactly when it is; elsewhere System.console() (non-null only with an interactive terminal
 * on JDK 21 and 25; on 22-24 it may be non-null regardless, so Console.isTerminal() is asked
 * too when it exists). The bar is cleared with a carriage return and spaces before anything
 * else is printed. Thread-safe (synchronised): simulations running side by side advance one bar,
 * labelled with the phase started last.
 * </pre>
 */
public final class Progress implements AutoCloseable {
  private static final int WIDTH = 30;

  private final PrintStream err;
  private final boolean enabled;

  @GuardedBy("this")
  private long total;

  @GuardedBy("this")
  private long done;

  @GuardedBy("this")
  private String label = "";

  @GuardedBy("this")
  private long lastDraw;

  @GuardedBy("this")
  private int drawnLength;

  private Progress(PrintStream err, boolean enabled) {
    this.err = err;
    this.enabled = enabled;
  }

  /** A progress bar on {@code err}, enabled unless {@code quiet} or stderr is no terminal. */
  public static Progress onStderr(PrintStream err, boolean quiet) {
    return new Progress(err, !quiet && stderrIsTerminal());
  }

  /** A progress bar that never draws. */
  public static Progress off() {
    return new Progress(System.err, false);
  }

  public boolean enabled() {
    return enabled;
  }

  /** Sets the total amount of work. */
  public synchronized void total(long total) {
    this.total = total;
  }

  /** Names the current phase. */
  public synchronized void phase(String label) {
    this.label = label;
    draw(true);
  }

  /** One unit of work done. */
  public synchronized void advance() {
    done++;
    if (enabled) draw(false);
  }

  @GuardedBy("this")
  private void draw(boolean force) {
    if (!enabled) return;
    long now = System.nanoTime();
    if (!force && now - lastDraw < 100_000_000L) return;
    lastDraw = now;
    double f = total == 0 ? 0 : Math.min(1.0, (double) done / total);
    int filled = (int) Math.round(f * WIDTH);
    String line =
        String.format(
            "\r[%s%s] %3d%%  %s",
            "#".repeat(filled), ".".repeat(WIDTH - filled), (int) (f * 100), label);
    int pad = Math.max(0, drawnLength - line.length());
    err.print(line + " ".repeat(pad));
    err.flush();
    drawnLength = line.length();
  }

  /** Clears the bar. */
  @Override
  public synchronized void close() {
    if (enabled && drawnLength > 0) {
      err.print("\r" + " ".repeat(drawnLength) + "\r");
      err.flush();
      drawnLength = 0;
    }
  }

  @SuppressWarnings("SystemConsoleNull") // compiled for JDK 21, where a null console means no tty
  public static boolean stderrIsTerminal() {
    Path fd2 = Path.of("/proc/self/fd/2");
    try {
      if (Files.exists(Path.of("/proc/self/fd"))) {
        String target = Files.readSymbolicLink(fd2).toString();
        return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty");
      }
    } catch (Exception e) {
      // fall through to the console
    }
    Console c = System.console();
    if (c == null) return false;
    try {
      Method isTerminal = Console.class.getMethod("isTerminal");
      return (Boolean) isTerminal.invoke(c);
    } catch (ReflectiveOperationException e) {
      return true; // JDK 21: a console exists only for a terminal
    }
  }
}
