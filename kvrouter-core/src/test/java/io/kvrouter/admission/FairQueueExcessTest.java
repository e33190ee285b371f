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
 * The excess rule of {@link FairQueue} ({@link FairQueue.Config#excessFactor()}): a waiting tenant
 * whose offer rate (requests offered per unit of weight, decaying by e every maxWaitNanos) exceeds
 * the factor times the mean of the other waiting tenants' rates waits behind them, in every band.
 * Orders are hand-computed from the self-clocked tags and the rates; the seeded test checks the
 * rule against the test's own books of what each tenant offered and has waiting.
 */
class FairQueueExcessTest {
  private static final long SEC = 1_000_000_000L;
  private static final long HORIZON = 60 * SEC; // the queues' maxWaitNanos: the rates' decay

  record Req(String id, int band, String tenant, double cost) {}

  private static FairQueue<Req> queue(double factor) {
    return new FairQueue<>(new FairQueue.Config(2, 10_000, HORIZON, 0).withExcessFactor(factor));
  }

  private static FairQueue.Ticket<Req> offer(
      FairQueue<Req> q, String id, int band, String tenant, double weight, long now) {
    return q.offer(new Req(id, band, tenant, 100), band, tenant, weight, 100, now);
  }

  private static List<String> drain(FairQueue<Req> q) {
    List<String> out = new ArrayList<>();
    for (FairQueue.Ticket<Req> t = q.poll(); t != null; t = q.poll()) out.add(t.item().id());
    return out;
  }

  /** Five requests of tenant h (cost 100 each), then two of tenant l, all at 0: rates 5 and 2. */
  private static FairQueue<Req> heavyThenLight(double factor) {
    FairQueue<Req> q = queue(factor);
    for (int i = 1; i <= 5; i++) offer(q, "h" + i, 1, "h", 1, 0);
    for (int i = 1; i <= 2; i++) offer(q, "l" + i, 1, "l", 1, 0);
    return q;
  }

  @Test
  void aTenantThatSendsFarMoreWaitsBehindTheOthers() {
    // tags: h1..h5 = 100..500, l1 = 100, l2 = 200; ties go to the earlier offer.
    // Without the rule: h1, l1, h2, l2, h3, h4, h5.
    assertThat(drain(heavyThenLight(0))).containsExactly("h1", "l1", "h2", "l2", "h3", "h4", "h5");
    // With factor 2: h's 5 is over 2 x 2, so l1 and l2 leave first; then h waits alone.
    assertThat(drain(heavyThenLight(2))).containsExactly("l1", "l2", "h1", "h2", "h3", "h4", "h5");
    // With factor 4, 5 is within 4 x 2 and the tags decide.
    assertThat(drain(heavyThenLight(4))).containsExactly("h1", "l1", "h2", "l2", "h3", "h4", "h5");
  }

  @Test
  void aQuietTenantsBurstLeavesFirstWhateverTheNoisyOneSent() {
    for (double factor : new double[] {1, 4, 16}) {
      FairQueue<Req> q = queue(factor);
      for (int i = 0; i < 1000; i++) offer(q, "n" + i, 1, "noisy", 1, 0);
      for (int i = 0; i < 5; i++) offer(q, "q" + i, 1, "quiet", 1, 0);
      List<String> first = drain(q).subList(0, 5);
      assertThat(first).as("factor %s", factor).containsExactly("q0", "q1", "q2", "q3", "q4");
    }
    // without the rule the burst is interleaved with the noisy tenant's requests
    FairQueue<Req> q = queue(0);
    for (int i = 0; i < 1000; i++) offer(q, "n" + i, 1, "noisy", 1, 0);
    for (int i = 0; i < 5; i++) offer(q, "q" + i, 1, "quiet", 1, 0);
    assertThat(drain(q).subList(0, 5)).containsExactly("n0", "q0", "n1", "q1", "n2");
  }

  @Test
  void ratesAreWeighed() {
    // a weighs 10: its ten requests are a rate of 1, like b's one request at weight 1, so the
    // tags decide: a's 100 / 10 before b's 100
    FairQueue<Req> q = queue(2);
    for (int i = 0; i < 10; i++) offer(q, "a" + i, 1, "a", 10, 0);
    offer(q, "b", 1, "b", 1, 0);
    assertThat(q.poll().item().id()).isEqualTo("a0");
    // at weight 1 the same requests are a rate of 10 against 1: b first
    FairQueue<Req> r = queue(2);
    for (int i = 0; i < 10; i++) offer(r, "a" + i, 1, "a", 1, 0);
    offer(r, "b", 1, "b", 1, 0);
    assertThat(r.poll().item().id()).isEqualTo("b");
  }

  @Test
  void ratesCountRequestsNotCost() {
    // h's two requests cost 1000 each, l's two cost 10: rates 2 and 2, so nobody is held back for
    // dearer requests and the bands stay strict: h's high ones first
    FairQueue<Req> q = queue(1);
    for (int i = 1; i <= 2; i++) q.offer(new Req("h" + i, 0, "h", 1000), 0, "h", 1, 1000, 0);
    for (int i = 1; i <= 2; i++) q.offer(new Req("l" + i, 1, "l", 10), 1, "l", 1, 10, 0);
    assertThat(drain(q)).containsExactly("h1", "h2", "l1", "l2");
  }

  @Test
  void whatATenantSentCountsUntilItDecays() {
    // cancelling does not take back what h sent: 5 against 1 stays over 2 x 1
    FairQueue<Req> q = queue(2);
    List<FairQueue.Ticket<Req>> h = new ArrayList<>();
    for (int i = 1; i <= 5; i++) h.add(offer(q, "h" + i, 1, "h", 1, 0));
    offer(q, "l1", 1, "l", 1, 0);
    for (int i = 2; i < 5; i++) assertThat(q.cancel(h.get(i))).isTrue();
    assertThat(drain(q)).containsExactly("l1", "h1", "h2");

    // ten horizons later h's five count 5 / e^10, under l's one: h is within the bound and the
    // tags go first (h1..h5 at 100..500 against l1's 100, offered later), while l, at 1 against
    // h's 0.0002, is over it and waits
    FairQueue<Req> d = queue(2);
    for (int i = 1; i <= 5; i++) offer(d, "h" + i, 1, "h", 1, 0);
    offer(d, "l1", 1, "l", 1, 10 * HORIZON);
    assertThat(drain(d)).containsExactly("h1", "h2", "h3", "h4", "h5", "l1");
  }

  @Test
  void aTenantThatNoLongerWaitsDoesNotCount() {
    // h sent ten requests and cancelled them all; g sends three and l one. Were h still counted
    // as waiting, the mean of g's others would be (10 + 1) / 2 and g (3) within it; h is gone,
    // so g is over 2 x 1 and l leaves first
    FairQueue<Req> q = queue(2);
    List<FairQueue.Ticket<Req>> h = new ArrayList<>();
    for (int i = 0; i < 10; i++) h.add(offer(q, "h" + i, 1, "h", 1, 0));
    for (FairQueue.Ticket<Req> t : h) assertThat(q.cancel(t)).isTrue();
    for (int i = 1; i <= 3; i++) offer(q, "g" + i, 1, "g", 1, 0);
    offer(q, "l1", 1, "l", 1, 0);
    assertThat(drain(q)).containsExactly("l1", "g1", "g2", "g3");
    // the same with expiry: h's ten expire at the horizon; g and l come just before it
    FairQueue<Req> e = queue(2);
    for (int i = 0; i < 10; i++) offer(e, "h" + i, 1, "h", 1, 0);
    for (int i = 1; i <= 3; i++) offer(e, "g" + i, 1, "g", 1, HORIZON - 1);
    offer(e, "l1", 1, "l", 1, HORIZON - 1);
    assertThat(e.expire(HORIZON)).hasSize(10);
    assertThat(drain(e)).containsExactly("l1", "g1", "g2", "g3");
  }

  @Test
  void aTenantThatSendsFarMoreWaitsInEveryBandAndBandsStayStrictWithinTheBound() {
    // h sends 5 in the high band against l's 1 in the normal band: over 2 x 1, so l1 goes first
    // although its band is lower; then h is alone
    FairQueue<Req> q = queue(2);
    for (int i = 1; i <= 5; i++) offer(q, "h" + i, 0, "h", 1, 0);
    offer(q, "l1", 1, "l", 1, 0);
    assertThat(drain(q)).containsExactly("l1", "h1", "h2", "h3", "h4", "h5");
    // within the bound (2 against 2) the high band is served first
    FairQueue<Req> r = queue(2);
    for (int i = 1; i <= 2; i++) offer(r, "h" + i, 0, "h", 1, 0);
    for (int i = 1; i <= 2; i++) offer(r, "l" + i, 1, "l", 1, 0);
    assertThat(drain(r)).containsExactly("h1", "h2", "l1", "l2");
    // a tenant's rate counts every band: h's 1 high and 4 normal are 5 against l's 1
    FairQueue<Req> u = queue(2);
    offer(u, "h1", 0, "h", 1, 0);
    for (int i = 2; i <= 5; i++) offer(u, "h" + i, 1, "h", 1, 0);
    offer(u, "l1", 1, "l", 1, 0);
    assertThat(drain(u)).containsExactly("l1", "h1", "h2", "h3", "h4", "h5");
    // without the rule the bands are strict whatever was sent
    FairQueue<Req> v = queue(0);
    for (int i = 1; i <= 5; i++) offer(v, "h" + i, 0, "h", 1, 0);
    offer(v, "l1", 1, "l", 1, 0);
    assertThat(drain(v)).containsExactly("h1", "h2", "h3", "h4", "h5", "l1");
  }

  /**
   * Seeded random offers, polls, cancels and expiries over five tenants of unequal rates and
   * weights, against the test's own books (what each tenant offered and when; its waiting requests
   * per band): each dispatched request's tenant had an offer rate within the factor times the mean
   * of the other waiting tenants', or waited alone; a higher band's waiting tenant was passed over
   * only when beyond the bound; and each tenant's requests of a band leave in arrival order. Some
   * dispatches happened while a tenant was beyond the bound (the rule was exercised).
   */
  @Test
  void everyDispatchKeepsTheRuleTheBandsAndEachTenantsOrder() {
    String[] names = {"a", "b", "c", "d", "e"};
    double[] weights = {1, 1, 2, 1, 0.5};
    int[] shares = {40, 5, 5, 3, 2};
    int demoted = 0;
    for (int seed = 0; seed < 40; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      double factor = 1 + rnd.nextInt(4);
      FairQueue<Req> q = queue(factor);
      Map<String, List<List<FairQueue.Ticket<Req>>>> waiting = new LinkedHashMap<>();
      Map<String, List<long[]>> sentAt = new HashMap<>(); // per tenant: offer times
      Map<String, Double> weightOf = new HashMap<>();
      List<FairQueue.Ticket<Req>> all = new ArrayList<>();
      long now = 0;
      long clock = 0; // the queue's: the latest time given to offer or expire
      int id = 0;
      for (int step = 0; step < 3000; step++) {
        now += rnd.nextInt(1, 500_000_000);
        int op = rnd.nextInt(100);
        if (op < 55) {
          int pick = rnd.nextInt(55);
          int t = 0;
          for (int acc = shares[0]; pick >= acc; acc += shares[++t]) {}
          int band = rnd.nextInt(5) == 0 ? 0 : 1;
          double cost = 10 + rnd.nextInt(500);
          Req r = new Req("r" + id++, band, names[t], cost);
          FairQueue.Ticket<Req> k = q.offer(r, band, names[t], weights[t], cost, now);
          clock = now;
          weightOf.put(names[t], weights[t]);
          sentAt.computeIfAbsent(names[t], x -> new ArrayList<>()).add(new long[] {now});
          List<List<FairQueue.Ticket<Req>>> mine = waiting.get(names[t]);
          if (mine == null) {
            mine = List.of(new ArrayList<>(), new ArrayList<>());
            waiting.put(names[t], mine);
          }
          mine.get(band).add(k);
          all.add(k);
        } else if (op < 90) {
          FairQueue.Ticket<Req> k = q.poll();
          if (k == null) {
            assertThat(waiting).as("seed %d: the queue said empty", seed).isEmpty();
            continue;
          }
          Map<String, Double> rate = new HashMap<>();
          double total = 0;
          for (String x : waiting.keySet()) {
            double v = 0;
            for (long[] at : sentAt.get(x)) {
              v += Math.exp(-(double) (clock - at[0]) / HORIZON) / weightOf.get(x);
            }
            rate.put(x, v);
            total += v;
          }
          int n = rate.size();
          boolean anyOver = false;
          for (Map.Entry<String, Double> x : rate.entrySet()) {
            double own = x.getValue();
            anyOver |= n > 1 && own > factor * (total - own) / (n - 1) * (1 + 1e-9);
          }
          double own = rate.get(k.tenant());
          if (n > 1) {
            assertThat(own)
                .as("seed %d: %s dispatched over the bound", seed, k.tenant())
                .isLessThanOrEqualTo(factor * (total - own) / (n - 1) * (1 + 1e-9));
          }
          for (Map.Entry<String, List<List<FairQueue.Ticket<Req>>>> x : waiting.entrySet()) {
            for (int b = 0; b < k.band(); b++) {
              if (!x.getValue().get(b).isEmpty()) {
                double o = rate.get(x.getKey());
                assertThat(o)
                    .as("seed %d: band %d of %s passed over", seed, b, x.getKey())
                    .isGreaterThan(factor * (total - o) / (n - 1) * (1 - 1e-9));
              }
            }
          }
          List<FairQueue.Ticket<Req>> mine = waiting.get(k.tenant()).get(k.band());
          assertThat(mine.get(0)).as("seed %d: the tenant's oldest request", seed).isSameAs(k);
          if (anyOver) demoted++;
          remove(waiting, k);
        } else if (op < 97) {
          if (all.isEmpty()) continue;
          FairQueue.Ticket<Req> k = all.get(rnd.nextInt(all.size()));
          if (q.cancel(k)) remove(waiting, k);
        } else {
          clock = now;
          for (FairQueue.Ticket<Req> k : q.expire(now)) remove(waiting, k);
        }
      }
    }
    assertThat(demoted).as("dispatches while a tenant was beyond the bound").isPositive();
  }

  private static void remove(
      Map<String, List<List<FairQueue.Ticket<Req>>>> w, FairQueue.Ticket<Req> k) {
    List<List<FairQueue.Ticket<Req>>> mine = w.get(k.tenant());
    assertThat(mine.get(k.band()).remove(k)).isTrue();
    if (mine.get(0).isEmpty() && mine.get(1).isEmpty()) w.remove(k.tenant());
  }

  @Test
  void badFactorsAreRefused() {
    FairQueue.Config c = new FairQueue.Config(2, 10, SEC, 0);
    assertThatThrownBy(() -> c.withExcessFactor(0.5)).hasMessageContaining("excessFactor");
    assertThatThrownBy(() -> c.withExcessFactor(Double.NaN)).hasMessageContaining("excessFactor");
    assertThatThrownBy(() -> c.withExcessFactor(Double.POSITIVE_INFINITY))
        .hasMessageContaining("excessFactor");
    assertThatThrownBy(() -> c.withSharesSpanningBands(0).withExcessFactor(2))
        .hasMessageContaining("span the bands");
    assertThat(c.withExcessFactor(0).excessFactor()).isZero();
  }

  @Test
  void memoryIsBoundedByTheDepthNotByTheNames() {
    FairQueue<Req> q = new FairQueue<>(new FairQueue.Config(2, 8, HORIZON, 0).withExcessFactor(2));
    for (int i = 0; i < 10_000; i++) {
      FairQueue.Ticket<Req> t = offer(q, "r" + i, 1, "tenant-" + i, 1, i);
      if (t != null) assertThat(q.cancel(t)).isTrue();
    }
    assertThat(q.tenantsKept()).isLessThanOrEqualTo(5 * 8 + 4 * 8);
  }
}
