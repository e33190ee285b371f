package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The route path's shortcuts (KvRouter.decide's plain passes, SlotTable.prepare clearing only what
 * the last route wrote, the exact reciprocal of a power-of-two block size, the pressure term left
 * unpriced before any eviction, BlockRefs) against the general path and a recomputation written
 * here. On seeded random fleets (1 to 300 ranks, block sizes powers of two or not, shared system
 * prompts cached by random ranks, routes and frees in random order, sometimes a busy limit so that
 * some ranks are busy, sometimes a Removed event so that the pressure term counts), two routers get
 * the same events and requests: one routes with the default options (the plain passes when no rank
 * is busy), the other with every worker allowed by name (always the general loop, the same
 * candidates). Their decisions must agree in every figure and every cost bit, ties and their seeded
 * draws included. And every candidate's prefill and decode blocks must equal the formula of
 * DESIGN.md §6 computed from the loads read before the route and a model of each rank's active
 * blocks kept here (a map of block counts per rank), and its cost, before any eviction, {@code
 * overlapWeight × prefill + decode + pressureWeight × newBlocks × 0}.
 */
class RoutePlainPathTest {
  private static final long BASE_SEED = 0x9_1A1_2026L;

  @Test
  void thePlainPassesDecideAsTheGeneralLoopAndTheFormula() {
    for (int c = 0; c < 80; c++) {
      runCase(BASE_SEED + c, 4, false);
    }
  }

  /**
   * Prompts cached by many ranks (up to 60 per system prompt, the index's answer in no particular
   * order) on fleets of 64 to 300: the plain passes take the matched ranks' triples from the
   * positions prepare noted, sorted, up to KvRouter.SORTED_TRIPLES_MAX of them, and scan past that.
   */
  @Test
  void manyMatchedRanksDecideAsTheGeneralLoopAndTheFormula() {
    for (int c = 0; c < 40; c++) {
      runCase(BASE_SEED + 1_000 + c, 61, true);
    }
  }

  private static void runCase(long seed, int holders, boolean large) {
    final SplittableRandom r = new SplittableRandom(seed);
    final String what = "seed " + seed;
    final int ranks =
        switch (large ? 3 : r.nextInt(4)) {
          case 0 -> 1 + r.nextInt(4);
          case 1 -> 8 + r.nextInt(24);
          default -> 64 + r.nextInt(237);
        };
    final int bs = r.nextBoolean() ? 16 : r.nextBoolean() ? 1 << r.nextInt(6) : 3 + r.nextInt(20);
    final double overlapWeight = r.nextBoolean() ? 1.0 : r.nextInt(5) * 0.5;
    final long routerSeed = r.nextLong();
    final int busyRequests = r.nextInt(3) == 0 ? 1 + r.nextInt(4) : 0;
    final long[] clock = {1_000_000_000L}; // both routers' time (the eviction counts decay with it)
    final KvRouter plain = router(bs, overlapWeight, routerSeed, busyRequests, clock);
    final KvRouter general = router(bs, overlapWeight, routerSeed, busyRequests, clock);
    final long[] ids = new long[ranks];
    for (int w = 0; w < ranks; w++) {
      ids[w] = 10L * w + 3; // not the ranks' positions
      plain.registerWorker(ids[w], 1, bs, 1_000_000);
      general.registerWorker(ids[w], 1, bs, 1_000_000);
    }
    final RouteOptions all = RouteOptions.defaults().withAllowedWorkers(ids);
    final BlockHasher hasher = BlockHasher.of(bs);
    // a few system prompts, each cached by a few ranks (Stored events), some by none
    final int prefixes = 1 + r.nextInt(6);
    final int[][] prefix = new int[prefixes][];
    long eventId = 0;
    for (int p = 0; p < prefixes; p++) {
      prefix[p] = tokens(r, bs * (1 + r.nextInt(8)));
      final long[] local = hasher.localHashes(prefix[p]);
      final long[] seq = SequenceHasher.sequenceHashes(local);
      for (int k = r.nextInt(holders); k > 0; k--) {
        final RouterEvent e =
            new RouterEvent(
                Worker.of(ids[r.nextInt(ranks)]), eventId++, CacheEvent.storedAtRoot(seq, local));
        plain.applyEvent(e);
        general.applyEvent(e);
      }
    }
    // the model: each rank's active blocks as counts of sequence hashes, each request's rank
    final Map<Worker, Map<Long, Integer>> active = new HashMap<>();
    final Map<String, Worker> placed = new HashMap<>();
    final Map<String, long[]> chains = new HashMap<>();
    final List<String> inFlight = new ArrayList<>();
    boolean evicted = false;
    for (int step = 0; step < 150; step++) {
      clock[0] += r.nextInt(50_000_000);
      if (!inFlight.isEmpty() && r.nextInt(3) == 0) {
        final String id = inFlight.remove(r.nextInt(inFlight.size()));
        assertThat(plain.free(id)).as(what).isTrue();
        assertThat(general.free(id)).as(what).isTrue();
        final Map<Long, Integer> counts = active.get(placed.remove(id));
        for (long h : chains.remove(id)) counts.merge(h, -1, (a, b) -> a + b == 0 ? null : a + b);
        continue;
      }
      if (!evicted && r.nextInt(60) == 0) { // from now on the pressure term counts
        final long[] local = hasher.localHashes(prefix[r.nextInt(prefixes)]);
        final RouterEvent e =
            new RouterEvent(
                Worker.of(ids[r.nextInt(ranks)]),
                eventId++,
                CacheEvent.removed(SequenceHasher.sequenceHashes(local)));
        plain.applyEvent(e);
        general.applyEvent(e);
        evicted = true;
      }
      final int[] prompt = prompt(r, prefix[r.nextInt(prefixes)], bs);
      final long[] seq = SequenceHasher.sequenceHashes(hasher.localHashes(prompt));
      final String id = "q" + step;
      final Map<Worker, WorkerLoad> before = new HashMap<>();
      for (WorkerLoad l : plain.loads()) before.put(l.worker(), l);
      final RouteDecision a = plain.route(id, prompt);
      final RouteDecision b = general.route(id, prompt, all);
      assertSame(what + " step " + step, a, b);
      if (a instanceof RouteDecision.Routed routed) {
        for (CandidateCost cc : routed.candidates()) {
          final Candidate cand = cc.candidate();
          final WorkerLoad load = before.get(cand.worker());
          final long charged =
              Math.max(0L, (long) prompt.length - (long) cand.overlapBlocks() * bs);
          final double prefill = (load.activePrefillTokens() + charged) / (double) bs;
          final Map<Long, Integer> counts = active.getOrDefault(cand.worker(), Map.of());
          int fresh = 0;
          for (long h : seq) if (!counts.containsKey(h)) fresh++;
          assertThat(cand.prefillBlocks()).as(what + " step " + step).isEqualTo(prefill);
          assertThat(cand.decodeBlocks())
              .as(what + " step " + step)
              .isEqualTo(load.activeBlocks() + fresh);
          if (!evicted) {
            final int newBlocks = Math.max(0, seq.length - cand.overlapBlocks());
            double cost = overlapWeight * prefill;
            cost =
                overlapWeight == 0 ? 1.0 * cand.decodeBlocks() : cost + 1.0 * cand.decodeBlocks();
            cost = cost + KvRouter.DEFAULT_PRESSURE_WEIGHT * newBlocks * 0.0;
            assertThat(Double.doubleToRawLongBits(cc.cost()))
                .as(what + " step " + step + " cost of " + cand.worker())
                .isEqualTo(Double.doubleToRawLongBits(cost));
          }
        }
        placed.put(id, routed.worker());
        chains.put(id, seq);
        inFlight.add(id);
        final Map<Long, Integer> counts =
            active.computeIfAbsent(routed.worker(), w -> new HashMap<>());
        for (long h : seq) counts.merge(h, 1, Integer::sum);
      }
    }
  }

