package io.kvrouter.sim.trace;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A trace as a live load generator needs it ({@code kvrouter bench fleet}): the same trace {@code
 * simulate} reads (the bundled one when no file is given) and the same prompt tokens it derives
 * from the hash ids.
 *
 * <pre>
 * Implementation notes
 *
 * A thin public view of TraceSource, TraceRequest and TraceTokens, which stay package-private.
 * Prompt tokens are computed on demand (about 10 us for 12 k tokens), so a loaded trace holds no
 * token arrays. Engines (vLLM, the mock engine) accept only non-negative token ids, so liveTokens
 * clears the sign bit of each token: equal blocks stay equal and different blocks stay different
 * (two 64-token blocks of different ids collide with probability about 2^-1984), so every prefix
 * is shared exactly as in simulate and hit rates are the same.
 * </pre>
 */
public final class TracePrompts {
  private final String name;
  private final List<TraceRequest> requests;

  private TracePrompts(String name, List<TraceRequest> requests) {
    this.name = name;
    this.requests = requests;
  }

  /**
   * The first {@code limit} requests of {@code trace} (null: the bundled trace).
   *
   * @throws IllegalArgumentException naming the file, line and field of a malformed trace, or a
   *     missing file
   */
  public static TracePrompts load(Path trace, int limit) {
    try {
      TraceSource.Loaded l = TraceSource.load(trace, limit);
      return new TracePrompts(l.name(), l.requests());
    } catch (TraceFormatException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  /**
   * The prompts of {@code requests} (those of {@link #requests(int)}, or some of them, in trace
   * order) under {@code name}.
   */
  public static TracePrompts of(String name, List<TraceRequest> requests) {
    if (requests.isEmpty()) throw new IllegalArgumentException("no requests");
    return new TracePrompts(name, List.copyOf(requests));
  }

  /** The name the trace is reported under. */
  public String name() {
    return name;
  }

  public int size() {
    return requests.size();
  }

  /** Arrival of request {@code i} in milliseconds from the first request's. */
  public double offsetMs(int i) {
    return requests.get(i).timestampMs() - requests.get(0).timestampMs();
  }

  public int inputLength(int i) {
    return requests.get(i).inputLength();
  }

  public int outputLength(int i) {
    return requests.get(i).outputLength();
  }

  /**
   * The requests, every output length capped at {@code maxOutput} (0: as in the trace): what a live
   * run that caps them replays, for the rules that read the trace ({@code TenantRule}, {@code
   * LoadFactor}).
   */
  public List<TraceRequest> requests(int maxOutput) {
    if (maxOutput <= 0) return List.copyOf(requests);
    List<TraceRequest> out = new ArrayList<>(requests.size());
    for (TraceRequest r : requests) {
      out.add(
          new TraceRequest(
              r.line(),
              r.timestampMs(),
              r.inputLength(),
              Math.min(r.outputLength(), maxOutput),
              r.hashIds()));
    }
    return out;
  }

  /**
   * Writes the trace again in its own format (Mooncake JSONL), every output length capped at {@code
   * maxOutput}: what {@code simulate} must replay to compare with a live run that capped them.
   */
  public void writeCapped(Path file, int maxOutput) throws IOException {
    try (BufferedWriter w = Files.newBufferedWriter(file)) {
      for (TraceRequest r : requests) {
        StringBuilder b = new StringBuilder("{\"timestamp\":");
        b.append(
            r.timestampMs() == Math.rint(r.timestampMs())
                ? Long.toString((long) r.timestampMs())
                : Double.toString(r.timestampMs()));
        b.append(",\"input_length\":").append(r.inputLength());
        b.append(",\"output_length\":").append(Math.min(r.outputLength(), maxOutput));
        b.append(",\"hash_ids\":[");
        long[] ids = r.hashIds();
        for (int k = 0; k < ids.length; k++) {
          if (k > 0) b.append(',');
          b.append(ids[k]);
        }
        w.write(b.append("]}\n").toString());
      }
    }
  }

  /** Request {@code i}'s prompt exactly as {@code simulate} builds it. */
  public int[] tokens(int i) {
    return TraceTokens.tokens(requests.get(i));
  }

  /** Request {@code i}'s prompt as non-negative token ids (see the class notes). */
  public int[] liveTokens(int i) {
    int[] t = tokens(i);
    for (int k = 0; k < t.length; k++) t[k] &= 0x7fffffff;
    return t;
  }
}
