package io.kvrouter.cli;

import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code kvrouter} command line: {@code serve}, {@code simulate}, {@code bench}. */
@Command(
    name = "kvrouter",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    description = "KV-cache-aware request router for LLM inference fleets.",
    subcommands = {Main.Simulate.class, ServeCommand.class, Main.Bench.class})
public final class Main implements Callable<Integer> {

  /** Runs the CLI and exits with its code. */
  public static void main(String[] args) {
    System.exit(run(args));
  }

  /** Runs the CLI and returns its exit code (0 ok, 1 failure, 2 usage error). */
  public static int run(String... args) {
    return new CommandLine(new Main()).execute(args);
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
      name = "simulate",
      mixinStandardHelpOptions = true,
      description =
          "Replay a real request trace through simulated engines under several routing policies.")
  static final class Simulate implements Callable<Integer> {
    @Override
    public Integer call() {
      System.err.println("kvrouter simulate: not built yet (see issue 6).");
      return 1;
    }
  }

  @Command(
      name = "bench",
      mixinStandardHelpOptions = true,
      description = "Benchmarks: trace replay stress against an index.")
  static final class Bench implements Callable<Integer> {
    @Override
    public Integer call() {
      System.err.println("kvrouter bench: not built yet (see issue 6).");
      return 1;
    }
  }
}
