package io.kvrouter.sim;

import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.HashSet;
import java.util.List;

/**
 * {@code simulate --load-factor X}: the speedup that offers a trace at X times the fleet's capacity
 * (docs/SIMULATION.md, "Admission and fair shares").
 *
 * <p>Capacity is the request rate the fleet sustains on this trace when every prompt's reusable
 * prefix is cached (the prefix of trace blocks that appeared earlier in the trace, as an unbounded
 * cache shared by the whole fleet would hold it): each rank prefills one prompt at a time and holds
 * at most {@code maxBatch} requests, so capacity = ranks × min(1 / mean prefill time, maxBatch /
 * mean time a request holds its slot (prefill + decode)), the means over the trace under the timing
 * model. Real caches hold less than the ideal one, so at factor X the fleet's real load is at least
 * X times what it can serve. Computed from the trace alone, in one pass.
 */
public final class LoadFactor {
  private LoadFactor() {}

  /** The fleet's capacity on {@code trace} in requests per second (above). */
  public static double capacity(List<TraceRequest> trace, TimingModel timing, int ranks) {
    int[] uncached = idealUncached(trace);
    double prefillSec = 0;
    double slotSec = 0;
    for (int i = 0; i < uncached.length; i++) {
      double p = timing.prefillNanos(uncached[i]) / 1e9;
      prefillSec += p;
      slotSec += p + timing.decodeNanos(trace.get(i).outputLength()) / 1e9;
    }
    int n = trace.size();
    return ranks * Math.min(n / prefillSec, timing.maxBatch() * n / slotSec);
  }

  /**
   * Each request's prompt tokens the ideal cache above does not hold: its prompt less the prefix of
   * trace blocks that appeared earlier in the trace (in trace order).
   */
  private static int[] idealUncached(List<TraceRequest> trace) {
    HashSet<Long> seen = new HashSet<>();
    int[] uncached = new int[trace.size()];
    for (int i = 0; i < uncached.length; i++) {
      TraceRequest r = trace.get(i);
      long[] h = r.hashIds();
      int lead = 0;
      while (lead < h.length && seen.contains(h[lead])) lead++;
      for (long x : h) seen.add(x);
      uncached[i] = Math.max(0, r.inputLength() - lead * TraceRequest.TRACE_BLOCK);
    }
    return uncached;
  }

  /**
   * The fleet's capacity on {@code trace} in cost tokens per second, the unit of the gateway's
   * token-rate limit and of the fair queue's cost: {@link #capacity} times the mean cost of a
   * request with the ideal cache above (its prompt less the reusable prefix, plus its output
   * tokens). Divided by the tenants, a fair share of the fleet to give each as {@code
   * --tenant-token-rate}.
   */
  public static double costCapacity(List<TraceRequest> trace, TimingModel timing, int ranks) {
    int[] uncached = idealUncached(trace);
    double cost = 0;
    for (int i = 0; i < uncached.length; i++) cost += uncached[i] + trace.get(i).outputLength();
    return capacity(trace, timing, ranks) * cost / trace.size();
  }

  /**
   * Prefill seconds the requests {@code i} with {@code include[i]} ask of the fleet: {@code [0]}
   * when every prompt's reusable prefix is cached (the ideal cache above, fed by every request of
   * the trace, included or not), {@code [1]} when nothing is cached.
   */
  public static double[] prefillSeconds(
      List<TraceRequest> trace, TimingModel timing, boolean[] include) {
    if (include.length != trace.size()) {
      throw new IllegalArgumentException(
          "include has " + include.length + " entries for " + trace.size() + " requests");
    }
    int[] uncached = idealUncached(trace);
    double ideal = 0;
    double cold = 0;
    for (int i = 0; i < uncached.length; i++) {
      if (!include[i]) continue;
      ideal += timing.prefillNanos(uncached[i]) / 1e9;
      cold += timing.prefillNanos(trace.get(i).inputLength()) / 1e9;
    }
    return new double[] {ideal, cold};
  }

  /** The trace's own request rate: requests per second of its timestamps. */
  public static double offeredRate(List<TraceRequest> trace) {
    double spanSec =
        (trace.get(trace.size() - 1).timestampMs() - trace.get(0).timestampMs()) / 1000.0;
    if (!(spanSec > 0)) {
      throw new IllegalArgumentException("--load-factor needs a trace that spans some time");
    }
    return trace.size() / spanSec;
  }

  /** The speedup that offers {@code trace} at {@code factor} times the fleet's capacity. */
  public static double speedup(
      List<TraceRequest> trace, TimingModel timing, int ranks, double factor) {
    if (!(factor > 0) || Double.isInfinite(factor)) {
      throw new IllegalArgumentException("--load-factor must be > 0, got " + factor);
    }
    return factor * capacity(trace, timing, ranks) / offeredRate(trace);
  }
}
