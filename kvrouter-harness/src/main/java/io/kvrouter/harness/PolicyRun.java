package io.kvrouter.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What one policy's run of {@code bench fleet} measured, for the reports. Times in model
 * milliseconds unless a name says wall.
 *
 * <pre>
 * Implementation notes
 *
 * A plain mutable record of one run, filled on the thread that runs the policy (FleetBench) by
 * the load (FleetLoad: counts, tokens, sorted latency arrays, makespan, imbalance), the end check
 * (EndCheck: indexProblems, blocksCompared), the lag probe (lagMs) and the gateways' figures
 * (FleetReads), then only read, by FleetReport and FleetHtmlReport. Latency arrays are sorted
 * ascending (Percentiles.pct needs it); maps are TreeMaps, so the reports list reasons in a
 * stable order. Unknown figures: routerLagMs and syncLagMs -1, syncApplied -1, imbalance NaN.
 * </pre>
 */
final class PolicyRun {
  String policy;
  int sent;
  int completed;
  int errors;
  double[] ttftMs;
  double[] itlMs;

  /**
   * Per answered request of two tokens or more: (last token - first token) / (tokens - 1), vLLM's
   * TPOT. Unlike the gaps of itlMs it holds when the client reads a stream late (a burst read makes
   * gaps of 0 and one long gap, not a shorter mean).
   */
  double[] tpotMs = new double[0];

  /** Token gaps read, and those shorter than FleetLoad.BURST_NANOS in wall time (read late). */
  long tokenGaps;

  long burstGaps;

  /** Per request, how late (wall ms) it was sent against its schedule, sorted. */
  double[] sendLateMs = new double[0];

  /** The gateways' abandoned event replays and sequence numbers never applied; -1 unknown. */
  long replaysAbandoned = -1;

  long eventsLost = -1;

  /** The machine's CPU over the run (/proc/stat), null where it cannot be read. */
  CpuSample.Usage cpu;

  /** Why the run's figures cannot be trusted (RunValidity); empty for a valid run. */
  List<String> invalid = new ArrayList<>();

  double[] e2eMs;
  long promptTokens;
  long cachedTokens;
  long predictedTokens;
  long outputTokens;
  double makespanSec;
  long eventsApplied;
  double settleMs;
  double[] lagMs = new double[0];

  /** The router's own mean event lag, publish to applied (its /metrics), -1 when unknown. */
  double routerLagMs = -1;

  /** Busiest engine's time-averaged requests in flight over the mean (client-side times). */
  double imbalance = Double.NaN;

  /** Sequence sync: changes the gateways applied from their peers, and the mean lag. */
  long syncApplied = -1;

  double syncLagMs = -1;

  /** Whether every gateway's count of peer requests in flight went back to 0 at the end. */
  boolean syncSettled = true;

  double wallSec;
  List<String> indexProblems = new ArrayList<>();
  Map<String, Integer> errorReasons = new TreeMap<>();

  /** Each failed request: its id, when it was due and sent, how long it ran, and why. */
  List<String> failed = new ArrayList<>();

  /** The gateways' attempts that failed before the first byte, by reason (their /metrics). */
  Map<String, Long> attemptFailures = new TreeMap<>();

  /** Requests the gateways sent again because a pooled connection expired as it was taken. */
  long staleResends;

  /**
   * bench fleet --admission only (null otherwise), per request in trace order: TTFT in model ms
   * (NaN: not answered), why it was not answered (FleetLoad's why, e.g. "status 429 queue_full";
   * null: answered), its served cost ((prompt - cached) + output tokens; 0: not answered), and when
   * its answer ended, in model seconds after the first request was due (NaN: not answered).
   */
  double[] requestTtftMs;

  String[] requestWhy;
  long[] requestServedTokens;
  double[] requestFinishSec;

  /**
   * bench fleet --admission: each request's prompt tokens and its engine's cached_tokens (0: not
   * answered).
   */
  long[] requestPromptTokens;

  long[] requestCachedTokens;

  /**
   * bench fleet --admission: the gateways' waits (kvrouter_gateway_queued_total plus
   * kvrouter_gateway_holder_waits_total), the queued ones and the refused ones (429 queue_full or
   * queue_timeout) by "band/tenant" label.
   */
  long gatewayWaits;

  Map<String, Long> queuedByBandTenant = new TreeMap<>();
  Map<String, Long> refusedByBandTenant = new TreeMap<>();

  /** bench fleet --admission --evict-lower-bands: evictions by "band/tenant" label. */
  Map<String, Long> evictedByBandTenant = new TreeMap<>();

  /** bench fleet --admission: 429 rate_limit_exceeded by tenant label (the gateway's count). */
  Map<String, Long> rateLimitedByTenant = new TreeMap<>();

  List<Long> pids = new ArrayList<>();
  long blocksCompared;
  boolean indexChecked = true;

  /** The engines' hit rate: cached prompt tokens over prompt tokens, 0 without any. */
  double hitRate() {
    return promptTokens == 0 ? 0 : (double) cachedTokens / promptTokens;
  }

  /** The router's predicted hit rate: predicted overlap tokens over prompt tokens. */
  double predictedRate() {
    return promptTokens == 0 ? 0 : (double) predictedTokens / promptTokens;
  }

  /** Requests answered per second of model time over the run's makespan. */
  double requestsPerSec() {
    return completed / makespanSec;
  }

  /** Output tokens per second of model time over the run's makespan. */
  double outputTokensPerSec() {
    return outputTokens / makespanSec;
  }
}
