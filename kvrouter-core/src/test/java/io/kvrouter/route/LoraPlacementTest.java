package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SaltedHashers;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * LoRA placement (docs/routing.md, "LoRA adapters"): {@link LoraResidency} against a naive
 * reference of per-engine LRU lists, and the router's choice with its term against a cost computed
 * by hand from the same reference.
 */
class LoraPlacementTest {
  private static final int BS = KvRouterTest.BS;
  private static final double LOAD = 7.0;
  private static final double EVICT = 5.0;

  /** The reference: one engine's --max-loras and resident adapters, least recently used first. */
  private static final class RefEngine {
    final int maxLoras;
    final List<String> lru = new ArrayList<>();

    RefEngine(int maxLoras) {
      this.maxLoras = maxLoras;
    }

    String use(String a) {
      if (lru.remove(a)) {
        lru.add(a);
        return null;
      }
      String evicted = maxLoras > 0 && lru.size() >= maxLoras ? lru.remove(0) : null;
      lru.add(a);
      return evicted;
    }

    double cost(String a) {
      if (lru.contains(a)) return 0;
      return maxLoras > 0 && lru.size() >= maxLoras ? LOAD + EVICT : LOAD;
    }
  }

  @Test
  void residencyFollowsTheReferenceLru() {
    for (long seed = 1; seed <= 40; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      LoraResidency table = new LoraResidency(new LoraCost(LOAD, EVICT));
      Map<Long, RefEngine> ref = new HashMap<>();
      for (int step = 0; step < 400; step++) {
        long w = 1L + rnd.nextInt(5);
        String a = "a" + rnd.nextInt(9);
        String at = "seed " + seed + " step " + step;
        switch (rnd.nextInt(10)) {
          case 0 -> {
            int max = rnd.nextInt(5);
            RefEngine old = ref.get(w);
            RefEngine e = new RefEngine(max);
            if (old != null) {
              e.lru.addAll(old.lru);
              while (max > 0 && e.lru.size() > max) e.lru.remove(0);
            }
            ref.put(w, e);
            table.track(w, max);
          }
          case 1 -> assertThat(table.forget(w)).as(at).isEqualTo(ref.remove(w) != null);
          case 2 -> {
            List<String> listed = new ArrayList<>();
            for (int i = rnd.nextInt(4); i > 0; i--) listed.add("a" + rnd.nextInt(9));
            RefEngine e = ref.get(w);
            if (e != null) { // known ones keep their order, new ones follow; oldest dropped
              List<String> next = new ArrayList<>();
              for (String x : e.lru) if (listed.contains(x)) next.add(x);
              for (String x : listed) if (!next.contains(x)) next.add(x);
              while (e.maxLoras > 0 && next.size() > e.maxLoras) next.remove(0);
              e.lru.clear();
              e.lru.addAll(next);
            }
            assertThat(table.replace(w, listed)).as(at).isEqualTo(e != null);
          }
          case 3 -> {
            RefEngine e = ref.get(w);
            assertThat(table.unloaded(w, a)).as(at).isEqualTo(e != null && e.lru.remove(a));
          }
          default -> {
            RefEngine e = ref.get(w);
            assertThat(table.loaded(w, a)).as(at).isEqualTo(e == null ? null : e.use(a));
          }
        }
        for (long v = 1; v <= 5; v++) {
          RefEngine e = ref.get(v);
          assertThat(table.resident(v))
              .as(at + " worker " + v)
              .isEqualTo(e == null ? List.of() : e.lru);
          assertThat(table.maxLoras(v)).as(at).isEqualTo(e == null ? -1 : e.maxLoras);
          for (int i = 0; i < 9; i++) {
            String x = "a" + i;
            assertThat(table.cost(v, x))
                .as(at + " cost of " + x + " on " + v)
                .isEqualTo(e == null ? 0.0 : e.cost(x));
            assertThat(table.isResident(v, x)).isEqualTo(e != null && e.lru.contains(x));
          }
        }
      }
    }
  }

