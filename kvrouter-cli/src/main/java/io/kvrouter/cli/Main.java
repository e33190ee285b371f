package io.kvrouter.cli;

import io.kvrouter.sim.BenchTraceCommand;
import io.kvrouter.sim.SimulateCommand;
import io.kvrouter.tokenize.TokenizerCommand;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code kvrouter} command line: {@code serve}, {@code simulate}, {@code bench}, {@code
 * tokenizer}.
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
      TokenizerCommand.class
    })
public final class Main implements Callable<Integer> {

  /** Runs the CLI and exits with its code. */
  public static void main(String[] args) {
    System.exit(run(args));
  }

  /** Runs the CLI and returns its exit code (0 ok, 1 failure, 2 usage error). */
  public static int run(String... args) {
    return new CommandLine(new Main()).execute(args);
  }

  /** Runs the CLI with its output and error streams redirected (for tests). */
  public static int run(PrintWriter out, PrintWriter err, String... args) {
    return new CommandLine(new Main()).setOut(out).setErr(err).execute(args);
  }

  @Override
  public Integer call() {
    new CommandLine(this).usage(System.err);
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
      description = "Benchmarks: trace replay stress against an index.",
      subcommands = {BenchTraceCommand.class})
  static final class Bench implements Callable<Integer> {
    @Override
    public Integer call() {
      System.err.println("kvrouter bench: name a benchmark, e.g. kvrouter bench trace --help");
      return 2;
    }
  }
}
