package io.kvrouter.cli;

import java.nio.file.Path;
import java.util.List;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * The HTML report flags of the commands that write one ({@code simulate}, {@code bench fleet}):
 * {@code --report FILE} and {@code --no-report}. Declared once here as a picocli mixin; each
 * command gives its own default file name. {@link #args()} is the command's arguments as given, for
 * the report's header.
 */
final class ReportOptions {
  @Spec(Spec.Target.MIXEE)
  CommandSpec mixee;

  @Option(
      names = "--report",
      paramLabel = "FILE",
      description = "Self-contained HTML report with plots (default: ${DEFAULT-VALUE}).")
  Path report;

  @Option(names = "--no-report", description = "Write no HTML report.")
  boolean noReport;

  ReportOptions(String defaultFile) {
    report = Path.of(defaultFile);
  }

  /** The report to write, or null with --no-report. */
  Path target() {
    return noReport ? null : report;
  }

  /** The command's arguments as given: what follows its name on the command line. */
  List<String> args() {
    List<String> args = mixee.commandLine().getParseResult().originalArgs();
    // the parse result of a subcommand holds the whole command line
    int at = args.indexOf(mixee.name());
    return at < 0 ? args : args.subList(at + 1, args.size());
  }
}
