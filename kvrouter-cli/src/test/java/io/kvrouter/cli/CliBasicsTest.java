package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The launcher contract: --help and --version succeed, unknown commands are usage errors. */
class CliBasicsTest {
  private static String captureOut(Runnable r) {
    PrintStream old = System.out;
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
    try {
      r.run();
    } finally {
      System.setOut(old);
    }
    return buf.toString(StandardCharsets.UTF_8);
  }

  @Test
  void helpAndVersionExitZero() {
    int[] code = new int[1];
    String help = captureOut(() -> code[0] = Main.run("--help"));
    assertThat(code[0]).isZero();
    assertThat(help).contains("Usage: kvrouter").contains("simulate").contains("serve");
    String version = captureOut(() -> code[0] = Main.run("--version"));
    assertThat(code[0]).isZero();
    assertThat(version).startsWith("kvrouter ");
  }

  @Test
  void unknownCommandsAndNoCommandAreUsageErrors() {
    PrintStream oldErr = System.err;
    System.setErr(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
    try {
      assertThat(Main.run("bogus")).isEqualTo(2);
      assertThat(Main.run()).isEqualTo(2);
    } finally {
      System.setErr(oldErr);
    }
  }

  @Test
  void everyCommandsHelpRendersWithoutAWarning() {
    List<String[]> commands =
        List.of(
            new String[] {"--help"},
            new String[] {"simulate", "--help"},
            new String[] {"serve", "--help"},
            new String[] {"bench", "--help"},
            new String[] {"bench", "trace", "--help"},
            new String[] {"tokenizer", "--help"},
            new String[] {"tokenizer", "check", "--help"},
            new String[] {"mock-engine", "--help"});
    for (String[] args : commands) {
      PrintStream oldErr = System.err;
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
      int[] code = new int[1];
      String help;
      try {
        help = captureOut(() -> code[0] = Main.run(args));
      } finally {
        System.setErr(oldErr);
      }
      String joined = String.join(" ", args);
      assertThat(code[0]).as(joined).isZero();
      assertThat(help).as(joined).startsWith("Usage: kvrouter");
      // picocli warns on stderr when a description is not a valid format string (a bare '%')
      assertThat(err.toString(StandardCharsets.UTF_8)).as(joined).doesNotContain("WARN");
      assertThat(help).as(joined).doesNotContain("%n");
    }
  }
}
