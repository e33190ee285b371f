package io.kvrouter.cli;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code java -cp <the test class path> io.kvrouter.cli.Main ARGS} as a child process, its stdout
 * and stderr merged and collected line by line on a thread of its own, so that a test can wait for
 * a line, signal the process and read its exit code.
 */
final class ChildProcess implements AutoCloseable {
  private static final Duration DEADLINE = Duration.ofSeconds(120);

  private final Process process;
  private final List<String> lines = new ArrayList<>();
  private final Thread reader;

  /**
   * {@code env --default-signal=INT,TERM} when this machine's env has it (coreutils 8.31 on): a
   * shell starts a background job with SIGINT ignored, the child would inherit that, and HotSpot
   * installs no handler for an ignored SIGINT, so a test run from such a job could not Ctrl-C the
   * child; env resets both signals to their default before the JVM starts. Empty otherwise.
   */
  private static final List<String> DEFAULT_SIGNALS = defaultSignals();

  private static List<String> defaultSignals() {
    List<String> env = List.of("env", "--default-signal=INT,TERM");
    try {
      List<String> probe = new ArrayList<>(env);
      probe.add("true");
      Process p = new ProcessBuilder(probe).redirectErrorStream(true).start();
      p.getInputStream().transferTo(java.io.OutputStream.nullOutputStream());
      return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0 ? env : List.of();
    } catch (IOException e) {
      return List.of();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return List.of();
    }
  }

  ChildProcess(List<String> jvmArgs, String... args) throws IOException {
    List<String> cmd = new ArrayList<>(DEFAULT_SIGNALS);
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-Xmx512m");
    cmd.addAll(jvmArgs);
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add(Main.class.getName());
    cmd.addAll(List.of(args));
    process = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    reader =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  try (BufferedReader r =
                      new BufferedReader(
                          new InputStreamReader(
                              process.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String l; (l = r.readLine()) != null; ) {
                      synchronized (lines) {
                        lines.add(l);
                        lines.notifyAll();
                      }
                    }
                  } catch (IOException e) {
                    // the process is gone
                  }
                });
  }

  /** Waits for a line matching {@code regex}; returns the match's first group (or all of it). */
  String await(String regex) throws InterruptedException {
    Pattern p = Pattern.compile(regex);
    long end = System.nanoTime() + DEADLINE.toNanos();
    int seen = 0;
    synchronized (lines) {
      while (true) {
        for (; seen < lines.size(); seen++) {
          Matcher m = p.matcher(lines.get(seen));
          if (m.find()) return m.groupCount() > 0 ? m.group(1) : m.group();
        }
        long left = end - System.nanoTime();
        if (left <= 0 || (!process.isAlive() && !reader.isAlive())) {
          throw new AssertionError("no line matching " + regex + " in:\n" + output());
        }
        lines.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(Math.min(left, 100_000_000L))));
      }
    }
  }

  /** Everything the process printed so far. */
  String output() {
    synchronized (lines) {
      return String.join("\n", lines);
    }
  }

  long pid() {
    return process.pid();
  }

  /** SIGTERM ({@code ProcessHandle.destroy} on Linux). */
  void sigterm() {
    process.toHandle().destroy();
  }

  /** SIGINT, as Ctrl-C sends it. */
  void sigint() throws IOException, InterruptedException {
    Process kill = new ProcessBuilder("kill", "-INT", Long.toString(pid())).start();
    if (kill.waitFor() != 0) throw new AssertionError("kill -INT failed");
  }

  /** Waits for the process to end; returns its exit code. */
  int exitCode() throws InterruptedException {
    if (!process.waitFor(DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
      throw new AssertionError("the process did not end:\n" + output());
    }
    reader.join(DEADLINE.toMillis());
    return process.exitValue();
  }

  @Override
  public void close() {
    process.destroyForcibly();
  }
}
