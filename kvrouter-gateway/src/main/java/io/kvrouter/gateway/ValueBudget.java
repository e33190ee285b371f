package io.kvrouter.gateway;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The JSON values (messages, tools, chat_template_kwargs built as Java objects) that the requests
 * in flight hold at once, under a limit ({@link GatewayConfig#maxInflightValues()}).
 *
 * <pre>
 * Implementation notes
 *
 * One AtomicLong: take() adds with a compare-and-set loop only while the sum stays within the
 * limit; give() subtracts what take() added. Every request thread takes once after its parse and
 * gives back in a finally; readers (metrics, tests) read held().
 * </pre>
 */
final class ValueBudget {
  private final long limit;
  private final AtomicLong held = new AtomicLong();

  ValueBudget(long limit) {
    this.limit = limit;
  }

  long limit() {
    return limit;
  }

  long held() {
    return held.get();
  }

  /** Takes {@code n} values; false (nothing taken) when the sum would pass the limit. */
  boolean take(long n) {
    while (true) {
      long h = held.get();
      if (h + n > limit) return false;
      if (held.compareAndSet(h, h + n)) return true;
    }
  }

  void give(long n) {
    held.addAndGet(-n);
  }
}
