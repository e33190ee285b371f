package io.kvrouter.admission;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link TokenBucket} on a clock the test moves: refill, the burst, the wait it reports, debt and
 * refunds, and no overflow at the clock's extremes or with huge costs. At 100 tokens per second a
 * token is 10 ms of refill exactly, so every expected value is worked out by hand.
 */
class TokenBucketTest {
  private static final long MS = 1_000_000L;
  private static final long SEC = 1_000_000_000L;

  /** A clock the test sets. */
  private static final class Clock {
    long now;

    Clock(long start) {
      now = start;
    }
  }

  @Test
  void aFullBucketGivesItsBurstThenRefillsAtItsRate() {
    Clock c = new Clock(123 * SEC);
    TokenBucket b = new TokenBucket(100, 1000, () -> c.now);
    assertThat(b.available()).isEqualTo(1000.0);
    assertThat(b.tryTake(600)).isZero();
    assertThat(b.tryTake(400)).isZero();
    assertThat(b.available()).isEqualTo(0.0);
    // one more token is 10 ms away
    assertThat(b.tryTake(1)).isEqualTo(10 * MS);
    c.now += 2 * SEC; // 200 tokens back
    assertThat(b.available()).isEqualTo(200.0);
    assertThat(b.tryTake(300)).as("100 tokens short: 1 s").isEqualTo(SEC);
    assertThat(b.available()).as("a refused take takes nothing").isEqualTo(200.0);
    assertThat(b.tryTake(200)).isZero();
    c.now += 60 * SEC; // long idle: full again, never above the burst
    assertThat(b.available()).isEqualTo(1000.0);
  }

  @Test
  void aRequestLargerThanTheBurstPassesOnAFullBucketAndLeavesADebt() {
    Clock c = new Clock(0);
    TokenBucket b = new TokenBucket(100, 1000, () -> c.now);
    assertThat(b.tryTake(10)).isZero();
    // not full: a 3000-token request needs the whole burst (1000), 10 tokens are missing
    assertThat(b.tryTake(3000)).isEqualTo(100 * MS);
    c.now += 100 * MS;
    assertThat(b.tryTake(3000)).isZero();
    assertThat(b.available()).isEqualTo(-2000.0);
    // the next 1-token request waits for the debt (2000) and its own token: 20.01 s
    assertThat(b.tryTake(1)).isEqualTo(20 * SEC + 10 * MS);
  }

  @Test
  void adjustChargesMoreOrGivesBackButNeverAboveTheBurst() {
    Clock c = new Clock(-5 * SEC); // System.nanoTime may be negative
    TokenBucket b = new TokenBucket(100, 1000, () -> c.now);
    assertThat(b.tryTake(800)).isZero();
    b.adjust(-300); // cost less than charged
    assertThat(b.available()).isEqualTo(500.0);
    b.adjust(700); // cost more: into debt
    assertThat(b.available()).isEqualTo(-200.0);
    b.adjust(-5000); // a refund fills it, no more
    assertThat(b.available()).isEqualTo(1000.0);
    b.adjust(0);
    assertThat(b.available()).isEqualTo(1000.0);
    assertThatThrownBy(() -> b.tryTake(-1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aClockThatWrapsOrGoesBackDoesNotBreakIt() {
    Clock c = new Clock(Long.MAX_VALUE - 500 * MS);
    TokenBucket b = new TokenBucket(100, 1000, () -> c.now);
    assertThat(b.tryTake(1000)).isZero();
    c.now += SEC; // wraps past Long.MAX_VALUE
    assertThat(c.now).isNegative();
    assertThat(b.available()).isEqualTo(100.0);
    assertThat(b.tryTake(100)).isZero();
    assertThat(b.tryTake(1)).isEqualTo(10 * MS);
    c.now -= 10 * SEC; // backwards: no refill, no crash
    assertThat(b.available()).isLessThanOrEqualTo(0.0);
    assertThat(b.tryTake(1)).isPositive();
  }

  @Test
  void hugeCostsAndRatesNeitherOverflowNorTurnNegative() {
    Clock c = new Clock(Long.MAX_VALUE - SEC);
    TokenBucket slow = new TokenBucket(1e-3, 1, () -> c.now); // a token per 1000 s
    assertThat(slow.tryTake(Long.MAX_VALUE)).isZero(); // full: passes, debt capped
    long wait = slow.tryTake(1);
    assertThat(wait).isPositive().isLessThanOrEqualTo(TokenBucket.MAX_AHEAD + 1000 * SEC);
    slow.adjust(Long.MAX_VALUE);
    slow.adjust(Long.MIN_VALUE); // a refund of everything: full again
    assertThat(slow.available()).isEqualTo(1.0);

    TokenBucket fast = new TokenBucket(1e12, 1e12, () -> c.now);
    SplittableRandom rnd = new SplittableRandom(7);
    for (int i = 0; i < 10_000; i++) {
      long cost = rnd.nextLong(0, Long.MAX_VALUE);
      long w = fast.tryTake(cost);
      assertThat(w).isNotNegative().isLessThanOrEqualTo(2 * TokenBucket.MAX_AHEAD);
      c.now += rnd.nextLong(0, SEC);
    }
  }

  @Test
  void overAnyRunItLetsThroughAtMostTheBurstPlusTheRefillPlusOneRequestsExcess() {
    for (int seed = 0; seed < 50; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      double rate = 1 + rnd.nextInt(1000);
      double burst = 1 + rnd.nextInt(5000);
      long t0 = rnd.nextLong();
      Clock c = new Clock(t0);
      TokenBucket b = new TokenBucket(rate, burst, () -> c.now);
      double taken = 0;
      int passed = 0;
      for (int i = 0; i < 2000; i++) {
        c.now += rnd.nextLong(0, 200 * MS);
        long cost = rnd.nextInt(10) == 0 ? rnd.nextLong(0, 3 * (long) burst) : rnd.nextLong(0, 100);
        if (b.tryTake(cost) == 0) {
          passed++;
          taken += cost;
          double elapsed = (c.now - t0) / 1e9;
          // one nanosecond of rounding per request taken, at most
          assertThat(taken)
              .isLessThanOrEqualTo(
                  burst + rate * elapsed + Math.max(0, cost - burst) + passed * rate / 1e9 + 1e-6);
        }
      }
      assertThat(passed).as("seed %d lets some through", seed).isPositive();
    }
  }

  @Test
  void badSettingsAreRefused() {
    assertThatThrownBy(() -> new TokenBucket(0, 10, () -> 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tokensPerSecond");
    assertThatThrownBy(() -> new TokenBucket(Double.NaN, 10, () -> 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new TokenBucket(10, 0.5, () -> 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("burst");
  }
}
