package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

/** A usage error is one line, a close option is suggested by edit distance, and the exit is 2. */
class UsageErrorsTest {
  private static String[] run(String... args) {
    StringWriter out = new StringWriter(), err = new StringWriter();
    int code = Main.run(new PrintWriter(out), new PrintWriter(err), args);
    return new String[] {Integer.toString(code), err.toString()};
  }

  @Test
  void aMistypedPortSuggestsPort() {
    String[] r = run("serve", "--prot", "8080");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1])
        .contains("Unknown options: '--prot', '8080'")
        .contains("Did you mean: --port?")
        .doesNotContain("--pressure-weight")
        .contains("Run 'kvrouter serve --help'");
  }

  @Test
  void aSwapOfTwoLettersIsOneEdit() {
    assertThat(UsageErrors.distance("--prot", "--port")).isEqualTo(1);
    assertThat(UsageErrors.distance("--port", "--port")).isZero();
    assertThat(UsageErrors.distance("--seed", "--speed")).isEqualTo(1);
    assertThat(UsageErrors.distance("abc", "")).isEqualTo(3);
  }

  @Test
  void nothingFarIsSuggested() {
    String[] r = run("simulate", "--zzzzzzzzzz");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1]).contains("Unknown option").doesNotContain("Did you mean");
  }
}
