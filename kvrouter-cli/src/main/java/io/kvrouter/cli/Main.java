package io.kvrouter.cli;

import java.io.PrintWriter;
import java.util.concurrent.Callable;
import java.util.logging.Level;
import java.util.logging.Logger;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/**
 * The {@code kvrouter} command line: {@code serve}, {@code simulate}, {@code bench}, {@code
 * tokenizer}.
 *
 * <p>Exit codes: 0 ok, 1 failure (a command's own, e.g. {@code serve} could not listen), 2 usage
 * error. {@link #main} also gives java.util.logging a one-line format ({@link #LOG_FORMAT}) unless
 * the JVM property {@code java.util.logging.SimpleFormatter.format} sets one.
 */
@Command(
    name = "kvrouter",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    description = "KV-cache-aware request router for LLM inference fleets.",
    subcommands = {
      SimulateCommand.class,
      ServeCommand.class,
      Main.Bench.class,
      TokenizerCommand.class,
      MockEngineCommand.class,
      GatewayCommand.class
    })
public final class Main implements Callable<Integer> {
  /**
   * One line per log record: time, level, logger, message, and the exception's stack trace only
   * when a record carries one (the JDK's default puts the time and the source on a line of their
   * own).
   */
  static final String LOG_FORMAT = "%1$tF %1$tT %4$s %3$s: %5$s%6$s%n";

  @Spec CommandSpec spec;

  /** Runs the CLI and exits with its code. */
  // kept referenced so that the levels set in main stick (JUL holds loggers weakly)
  private static final Logger DJL_LOG = Logger.getLogger("ai.djl");

  private static final Logger DJL_CUDA_LOG = Logger.getLogger("ai.djl.util.cuda");

  public static void main(String[] args) {
    if (System.getProperty("java.util.logging.SimpleFormatter.format") == null) {
      System.setProperty("java.util.logging.SimpleFormatter.format", LOG_FORMAT);
    }
    // DJL's tokenizer library looks for CUDA when it loads and warns on every CPU-only host
    // ("CUDA driver version is insufficient"), then logs where its native library came from:
    // neither concerns kvrouter, which uses its tokenizers on the CPU only
    DJL_LOG.setLevel(Level.WARNING);
    DJL_CUDA_LOG.setLevel(Level.SEVERE);
    System.exit(run(args));
  }

  /** Runs the CLI and returns its exit code (0 ok, 1 failure, 2 usage error). */
  public static int run(String... args) {
    return commandLine().execute(args);
  }

  /** Runs the CLI with its output and error streams redirected (for tests). */
  public static int run(PrintWriter out, PrintWriter err, String... args) {
    return commandLine().setOut(out).setErr(err).execute(args);
  }

  /** The root command with kvrouter's usage-error handler. */
  static CommandLine commandLine() {
    return new CommandLine(new Main()).setParameterExceptionHandler(new UsageErrors());
  }

  @Override
  public Integer call() {
    spec.commandLine().usage(spec.commandLine().getErr());
    return 2;
  }

  /** Reads the version from the jar manifest. */
  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = Main.class.getPackage().getImplementationVersion();
      return new String[] {"kvrouter " + (v == null ? "(development build)" : v)};
    }
  }

  @Command(
      name = "bench",
      mixinStandardHelpOptions = true,
      description =
          "Benchmarks: trace (replay stress against an index), fleet (a live fleet of serve or"
              + " gateway, mock engines and load, compared by policy), gateway (the gateway's own"
              + " overhead per request).",
      subcommands = {
        BenchTraceCommand.class,
        GatewayBenchCommand.class,
        FleetBenchCommand.class,
        ServeLoadCommand.class
      })
  static final class Bench implements Callable<Integer> {
    @Spec CommandSpec spec;

    @Override
    public Integer call() {
      spec.commandLine()
          .getErr()
          .println("kvrouter bench: name a benchmark, e.g. kvrouter bench trace --help");
      return 2;
    }
  }
}
