package io.kvrouter.sim.trace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link TracePrompts}: simulate's tokens, their non-negative live form keeps every shared prefix,
 * and a capped copy of the trace reads back with the same prompts.
 */
class TracePromptsTest {
  @TempDir Path dir;

  private Path trace() throws Exception {
    Path f = dir.resolve("t.jsonl");
    Files.write(
        f,
        List.of(
            "{\"timestamp\":0,\"input_length\":1100,\"output_length\":300,\"hash_ids\":[5,6,7]}",
            "{\"timestamp\":250,\"input_length\":1536,\"output_length\":10,\"hash_ids\":[5,6,8]}"));
    return f;
  }

  @Test
  void liveTokensAreNonNegativeAndShareExactlyTheSamePrefix() throws Exception {
    TracePrompts t = TracePrompts.load(trace(), 10);
    assertThat(t.size()).isEqualTo(2);
    assertThat(t.offsetMs(1)).isEqualTo(250.0);
    int[] a = t.tokens(0);
    int[] b = t.tokens(1);
    assertThat(a).hasSize(1100);
    assertThat(Arrays.stream(a).anyMatch(x -> x < 0)).as("simulate's tokens use the sign").isTrue();
    int[] la = t.liveTokens(0);
    int[] lb = t.liveTokens(1);
    assertThat(Arrays.stream(la).allMatch(x -> x >= 0)).isTrue();
    assertThat(Arrays.stream(lb).allMatch(x -> x >= 0)).isTrue();
    assertThat(Arrays.mismatch(a, b)).isEqualTo(1024);
    assertThat(Arrays.mismatch(la, lb)).isEqualTo(1024);
  }

  @Test
  void aCappedCopyKeepsThePromptsAndCapsTheOutputs() throws Exception {
    TracePrompts t = TracePrompts.load(trace(), 10);
    Path capped = dir.resolve("capped.jsonl");
    t.writeCapped(capped, 64);
    TracePrompts c = TracePrompts.load(capped, 10);
    assertThat(c.size()).isEqualTo(2);
    assertThat(c.outputLength(0)).isEqualTo(64);
    assertThat(c.outputLength(1)).isEqualTo(10);
    for (int i = 0; i < 2; i++) {
      assertThat(c.offsetMs(i)).isEqualTo(t.offsetMs(i));
      assertThat(c.tokens(i)).isEqualTo(t.tokens(i));
    }
  }

  @Test
  void cappedRequestsAndASubsetKeepThePrompts() throws Exception {
    TracePrompts t = TracePrompts.load(trace(), 10);
    List<TraceRequest> capped = t.requests(64);
    assertThat(capped).extracting(TraceRequest::outputLength).containsExactly(64, 10);
    assertThat(capped).extracting(TraceRequest::inputLength).containsExactly(1100, 1536);
    assertThat(t.requests(0)).extracting(TraceRequest::outputLength).containsExactly(300, 10);
    TracePrompts second = TracePrompts.of("sub", capped.subList(1, 2));
    assertThat(second.name()).isEqualTo("sub");
    assertThat(second.size()).isEqualTo(1);
    assertThat(second.offsetMs(0)).isZero();
    assertThat(second.tokens(0)).isEqualTo(t.tokens(1));
    assertThatThrownBy(() -> TracePrompts.of("none", List.of()))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aMissingFileIsAnIllegalArgument() {
    assertThatThrownBy(() -> TracePrompts.load(dir.resolve("none.jsonl"), 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no such file");
  }
}
