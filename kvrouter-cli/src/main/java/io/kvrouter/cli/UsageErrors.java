package io.kvrouter.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * How a usage error is reported: the error in one line, for a mistyped option the options of that
 * command closest to it by edit distance ({@code --prot} suggests {@code --port}, where picocli's
 * own suggestion was {@code --pressure-weight}), and where to find the rest; exit code 2. Installed
 * on the root command by {@link Main}.
 */
final class UsageErrors implements CommandLine.IParameterExceptionHandler {
  /** Options at most this many edits away are suggested (and at most a third of the word). */
  private static final int MAX_EDITS = 3;

  @Override
  public int handleParseException(ParameterException ex, String[] args) {
    CommandLine cmd = ex.getCommandLine();
    PrintWriter err = cmd.getErr();
    err.println(cmd.getColorScheme().errorText(ex.getMessage()));
    if (ex instanceof UnmatchedArgumentException u) {
      for (String arg : u.getUnmatched()) {
        if (!arg.startsWith("-")) continue;
        List<String> near = nearest(cmd.getCommandSpec(), arg.split("=", 2)[0]);
        if (!near.isEmpty()) err.println("Did you mean: " + String.join(" or ", near) + "?");
        break;
      }
    }
    err.println("Run '" + cmd.getCommandSpec().qualifiedName() + " --help' for its options.");
    err.flush();
    return 2;
  }

  /** The option names of {@code spec} closest to {@code word}, nearest first. */
  static List<String> nearest(CommandSpec spec, String word) {
    record Scored(String name, int edits) {}
    List<Scored> scored = new ArrayList<>();
    int limit = Math.min(MAX_EDITS, Math.max(1, word.replaceFirst("^-+", "").length() / 3));
    for (OptionSpec o : spec.options()) {
      if (o.hidden()) continue;
      for (String name : o.names()) {
        if (!name.startsWith("--")) continue;
        int d = distance(word, name);
        if (d <= limit) scored.add(new Scored(name, d));
      }
    }
    scored.sort(Comparator.comparingInt(Scored::edits).thenComparing(Scored::name));
    List<String> out = new ArrayList<>();
    for (Scored s : scored) {
      if (out.size() == 3 || s.edits() > scored.get(0).edits()) break;
      out.add(s.name());
    }
    return out;
  }

  /** Damerau-Levenshtein distance (optimal string alignment): a swap of two letters is one edit. */
  static int distance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) d[i][0] = i;
    for (int j = 0; j <= b.length(); j++) d[0][j] = j;
    for (int i = 1; i <= a.length(); i++) {
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
        if (i > 1
            && j > 1
            && a.charAt(i - 1) == b.charAt(j - 2)
            && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }
}
