package io.kvrouter.sim;

import java.util.Arrays;
import java.util.function.IntPredicate;

/**
 * What one {@link AdmissionSimulation} run measured: outcomes, TTFT of the high band and of each
 * tenant (answered requests; a refused request has no TTFT), served cost per tenant, goodput.
 *
 * @param label the run's name in reports (its mode, and "no heavy" / "unloaded" for baselines)
 * @param mode the admission mode
 * @param sent requests in the run
 * @param answered requests answered (their prefill and decode ran)
 * @param refusedFull 429 queue_full
 * @param refusedTimeout 429 queue_timeout
 * @param engineRejected requests an engine could never admit (prompt above a rank's pool)
 * @param lost requests neither answered nor refused (must be 0)
 * @param waited requests that waited in the queue
 * @param sentPerTenant requests per tenant
 * @param highTtftMs TTFT of answered high-priority requests (any order)
 * @param tenantTtftMs per tenant, TTFT of its answered requests (any order)
 * @param servedCost per tenant, (prompt - cached) + output tokens of requests finished within the
 *     arrival span
 * @param queueWaitMs per tenant, the total time its answered requests waited in the queue
 * @param good answered requests with TTFT within the SLO
 * @param arrivalSpanSec simulated seconds from the first arrival to the last
 * @param makespanSec simulated seconds from the first arrival to the last finish
 * @param hitRate cached prompt tokens over prompt tokens of answered requests
 * @param tenantHitRate per tenant, the same over its answered requests (0 when none)
 * @param speedup the trace's timestamps were divided by this
 * @param rateRefused per tenant, per band (0 high, 1 normal), the 429 rate_limit_exceeded
 * @param wallNanos wall time of the run
 * @param evictions what eviction of in-flight lower-band work did ({@link Evictions#NONE} when off)
 * @param otherHighTtftMs TTFT of answered high-priority requests of every tenant but t0 (any
 *     order): the high band without the heavy tenant's
 */
