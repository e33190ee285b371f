package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The session table against a naive reference (a map of key → worker, last turn, stamp, origin):
 * seeded random binds, remote binds, turns and clock steps on a small key space. The reference
 * knows TTL and the remote ordering exactly; which key a full table evicts is Caffeine's choice
 * (W-TinyLFU), so the reference learns evictions by looking, and checks everything else: the table
 * never holds more than its bound, a key it holds has the reference's worker, a key whose TTL ran
 * out is gone, and the evictions it counts are exactly the keys that vanished before their TTL.
 */
class SessionTableModelTest {
  private static final class Entry {
    Worker worker;
    long lastTurn;
    long stamp;
    String origin;

    Entry(Worker worker, long lastTurn, long stamp, String origin) {
      this.worker = worker;
      this.lastTurn = lastTurn;
      this.stamp = stamp;
      this.origin = origin;
    }

    boolean loses(long otherStamp, String otherOrigin) {
      return otherStamp != stamp ? otherStamp > stamp : otherOrigin.compareTo(origin) > 0;
    }
  }

  @Test
  void theTableAgreesWithTheReference() {
    long evicted = 0;
    for (int run = 0; run < 20; run++) {
      long seed = new SplittableRandom().nextLong();
      try {
        evicted += run(seed);
      } catch (AssertionError e) {
        throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
      }
    }
    assertThat(evicted).as("key spaces past the bound evict").isPositive();
  }

  /** One seeded walk; returns the evictions it saw. */
  private static long run(long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    final long ttl = 1_000L + r.nextInt(10_000);
    final int bound = 1 + r.nextInt(40);
    final int keys = bound + 1 + r.nextInt(3 * bound);
    AtomicLong nanos = new AtomicLong(r.nextLong(1L << 40));
    AtomicLong metric = new AtomicLong();
    SessionTable t =
        new SessionTable(bound, Duration.ofNanos(ttl), nanos::get, "gw-b", metric::incrementAndGet);
    Map<String, Entry> ref = new HashMap<>();
    long vanished = 0;
    long wall = 1_000;
    for (int step = 0; step < 3_000; step++) {
      String key = SessionTable.key("m", "s" + r.nextInt(keys));
      Worker w = new Worker(1 + r.nextInt(4), r.nextInt(2));
      long now = nanos.get();
      Entry e = ref.get(key);
      boolean live = e != null && now - e.lastTurn < ttl;
      if (e != null && !live) ref.remove(key);
      switch (r.nextInt(6)) {
        case 0, 1 -> { // a turn: the proxy reads the binding
          SessionTable.Binding b = t.get(key);
          if (live) {
            assertThat(b).as("a live key the table holds (checked after every step)").isNotNull();
            assertThat(b.worker()).isEqualTo(e.worker);
            e.lastTurn = now;
          } else {
            assertThat(b).as("key %s: no binding or its TTL ran out", key).isNull();
          }
        }
        case 2, 3 -> { // routed here
          wall += r.nextInt(3); // the same millisecond now and then
          SessionTable.Binding b = t.bind(key, w, wall);
          if (live && e.worker.equals(w)) {
            assertThat(b).as("the same worker: no new binding").isNull();
            e.lastTurn = now;
          } else {
            long stamp = live ? Math.max(wall, e.stamp + 1) : wall;
            assertThat(b).isNotNull();
            assertThat(b.worker()).isEqualTo(w);
            assertThat(b.stamp()).isEqualTo(stamp);
            assertThat(b.only()).containsExactly(w.workerId());
            ref.put(key, new Entry(w, now, stamp, "gw-b"));
          }
        }
        case 4 -> { // another gateway's binding
          long stamp = wall - 2 + r.nextInt(5);
          String origin = r.nextBoolean() ? "gw-a" : "gw-c";
          boolean applied = t.bindRemote(key, w, stamp, origin);
          boolean wins = !live || e.loses(stamp, origin);
          assertThat(applied).as("remote (%d, %s) applied", stamp, origin).isEqualTo(wins);
          if (wins) ref.put(key, new Entry(w, now, stamp, origin));
          else e.lastTurn = now; // a compute that keeps the value still counts as an access
        }
        default -> nanos.addAndGet(r.nextLong(ttl / 3 + 1)); // time passes
      }
      // after every step: bounded, and each key the reference holds is in the table or was evicted
      assertThat(t.size()).as("held keys").isLessThanOrEqualTo(bound);
      long at = nanos.get();
      for (Iterator<Map.Entry<String, Entry>> it = ref.entrySet().iterator(); it.hasNext(); ) {
        Map.Entry<String, Entry> x = it.next();
        SessionTable.Binding b = t.peek(x.getKey());
        boolean stillLive = at - x.getValue().lastTurn < ttl;
        if (!stillLive) {
          assertThat(b).as("key %s past its TTL", x.getKey()).isNull();
          it.remove();
        } else if (b == null) {
          vanished++; // evicted for the bound
          it.remove();
        } else {
          assertThat(b.worker()).as("key %s", x.getKey()).isEqualTo(x.getValue().worker);
          assertThat(b.stamp()).isEqualTo(x.getValue().stamp);
          assertThat(b.origin()).isEqualTo(x.getValue().origin);
        }
      }
      assertThat(t.evictions()).as("evictions counted").isEqualTo(vanished);
      assertThat(metric.get()).as("the metric's count").isEqualTo(vanished);
    }
    return vanished;
  }
}
