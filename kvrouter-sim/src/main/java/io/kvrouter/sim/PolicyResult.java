package io.kvrouter.sim;

/**
 * What one policy did with the trace on a fresh fleet.
 *
 * @param policy the policy
 * @param requests requests in the trace
 * @param completed requests that finished
 * @param rejected requests larger than a rank's whole cache (never admitted)
 * @param promptTokens prompt tokens of the completed requests
 * @param cachedTokens of those, tokens the chosen rank's cache held at admission
 * @param routedOverlapTokens of those, tokens the router expected the chosen rank to hold
 * @param outputTokens output tokens of the completed requests
 * @param ttftMs time to first token of every completed request, ascending, in simulated ms
 * @param makespanSec simulated seconds from the first arrival to the last completion
 * @param meanLoad per rank, the time-averaged requests in flight over the makespan
 * @param prefillUtilisation per rank, the fraction of the makespan its prefill lane worked
 * @param load per-rank load over time
 * @param hits prompt and cached tokens of the completed requests per slice of the arrival span
 * @param eventsPublished KV events the engines published
 * @param eventsApplied KV events applied to the index (the router's, or in approximate mode the
 *     shadow index that is only verified)
 * @param verification the index-equals-caches check
 * @param wallNanos wall-clock time of the run
 * @param prediction how far the router's predicted hits were from the engines' (hybrid models only,
 *     else null)
 */
public record PolicyResult(
    Policy policy,
    int requests,
    int completed,
    int rejected,
    long promptTokens,
    long cachedTokens,
    long routedOverlapTokens,
    long outputTokens,
    double[] ttftMs,
    double makespanSec,
    double[] meanLoad,
    double[] prefillUtilisation,
    LoadSeries load,
    HitSeries hits,
    long eventsPublished,
    long eventsApplied,
    Verification verification,
    long wallNanos,
    Prediction prediction) {

  /**
   * The router's predictions against the engines' hits, over the completed requests.
   *
   * @param routedErrorTokens the sum of |overlap the router expected when routing - tokens the
   *     engine's cache served at admission|
   * @param admissionPredictedTokens the sum of what the router predicted for the chosen rank at the
   *     moment the engine admitted the request
   * @param admissionErrorTokens the sum of |that prediction - tokens served|: scoring exactness,
   *     without the changes between routing and admission
   */
  public record Prediction(
      long routedErrorTokens, long admissionPredictedTokens, long admissionErrorTokens) {}

  /** A result without prediction figures (a model of one KV cache group). */
  public PolicyResult(
      Policy policy,
      int requests,
      int completed,
      int rejected,
      long promptTokens,
      long cachedTokens,
      long routedOverlapTokens,
      long outputTokens,
      double[] ttftMs,
      double makespanSec,
      double[] meanLoad,
      double[] prefillUtilisation,
      LoadSeries load,
      HitSeries hits,
      long eventsPublished,
      long eventsApplied,
      Verification verification,
      long wallNanos) {
    this(
        policy,
        requests,
        completed,
        rejected,
        promptTokens,
        cachedTokens,
        routedOverlapTokens,
        outputTokens,
        ttftMs,
        makespanSec,
        meanLoad,
        prefillUtilisation,
        load,
        hits,
        eventsPublished,
        eventsApplied,
        verification,
        wallNanos,
        null);
  }

  /** Tokens served from cache / prompt tokens. */
  public double hitRate() {
    return promptTokens == 0 ? 0 : (double) cachedTokens / promptTokens;
  }

  /** The router's expected cached tokens / prompt tokens. */
  public double routedHitRate() {
    return promptTokens == 0 ? 0 : (double) routedOverlapTokens / promptTokens;
  }

  /** The {@code p}-th percentile (0..100, nearest rank) of TTFT in ms; NaN without requests. */
  public double ttftPercentile(double p) {
    return percentile(ttftMs, p);
  }

  /** Completed requests per simulated second. */
  public double requestsPerSec() {
    return makespanSec <= 0 ? 0 : completed / makespanSec;
  }

  /** Output tokens per simulated second. */
  public double outputTokensPerSec() {
    return makespanSec <= 0 ? 0 : outputTokens / makespanSec;
  }

  /** Load imbalance: the largest time-averaged load of a rank over the mean of all ranks. */
  public double imbalance() {
    double max = 0;
    double sum = 0;
    for (double l : meanLoad) {
      max = Math.max(max, l);
      sum += l;
    }
    return sum == 0 ? 1 : max / (sum / meanLoad.length);
  }

  /** The mean prefill utilisation over the ranks. */
  public double meanPrefillUtilisation() {
    double sum = 0;
    for (double u : prefillUtilisation) sum += u;
    return prefillUtilisation.length == 0 ? 0 : sum / prefillUtilisation.length;
  }

  public static double percentile(double[] sorted, double p) {
    if (sorted.length == 0) return Double.NaN;
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
  }
}
