package io.kvrouter.admission;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Seeded property tests of {@link FairQueue}: strict bands, FIFO per tenant, weighted shares of
 * served cost, isolation from a noisy tenant, the depth bound, cancellation as if the request never
 * came, expiry, the starvation bound, corrections, and memory bounded by the depth whatever the
 * tenant names. Each expected value comes from the property, not from the queue.
 */
class FairQueueTest {
  private static final long SEC = 1_000_000_000L;
  private static final int SEEDS = 50;

  record Req(int id, int band, String tenant, double cost) {}

  private static FairQueue<Req> queue(int bands, int depth, int starvation) {
    return new FairQueue<>(new FairQueue.Config(bands, depth, 60 * SEC, starvation));
  }

  private static FairQueue.Ticket<Req> offer(FairQueue<Req> q, Req r, double weight, long now) {
    return q.offer(r, r.band(), r.tenant(), weight, r.cost(), now);
  }

  @Test
  void strictBandsNeverServeALowerBandWhileAHigherOneWaits() {
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      FairQueue<Req> q = queue(3, 1000, 0);
      int[] waiting = new int[3];
      int id = 0;
      for (int step = 0; step < 400; step++) {
        if (rnd.nextInt(3) > 0) {
          int band = rnd.nextInt(3);
          offer(q, new Req(id++, band, "t" + rnd.nextInt(4), rnd.nextInt(1, 100)), 1, 0);
          waiting[band]++;
        } else {
          FairQueue.Ticket<Req> e = q.poll();
          if (e == null) {
            assertThat(waiting).containsOnly(0);
            continue;
          }
          for (int b = 0; b < e.band(); b++) {
            assertThat(waiting[b])
                .as("seed %d: band %d waits while %d is served", seed, b, e.band())
                .isZero();
          }
          waiting[e.band()]--;
        }
      }
    }
  }

  @Test
  void aTenantsRequestsLeaveInArrivalOrder() {
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      FairQueue<Req> q = queue(2, 1000, 2);
      Map<String, Integer> last = new HashMap<>();
      int id = 0;
      for (int step = 0; step < 500; step++) {
        if (rnd.nextInt(5) < 3) {
          offer(
              q,
              new Req(id++, rnd.nextInt(2), "t" + rnd.nextInt(5), rnd.nextInt(1, 500)),
              1 + rnd.nextInt(3),
              0);
        } else {
          FairQueue.Ticket<Req> e = q.poll();
          if (e == null) continue;
          String key = e.band() + "/" + e.tenant();
          Integer before = last.put(key, e.item().id());
          if (before != null) assertThat(e.item().id()).as("seed %d", seed).isGreaterThan(before);
        }
      }
    }
  }

  @Test
  void backloggedTenantsAreServedInProportionToTheirWeightsWithinOneRequest() {
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      FairQueue<Req> q = queue(1, 100_000, 0);
      double[] weights = {1, 2, 3};
      double maxCost = 0;
      int id = 0;
      for (int i = 0; i < 2000; i++) {
        for (int t = 0; t < 3; t++) {
          double c = rnd.nextInt(1, 2000);
          maxCost = Math.max(maxCost, c);
          offer(q, new Req(id++, 0, "t" + t, c), weights[t], 0);
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
              .as("seed %d: normalised service of t%d and t%d", seed, a, b)
              .isLessThanOrEqualTo(maxCost / weights[a] + maxCost / weights[b]);
        }
      }
    }
  }

  @Test
  void aTenantSendingTenTimesMoreDoesNotDelayAnother() {
    // equal costs and weights: the quiet tenant's k-th request leaves within the first 2k polls
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      FairQueue<Req> q = queue(1, 100_000, 0);
      int id = 0;
      List<Integer> quiet = new ArrayList<>();
      for (int i = 0; i < 1100; i++) {
        boolean isQuiet = rnd.nextInt(11) == 0;
        Req r = new Req(id++, 0, isQuiet ? "quiet" : "noisy", 100);
        if (isQuiet) quiet.add(r.id());
        offer(q, r, 1, 0);
      }
      int k = 0;
      for (int poll = 1; k < quiet.size(); poll++) {
        FairQueue.Ticket<Req> e = q.poll();
        if (e.item().tenant().equals("quiet")) {
          k++;
          assertThat(poll).as("seed %d: quiet request %d", seed, k).isLessThanOrEqualTo(2 * k);
        }
      }
    }
  }

  @Test
  void theDepthIsBoundedAndAFullQueueRefuses() {
    FairQueue<Req> q = queue(2, 5, 0);
    for (int i = 0; i < 5; i++) assertThat(offer(q, new Req(i, i % 2, "a", 1), 1, 0)).isNotNull();
    assertThat(offer(q, new Req(5, 0, "b", 1), 1, 0)).as("the sixth").isNull();
    assertThat(q.size()).isEqualTo(5);
    assertThat(q.poll()).isNotNull();
    assertThat(offer(q, new Req(6, 0, "b", 1), 1, 0)).as("room again").isNotNull();
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
      FairQueue<Req> with = queue(2, 1000, 3);
      FairQueue<Req> without = queue(2, 1000, 3);
      FairQueue.Ticket<Req> victim = null;
      for (Req r : reqs) {
        double w = 1 + r.tenant().charAt(1) - '0';
        FairQueue.Ticket<Req> e = offer(with, r, w, 0);
        if (r.id() == cancelled) victim = e;
        else offer(without, r, w, 0);
      }
      assertThat(with.cancel(victim)).isTrue();
      assertThat(with.cancel(victim)).as("twice").isFalse();
      assertThat(victim.isWaiting()).isFalse();
      assertThat(drain(with)).as("seed %d", seed).isEqualTo(drain(without));
    }
  }

  /**
   * Tenant a queues costly requests early, the band's virtual time moves on while b is served, then
   * a queues more and cancels (or lets expire) every early one still waiting: its later requests
   * must be ordered as if the cancelled ones had never come, so they do not start below the virtual
   * time they arrived at and pass b's waiting requests.
   */
  @Test
  void cancellingManyQueuedRequestsGainsNoPriorityLater() {
    for (int seed = 0; seed < SEEDS; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      List<Req> early = new ArrayList<>();
      List<Req> first = new ArrayList<>();
      List<Req> late = new ArrayList<>();
      int id = 0;
      for (int i = 0; i < 40; i++) first.add(new Req(id++, 0, "b", rnd.nextInt(1, 100)));
      for (int i = 0; i < 10; i++) early.add(new Req(id++, 0, "a", rnd.nextInt(50, 500)));
      int polls = rnd.nextInt(5, 30);
      for (int i = 0; i < 5; i++) late.add(new Req(id++, 0, "a", rnd.nextInt(1, 100)));
      for (int i = 0; i < 10; i++) late.add(new Req(id++, 0, "b", rnd.nextInt(1, 100)));
      // with: the early requests come, the ones still waiting after the polls are cancelled
      FairQueue<Req> with = queue(1, 1000, 0);
      Map<Integer, FairQueue.Ticket<Req>> tickets = new HashMap<>();
      for (Req r : first) offer(with, r, 1, 0);
      for (Req r : early) tickets.put(r.id(), offer(with, r, 1, 0));
      List<Integer> polledWith = new ArrayList<>();
      for (int i = 0; i < polls; i++) polledWith.add(with.poll().item().id());
      for (Req r : late) offer(with, r, 1, 0);
      List<Integer> gone = new ArrayList<>();
      for (Req r : early) {
        if (tickets.get(r.id()).isWaiting()) {
          assertThat(with.cancel(tickets.get(r.id()))).isTrue();
          gone.add(r.id());
        }
      }
      // without: the same, except that the cancelled requests never came
      FairQueue<Req> without = queue(1, 1000, 0);
      for (Req r : first) offer(without, r, 1, 0);
      for (Req r : early) if (!gone.contains(r.id())) offer(without, r, 1, 0);
      List<Integer> polledWithout = new ArrayList<>();
      for (int i = 0; i < polls; i++) polledWithout.add(without.poll().item().id());
      for (Req r : late) offer(without, r, 1, 0);
      assertThat(polledWith)
          .as("seed %d: the polls before the cancels", seed)
          .isEqualTo(polledWithout);
      assertThat(drain(with)).as("seed %d: cancelled %s", seed, gone).isEqualTo(drain(without));
    }
  }

  /** The same by hand: a's late requests do not all leave before b's that waited already. */
  @Test
  void aTenantThatCancelledDoesNotJumpTheQueue() {
    FairQueue<Req> q = queue(1, 1000, 0);
    for (int i = 0; i < 100; i++) offer(q, new Req(i, 0, "b", 1), 1, 0); // tags 1..100
    List<FairQueue.Ticket<Req>> early = new ArrayList<>();
    for (int i = 0; i < 10; i++) early.add(offer(q, new Req(100 + i, 0, "a", 10), 1, 0)); // 10..100
    // 50 dispatches: b1..b9 (tags 1..9), then a's and b's by tag: the virtual time reaches 45
    for (int i = 0; i < 50; i++) q.poll();
    for (int i = 0; i < 5; i++) offer(q, new Req(200 + i, 0, "a", 1), 1, 0);
    int cancelled = 0;
    for (FairQueue.Ticket<Req> e : early) if (q.cancel(e)) cancelled++;
    assertThat(cancelled).as("a's early requests still waiting").isGreaterThanOrEqualTo(5);
    // a's late requests arrived at virtual time 45: each is tagged one past b's waiting ones of
    // the same tag at best, so they alternate with b's, never leave five in a row
    List<Integer> next = new ArrayList<>();
    for (int i = 0; i < 10; i++) next.add(q.poll().item().id());
    int aBeforeFirstB = 0;
    while (next.get(aBeforeFirstB) >= 200) aBeforeFirstB++;
    assertThat(aBeforeFirstB)
        .as("a's requests before b's first, in %s", next)
        .isLessThanOrEqualTo(1);
    assertThat(next.stream().filter(x -> x >= 200).count())
        .as("a's share of the next ten, %s", next)
        .isLessThanOrEqualTo(5);
  }

  @Test
  void expiryRemovesWhatWaitedTooLongAndOnlyThat() {
    FairQueue<Req> q = new FairQueue<>(new FairQueue.Config(1, 100, 10 * SEC, 0));
    offer(q, new Req(0, 0, "a", 1), 1, 0);
    offer(q, new Req(1, 0, "b", 1), 1, 3 * SEC);
    FairQueue.Ticket<Req> gone = offer(q, new Req(2, 0, "a", 1), 1, 5 * SEC);
    q.cancel(gone);
    offer(q, new Req(3, 0, "c", 1), 1, 12 * SEC);
    assertThat(q.expire(9 * SEC)).isEmpty();
    assertThat(q.expire(13 * SEC)).extracting(e -> e.item().id()).containsExactly(0, 1);
    assertThat(q.size()).isEqualTo(1);
    assertThat(q.poll().item().id()).isEqualTo(3);
    assertThat(q.poll()).isNull();
  }

  @Test
  void aLowerBandIsPassedOverAtMostTheLimitInARow() {
    for (int limit = 1; limit <= 5; limit++) {
      for (int seed = 0; seed < 20; seed++) {
        SplittableRandom rnd = new SplittableRandom(seed * 31L + limit);
        FairQueue<Req> q = queue(3, 10_000, limit);
        int id = 0;
        int[] waiting = new int[3];
        int[] passed = new int[3];
        for (int step = 0; step < 600; step++) {
          if (rnd.nextInt(10) < 6) {
            int band = rnd.nextInt(3);
            offer(q, new Req(id++, band, "t", 10), 1, 0);
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
  void aCorrectionMovesTheTenantsNextTag() {
    // a and b alternate at equal cost; b is then told its last request cost 1,000 less than
    // charged, so its next two requests leave before a's next one
    FairQueue<Req> q = queue(1, 100, 0);
    offer(q, new Req(0, 0, "a", 500), 1, 0);
    offer(q, new Req(1, 0, "b", 500), 1, 0);
    assertThat(drain(q)).containsExactly(0, 1);
    q.charge(0, "b", -1000);
    offer(q, new Req(2, 0, "a", 500), 1, 0);
    offer(q, new Req(3, 0, "b", 500), 1, 0);
    offer(q, new Req(4, 0, "b", 500), 1, 0);
    assertThat(drain(q)).containsExactly(3, 2, 4);
  }

  @Test
  void memoryIsBoundedByTheDepthNotByTheNames() {
    FairQueue<Req> q = queue(2, 50, 0);
    SplittableRandom rnd = new SplittableRandom(7);
    for (int i = 0; i < 100_000; i++) {
      String name = "tenant-" + i; // every request a new client-chosen name
      FairQueue.Ticket<Req> e = offer(q, new Req(i, rnd.nextInt(2), name, 10), 1, 0);
      if (e == null || rnd.nextBoolean()) q.poll();
      q.charge(rnd.nextInt(2), name, rnd.nextInt(-50, 50));
      assertThat(q.tenantsKept()).isLessThanOrEqualTo(q.size() + 4 * 50);
    }
  }

  @Test
  void badArgumentsAreRefusedWithTheirNames() {
    FairQueue<Req> q = queue(2, 5, 0);
    assertThatThrownBy(() -> q.offer(new Req(0, 0, "a", 1), 2, "a", 1, 1, 0))
        .hasMessageContaining("band");
    assertThatThrownBy(() -> q.offer(new Req(0, 0, "a", 1), 0, "a", 0, 1, 0))
        .hasMessageContaining("weight");
    assertThatThrownBy(() -> q.offer(new Req(0, 0, "a", 1), 0, "a", 1, -1, 0))
        .hasMessageContaining("cost");
    assertThatThrownBy(() -> new FairQueue.Config(0, 1, 1, 0)).hasMessageContaining("bands");
    assertThatThrownBy(() -> new FairQueue.Config(1, 0, 1, 0)).hasMessageContaining("maxDepth");
    assertThatThrownBy(() -> new FairQueue.Config(1, 1, 0, 0)).hasMessageContaining("maxWaitNanos");
  }

  private static List<Integer> drain(FairQueue<Req> q) {
    List<Integer> out = new ArrayList<>();
    for (FairQueue.Ticket<Req> e; (e = q.poll()) != null; ) out.add(e.item().id());
    return out;
  }
}
