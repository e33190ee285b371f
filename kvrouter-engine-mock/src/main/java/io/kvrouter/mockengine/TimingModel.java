package io.kvrouter.mockengine;

/**
 * The mock engine's clock: how long a prefill and a decode take, and how many requests run at once.
 * Times are simulated nanoseconds.
 *
 * <ul>
 *   <li>Prefill of a request takes {@code prefillBaseMs + uncachedTokens / 1000 ×
 *       prefillMsPer1kTokens}, where {@code uncachedTokens} are the prompt tokens the engine's
 *       prefix cache did not hold when the request was admitted. An engine prefills one request at
 *       a time, in admission order (a FIFO prefill lane).
 *   <li>The first output token comes out when the prefill ends: TTFT = prefill end − arrival.
 *   <li>Each further output token takes {@code decodeMsPerToken}; decodes of the requests in the
 *       batch run side by side, so a request occupies its batch slot and its KV blocks for {@code
 *       (outputTokens − 1) × decodeMsPerToken} after its prefill.
 *   <li>At most {@code maxBatch} requests are admitted (prefilling or decoding) at once; the rest
 *       wait in a FIFO queue, as does a request whose blocks the cache cannot hold until other
 *       requests release theirs.
 * </ul>
 *
 * @param prefillBaseMs fixed cost of every prefill (scheduling, one forward pass)
 * @param prefillMsPer1kTokens prefill cost per 1,000 uncached prompt tokens
 * @param decodeMsPerToken time per output token after the first
 * @param maxBatch requests admitted at once per engine rank
 */
public record TimingModel(
    double prefillBaseMs, double prefillMsPer1kTokens, double decodeMsPerToken, int maxBatch) {

  public TimingModel {
    if (!(prefillBaseMs >= 0) || !(prefillMsPer1kTokens >= 0) || !(decodeMsPerToken >= 0)) {
      throw new IllegalArgumentException("timing parameters must be >= 0");
    }
    if (maxBatch < 1) {
      throw new IllegalArgumentException("maxBatch must be >= 1, got " + maxBatch);
    }
  }

  /** Nanoseconds to prefill {@code uncachedTokens} prompt tokens. */
  public long prefillNanos(int uncachedTokens) {
    return Math.round((prefillBaseMs + uncachedTokens * prefillMsPer1kTokens / 1000.0) * 1e6);
  }

  /** Nanoseconds from the first output token to the last of {@code outputTokens}. */
  public long decodeNanos(int outputTokens) {
    return Math.round(Math.max(0, outputTokens - 1) * decodeMsPerToken * 1e6);
  }
}
