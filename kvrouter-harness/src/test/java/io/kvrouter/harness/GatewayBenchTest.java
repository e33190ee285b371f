package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * {@code bench gateway}'s harness at a tiny size: one instant engine, phases of 0.2 s. Every
 * workload runs direct and through the gateway without an error, and the gateway's row is followed
 * by its stage times. The figures themselves are never asserted (docs/BENCHMARKS.md has them).
 */
class GatewayBenchTest {
  private static final Path TINY = Path.of("../kvrouter-gateway/src/test/resources/models/tiny");

  private static final Pattern ROW =
      Pattern.compile(
          "(?m)^(short completion|short completion sse|8k-token chat|8k-token chat sse) +"
              + "(direct|gateway) +([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9]+)$");

  @Test
  void everyWorkloadRunsDirectAndThroughTheGatewayWithoutAnError() throws Exception {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        new GatewayBench(new GatewayBench.Settings(TINY, 1, 2, 20, 0.2))
            .run(new PrintWriter(out, true), new PrintWriter(err, true));
    assertThat(code).as(err.toString()).isZero();
    String text = out.toString();
    assertThat(text).startsWith("bench gateway: 1 instant mock engines, 2 clients (saturation),");
    List<String> rows = new ArrayList<>();
    Matcher m = ROW.matcher(text);
    while (m.find()) {
      rows.add(m.group(1) + "/" + m.group(2));
      assertThat(m.group(6)).as("errors of " + m.group()).isEqualTo("0");
    }
    assertThat(rows)
        .containsExactly(
            "short completion/direct",
            "short completion/gateway",
            "short completion sse/direct",
            "short completion sse/gateway",
            "8k-token chat/direct",
            "8k-token chat/gateway",
            "8k-token chat sse/direct",
            "8k-token chat sse/gateway");
    // each gateway row is followed by its stages, each a number of microseconds
    assertThat(
            text.split("\n    gateway stages at the fixed rate, mean us: parse [0-9.]+ tokenize"))
        .hasSize(5);
  }

  @Test
  void aMissingModelDirectoryIsAUsageError() throws Exception {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    Path none = Path.of("no-such-model-dir");
    int code =
        new GatewayBench(new GatewayBench.Settings(none, 1, 2, 20, 0.2))
            .run(new PrintWriter(out, true), new PrintWriter(err, true));
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).startsWith("bench gateway: no --model-dir no-such-model-dir");
    assertThat(out.toString()).isEmpty();
  }
}
