package io.kvrouter.admission;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * A token bucket that may go into debt: it holds at most {@code burst} tokens and refills at {@code
 * tokensPerSecond}; a request of cost {@code c} is let through when the bucket holds at least
 * {@code min(c, burst)} tokens and then takes all of {@code c}, so a request larger than the burst
 * passes when the bucket is full and leaves it in debt, which later requests wait off.
 *
 * <pre>
 * Implementation notes
 *
 * Data: one AtomicLong, tat, the clock's time (nanos) at which the bucket is full again (the
 * generic cell rate algorithm's theoretical arrival time). The level at time now is
 * burst - max(0, tat - now) / nsPerToken: tat at or before now is a full bucket, tat ahead of now
 * by burst's worth an empty one, further ahead a debt.
 *
 * Who writes: any thread, by compare-and-set of tat (tryTake, adjust); no lock, no allocation.
 * Who reads: the same, and available() for tests and messages.
 *
 * Invariants: only differences of clock readings are used (tat - now), so a clock that starts
 * anywhere (System.nanoTime may be negative) or wraps works; how far tat runs ahead of now is
 * capped at MAX_AHEAD (2^61 ns, about 73 years), and a cost in nanos is capped at it before it
 * is added, so no sum overflows. A clock that goes backwards reads as no time passed.
 * </pre>
 */
public final class TokenBucket {
  /** The most a bucket's debt (in nanos of refill) may reach: about 73 years. */
  static final long MAX_AHEAD = 1L << 61;

  private final double nsPerToken;
  private final double burst;
  private final long tau;
  private final LongSupplier clock;
  private final AtomicLong tat;

  /**
   * A full bucket.
   *
   * @param tokensPerSecond the refill rate (finite, > 0)
   * @param burst the most tokens it holds (finite, >= 1)
   * @param nanoClock the time in nanoseconds (System::nanoTime; a test's own clock)
   */
  public TokenBucket(double tokensPerSecond, double burst, LongSupplier nanoClock) {
    if (!(tokensPerSecond > 0) || Double.isInfinite(tokensPerSecond)) {
      throw new IllegalArgumentException(
          "tokensPerSecond must be finite and > 0, got " + tokensPerSecond);
    }
    if (!(burst >= 1) || Double.isInfinite(burst)) {
      throw new IllegalArgumentException("burst must be finite and >= 1, got " + burst);
    }
    this.nsPerToken = 1e9 / tokensPerSecond;
    this.burst = burst;
    this.tau = nanos(burst);
    this.clock = nanoClock;
    this.tat = new AtomicLong(nanoClock.getAsLong());
  }

  /** {@code tokens} (>= 0) as nanos of refill, rounded up, at most {@link #MAX_AHEAD}. */
  private long nanos(double tokens) {
    double ns = Math.ceil(tokens * nsPerToken);
    return ns >= MAX_AHEAD ? MAX_AHEAD : (long) ns;
  }

  /**
   * Takes {@code cost} tokens if the bucket holds at least {@code min(cost, burst)}.
   *
   * @return 0 when taken; otherwise the nanos until it would be (> 0), nothing taken
   * @throws IllegalArgumentException for a negative cost
   */
  public long tryTake(long cost) {
    if (cost < 0) throw new IllegalArgumentException("cost must be >= 0, got " + cost);
    long need = nanos(Math.min(cost, burst));
    long charge = nanos(cost);
    while (true) {
      long now = clock.getAsLong();
      long t = tat.get();
      long ahead = Math.max(0, t - now);
      long over = ahead + need - tau;
      if (over > 0) return over;
      long next = Math.min(ahead + charge, MAX_AHEAD);
      if (tat.compareAndSet(t, now + next)) return 0;
    }
  }

  /**
   * Charges {@code delta} more tokens (> 0: into debt if need be) or gives {@code -delta} back
   * (never above the burst): what a request really cost, less what {@link #tryTake} charged.
   */
  public void adjust(long delta) {
    if (delta == 0) return;
    long ns = delta > 0 ? nanos(delta) : -nanos(-(double) delta);
    while (true) {
      long now = clock.getAsLong();
      long t = tat.get();
      long ahead = Math.max(0, t - now);
      long next = Math.max(0, Math.min(ahead + ns, MAX_AHEAD));
      if (tat.compareAndSet(t, now + next)) return;
    }
  }

  /** The tokens it holds now: at most the burst, below 0 while in debt. */
  public double available() {
    long ahead = Math.max(0, tat.get() - clock.getAsLong());
    return burst - ahead / nsPerToken;
  }

  /** The most tokens it holds. */
  public double burst() {
    return burst;
  }
}
