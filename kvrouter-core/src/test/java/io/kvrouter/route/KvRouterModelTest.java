package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.OverlapScores;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Seeded random walks through the router (routes with shared prefixes and allowed-worker subsets,
 * prefill completions, frees, expiry, KV events, unregistering and registering again), checking
 * every candidate's load terms against a naive model that recomputes them from the requests in
 * flight, and that the choice is the minimum cost.
 */
class KvRouterModelTest {
  private static final int BS = 4;
  private static final long EXPIRY = 1_000;

  /** A request of the model. */
  private record Req(Worker worker, Set<Long> blocks, long[] prefill, long deadline, long root) {}

  @Test
  void candidateLoadsAgreeWithANaiveModel() {
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
    KvRouter router =
        KvRouter.builder(BS)
            .requestExpiry(Duration.ofNanos(EXPIRY))
            .nanoClock(clock::get)
            .seed(seed)
            .build();
    int workers = 3 + rnd.nextInt(4);
    for (int w = 0; w < workers; w++) router.registerWorker(w, 1 + w % 2, BS);
    BlockHasher hasher = BlockHasher.of(BS);
    Map<String, Req> model = new HashMap<>();
    long eventId = 0;
    int routed = 0;
    for (int step = 0; step < 1_500; step++) {
      clock.addAndGet(rnd.nextInt(20));
      long now = clock.get();
      model.values().removeIf(r -> now - r.deadline >= 0);
      int op = rnd.nextInt(20);
      if (op < 9) {
        int[] tokens = prompt(rnd);
        long[] seq = SequenceHasher.sequenceHashes(hasher.localHashes(tokens));
        RouteOptions options = RouteOptions.defaults();
        if (rnd.nextInt(4) == 0) options = options.withAllowedWorkers(rnd.nextInt(workers));
        String id = "r" + rnd.nextInt(200);
        if (model.containsKey(id)) continue; // duplicates are covered elsewhere
        OverlapScores before = router.overlaps(tokens, options);
        RouteDecision d = router.route(id, tokens, options);
        if (!(d instanceof RouteDecision.Routed r)) {
          assertThat(d).isInstanceOf(RouteDecision.NoWorkers.class);
          continue;
        }
        routed++;
        double best = Double.POSITIVE_INFINITY;
        for (CandidateCost cc : r.candidates()) {
          Candidate c = cc.candidate();
          Worker w = c.worker();
          assertThat(c.overlapBlocks()).isEqualTo(before.score(w));
          Set<Long> blocks = new HashSet<>();
          long prefill = 0;
          for (Req q : model.values()) {
            if (!q.worker.equals(w)) continue;
            blocks.addAll(q.blocks);
            prefill += q.prefill[0];
          }
          for (long h : seq) blocks.add(h);
          long own = Math.max(0, tokens.length - (long) c.overlapBlocks() * BS);
          assertThat(c.decodeBlocks()).as("step %d %s decode", step, w).isEqualTo(blocks.size());
          assertThat(c.prefillBlocks())
              .as("step %d %s prefill", step, w)
              .isEqualTo((prefill + own) / (double) BS);
          best = Math.min(best, cc.cost());
        }
        assertThat(r.cost()).isEqualTo(best);
        Set<Long> mine = new HashSet<>();
        for (long h : seq) mine.add(h);
        long charge = Math.max(0, tokens.length - (long) r.overlapBlocks() * BS);
        model.put(
            id,
            new Req(
                r.worker(), mine, new long[] {charge}, now + EXPIRY, seq.length == 0 ? 0 : seq[0]));
      } else if (op < 12) {
        String id = "r" + rnd.nextInt(200);
        boolean present = model.containsKey(id);
        assertThat(router.markPrefillCompleted(id)).isEqualTo(present);
        if (present) model.get(id).prefill[0] = 0;
      } else if (op < 16) {
        String id = "r" + rnd.nextInt(200);
        assertThat(router.free(id)).isEqualTo(model.remove(id) != null);
      } else if (op < 19) {
        // the engine of a random rank caches a random prompt prefix
        Worker w = new Worker(rnd.nextInt(workers), 0);
        long[] local = hasher.localHashes(prompt(rnd));
        if (local.length > 0) {
          router.applyEvent(
              new RouterEvent(
                  w,
                  eventId++,
                  CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
        }
      } else {
        long id = rnd.nextInt(workers);
        router.unregisterWorker(id);
        model.values().removeIf(q -> q.worker.workerId() == id);
        router.registerWorker(id, 1 + (int) id % 2, BS);
      }
      assertThat(router.inFlight()).as("step %d", step).isEqualTo(model.size());
      assertThat(router.rootBlocksInFlight())
          .isEqualTo(
              (int)
                  model.values().stream()
                      .filter(q -> !q.blocks.isEmpty())
                      .map(Req::root)
                      .distinct()
                      .count());
    }
    assertThat(routed).isGreaterThan(300);
    for (String id : new ArrayList<>(model.keySet())) assertThat(router.free(id)).isTrue();
    assertThat(router.loads()).allSatisfy(l -> assertThat(l.isIdle()).isTrue());
    assertThat(router.rootBlocksInFlight()).isZero();
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