public record AdmissionResult(
    String label,
    AdmissionSimulation.Mode mode,
    int sent,
    int answered,
    int refusedFull,
    int refusedTimeout,
    int engineRejected,
    int lost,
    int waited,
    int[] sentPerTenant,
    double[] highTtftMs,
    double[][] tenantTtftMs,
    double[] servedCost,
    double[] queueWaitMs,
    int good,
    double arrivalSpanSec,
    double makespanSec,
    double hitRate,
    double[] tenantHitRate,
    double speedup,
    int[][] rateRefused,
    long wallNanos,
    Evictions evictions,
    double[] otherHighTtftMs) {

  /**
   * What eviction of in-flight lower-band work did in a run.
   *
   * @param perTenantBand per tenant, per band (0 high, 1 normal): evictions (a request evicted
   *     twice counts twice)
   * @param requests distinct requests evicted at least once
   * @param answered of those, answered in the end
   * @param refused of those, refused in the end (429: their wait bound, from their original
   *     arrival, passed while they waited again)
   * @param wastedPrefillTokens prefill tokens the engines had computed for the evicted attempts
   */
  public record Evictions(
      int[][] perTenantBand, int requests, int answered, int refused, long wastedPrefillTokens) {

    /** Eviction off. */
    public static final Evictions NONE = new Evictions(new int[0][], 0, 0, 0, 0);

    /** Evictions in all. */
    public int total() {
      int n = 0;
      for (int[] bands : perTenantBand) for (int x : bands) n += x;
      return n;
    }

    /** Tenant {@code t}'s evictions in band {@code band}. */
    public int of(int t, int band) {
      return perTenantBand[t][band];
    }
  }

  /** Without eviction, without the high band split by tenant ({@link #otherHighTtftMs()} empty). */
  public AdmissionResult(
      String label,
      AdmissionSimulation.Mode mode,
      int sent,
      int answered,
      int refusedFull,
      int refusedTimeout,
      int engineRejected,
      int lost,
      int waited,
      int[] sentPerTenant,
      double[] highTtftMs,
      double[][] tenantTtftMs,
      double[] servedCost,
      double[] queueWaitMs,
      int good,
      double arrivalSpanSec,
      double makespanSec,
      double hitRate,
      double[] tenantHitRate,
      double speedup,
      int[][] rateRefused,
      long wallNanos) {
    this(
        label,
        mode,
        sent,
        answered,
        refusedFull,
        refusedTimeout,
        engineRejected,
        lost,
        waited,
        sentPerTenant,
        highTtftMs,
        tenantTtftMs,
        servedCost,
        queueWaitMs,
        good,
        arrivalSpanSec,
        makespanSec,
        hitRate,
        tenantHitRate,
        speedup,
        rateRefused,
        wallNanos,
        Evictions.NONE,
        new double[0]);
  }

  public AdmissionResult {
    highTtftMs = sorted(highTtftMs);
    otherHighTtftMs = sorted(otherHighTtftMs);
    double[][] t = new double[tenantTtftMs.length][];
    for (int i = 0; i < t.length; i++) t[i] = sorted(tenantTtftMs[i]);
    tenantTtftMs = t;
  }

  /**
   * The TTFTs ({@code ttftMs[i]}) of the answered requests of the high band (band 0), of every
   * tenant or, with {@code withoutT0}, of every tenant but t0: the high band's figures of a run,
   * from its per-request outcomes (simulate's and bench fleet's alike).
   */
  public static double[] highBandTtftMs(
      TenantRule.Assignment a, double[] ttftMs, IntPredicate answered, boolean withoutT0) {
    int n = 0;
    for (int i = 0; i < ttftMs.length; i++) {
      if (a.band()[i] == 0 && !(withoutT0 && a.tenant()[i] == 0) && answered.test(i)) n++;
    }
    double[] out = new double[n];
    int k = 0;
    for (int i = 0; i < ttftMs.length; i++) {
      if (a.band()[i] == 0 && !(withoutT0 && a.tenant()[i] == 0) && answered.test(i)) {
        out[k++] = ttftMs[i];
      }
    }
    return out;
  }

  private static double[] sorted(double[] x) {
    double[] c = x.clone();
    Arrays.sort(c);
    return c;
  }

  /** 429s: queue full, waited too long, or over the tenant's token rate. */
  public int refused() {
    return refusedFull + refusedTimeout + refusedRate();
  }

  /** 429 rate_limit_exceeded: refused at arrival by their tenant's token rate. */
  public int refusedRate() {
    int n = 0;
    for (int[] bands : rateRefused) n += bands[0] + bands[1];
    return n;
  }

  /** Tenant {@code t}'s 429 rate_limit_exceeded in band {@code band}. */
  public int rateRefused(int t, int band) {
    return rateRefused[t][band];
  }

  /** Whether every request was answered or refused (engine rejections are answered with errors). */
  public boolean nothingLost() {
    return lost == 0 && answered + refused() + engineRejected == sent;
  }

  /** The {@code p}-th percentile (nearest rank) of the high band's TTFT in ms; NaN when none. */
  public double highTtft(double p) {
    return PolicyResult.percentile(highTtftMs, p);
  }

  /**
   * The {@code p}-th percentile of the high band's TTFT in ms without t0's requests; NaN when none.
   */
  public double otherHighTtft(double p) {
    return PolicyResult.percentile(otherHighTtftMs, p);
  }

  /** The {@code p}-th percentile of tenant {@code t}'s TTFT in ms; NaN when none answered. */
  public double tenantTtft(int t, double p) {
    return PolicyResult.percentile(tenantTtftMs[t], p);
  }

  /** Mean queue wait of tenant {@code t}'s answered requests in ms; NaN when none answered. */
  public double meanQueueWaitMs(int t) {
    return tenantTtftMs[t].length == 0 ? Double.NaN : queueWaitMs[t] / tenantTtftMs[t].length;
  }

  /** Jain's fairness index of the tenants' served cost (all tenants weigh the same). */
  public double jain() {
    return jain(servedCost);
  }

  /** Requests answered within the TTFT SLO per simulated second of the arrival span. */
  public double goodput() {
    return arrivalSpanSec <= 0 ? good : good / arrivalSpanSec;
  }

  /**
   * Jain's fairness index (Jain, Chiu and Hawe, 1984): {@code (Σx)² / (n · Σx²)}, 1 when all are
   * equal, {@code 1/n} when one has everything; NaN for no values, 1 when all are 0.
   */
  public static double jain(double[] x) {
    if (x.length == 0) return Double.NaN;
    double sum = 0;
    double sq = 0;
    for (double v : x) {
      if (!(v >= 0) || Double.isInfinite(v)) {
        throw new IllegalArgumentException("shares must be finite and >= 0, got " + v);
      }
      sum += v;
      sq += v * v;
    }
    return sq == 0 ? 1.0 : sum * sum / (x.length * sq);
  }
}
