package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Seeded random walks through the router (routes with shared prefixes and allowed-worker subsets,
 * prefill completions, frees, expiry, Stored, Removed and Cleared events, unregistering and
 * registering again, busy thresholds), checking every decision against a naive model of the fleet
 * that the test keeps itself: what each rank caches (a set of sequence hashes), its requests in
 * flight, and the blocks its Removed events named with their times. From that model alone the test
 * computes each candidate's terms, busy state and cost by DESIGN.md §6's formula plus
 * docs/routing.md's pressure term, and checks the router's candidates, costs, busy ranks and choice
 * against them.
 */
class KvRouterModelTest {
  private static final int BS = 4;
  private static final long EXPIRY = 1_000;
  private static final long WINDOW = 300; // pressure window, ns
  private static final long BUSY_PREFILL = 40;
  private static final double BUSY_FRACTION = 0.75;
  private static final double TOLERANCE = 1e-9; // relative, for the decayed eviction counts

  /** A request of the model; prefill[0] is the charge still owed. */
  private record Req(Worker worker, long[] seq, long[] prefill, long deadline) {}

  /** A registered rank of the model. */
  private static final class Rank {
    final long kvBlocks;
    final Set<Long> cached = new HashSet<>(); // what the index holds for it
    final List<long[]> evictions = new ArrayList<>(); // {time, blocks}

    Rank(long kvBlocks) {
      this.kvBlocks = kvBlocks;
    }

    /** Σ blocks × e^(−(now − t) / window): the decaying count of docs/routing.md. */
    double evicted(long now) {
      evictions.removeIf(e -> now - e[0] > 60 * WINDOW); // below e^-60 of a block
      double sum = 0;
      for (long[] e : evictions) sum += e[1] * Math.exp(-(now - e[0]) / (double) WINDOW);
      return sum;
    }
  }

  /** What the model says about one allowed rank for one prompt. */
  private record Expected(
      Worker worker,
      int overlap,
      int cached,
      double prefillBlocks,
      int decodeBlocks,
      boolean busy,
      double evicted) {}

  @Test
  void decisionsAgreeWithANaiveModelOfTheFleet() {
    for (long seed = 1; seed <= 12; seed++) {
      try {
        walk(seed);
      } catch (AssertionError e) {
        throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
      }
    }
  }

