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
 * The backlog rule of {@link FairQueue} ({@link FairQueue.Config#backlogFactor()}): a tenant whose
 * backlog (requests waiting in every band, divided by its weight) exceeds the factor times the mean
 * of the other waiting tenants' waits behind them, in every band. Orders are hand-computed from the
 * self-clocked tags; the seeded test checks the rule against the test's own books of what each
 * tenant has waiting.
 */
class FairQueueBacklogTest {
  private static final long SEC = 1_000_000_000L;

  record Req(String id, int band, String tenant, double cost) {}

  private static FairQueue<Req> queue(double factor) {
    return new FairQueue<>(new FairQueue.Config(2, 10_000, 60 * SEC, 0).withBacklogFactor(factor));
  }

  private static List<String> drain(FairQueue<Req> q) {
    List<String> out = new ArrayList<>();
    for (FairQueue.Ticket<Req> t = q.poll(); t != null; t = q.poll()) out.add(t.item().id());
    return out;
  }

  /** Five requests of tenant h (cost 100 each) waiting, then two of tenant l: backlogs 5 and 2. */
  private static FairQueue<Req> heavyThenLight(double factor) {
    FairQueue<Req> q = queue(factor);
    for (int i = 1; i <= 5; i++) q.offer(new Req("h" + i, 1, "h", 100), 1, "h", 1, 100, 0);
    for (int i = 1; i <= 2; i++) q.offer(new Req("l" + i, 1, "l", 100), 1, "l", 1, 100, 0);
    return q;
  }

  @Test
  void aTenantFarOverTheOthersBacklogWaitsBehindThem() {
    // tags: h1..h5 = 100..500, l1 = 100, l2 = 200; ties go to the earlier offer.
    // Without the rule: h1, l1, h2, l2, h3, h4, h5.
    assertThat(drain(heavyThenLight(0))).containsExactly("h1", "l1", "h2", "l2", "h3", "h4", "h5");
    // With factor 2: h waits 5 against l's 2, over 2 x 2 = 4, so l1 leaves first; then 5
    // against 1 (over 2): l2; then h alone.
    assertThat(drain(heavyThenLight(2))).containsExactly("l1", "l2", "h1", "h2", "h3", "h4", "h5");
    // With factor 4, 5 is within 4 x 2 and the tags decide: h1, l1; then h's 4 against l's 1 is
    // within 4 x 1 (equal), so the tags go on: h2, l2, ...
    assertThat(drain(heavyThenLight(4))).containsExactly("h1", "l1", "h2", "l2", "h3", "h4", "h5");
  }

  @Test
  void aQuietTenantsBurstLeavesFirstWhateverTheNoisyOneQueued() {
    for (double factor : new double[] {1, 4, 16}) {
      FairQueue<Req> q = queue(factor);
      for (int i = 0; i < 1000; i++)
        q.offer(new Req("n" + i, 1, "noisy", 100), 1, "noisy", 1, 100, 0);
      for (int i = 0; i < 5; i++) q.offer(new Req("q" + i, 1, "quiet", 100), 1, "quiet", 1, 100, 0);
      List<String> first = drain(q).subList(0, 5);
      assertThat(first).as("factor %s", factor).containsExactly("q0", "q1", "q2", "q3", "q4");
    }
    // without the rule the burst is interleaved with the noisy tenant's requests
    FairQueue<Req> q = queue(0);
    for (int i = 0; i < 1000; i++)
      q.offer(new Req("n" + i, 1, "noisy", 100), 1, "noisy", 1, 100, 0);
    for (int i = 0; i < 5; i++) q.offer(new Req("q" + i, 1, "quiet", 100), 1, "quiet", 1, 100, 0);
    assertThat(drain(q).subList(0, 5)).containsExactly("n0", "q0", "n1", "q1", "n2");
  }

  @Test
  void backlogsAreWeighed() {
    // a weighs 10: its ten requests are a backlog of 1, like b's one request at weight 1, so
    // the tags decide: a's 100 / 10 before b's 100
    FairQueue<Req> q = queue(2);
    for (int i = 0; i < 10; i++) q.offer(new Req("a" + i, 1, "a", 100), 1, "a", 10, 100, 0);
    q.offer(new Req("b", 1, "b", 100), 1, "b", 1, 100, 0);
    assertThat(q.poll().item().id()).isEqualTo("a0");
    // at weight 1 the same requests are a backlog of 10 against 1: b first
    FairQueue<Req> r = queue(2);
    for (int i = 0; i < 10; i++) r.offer(new Req("a" + i, 1, "a", 100), 1, "a", 1, 100, 0);
    r.offer(new Req("b", 1, "b", 100), 1, "b", 1, 100, 0);
    assertThat(r.poll().item().id()).isEqualTo("b");
  }

  @Test
  void backlogsCountRequestsNotCost() {
    // h's two requests cost 1000 each, l's two cost 10: backlogs 2 and 2, so the tags decide
    // (l's 10 and 20 before h's 1000) and nobody is held back for dearer requests
    FairQueue<Req> q = queue(1);
    for (int i = 1; i <= 2; i++) q.offer(new Req("h" + i, 0, "h", 1000), 0, "h", 1, 1000, 0);
    for (int i = 1; i <= 2; i++) q.offer(new Req("l" + i, 1, "l", 10), 1, "l", 1, 10, 0);
    // h is in the high band: strict, since within the bound
    assertThat(drain(q)).containsExactly("h1", "h2", "l1", "l2");
  }

  @Test
  void cancelledAndExpiredRequestsLeaveTheBacklog() {
    FairQueue<Req> q = queue(2);
    List<FairQueue.Ticket<Req>> h = new ArrayList<>();
    for (int i = 1; i <= 5; i++) h.add(q.offer(new Req("h" + i, 1, "h", 100), 1, "h", 1, 100, 0));
    q.offer(new Req("l1", 1, "l", 100), 1, "l", 1, 100, 0);
    // h waits 5 against 1: over; cancelling h3..h5 leaves 2, within 2 x 1
    for (int i = 2; i < 5; i++) assertThat(q.cancel(h.get(i))).isTrue();
    assertThat(drain(q)).containsExactly("h1", "l1", "h2");

    // expiry: h's five requests arrived at 0 and expire at 60 s; l's arrived later
    FairQueue<Req> e = queue(2);
    for (int i = 1; i <= 5; i++) e.offer(new Req("h" + i, 1, "h", 100), 1, "h", 1, 100, 0);
    e.offer(new Req("h6", 1, "h", 100), 1, "h", 1, 100, 30 * SEC);
    e.offer(new Req("l1", 1, "l", 100), 1, "l", 1, 100, 30 * SEC);
    assertThat(e.expire(60 * SEC)).hasSize(5);
    // h6 is tagged again as if h1..h5 had never come (100, like l1, and offered first); its
    // backlog of 1 is within 2 x 1 only if the expired ones left it (6 would be over)
    assertThat(drain(e)).containsExactly("h6", "l1");
  }

  @Test
  void aTenantFarOverTheBoundWaitsInEveryBandAndBandsStayStrictWithinIt() {
    // h waits 5 in the high band against l's 1 in the normal band: over 2 x 1, so l1 goes first
    // although its band is lower; then h is alone
    FairQueue<Req> q = queue(2);
    for (int i = 1; i <= 5; i++) q.offer(new Req("h" + i, 0, "h", 100), 0, "h", 1, 100, 0);
    q.offer(new Req("l1", 1, "l", 100), 1, "l", 1, 100, 0);
    assertThat(drain(q)).containsExactly("l1", "h1", "h2", "h3", "h4", "h5");
    // within the bound (h 2 against l 2) the high band is served first
    FairQueue<Req> r = queue(2);
    for (int i = 1; i <= 2; i++) r.offer(new Req("h" + i, 0, "h", 100), 0, "h", 1, 100, 0);
    for (int i = 1; i <= 2; i++) r.offer(new Req("l" + i, 1, "l", 100), 1, "l", 1, 100, 0);
    assertThat(drain(r)).containsExactly("h1", "h2", "l1", "l2");
    // a tenant's backlog counts every band: h's 1 high and 4 normal are 5 against l's 1
    FairQueue<Req> u = queue(2);
    u.offer(new Req("h1", 0, "h", 100), 0, "h", 1, 100, 0);
    for (int i = 2; i <= 5; i++) u.offer(new Req("h" + i, 1, "h", 100), 1, "h", 1, 100, 0);
    u.offer(new Req("l1", 1, "l", 100), 1, "l", 1, 100, 0);
    assertThat(drain(u)).containsExactly("l1", "h1", "h2", "h3", "h4", "h5");
    // without the rule the bands are strict whatever the backlogs
    FairQueue<Req> v = queue(0);
    for (int i = 1; i <= 5; i++) v.offer(new Req("h" + i, 0, "h", 100), 0, "h", 1, 100, 0);
    v.offer(new Req("l1", 1, "l", 100), 1, "l", 1, 100, 0);
    assertThat(drain(v)).containsExactly("h1", "h2", "h3", "h4", "h5", "l1");
  }

  /**
   * Seeded random offers, polls, cancels and expiries over five tenants of unequal rates and
   * weights, against the test's own books (each tenant's waiting requests per band): each
   * dispatched request's tenant had a backlog (every band) within the factor times the mean of the
   * other waiting tenants', or waited alone; no higher band held a tenant within that bound; and
   * each tenant's requests of a band leave in arrival order. Some dispatches passed over a tenant
   * beyond the bound (the rule was exercised).
   */
  @Test
  void everyDispatchKeepsTheRuleTheBandsAndEachTenantsOrder() {
    String[] names = {"a", "b", "c", "d", "e"};
    double[] weights = {1, 1, 2, 1, 0.5};
    int[] rates = {40, 5, 5, 3, 2};
    int demoted = 0;
    for (int seed = 0; seed < 40; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      double factor = 1 + rnd.nextInt(4);
      FairQueue<Req> q = queue(factor);
      // the test's own books: per tenant, per band, the waiting requests in arrival order
      Map<String, List<List<FairQueue.Ticket<Req>>>> waiting = new LinkedHashMap<>();
      Map<String, Double> weightOf = new HashMap<>();
      List<FairQueue.Ticket<Req>> all = new ArrayList<>();
      long now = 0;
      int id = 0;
      for (int step = 0; step < 3000; step++) {
        now += rnd.nextInt(1, 50_000_000);
        int op = rnd.nextInt(100);
        if (op < 55) {
          int pick = rnd.nextInt(55);
          int t = 0;
          for (int acc = rates[0]; pick >= acc; acc += rates[++t]) {}
          int band = rnd.nextInt(5) == 0 ? 0 : 1;
          double cost = 10 + rnd.nextInt(500);
          Req r = new Req("r" + id++, band, names[t], cost);
          FairQueue.Ticket<Req> k = q.offer(r, band, names[t], weights[t], cost, now);
          weightOf.put(names[t], weights[t]);
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
          Map<String, Double> backlogs = new HashMap<>();
          double total = 0;
          for (Map.Entry<String, List<List<FairQueue.Ticket<Req>>>> x : waiting.entrySet()) {
            double b = 0;
            for (List<FairQueue.Ticket<Req>> l : x.getValue())
              b += backlog(l, weightOf.get(x.getKey()));
            backlogs.put(x.getKey(), b);
            total += b;
          }
          int n = backlogs.size();
          Map<String, Boolean> within = new HashMap<>();
          boolean anyOver = false;
          for (Map.Entry<String, Double> x : backlogs.entrySet()) {
            double own = x.getValue();
            boolean in = n == 1 || own <= factor * (total - own) / (n - 1) + 1e-6;
            within.put(x.getKey(), in);
            anyOver |= !in;
          }
          assertThat(within.get(k.tenant()))
              .as("seed %d: %s dispatched over its backlog bound", seed, k.tenant())
              .isTrue();
          for (Map.Entry<String, List<List<FairQueue.Ticket<Req>>>> x : waiting.entrySet()) {
            for (int b = 0; b < k.band(); b++) {
              if (!x.getValue().get(b).isEmpty()) {
                // a higher band's tenant may be passed over only when it is beyond the bound
                // (with 1e-6 of rounding either way)
                double own = backlogs.get(x.getKey());
                assertThat(own)
                    .as("seed %d: band %d of %s passed over", seed, b, x.getKey())
                    .isGreaterThan(factor * (total - own) / (n - 1) - 1e-6);
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
          for (FairQueue.Ticket<Req> k : q.expire(now)) remove(waiting, k);
        }
      }
    }
    assertThat(demoted).as("dispatches while a tenant was beyond the bound").isPositive();
  }

  /** A tenant's backlog in one band: its requests waiting there, divided by its weight. */
  private static double backlog(List<FairQueue.Ticket<Req>> l, double weight) {
    return l.size() / weight;
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
    assertThatThrownBy(() -> c.withBacklogFactor(0.5)).hasMessageContaining("backlogFactor");
    assertThatThrownBy(() -> c.withBacklogFactor(Double.NaN)).hasMessageContaining("backlogFactor");
    assertThatThrownBy(() -> c.withBacklogFactor(Double.POSITIVE_INFINITY))
        .hasMessageContaining("backlogFactor");
    assertThatThrownBy(() -> c.withSharesSpanningBands(0).withBacklogFactor(2))
        .hasMessageContaining("span the bands");
    assertThat(c.withBacklogFactor(0).backlogFactor()).isZero();
  }
}
