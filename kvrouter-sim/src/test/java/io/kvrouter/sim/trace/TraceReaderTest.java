package io.kvrouter.sim.trace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;

/** {@link TraceReader}: the Mooncake JSONL format, plain and gzip, and its error messages. */
class TraceReaderTest {

  private static List<TraceRequest> read(String text) {
    return TraceReader.read(
        new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)), "t.jsonl", 1000);
  }

  private static void fails(String text, String... fragments) {
    assertThatThrownBy(() -> read(text))
        .isInstanceOf(TraceFormatException.class)
        .message()
        .contains(fragments);
  }

  @Test
  void readsGoodLinesSkippingBlankLinesAndUnknownFields() {
    List<TraceRequest> rs =
        read(
            """
            {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}

            {"hash_ids": [0, 14], "extra": {"nested": [1, "x"]}, "output_length": 0, "input_length": 513, "timestamp": 12.5}
            """);
    assertThat(rs).hasSize(2);
    TraceRequest a = rs.get(0);
    assertThat(a.line()).isEqualTo(1);
    assertThat(a.timestampMs()).isZero();
    assertThat(a.inputLength()).isEqualTo(6758);
    assertThat(a.outputLength()).isEqualTo(500);
    assertThat(a.hashIds()).hasSize(14).startsWith(0, 1, 2).endsWith(13);
    TraceRequest b = rs.get(1);
    assertThat(b.line()).isEqualTo(3);
    assertThat(b.timestampMs()).isEqualTo(12.5);
    assertThat(b.hashIds()).containsExactly(0, 14);
  }

  @Test
  void readsGzipAndStopsAtTheLimit() throws IOException {
    String text =
        """
        {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}
        {"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1]}
        {"timestamp": 2, "input_length": 10, "output_length": 1, "hash_ids": [2]}
        """;
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (GZIPOutputStream gz = new GZIPOutputStream(bytes)) {
      gz.write(text.getBytes(StandardCharsets.UTF_8));
    }
    List<TraceRequest> rs =
        TraceReader.read(new ByteArrayInputStream(bytes.toByteArray()), "t.jsonl.gz", 2);
    assertThat(rs).extracting(r -> r.hashIds()[0]).containsExactly(0L, 1L);
  }

  @Test
  void theBundledTraceIsComplete() {
    TraceSource.Loaded t = TraceSource.load(null, Integer.MAX_VALUE);
    assertThat(t.requests()).hasSize(12_031);
    assertThat(t.requests().get(12_030).timestampMs()).isEqualTo(3_536_999);
    long blocks = t.requests().stream().mapToLong(r -> r.hashIds().length).sum();
    assertThat(blocks).isEqualTo(288_500);
  }

  @Test
  void namesTheLineAndTheFieldOfEveryMistake() {
    String good =
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n";
    fails(
        good + "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1}\n",
        "t.jsonl, line 2, field 'hash_ids': missing");
    fails(
        good
            + good
            + "{\"timestamp\": 1, \"input_length\": \"10\", \"output_length\": 1,"
            + " \"hash_ids\": [0]}\n",
        "line 3, field 'input_length': expected an integer, got the string \"10\"");
    fails(
        "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": []}",
        "line 1, field 'input_length': expected an integer in [1, ");
    fails(
        "{\"timestamp\": -1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}",
        "line 1, field 'timestamp': expected a number >= 0, got -1");
    fails(
        "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0, -3]}",
        "line 1, field 'hash_ids[1]': expected an integer in [0, ");
    fails(
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [0]}",
        "line 1, field 'hash_ids': has 1 ids but input_length 600 needs ceil(600 / 512) = 2");
    fails(
        "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": 7}",
        "line 1, field 'hash_ids': expected an array of integers, got 7");
    fails(
        "{\"timestamp\": 0, \"timestamp\": 0, \"input_length\": 5}",
        "line 1, field 'timestamp': given twice");
    fails(
        "{\"timestamp\": 5, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}\n"
            + "{\"timestamp\": 4, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}",
        "line 2, field 'timestamp': arrival 4 ms is before the previous request's 5 ms");
    fails(good + "{\"timestamp\": 0, \"input_length\" 5}", "line 2: malformed JSON at column");
    fails(good + good + "[1, 2]", "line 3: expected a JSON object");
    fails(good + "{} {}", "line 2: unexpected content after the object");
    fails("\n\n", "t.jsonl: holds no request");
  }

  @Test
  void theExceptionCarriesLineAndField() {
    assertThatThrownBy(
            () ->
                read(
                    "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": -1, \"hash_ids\":"
                        + " [0]}"))
        .isInstanceOfSatisfying(
            TraceFormatException.class,
            e -> {
              assertThat(e.line()).isEqualTo(1);
              assertThat(e.field()).isEqualTo("output_length");
            });
  }
}