  private static KvRouter router(
      int bs, double overlapWeight, long seed, int busyRequests, long[] clock) {
    KvRouter.Builder b =
        KvRouter.builder(bs).overlapWeight(overlapWeight).seed(seed).nanoClock(() -> clock[0]);
    if (busyRequests > 0) b.busyRequests(busyRequests);
    return b.build();
  }

  private static int[] tokens(SplittableRandom r, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) t[i] = r.nextInt(32_000);
    return t;
  }

  /** The prefix (or its first blocks, or nothing) and a random tail, sometimes not whole blocks. */
  private static int[] prompt(SplittableRandom r, int[] prefix, int bs) {
    final int keep = r.nextInt(4) == 0 ? bs * r.nextInt(1 + prefix.length / bs) : prefix.length;
    final int tail = r.nextInt(4) == 0 ? 0 : r.nextInt(6 * bs + 3);
    final int[] t = new int[keep + tail];
    System.arraycopy(prefix, 0, t, 0, keep);
    for (int i = keep; i < t.length; i++) t[i] = r.nextInt(32_000);
    return t;
  }

  private static void assertSame(String what, RouteDecision a, RouteDecision b) {
    assertThat(a.getClass()).as(what).isEqualTo(b.getClass());
    if (a instanceof RouteDecision.AllBusy x && b instanceof RouteDecision.AllBusy y) {
      assertThat(x.candidates()).as(what).isEqualTo(y.candidates());
    }
    if (a instanceof RouteDecision.Routed x && b instanceof RouteDecision.Routed y) {
      assertThat(x.worker()).as(what).isEqualTo(y.worker());
      assertThat(x.overlapBlocks()).as(what).isEqualTo(y.overlapBlocks());
      assertThat(x.busy()).as(what).isEqualTo(y.busy());
      assertThat(x.candidates()).as(what).hasSameSizeAs(y.candidates());
      for (int i = 0; i < x.candidates().size(); i++) {
        final CandidateCost p = x.candidates().get(i);
        final CandidateCost q = y.candidates().get(i);
        assertThat(p.candidate()).as(what).isEqualTo(q.candidate());
        assertThat(Double.doubleToRawLongBits(p.cost()))
            .as(what + " cost " + i)
            .isEqualTo(Double.doubleToRawLongBits(q.cost()));
      }
    }
  }
}
