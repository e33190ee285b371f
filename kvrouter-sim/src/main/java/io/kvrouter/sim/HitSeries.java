package io.kvrouter.sim;

/**
 * Prompt tokens and cached tokens per slice of the trace's arrival span: the hit rate over time.
 *
 * <pre>
 * Implementation notes
 *
 * A fixed number of buckets over [first arrival, last arrival] of the trace, in trace
 * milliseconds; a request counts in the bucket of its arrival, whenever it is admitted or
 * finishes, so the series of every policy and of the pooled ceiling share one time axis. Three
 * parallel arrays (requests, prompt tokens, cached tokens) are written by the one thread that
 * runs the simulation, through add(), and read only after the run. Adding to it changes nothing
 * the simulation computes.
 * </pre>
 */
public final class HitSeries {
  private final double t0Ms;
  private final double spanMs;
  private final int[] requests;
  private final long[] promptTokens;
  private final long[] cachedTokens;

  /** {@code buckets} slices of the arrival span of a trace whose arrivals run t0Ms..t1Ms. */
  public HitSeries(double t0Ms, double t1Ms, int buckets) {
    if (buckets < 1) throw new IllegalArgumentException("buckets must be >= 1, got " + buckets);
    this.t0Ms = t0Ms;
    this.spanMs = Math.max(0, t1Ms - t0Ms);
    this.requests = new int[buckets];
    this.promptTokens = new long[buckets];
    this.cachedTokens = new long[buckets];
  }

  /** Counts one request that arrived at {@code arrivalMs} (trace time). */
  public void add(double arrivalMs, long prompt, long cached) {
    int n = requests.length;
    int b = spanMs == 0 ? 0 : (int) Math.floor((arrivalMs - t0Ms) / spanMs * n);
    b = Math.max(0, Math.min(n - 1, b));
    requests[b]++;
    promptTokens[b] += prompt;
    cachedTokens[b] += cached;
  }

  public int buckets() {
    return requests.length;
  }

  public int requests(int bucket) {
    return requests[bucket];
  }

  public long promptTokens(int bucket) {
    return promptTokens[bucket];
  }

  public long cachedTokens(int bucket) {
    return cachedTokens[bucket];
  }
}