  private void walk(long seed) {
    Random rnd = new Random(seed);
    AtomicLong clock = new AtomicLong();
    final double overlapWeight = new double[] {1.0, 0.5, 2.0}[(int) (seed % 3)];
    final double pressureWeight = new double[] {20, 0, 7.5, 20}[(int) (seed % 4)];
    final boolean busyLimits = seed % 2 == 1;
    KvRouter.Builder b =
        KvRouter.builder(BS)
            .requestExpiry(Duration.ofNanos(EXPIRY))
            .nanoClock(clock::get)
            .overlapWeight(overlapWeight)
            .pressureWeight(pressureWeight)
            .pressureWindow(Duration.ofNanos(WINDOW))
            .seed(seed);
    if (busyLimits) b.busyPrefillTokens(BUSY_PREFILL).busyBlockFraction(BUSY_FRACTION);
    KvRouter router = b.build();
    final int workers = 3 + rnd.nextInt(4);
    TreeMap<Worker, Rank> ranks = new TreeMap<>();
    for (int w = 0; w < workers; w++) register(router, ranks, w);
    BlockHasher hasher = BlockHasher.of(BS);
    Map<String, Req> requests = new HashMap<>();
    long eventId = 0;
    int routed = 0;
    int pressured = 0;
    int busySeen = 0;
    for (int step = 0; step < 1_500; step++) {
      clock.addAndGet(rnd.nextInt(20));
      final long now = clock.get();
      requests.values().removeIf(r -> now - r.deadline >= 0);
      int op = rnd.nextInt(20);
      if (op < 8) {
        int[] tokens = prompt(rnd);
        long[] seq = SequenceHasher.sequenceHashes(hasher.localHashes(tokens));
        RouteOptions options = RouteOptions.defaults();
        int restrict = rnd.nextInt(5);
        if (restrict == 0) options = options.withAllowedWorkers(rnd.nextInt(workers));
        if (restrict == 1) {
          options = options.withAllowedWorkers(rnd.nextInt(workers), rnd.nextInt(workers));
        }
        String id = "r" + rnd.nextInt(200);
        if (requests.containsKey(id)) continue; // duplicates are covered elsewhere

        // the model's view, computed before the router sees the request
        List<Expected> allowed = new ArrayList<>();
        for (Map.Entry<Worker, Rank> e : ranks.entrySet()) {
          if (options.allows(e.getKey().workerId())) {
            allowed.add(
                expected(e.getKey(), e.getValue(), requests, seq, tokens.length, busyLimits, now));
          }
        }
        double evictedSum = 0;
        for (Expected x : allowed) evictedSum += x.evicted;
        final double mean = allowed.isEmpty() ? 1 : Math.max(1.0, evictedSum / allowed.size());
        List<Expected> eligible = allowed.stream().filter(x -> !x.busy).toList();
        List<Worker> busy = allowed.stream().filter(Expected::busy).map(Expected::worker).toList();

        RouteDecision d = router.route(id, tokens, options);
        if (allowed.isEmpty()) {
          assertThat(d).as("step %d", step).isInstanceOf(RouteDecision.NoWorkers.class);
          continue;
        }
        if (eligible.isEmpty()) {
          assertThat(d).as("step %d", step).isInstanceOf(RouteDecision.AllBusy.class);
          List<Candidate> got = ((RouteDecision.AllBusy) d).candidates();
          assertThat(got).extracting(Candidate::worker).containsExactlyElementsOf(busy);
          for (int i = 0; i < got.size(); i++) assertTerms(step, got.get(i), allowed.get(i));
          busySeen++;
          continue;
        }
        assertThat(d).as("step %d", step).isInstanceOf(RouteDecision.Routed.class);
        RouteDecision.Routed r = (RouteDecision.Routed) d;
        routed++;
        if (!busy.isEmpty()) busySeen++;
        assertThat(r.busy()).as("step %d busy", step).containsExactlyElementsOf(busy);
        assertThat(r.candidates())
            .extracting(CandidateCost::worker)
            .as("step %d candidates", step)
            .containsExactlyElementsOf(eligible.stream().map(Expected::worker).toList());
        double[] cost = new double[eligible.size()];
        double min = Double.POSITIVE_INFINITY;
        for (int i = 0; i < cost.length; i++) {
          Expected x = eligible.get(i);
          // DESIGN.md §6, plus docs/routing.md's pressure term
          cost[i] = overlapWeight * x.prefillBlocks + x.decodeBlocks;
          int newBlocks = Math.max(0, seq.length - x.overlap);
          if (pressureWeight > 0) cost[i] += pressureWeight * newBlocks * (x.evicted / mean);
          if (pressureWeight > 0 && newBlocks > 0 && x.evicted > 0.5) pressured++;
          min = Math.min(min, cost[i]);
          CandidateCost got = r.candidates().get(i);
          assertTerms(step, got.candidate(), x);
          assertThat(got.cost())
              .as("step %d %s cost", step, x.worker)
              .isCloseTo(cost[i], within(tol(cost[i])));
        }
        // the choice: a minimum of the model's costs; among those, fewest cached blocks
        int chosen = -1;
        for (int i = 0; i < cost.length; i++) {
          if (eligible.get(i).worker.equals(r.worker())) chosen = i;
        }
        assertThat(cost[chosen]).as("step %d chosen cost", step).isLessThan(min + tol(min));
        for (int i = 0; i < cost.length; i++) {
          if (cost[i] < min + tol(min)) {
            assertThat(eligible.get(chosen).cached)
                .as("step %d tie-break", step)
                .isLessThanOrEqualTo(eligible.get(i).cached);
          }
        }
        Expected target = eligible.get(chosen);
        assertThat(r.overlapBlocks()).isEqualTo(target.overlap);
        long charge = Math.max(0, tokens.length - (long) target.overlap * BS);
        requests.put(id, new Req(r.worker(), seq, new long[] {charge}, now + EXPIRY));
      } else if (op < 11) {
        String id = "r" + rnd.nextInt(200);
        boolean present = requests.containsKey(id);
        assertThat(router.markPrefillCompleted(id)).isEqualTo(present);
        if (present) requests.get(id).prefill[0] = 0;
      } else if (op < 14) {
        String id = "r" + rnd.nextInt(200);
        assertThat(router.free(id)).isEqualTo(requests.remove(id) != null);
      } else if (op < 17) {
        // the engine of a random rank caches a random prompt prefix
        Worker w = randomRank(rnd, ranks);
        long[] local = hasher.localHashes(prompt(rnd));
        if (local.length > 0) {
          long[] seq = SequenceHasher.sequenceHashes(local);
          router.applyEvent(new RouterEvent(w, eventId++, CacheEvent.storedAtRoot(seq, local)));
          for (long h : seq) ranks.get(w).cached.add(h);
        }
      } else if (op < 19) {
        // it evicts some of its blocks (and names one it never held: skipped, still counted)
        Worker w = randomRank(rnd, ranks);
        Rank k = ranks.get(w);
        List<Long> victims = new ArrayList<>();
        for (long h : k.cached) {
          if (rnd.nextInt(3) == 0) victims.add(h);
        }
        if (rnd.nextBoolean()) victims.add(rnd.nextLong());
        if (victims.isEmpty()) continue;
        long[] hashes = victims.stream().mapToLong(Long::longValue).toArray();
        router.applyEvent(new RouterEvent(w, eventId++, CacheEvent.removed(hashes)));
        victims.forEach(k.cached::remove);
        k.evictions.add(new long[] {now, hashes.length});
      } else if (rnd.nextBoolean()) {
        Worker w = randomRank(rnd, ranks);
        router.applyEvent(new RouterEvent(w, eventId++, CacheEvent.cleared()));
        ranks.get(w).cached.clear();
        ranks.get(w).evictions.clear(); // an emptied cache evicts nothing for a while
      } else {
        long id = rnd.nextInt(workers);
        router.unregisterWorker(id);
        requests.values().removeIf(q -> q.worker.workerId() == id);
        ranks.keySet().removeIf(w -> w.workerId() == id);
        register(router, ranks, id);
      }
      assertThat(router.inFlight()).as("step %d", step).isEqualTo(requests.size());
      assertThat(router.rootBlocksInFlight())
          .as("step %d roots", step)
          .isEqualTo(
              (int)
                  requests.values().stream()
                      .filter(q -> q.seq.length > 0)
                      .mapToLong(q -> q.seq[0])
                      .distinct()
                      .count());
    }
    assertThat(routed).isGreaterThan(300);
    if (pressureWeight > 0) assertThat(pressured).as("pressure term exercised").isGreaterThan(50);
    if (busyLimits) assertThat(busySeen).as("busy ranks seen").isGreaterThan(20);
    for (String id : new ArrayList<>(requests.keySet())) assertThat(router.free(id)).isTrue();
    assertThat(router.loads()).allSatisfy(l -> assertThat(l.isIdle()).isTrue());
    assertThat(router.rootBlocksInFlight()).isZero();
  }

