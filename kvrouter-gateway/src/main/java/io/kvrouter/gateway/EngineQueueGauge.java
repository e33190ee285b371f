package io.kvrouter.gateway;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * Reads how many requests an engine says wait in its own queue from its Prometheus {@code /metrics}
 * text: vLLM's {@code vllm:num_requests_waiting}, SGLang's {@code sglang:num_queue_reqs} and
 * llama.cpp's {@code llamacpp:requests_deferred} (its server with {@code --metrics}). The samples
 * of every such gauge are summed (vLLM publishes one per engine core of a data-parallel server).
 *
 * <pre>
 * Implementation notes
 *
 * A pure function over the bytes of one answer. It reads line by line, at most maxBytes in all
 * and MAX_LINE bytes of each line (a longer line, a histogram's label set, say, is skipped to its
 * end, never kept), so an engine's answer never grows the gateway's memory. A sample line is
 * NAME[{labels}] VALUE [TIMESTAMP]; comments (#) and other metrics are skipped.
 * </pre>
 */
final class EngineQueueGauge {
  /** The gauges read, in the order of the engines above. */
  static final String[] NAMES = {
    "vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"
  };

  private static final int MAX_LINE = 4096;

  private EngineQueueGauge() {}

  /**
   * The requests waiting in the engine's queue, or -1 when the text has none of the gauges.
   *
   * @throws IOException when reading fails, the text passes {@code maxBytes}, or a gauge's value is
   *     not a number
   */
  static long waiting(InputStream in, long maxBytes) throws IOException {
    byte[] line = new byte[MAX_LINE];
    long read = 0;
    long sum = 0;
    boolean found = false;
    while (true) {
      int n = 0;
      boolean cut = false;
      int c;
      while ((c = in.read()) >= 0 && c != '\n') {
        if (++read > maxBytes) {
          throw new IOException("the metrics answer is longer than " + maxBytes + " bytes");
        }
        if (n < MAX_LINE) line[n++] = (byte) c;
        else cut = true;
      }
      if (c >= 0) read++;
      if (!cut && n > 0 && line[0] != '#') {
        double v = sample(line, n);
        if (!Double.isNaN(v)) {
          found = true;
          sum += (long) Math.max(0, v);
        }
      }
      if (c < 0) return found ? sum : -1;
    }
  }

  /** The value of a sample line of one of the gauges, else NaN. */
  private static double sample(byte[] line, int n) throws IOException {
    String s = new String(line, 0, n, StandardCharsets.UTF_8).strip();
    for (String name : NAMES) {
      if (!s.startsWith(name)) continue;
      int at = name.length();
      if (at == s.length()) return Double.NaN;
      char next = s.charAt(at);
      if (next == '{') {
        at = s.indexOf('}', at);
        if (at < 0) throw new IOException("a sample of " + name + " with unclosed labels");
        at++;
      } else if (next != ' ' && next != '\t') {
        return Double.NaN; // another metric whose name starts so
      }
      String[] rest = s.substring(at).strip().split("[ \t]+");
      try {
        return Double.parseDouble(rest[0]);
      } catch (NumberFormatException e) {
        throw new IOException("a sample of " + name + " that is not a number: " + rest[0]);
      }
    }
    return Double.NaN;
  }
}
