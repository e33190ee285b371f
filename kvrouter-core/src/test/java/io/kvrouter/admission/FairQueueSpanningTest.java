package io.kvrouter.admission;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Seeded model-based and property tests of {@link FairQueue} with tenant shares spanning the bands
 * ({@link FairQueue.Config#sharesSpanBands()}): every call sequence (offers, polls, cancels,
 * expiries, corrections) against a naive model written from the rule in docs/routing.md, then the
 * rule's guarantees checked on the queue alone: shares of served cost across bands, a heavy
 * tenant's high band not delaying a light tenant's normal band beyond the slack, strict bands among
 * tenants within their share, the starvation bound, FIFO per tenant and band, cancellation, and
 * memory bounded by the depth. No clock but the numbers passed in.
 */
class FairQueueSpanningTest {
  private static final long SEC = 1_000_000_000L;
  private static final int SEEDS = 50;

  record Req(int id, int band, String tenant, double cost) {}

  private static FairQueue<Req> queue(int bands, int depth, int starvation, double slack) {
    return new FairQueue<>(
        new FairQueue.Config(bands, depth, 10 * SEC, starvation).withSharesSpanningBands(slack));
  }

  /** The rule, written plainly: linear scans, no sorted sets. */
  static final class Model {
    final int bands;
    final int depth;
    final int limit;
    final double slack;
    final List<Object[]> waiting = new ArrayList<>(); // {Req, seq, arrival}
    final Map<String, Double> clock = new HashMap<>();
    final Map<String, Double> weight = new HashMap<>();
    final Map<String, Double> debt = new LinkedHashMap<>();
    final int[] passed;
    double v;
    long seq;

    Model(int bands, int depth, int limit, double slack) {
      this.bands = bands;
      this.depth = depth;
      this.limit = limit;
      this.slack = slack;
      passed = new int[bands];
    }

    boolean waits(String t) {
      for (Object[] x : waiting) if (((Req) x[0]).tenant().equals(t)) return true;
      return false;
    }

    double least() {
      double m = Double.POSITIVE_INFINITY;
      for (Object[] x : waiting) m = Math.min(m, clock.get(((Req) x[0]).tenant()));
      return waiting.isEmpty() ? v : m;
    }

    boolean offer(Req r, double w, long now) {
      if (waiting.size() >= depth) return false;
      if (!waits(r.tenant())) {
        double c = least();
        Double d = debt.remove(r.tenant());
        if (d != null) c += d / w;
        clock.put(r.tenant(), c);
      }
      weight.put(r.tenant(), w);
      waiting.add(new Object[] {r, seq++, now});
      return true;
    }

    int live(int band) {
      int n = 0;
      for (Object[] x : waiting) if (((Req) x[0]).band() == band) n++;
      return n;
    }

    Req poll() {
      if (waiting.isEmpty()) return null;
      int chosen = -1;
      if (limit > 0) {
        for (int b = bands - 1; b >= 0; b--) {
          if (live(b) > 0 && passed[b] >= limit) {
            chosen = b;
            break;
          }
        }
      }
      if (chosen < 0) {
        double within = least() + slack;
        for (int b = 0; b < bands && chosen < 0; b++) {
          for (Object[] x : waiting) {
            Req r = (Req) x[0];
            if (r.band() == b && clock.get(r.tenant()) <= within) chosen = b;
          }
        }
      }
      for (int b = chosen + 1; b < bands; b++) if (live(b) > 0) passed[b]++;
      passed[chosen] = 0;
      Object[] best = null;
      for (Object[] x : waiting) {
        Req r = (Req) x[0];
        if (r.band() != chosen) continue;
        if (best == null) {
          best = x;
          continue;
        }
        int c = Double.compare(clock.get(r.tenant()), clock.get(((Req) best[0]).tenant()));
        if (c < 0 || (c == 0 && (long) x[1] < (long) best[1])) best = x;
      }
      Req r = (Req) best[0];
      waiting.remove(best);
      v = clock.get(r.tenant());
      clock.put(r.tenant(), v + r.cost() / weight.get(r.tenant()));
      left(r.tenant());
      return r;
    }

    void left(String t) {
      if (waits(t)) return;
      double lead = clock.remove(t) - least();
      if (lead > 0) debt.merge(t, lead * weight.get(t), Double::sum);
    }

    boolean cancel(int id) {
      for (Object[] x : waiting) {
        Req r = (Req) x[0];
        if (r.id() != id) continue;
        waiting.remove(x);
        if (live(r.band()) == 0) passed[r.band()] = 0;
        left(r.tenant());
        return true;
      }
      return false;
    }

    List<Integer> expire(long now) {
      List<Integer> out = new ArrayList<>();
      for (Object[] x : new ArrayList<>(waiting)) {
        if (now - (long) x[2] >= 10 * SEC) {
          out.add(((Req) x[0]).id());
          cancel(((Req) x[0]).id());
        }
      }
      return out;
    }

    void charge(String t, double d) {
      if (d == 0) return;
      if (waits(t)) clock.put(t, clock.get(t) + d / weight.get(t));
      else debt.merge(t, d, Double::sum);
    }
  }

  @Test
  void everyCallSequenceMatchesTheModel() {
    for (int seed = 0; seed < 200; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      int bands = rnd.nextInt(1, 4);
      int limit = rnd.nextInt(3) == 0 ? rnd.nextInt(1, 4) : 0;
      double slack = rnd.nextInt(3) == 0 ? 0 : rnd.nextInt(1, 2000);
      int depth = rnd.nextInt(5, 200);
      FairQueue<Req> q = queue(bands, depth, limit, slack);
      Model m = new Model(bands, depth, limit, slack);
      Map<Integer, FairQueue.Ticket<Req>> tickets = new HashMap<>();
      long now = 0;
      int id = 0;
      for (int step = 0; step < 1500; step++) {
        now += rnd.nextLong(SEC / 2);
        int op = rnd.nextInt(20);
        String ctx = "seed " + seed + " step " + step;
        if (op < 10) {
          int t = rnd.nextInt(5);
          Req r = new Req(id++, rnd.nextInt(bands), "t" + t, rnd.nextInt(0, 1000));
          FairQueue.Ticket<Req> e = q.offer(r, r.band(), r.tenant(), 1 + t % 3, r.cost(), now);
          assertThat(e != null).as(ctx).isEqualTo(m.offer(r, 1 + t % 3, now));
          if (e != null) tickets.put(r.id(), e);
        } else if (op < 16) {
          FairQueue.Ticket<Req> e = q.poll();
          Req r = m.poll();
          assertThat(e == null ? null : e.item()).as(ctx).isEqualTo(r);
        } else if (op < 18 && id > 0) {
          int victim = rnd.nextInt(id);
          FairQueue.Ticket<Req> e = tickets.get(victim);
          boolean did = e != null && q.cancel(e);
          assertThat(did).as(ctx + " cancel %d", victim).isEqualTo(m.cancel(victim));
        } else if (op < 19) {
          List<Integer> gone = new ArrayList<>();
          for (FairQueue.Ticket<Req> e : q.expire(now)) gone.add(e.item().id());
          assertThat(gone).as(ctx + " expire").isEqualTo(m.expire(now));
        } else {
          String t = "t" + rnd.nextInt(5);
          double d = rnd.nextInt(-500, 500);
          q.charge(rnd.nextInt(bands), t, d);
          m.charge(t, d);
        }
        assertThat(q.size()).as(ctx).isEqualTo(m.waiting.size());
      }
    }
  }

  @Test
  void tenantsWaitingInDifferentBandsShareServedCostByWeight() {
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      double slack = rnd.nextInt(0, 3000);
      FairQueue<Req> q = queue(3, 100_000, 0, slack);
      double[] weights = {1, 2, 3};
      double maxCost = 0;
      int id = 0;
      for (int i = 0; i < 2000; i++) {
        for (int t = 0; t < 3; t++) {
          double c = rnd.nextInt(1, 2000);
          maxCost = Math.max(maxCost, c);
          // t0 sends only high priority, t1 mixed, t2 only the lowest band
          int band = t == 0 ? 0 : t == 2 ? 2 : rnd.nextInt(3);
          q.offer(new Req(id++, band, "t" + t, c), band, "t" + t, weights[t], c, 0);
        }
      }
      double[] served = new double[3];
      for (int i = 0; i < 3000; i++) { // every tenant stays backlogged
        FairQueue.Ticket<Req> e = q.poll();
        served[e.item().tenant().charAt(1) - '0'] += e.item().cost();
      }
      for (int a = 0; a < 3; a++) {
        for (int b = 0; b < 3; b++) {
          double diff = Math.abs(served[a] / weights[a] - served[b] / weights[b]);
          assertThat(diff)
              .as("seed %d slack %s: normalised service of t%d and t%d", seed, slack, a, b)
              .isLessThanOrEqualTo(slack + maxCost / weights[a] + maxCost / weights[b]);
        }
      }
    }
  }

  @Test
  void aHeavyTenantsHighBandDelaysALightTenantsNormalBandByAtMostTheSlack() {
    // equal costs c and weights; slack = s·c: the light tenant's k-th request leaves within the
    // first 2k + s polls, though the heavy one sends ten times more, all of it high priority
    for (int s = 0; s <= 4; s++) {
      for (int seed = 0; seed < SEEDS; seed++) {
        SplittableRandom rnd = new SplittableRandom(seed * 7L + s);
        FairQueue<Req> q = queue(2, 100_000, 0, s * 100.0);
        int id = 0;
        List<Integer> light = new ArrayList<>();
        for (int i = 0; i < 1100; i++) {
          boolean isLight = rnd.nextInt(11) == 0;
          Req r = new Req(id++, isLight ? 1 : 0, isLight ? "light" : "heavy", 100);
          if (isLight) light.add(r.id());
          q.offer(r, r.band(), r.tenant(), 1, r.cost(), 0);
        }
        int k = 0;
        for (int poll = 1; k < light.size(); poll++) {
          FairQueue.Ticket<Req> e = q.poll();
          if (e.item().tenant().equals("light")) {
            k++;
            assertThat(poll)
                .as("slack %d seed %d: light request %d", s, seed, k)
                .isLessThanOrEqualTo(2 * k + s);
          }
        }
      }
    }
  }

  @Test
  void withinTheirShareBandsAreStrict() {
    // a tenant that never waited before and all costs 0: every account stays at the least clock,
    // so every tenant is within its share and no lower band leaves while a higher one waits
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      FairQueue<Req> q = queue(3, 1000, 0, 0);
      int[] waiting = new int[3];
      int id = 0;
      for (int step = 0; step < 400; step++) {
        if (rnd.nextInt(3) > 0) {
          int band = rnd.nextInt(3);
          String t = "t" + rnd.nextInt(4);
          q.offer(new Req(id++, band, t, 0), band, t, 1, 0, 0);
          waiting[band]++;
        } else {
          FairQueue.Ticket<Req> e = q.poll();
          if (e == null) continue;
          for (int b = 0; b < e.band(); b++) {
            assertThat(waiting[b]).as("seed %d: band %d waits", seed, b).isZero();
          }
          waiting[e.band()]--;
        }
      }
    }
  }

  @Test
  void aTenantOverItsShareWaitsWhateverItsBand() {
    // a has been served 5,000 more than b (slack 1,000): b's lowest-band requests leave before a's
    // high-band ones until b has caught up to within the slack
    FairQueue<Req> q = queue(2, 1000, 0, 1000);
    for (int i = 0; i < 5; i++) q.offer(new Req(i, 0, "a", 1000), 0, "a", 1, 1000, 0);
    q.offer(new Req(5, 1, "b", 1000), 1, "b", 1, 1000, 0);
    // a's clock 0, b's 0: a goes first while within the slack (0 and 1,000), then b, then a
    List<Integer> order = new ArrayList<>();
    for (int i = 0; i < 6; i++) order.add(q.poll().item().id());
    assertThat(order).containsExactly(0, 1, 5, 2, 3, 4);
    // again, b waiting with several: a at 5,000, b lifted to 5,000 then served 1,000 each
    for (int i = 0; i < 4; i++) q.offer(new Req(10 + i, 0, "a", 1000), 0, "a", 1, 1000, 0);
    for (int i = 0; i < 4; i++) q.offer(new Req(20 + i, 1, "b", 1000), 1, "b", 1, 1000, 0);
    order.clear();
    for (int i = 0; i < 8; i++) order.add(q.poll().item().id());
    assertThat(order).containsExactly(10, 11, 20, 12, 21, 13, 22, 23);
  }

  @Test
  void aLowerBandIsPassedOverAtMostTheLimitInARow() {
    for (int limit = 1; limit <= 5; limit++) {
      for (int seed = 0; seed < 20; seed++) {
        SplittableRandom rnd = new SplittableRandom(seed * 31L + limit);
        FairQueue<Req> q = queue(3, 10_000, limit, rnd.nextInt(0, 500));
        int id = 0;
        int[] waiting = new int[3];
        int[] passed = new int[3];
        for (int step = 0; step < 600; step++) {
          if (rnd.nextInt(10) < 6) {
            int band = rnd.nextInt(3);
            String t = "t" + rnd.nextInt(3);
            q.offer(new Req(id++, band, t, 10), band, t, 1, rnd.nextInt(1, 100), 0);
            waiting[band]++;
          } else {
            FairQueue.Ticket<Req> e = q.poll();
            if (e == null) continue;
            waiting[e.band()]--;
            passed[e.band()] = 0;
            for (int b = e.band() + 1; b < 3; b++) {
              if (waiting[b] > 0) {
                passed[b]++;
                assertThat(passed[b])
                    .as("limit %d seed %d band %d", limit, seed, b)
                    .isLessThanOrEqualTo(limit);
              } else {
                passed[b] = 0;
              }
            }
          }
        }
      }
    }
  }

  @Test
  void aTenantsRequestsInOneBandLeaveInArrivalOrder() {
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      FairQueue<Req> q = queue(2, 1000, 2, 300);
      Map<String, Integer> last = new HashMap<>();
      int id = 0;
      for (int step = 0; step < 500; step++) {
        if (rnd.nextInt(5) < 3) {
          int band = rnd.nextInt(2);
          String t = "t" + rnd.nextInt(5);
          q.offer(new Req(id++, band, t, 0), band, t, 1 + rnd.nextInt(3), rnd.nextInt(1, 500), 0);
        } else {
          FairQueue.Ticket<Req> e = q.poll();
          if (e == null) continue;
          Integer before = last.put(e.band() + "/" + e.tenant(), e.item().id());
          if (before != null) assertThat(e.item().id()).as("seed %d", seed).isGreaterThan(before);
        }
      }
    }
  }

  @Test
  void aCancelledRequestLeavesTheOthersAsIfItHadNeverCome() {
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      List<Req> reqs = new ArrayList<>();
      for (int i = 0; i < 60; i++) {
        reqs.add(new Req(i, rnd.nextInt(2), "t" + rnd.nextInt(4), rnd.nextInt(1, 1000)));
      }
      int cancelled = rnd.nextInt(reqs.size());
      FairQueue<Req> with = queue(2, 1000, 3, 500);
      FairQueue<Req> without = queue(2, 1000, 3, 500);
      FairQueue.Ticket<Req> victim = null;
      for (Req r : reqs) {
        double w = 1 + r.tenant().charAt(1) - '0';
        FairQueue.Ticket<Req> e = with.offer(r, r.band(), r.tenant(), w, r.cost(), 0);
        if (r.id() == cancelled) victim = e;
        else without.offer(r, r.band(), r.tenant(), w, r.cost(), 0);
      }
      assertThat(with.cancel(victim)).isTrue();
      assertThat(with.cancel(victim)).as("twice").isFalse();
      assertThat(drain(with)).as("seed %d", seed).isEqualTo(drain(without));
    }
  }

  @Test
  void aCorrectionMovesTheTenantsAccountInEveryBand() {
    // a and b alternate at equal cost (each leaves owing 500 over the least clock, 0); b is then
    // told its last request cost 1,500 less than charged, so its next two requests (in the lower
    // band) leave before a's high-band one
    FairQueue<Req> q = queue(2, 100, 0, 0);
    q.offer(new Req(0, 0, "a", 500), 0, "a", 1, 500, 0);
    q.offer(new Req(1, 0, "b", 500), 0, "b", 1, 500, 0);
    assertThat(drain(q)).containsExactly(0, 1);
    q.charge(0, "b", -1500);
    q.offer(new Req(2, 0, "a", 500), 0, "a", 1, 500, 0);
    q.offer(new Req(3, 1, "b", 500), 1, "b", 1, 500, 0);
    q.offer(new Req(4, 1, "b", 500), 1, "b", 1, 500, 0);
    assertThat(drain(q)).containsExactly(3, 4, 2);
  }

  @Test
  void memoryIsBoundedByTheDepthNotByTheNames() {
    FairQueue<Req> q = queue(2, 50, 0, 100);
    SplittableRandom rnd = new SplittableRandom(7);
    for (int i = 0; i < 100_000; i++) {
      String name = "tenant-" + i;
      int band = rnd.nextInt(2);
      FairQueue.Ticket<Req> e = q.offer(new Req(i, band, name, 10), band, name, 1, 10, 0);
      if (e == null || rnd.nextBoolean()) q.poll();
      q.charge(rnd.nextInt(2), name, rnd.nextInt(-50, 50));
      assertThat(q.tenantsKept()).isLessThanOrEqualTo(q.size() + 4 * 50);
    }
  }

  @Test
  void aBadSlackIsRefusedWithItsName() {
    FairQueue.Config c = new FairQueue.Config(2, 10, SEC, 0);
    assertThat(c.sharesSpanBands()).as("the four-value constructor keeps bands apart").isFalse();
    assertThatThrownBy(() -> c.withSharesSpanningBands(-1))
        .hasMessageContaining("shareSlack must be finite and >= 0, got -1");
    assertThatThrownBy(() -> c.withSharesSpanningBands(Double.NaN))
        .hasMessageContaining("shareSlack");
  }

  private static List<Integer> drain(FairQueue<Req> q) {
    List<Integer> out = new ArrayList<>();
    for (FairQueue.Ticket<Req> e = q.poll(); e != null; e = q.poll()) out.add(e.item().id());
    return out;
  }
}
