package io.kvrouter.sim;

import io.kvrouter.sim.trace.TraceRequest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Small hand-made traces for tests. */
public final class SyntheticTrace {
  private SyntheticTrace() {}

  /**
   * {@code conversations × turns} requests: every prompt starts with block id 0 (a shared system
   * prompt); turn t of a conversation repeats the previous turn's ids and adds two new ones, and
   * ends 100 tokens into its last block. Turn t of conversation c arrives at {@code t * gapMs + c *
   * 40} ms, so conversations interleave and a turn comes back after the others have run.
   */
  public static List<TraceRequest> conversations(int conversations, int turns, int gapMs) {
    List<TraceRequest> out = new ArrayList<>();
    long nextId = 1;
    long[][] ids = new long[conversations][];
    for (int c = 0; c < conversations; c++) ids[c] = new long[] {0};
    int line = 0;
    for (int t = 0; t < turns; t++) {
      for (int c = 0; c < conversations; c++) {
        long[] prev = ids[c];
        long[] next = Arrays.copyOf(prev, prev.length + 2);
        next[prev.length] = nextId++;
        next[prev.length + 1] = nextId++;
        ids[c] = next;
        int input = next.length * TraceRequest.TRACE_BLOCK - 412;
        out.add(new TraceRequest(++line, t * (double) gapMs + c * 40.0, input, 20, next));
      }
    }
    return out;
  }
}