  /**
   * Random fleets: each worker with a random --max-loras, resident adapters and background load
   * (requests of random length, prefill not completed, pinned there with allowed workers); then
   * adapter requests of fresh prompts (no overlap anywhere). Each must go to a worker of least
   * hand-computed cost: prefill blocks + decode blocks (overlap weight 1, no pressure) + the
   * reference's LoRA cost; after each, the worker uses the adapter, in the table and the reference.
   */
  @Test
  void routerPicksTheCheapestPlacementOfTheReference() {
    for (long seed = 1; seed <= 30; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      LoraResidency table = new LoraResidency(new LoraCost(LOAD, EVICT));
      KvRouter router = KvRouter.builder(BS).selector(withLora(table, 0, seed)).build();
      int workers = 2 + rnd.nextInt(4);
      Map<Long, RefEngine> ref = new HashMap<>();
      long[] loadBlocks = new long[workers + 1];
      int next = 1_000;
      for (long w = 1; w <= workers; w++) {
        router.registerWorker(w, 1, BS);
        RefEngine e = new RefEngine(1 + rnd.nextInt(3));
        ref.put(w, e);
        table.track(w, e.maxLoras);
        for (int i = rnd.nextInt(4); i > 0; i--) {
          String a = "a" + rnd.nextInt(6);
          e.use(a);
          table.loaded(w, a);
        }
        for (int i = rnd.nextInt(3); i > 0; i--) {
          int blocks = 1 + rnd.nextInt(5);
          int[] t = KvRouterTest.tokens(next, blocks * BS);
          next += blocks * BS;
          RouteOptions only = RouteOptions.defaults().withAllowedWorkers(w);
          KvRouterTest.routed(router.route("bg-" + w + "-" + i, t, only));
          loadBlocks[(int) w] += blocks;
        }
      }
      for (int r = 0; r < 12; r++) {
        String a = "a" + rnd.nextInt(6);
        int blocks = 1 + rnd.nextInt(4);
        int[] t = KvRouterTest.tokens(next, blocks * BS);
        next += blocks * BS;
        double best = Double.POSITIVE_INFINITY;
        double[] expected = new double[workers + 1];
        for (int w = 1; w <= workers; w++) {
          // prefill (load + this prompt) + decode (load + this prompt's new blocks) + LoRA
          expected[w] = 2.0 * (loadBlocks[w] + blocks) + ref.get((long) w).cost(a);
          best = Math.min(best, expected[w]);
        }
        RouteDecision.Routed d =
            KvRouterTest.routed(router.route("r" + r, t, RouteOptions.defaults().withLora(a)));
        int chosen = (int) d.worker().workerId();
        assertThat(expected[chosen])
            .as("seed %d request %d for %s: costs %s", seed, r, a, Arrays.toString(expected))
            .isEqualTo(best);
        loadBlocks[chosen] += blocks;
        ref.get((long) chosen).use(a);
        table.loaded(chosen, a);
      }
    }
  }

  /**
   * The term weighs a load against the KV overlap: a long cached prefix beats a resident adapter.
   */
  @Test
  void aLoadIsWeighedAgainstOverlap() {
    LoraResidency table = new LoraResidency(new LoraCost(LOAD, EVICT));
    KvRouter router = KvRouter.builder(BS).selector(withLora(table, 1, 1)).build();
    router.registerWorker(1, 1, BS);
    router.registerWorker(2, 1, BS);
    // worker 2 caches 40 blocks of a prompt for the adapter (its hashes salted with its name)
    int[] cachedPrompt = KvRouterTest.tokens(1, 40 * BS);
    long[] local = new SaltedHashers(BS).get("sql", null).localHashes(cachedPrompt);
    router.applyEvent(
        new RouterEvent(
            Worker.of(2), 1, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
    table.track(1, 2);
    table.track(2, 2);
    table.loaded(1, "sql");
    RouteOptions sql = RouteOptions.defaults().withLora("sql");
    int[] shortPrompt = KvRouterTest.tokens(5_000, 2 * BS);
    // no overlap anywhere: the engine that has the adapter; the term's share is reported
    RouteDecision.Routed a = KvRouterTest.routed(router.route("a", shortPrompt, sql));
    assertThat(a.worker()).isEqualTo(Worker.of(1));
    assertThat(a.scorerNames()).endsWith(Scorers.LORA);
    int lora = a.scorerNames().indexOf(Scorers.LORA);
    assertThat(a.contribution(1, lora)).isEqualTo(LOAD); // worker 2: a load, no eviction
    // 40 cached blocks on worker 2 outweigh a load of 7
    assertThat(KvRouterTest.routed(router.route("b", cachedPrompt, sql)).worker())
        .isEqualTo(Worker.of(2));
    // a request that names no adapter pays no load
    assertThat(table.cost(2, null)).isZero();
  }

  /** Default cost without pressure, plus the LoRA term of {@code table} at weight 1. */
  private static WorkerSelector withLora(LoraResidency table, double pressureWeight, long seed) {
    return WorkerSelector.withTerm(
        WorkerSelector.costBased(1, pressureWeight, 0, seed), Scorers.LORA, 1, table.scorer());
  }

  @Test
  void badCostsAreRefused() {
    assertThatThrownBy(() -> new LoraCost(-1, 0)).hasMessageContaining("loadCost");
    assertThatThrownBy(() -> new LoraCost(0, Double.NaN)).hasMessageContaining("evictionCost");
    assertThatThrownBy(() -> new LoraResidency(LoraCost.defaults()).track(1, -1))
        .hasMessageContaining("maxLoras");
    KvRouter router = KvRouterTest.router(1);
    assertThatThrownBy(() -> WorkerSelector.withTerm((c, costs) -> 0, Scorers.LORA, 1, (c, i) -> 0))
        .hasMessageContaining("needs a cost of named terms");
    assertThat(router.inFlight()).isZero();
  }
}
