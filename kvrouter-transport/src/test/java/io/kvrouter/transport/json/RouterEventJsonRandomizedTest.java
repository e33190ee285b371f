package io.kvrouter.transport.json;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Seeded randomized round trips: random events → write → read → equal. The seed is printed on
 * failure; rerun one with {@code -Dkvrouter.test.seed=<seed>}.
 */
class RouterEventJsonRandomizedTest {
  private static final int EVENTS = 2_000;

  /** 64-bit values biased towards the edges that break naive u64 handling. */
  private static long u64(SplittableRandom r) {
    return switch (r.nextInt(8)) {
      case 0 -> 0L;
      case 1 -> -1L; // 2^64 - 1
      case 2 -> Long.MIN_VALUE; // 2^63
      case 3 -> Long.MAX_VALUE;
      case 4 -> r.nextLong(1_000);
      default -> r.nextLong();
    };
  }

  private static long[] u64s(SplittableRandom r, int n) {
    long[] out = new long[n];
    for (int i = 0; i < n; i++) out[i] = u64(r);
    return out;
  }

  static RouterEvent randomEvent(SplittableRandom r) {
    int dp = r.nextInt(4) == 0 ? r.nextInt(Integer.MAX_VALUE) + 1 : r.nextInt(4);
    Worker w = new Worker(u64(r), r.nextBoolean() ? 0 : dp);
    CacheEvent data =
        switch (r.nextInt(5)) {
          case 0 -> CacheEvent.cleared();
          case 1, 2 -> CacheEvent.removed(u64s(r, r.nextInt(40)));
          default -> {
            int n = 1 + r.nextInt(r.nextBoolean() ? 4 : 64);
            yield r.nextBoolean()
                ? CacheEvent.stored(u64(r), u64s(r, n), u64s(r, n))
                : CacheEvent.storedAtRoot(u64s(r, n), u64s(r, n));
          }
        };
    return new RouterEvent(w, u64(r), data);
  }

  @Test
  void randomEventsRoundTrip() {
    long seed = Long.getLong("kvrouter.test.seed", new SplittableRandom().nextLong());
    try {
      SplittableRandom r = new SplittableRandom(seed);
      List<RouterEvent> all = new ArrayList<>(EVENTS);
      for (int i = 0; i < EVENTS; i++) {
        RouterEvent e = randomEvent(r);
        all.add(e);
        String json = RouterEventJson.writeEvent(e);
        assertThat(json).as("event %d: %s", i, json).doesNotContain("-");
        assertThat(RouterEventJson.readEvent(json)).as("event %d: %s", i, json).isEqualTo(e);
        byte[] bytes = RouterEventJson.writeEventBytes(e);
        assertThat(bytes).isEqualTo(json.getBytes(StandardCharsets.UTF_8));
        assertThat(RouterEventJson.readEvent(bytes)).isEqualTo(e);
      }
      assertThat(RouterEventJson.readEvents(RouterEventJson.writeEvents(all))).isEqualTo(all);
    } catch (AssertionError | RuntimeException e) {
      throw new AssertionError(
          "randomized round trip failed with seed "
              + seed
              + " (rerun with -Dkvrouter.test.seed="
              + seed
              + ")",
          e);
    }
  }
}
