package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The engines' queue gauges read from their /metrics text (EngineQueueGauge). */
class EngineQueueGaugeTest {
  private static long read(String text) throws IOException {
    return EngineQueueGauge.waiting(
        new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)), 1 << 20);
  }

  @Test
  void vllmsGaugeIsSummedOverItsEngineCores() throws IOException {
    String text =
        """
        # HELP vllm:num_requests_running Number of requests in model execution batches.
        # TYPE vllm:num_requests_running gauge
        vllm:num_requests_running{engine="0",model_name="qwen3"} 64.0
        # HELP vllm:num_requests_waiting Number of requests waiting to be processed.
        # TYPE vllm:num_requests_waiting gauge
        vllm:num_requests_waiting{engine="0",model_name="qwen3"} 3.0
        vllm:num_requests_waiting{engine="1",model_name="qwen3"} 4.0
        vllm:num_requests_waiting_extra{engine="0"} 100.0
        """;
    assertThat(read(text)).isEqualTo(7);
  }

  @Test
  void sglangAndLlamaCppGaugesAreRead() throws IOException {
    assertThat(read("sglang:num_queue_reqs{model_name=\"m\",tp_rank=\"0\"} 12\n")).isEqualTo(12);
    assertThat(read("llamacpp:requests_processing 1\nllamacpp:requests_deferred 2\n")).isEqualTo(2);
    // a timestamp after the value, a line without its final newline
    assertThat(read("vllm:num_requests_waiting 5 1700000000000")).isEqualTo(5);
  }

  @Test
  void anAnswerWithoutAQueueGaugeIsNotAnEmptyQueue() throws IOException {
    assertThat(read("")).isEqualTo(-1);
    assertThat(read("vllm:num_requests_running 3\n# vllm:num_requests_waiting 9\n")).isEqualTo(-1);
  }

  @Test
  void badOrOversizedTextsAreErrors() {
    assertThatThrownBy(() -> read("vllm:num_requests_waiting lots\n"))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("not a number");
    assertThatThrownBy(() -> read("vllm:num_requests_waiting{engine=\"0\" 3\n"))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("unclosed");
    byte[] big = new byte[2048];
    Arrays.fill(big, (byte) 'x');
    assertThatThrownBy(() -> EngineQueueGauge.waiting(new ByteArrayInputStream(big), 1024))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("longer than 1024 bytes");
  }

  @Test
  void aLineLongerThanTheLineBoundIsSkippedNotKept() throws IOException {
    String longLabels = "vllm:num_requests_waiting{a=\"" + "y".repeat(10_000) + "\"} 50\n";
    assertThat(read(longLabels + "vllm:num_requests_waiting 2\n")).isEqualTo(2);
  }
}
