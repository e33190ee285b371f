package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvrouter bench trace} on the command line: its table, JSON and plot, and the refusals of
 * bad flags (exit code 2). The replay itself: kvrouter-harness's TraceBenchTest.
 */
class BenchTraceTest {
  @TempDir Path tmp;

  @Test
  void theCommandWritesJsonAndAPlot() throws IOException {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    Path json = tmp.resolve("b.json");
    Path svg = tmp.resolve("b.svg");
    int code =
        Main.run(
            new PrintWriter(out, true),
            new PrintWriter(err, true),
            "bench",
            "trace",
            "--requests",
            "400",
            "--workers",
            "4",
            "--gpu-blocks",
            "256",
            "--index",
            "radix-tree,positional,compressed-tree",
            "--sweep",
            "--sweep-min-ms",
            "2",
            "--sweep-max-ms",
            "20",
            "--sweep-steps",
            "2",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--quiet",
            "--output",
            json.toString(),
            "--plot",
            svg.toString());
    assertThat(code).as(err.toString()).isZero();
    assertThat(out.toString())
        .containsPattern("(?m)^radix-tree +20 ms +[0-9.]+ ms")
        .contains("positional");
    // every timed row says whether it kept up and by how much; the output says what that means
    assertThat(out.toString())
        .containsPattern("(?m)^radix-tree +2 ms .* (yes|no) \\(\\d+%\\) +ok$")
        .containsPattern("(?m)^positional +20 ms .* (yes|no) \\(\\d+%\\) +ok$")
        .containsPattern("(?m)^compressed-tree +20 ms .* (yes|no) \\(\\d+%\\) +ok$")
        .contains("kept up: yes when achieved >= 95% of offered")
        .containsPattern("(?m)^machine: \\d+ cores?")
        .containsPattern("(?m)^radix-tree: (kept up|fell behind|the slowest)")
        .containsPattern("(?m)^positional: (kept up|fell behind|the slowest)");
    String j = Files.readString(json);
    assertThat(j).contains("\"radix-tree\"").contains("\"find_matches_p99_us\"");
    assertThat(j).contains("\"removed_events\" : \"per-block\"");
    assertThat(j).doesNotContain("\"index_equals_caches\" : false");
    assertThat(Files.readString(svg)).startsWith("<svg").contains("<polyline");
  }

  /** Runs {@code bench trace} with {@code args}, expects exit code 2 and returns stderr. */
  private static String refused(String... args) {
    StringWriter err = new StringWriter();
    String[] all = new String[args.length + 2];
    all[0] = "bench";
    all[1] = "trace";
    System.arraycopy(args, 0, all, 2, args.length);
    int code = Main.run(new PrintWriter(new StringWriter()), new PrintWriter(err, true), all);
    assertThat(code).as(err.toString()).isEqualTo(2);
    return err.toString();
  }

  @Test
  void anUnknownRemovedEventsShapeIsRefused() {
    assertThat(refused("--removed-events", "sideways"))
        .contains("--removed-events must be per-block or per-eviction, got 'sideways'");
  }

  @Test
  void anUnknownIndexListsTheKnownOnes() {
    assertThat(refused("--index", "btree"))
        .contains(
            "unknown index 'btree'; known indexes: radix-tree, concurrent-radix-tree, positional, compressed-tree");
  }
}