  private static void register(KvRouter router, TreeMap<Worker, Rank> ranks, long id) {
    int dp = 1 + (int) id % 2;
    long kv = id % 3 == 0 ? 16 : 0; // capacity known for some workers only
    router.registerWorker(id, dp, BS, kv);
    for (int r = 0; r < dp; r++) ranks.put(new Worker(id, r), new Rank(kv));
  }

  private static Worker randomRank(Random rnd, TreeMap<Worker, Rank> ranks) {
    List<Worker> all = new ArrayList<>(ranks.keySet());
    return all.get(rnd.nextInt(all.size()));
  }

  /** One rank's terms for a prompt, from the model alone. */
  private Expected expected(
      Worker w,
      Rank k,
      Map<String, Req> requests,
      long[] seq,
      int isl,
      boolean busyLimits,
      long now) {
    int overlap = 0;
    while (overlap < seq.length && k.cached.contains(seq[overlap])) overlap++;
    Set<Long> active = new HashSet<>();
    long prefill = 0;
    for (Req q : requests.values()) {
      if (!q.worker.equals(w)) continue;
      for (long h : q.seq) active.add(h);
      prefill += q.prefill[0];
    }
    int activeBlocks = active.size();
    for (long h : seq) active.add(h);
    long own = Math.max(0, isl - (long) overlap * BS);
    boolean busy =
        busyLimits
            && (prefill > BUSY_PREFILL
                || (k.kvBlocks > 0 && activeBlocks > BUSY_FRACTION * k.kvBlocks));
    return new Expected(
        w,
        overlap,
        overlap > 0 ? k.cached.size() : 0,
        (prefill + own) / (double) BS,
        active.size(),
        busy,
        k.evicted(now));
  }

  private static void assertTerms(int step, Candidate c, Expected x) {
    assertThat(c.worker()).isEqualTo(x.worker);
    assertThat(c.overlapBlocks()).as("step %d %s overlap", step, x.worker).isEqualTo(x.overlap);
    assertThat(c.cachedBlocks()).as("step %d %s cached", step, x.worker).isEqualTo(x.cached);
    assertThat(c.prefillBlocks())
        .as("step %d %s prefill", step, x.worker)
        .isEqualTo(x.prefillBlocks);
    assertThat(c.decodeBlocks()).as("step %d %s decode", step, x.worker).isEqualTo(x.decodeBlocks);
  }

  private static double tol(double v) {
    return TOLERANCE * Math.max(1, Math.abs(v));
  }

  /** 0..9 blocks (plus a partial one) over a token tree with fan-out 3, so prefixes are shared. */
  private static int[] prompt(Random rnd) {
    int blocks = rnd.nextInt(10);
    int[] t = new int[blocks * BS + rnd.nextInt(BS)];
    for (int b = 0; b < blocks; b++) {
      int branch = rnd.nextInt(3);
      for (int i = 0; i < BS; i++) t[b * BS + i] = branch * 100 + i;
    }
    for (int i = blocks * BS; i < t.length; i++) t[i] = 7;
    return t;
  }
}
