package io.kvrouter.harness;

import java.util.Arrays;
import java.util.List;

/** Nearest-rank percentiles over sorted samples, as {@code simulate}'s. */
final class Percentiles {
  private Percentiles() {}

  /** The nearest-rank {@code p}-th percentile of ascending {@code sorted}; NaN when empty. */
  static double pct(double[] sorted, double p) {
    if (sorted.length == 0) return Double.NaN;
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }

  /** {@code v} as an ascending array. */
  static double[] sorted(List<Double> v) {
    double[] a = new double[v.size()];
    for (int i = 0; i < a.length; i++) a[i] = v.get(i);
    Arrays.sort(a);
    return a;
  }
}
