package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.transport.kvevents.Workload;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Consumer;

/**
 * A few mock engines (test support): each a {@link PrefixCache} whose events go to one listener
 * (usually a {@link NatsEventPublisher}) and are also kept in {@link #history()}. A seeded workload
 * admits prompts that share system prompts, releases them, evicts and now and then clears, with a
 * small block pool so that admissions evict. The engines' own {@code lookup} is the expected answer
 * for a replica's index. Test thread only.
 */
final class EngineFleet {
  static final int BLOCK_SIZE = 4;
  static final BlockHasher HASHER = BlockHasher.of(BLOCK_SIZE);

  private final Random rnd;
  private final Workload.Prompts prompts;
  private final List<PrefixCache> engines = new ArrayList<>();
  private final List<Workload> workloads = new ArrayList<>();
  private final List<RouterEvent> history = new ArrayList<>();
  private int stored;
  private int removed;
  private int cleared;

  /** Engines for workers 1, 2 (ranks 0 and 1) and 3, publishing to {@code sink}. */
  EngineFleet(long seed, Consumer<RouterEvent> sink) {
    this.rnd = new Random(seed);
    this.prompts = new Workload.Prompts(rnd, BLOCK_SIZE, 5, 2, 6, 4, 100);
    Consumer<RouterEvent> listener =
        e -> {
          history.add(e);
          switch (e.data()) {
            case CacheEvent.Stored s -> stored++;
            case CacheEvent.Removed r -> removed++;
            case CacheEvent.Cleared c -> cleared++;
          }
          sink.accept(e);
        };
    for (Worker w :
        List.of(new Worker(1, 0), new Worker(2, 0), new Worker(2, 1), new Worker(3, 0))) {
      engines.add(new PrefixCache(w, BLOCK_SIZE, 40, listener));
      workloads.add(new Workload(rnd, prompts, true));
    }
  }

  /** Runs {@code steps} workload steps over random engines. */
  void run(int steps) {
    for (int i = 0; i < steps; i++) step();
  }

  /** Runs steps until at least one event was published. */
  void runUntilPublished() {
    int before = history.size();
    while (history.size() == before) step();
  }

  private void step() {
    int e = rnd.nextInt(engines.size());
    workloads.get(e).step(Workload.Engine.of(engines.get(e)));
  }

  /** Every event the engines published so far, in order. */
  List<RouterEvent> history() {
    return history;
  }

  int storedEvents() {
    return stored;
  }

  int removedEvents() {
    return removed;
  }

  int clearedEvents() {
    return cleared;
  }

  /** Prompts to compare on: recent ones, the system prompts, their halves and fresh ones. */
  List<int[]> probes() {
    return prompts.probes();
  }

  /** Asserts that {@code index} scores every engine's worker as the engine's own lookup. */
  void assertIndexMatches(String name, KvIndex index) {
    index.flush();
    int checked = 0;
    for (int[] p : probes()) {
      OverlapScores s = index.findMatches(HASHER.localHashes(p), false);
      for (PrefixCache engine : engines) {
        assertThat(s.score(engine.worker()))
            .as("%s: score of %s for a prompt of %d tokens", name, engine.worker(), p.length)
            .isEqualTo(engine.lookup(p));
        checked++;
      }
    }
    assertThat(checked).isPositive();
  }

  /** Asserts that two indexes give the same scores for every probe. */
  void assertSameAnswers(KvIndex a, KvIndex b) {
    a.flush();
    b.flush();
    for (int[] p : probes()) {
      long[] q = HASHER.localHashes(p);
      assertThat(a.findMatches(q, false).scores())
          .as("scores for a prompt of %d tokens", p.length)
          .isEqualTo(b.findMatches(q, false).scores());
    }
  }

  /** How many blocks the engines hold in all. */
  int cachedBlocks() {
    int n = 0;
    for (PrefixCache e : engines) n += e.cachedBlocks();
    return n;
  }
}
