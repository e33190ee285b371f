package io.kvrouter.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What {@code bench fleet --engine-kind llama-cpp} measured for one policy, summed over its runs
 * (each run on fresh engines): the requests' results and the figures the reports print.
 *
 * <pre>
 * Implementation notes
 *
 * Filled on the bench's thread: add() appends one run's results (ChatLoad wrote each Result on
 * its request's thread before the load returned), then the reports only read. Times are wall
 * milliseconds at the client. The engine-reported hit rate is the sum of cached_tokens over the
 * sum of prompt_tokens of the answered requests; TTFT percentiles are nearest-rank
 * (Percentiles) over the answered requests.
 * </pre>
 */
final class ChatRun {
  /** One request's outcome; written by its request's thread only. */
  static final class Result {
    final int conversation;
    final int turn;
    final int systemPrompt;
    long worker = -1;
    int predicted;
    int prompt;
    int cached;
    int output;
    double ttftMs = Double.NaN;
    double e2eMs = Double.NaN;
    boolean ok;
    String why;

    Result(int conversation, int turn, int systemPrompt) {
      this.conversation = conversation;
      this.turn = turn;
      this.systemPrompt = systemPrompt;
    }
  }

  final String policy;
  final List<Result> results = new ArrayList<>();
  final List<Double> wallSec = new ArrayList<>();
  final List<Long> pids = new ArrayList<>();

  ChatRun(String policy) {
    this.policy = policy;
  }

  /** Adds one run's results and its wall time. */
  void add(Result[] run, double wall) {
    results.addAll(List.of(run));
    wallSec.add(wall);
  }

  int requests() {
    return results.size();
  }

  int answered() {
    int n = 0;
    for (Result r : results) if (r.ok) n++;
    return n;
  }

  long promptTokens() {
    long n = 0;
    for (Result r : results) if (r.ok) n += r.prompt;
    return n;
  }

  long cachedTokens() {
    long n = 0;
    for (Result r : results) if (r.ok) n += r.cached;
    return n;
  }

  long predictedTokens() {
    long n = 0;
    for (Result r : results) if (r.ok) n += Math.min(r.predicted, r.prompt);
    return n;
  }

  /** Engine-reported hit rate: cached over prompt tokens, 0 without any. */
  double hitRate() {
    long p = promptTokens();
    return p == 0 ? 0 : (double) cachedTokens() / p;
  }

  /** The router's predicted overlap over prompt tokens. */
  double predictedRate() {
    long p = promptTokens();
    return p == 0 ? 0 : (double) predictedTokens() / p;
  }

  /** The answered requests' TTFTs, ascending. */
  double[] ttftMs() {
    List<Double> v = new ArrayList<>();
    for (Result r : results) if (r.ok) v.add(r.ttftMs);
    return Percentiles.sorted(v);
  }

  double meanTtftMs() {
    double[] t = ttftMs();
    double s = 0;
    for (double x : t) s += x;
    return t.length == 0 ? Double.NaN : s / t.length;
  }

  /** Answered requests per engine (the gateway's x-kvrouter-worker). */
  Map<Long, Integer> byEngine() {
    Map<Long, Integer> m = new TreeMap<>();
    for (Result r : results) if (r.ok) m.merge(r.worker, 1, Integer::sum);
    return m;
  }

  /** Failed requests by reason. */
  Map<String, Integer> errors() {
    Map<String, Integer> m = new TreeMap<>();
    for (Result r : results) if (!r.ok) m.merge(r.why == null ? "unknown" : r.why, 1, Integer::sum);
    return m;
  }
}
