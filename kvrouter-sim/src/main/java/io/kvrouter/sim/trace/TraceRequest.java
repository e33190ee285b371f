package io.kvrouter.sim.trace;

/**
 * One request of a Mooncake-format trace.
 *
 * @param line the 1-based line of the trace it came from
 * @param timestampMs arrival in milliseconds from the start of the trace
 * @param inputLength prompt tokens
 * @param outputLength generated tokens
 * @param hashIds one id per 512-token block of the prompt ({@code ceil(inputLength / 512)} ids)
 */
public record TraceRequest(
    int line, double timestampMs, int inputLength, int outputLength, long[] hashIds) {

  /** Tokens per trace block ({@code hash_ids} granularity of the Mooncake format). */
  public static final int TRACE_BLOCK = 512;
}
