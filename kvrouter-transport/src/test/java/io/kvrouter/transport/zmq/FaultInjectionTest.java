package io.kvrouter.transport.zmq;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.transport.TestBudget;
import io.kvrouter.transport.TestWaits;
import io.kvrouter.transport.kvevents.VllmEncoder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Nothing is lost under event faults (issue 9): simulated vLLM engines publish over real ZMQ
 * sockets to three router replicas (a radix tree, a positional index and the compressed tree, the
 * router's default), each engine reaching each replica through its own {@link FaultyLink} that
 * drops, duplicates and delays messages; now and then an engine restarts (its cache and sequence
 * numbers start over) and a replica restarts (a new index warm-started from the other replica's
 * {@code dump()}, new subscribers). Then the faults stop, the engines take a few more steps so that
 * every gap shows, and each replica's index must hold exactly the blocks every engine caches: for
 * every worker, the set of block hashes in the index's dump equals the set in the engine's cache,
 * and every probe prompt scores what the engine would serve from its cache.
 *
 * <p>Seeded ({@code -Dkvrouter.faults.seed}); the CI run is short. The long run of
 * docs/RELIABILITY.md sets {@code -Dkvrouter.faults.rounds}.
 */
@Timeout(value = 30, unit = TimeUnit.MINUTES)
class FaultInjectionTest {
  private static final int ENGINES = Integer.getInteger("kvrouter.faults.engines", 3);
  private static final int ROUNDS = TestBudget.count("kvrouter.faults.rounds", 60, 2000);
  private static final int STEPS = TestBudget.count("kvrouter.faults.steps", 25, 100);
  private static final long SEED = Long.getLong("kvrouter.faults.seed", 9);
  private static final int BLOCK_SIZE = 4;
  private static final int CAPACITY = 64;
  private static final int REPLAY_BUFFER = 2_000;
  private static final double DROP = 0.04;
  private static final double DUPLICATE = 0.04;
  private static final double DELAY = 0.04;
  private static final int MAX_DELAY_MS = 20;
  private static final double ENGINE_RESTART = 0.03; // per engine and round
  private static final int ROUTER_RESTART_EVERY = 7; // rounds
  private static final Duration WAIT = TestWaits.WAIT;

  private final List<EngineSim> engines = new ArrayList<>();
  private final List<Replica> replicas = new ArrayList<>();

  /** One router replica: its index, and per engine a link and a subscriber. */
  private final class Replica {
    final String name;
    final String kindName;
    final Supplier<KvIndex> indexKind;
    final List<FaultyLink> links = new ArrayList<>();
    final List<ZmqEventSubscriber> subs = new ArrayList<>();
    KvIndex index;
    int restarts;

    /** Per counter, the sum over the subscribers of earlier lives of this replica. */
    final long[] earlier = new long[6];

    Replica(String name, String kindName, Supplier<KvIndex> indexKind, long seed) {
      this.name = name;
      this.kindName = kindName;
      this.indexKind = indexKind;
      this.index = indexKind.get();
      for (int e = 0; e < ENGINES; e++) {
        links.add(
            new FaultyLink(
                    engines.get(e).pub.pubEndpoint(),
                    seed * 31 + e,
                    DROP,
                    DUPLICATE,
                    DELAY,
                    MAX_DELAY_MS)
                .start());
      }
      subscribeAll();
    }

    void subscribeAll() {
      subs.clear();
      for (int e = 0; e < ENGINES; e++) {
        long before = links.get(e).subscriptionsSeen();
        subs.add(
            ZmqEventSubscriber.connect(links.get(e).endpoint(), spec(e))
                .routerHasher(BlockHasher.of(BLOCK_SIZE))
                .sink(IngestSink.deviceIndex(index))
                .reconnectBackoff(Duration.ofMillis(20), Duration.ofMillis(200))
                .handshakeTimeout(Duration.ofMillis(300))
                .start());
        links.get(e).awaitSubscriptions(before + 1, WAIT);
      }
    }

    /** The replica process dies and comes back, warm-started from {@code peer}'s dump. */
    void restartFrom(Replica peer) {
      for (ZmqEventSubscriber s : subs) {
        s.close();
        long[] c = counters(s.stats());
        for (int i = 0; i < c.length; i++) earlier[i] += c[i];
      }
      index.close();
      index = indexKind.get();
      for (RouterEvent ev : peer.index.dump()) index.apply(ev);
      subscribeAll();
      restarts++;
    }

    /** gaps, repeats skipped, replays, batches replayed, restarts seen, batches lost: all lives. */
    long[] totals() {
      long[] t = earlier.clone();
      for (ZmqEventSubscriber s : subs) {
        long[] c = counters(s.stats());
        for (int i = 0; i < c.length; i++) t[i] += c[i];
      }
      return t;
    }

    void faults(boolean on) {
      for (FaultyLink l : links) l.faults(on);
    }

    void close() {
      for (ZmqEventSubscriber s : subs) s.close();
      for (FaultyLink l : links) l.close();
      index.close();
    }
  }

  private static long[] counters(IngestStats s) {
    return new long[] {
      s.gaps(), s.duplicates(), s.replays(), s.replayedMessages(), s.restarts(), s.lostMessages()
    };
  }

  private EngineSpec spec(int engine) {
    return EngineSpec.of(workerId(engine), BLOCK_SIZE)
        .withTopic(topic(engine))
        .withReplay(engines.get(engine).pub.replayEndpoint());
  }

  private static long workerId(int engine) {
    return 100L + engine;
  }

  private static String topic(int engine) {
    return "kv-" + engine;
  }

  @AfterEach
  void tearDown() {
    for (Replica r : replicas) r.close();
    for (EngineSim e : engines) e.pub.close();
  }

  @Test
  void theIndexEqualsEveryEngineCacheAfterFaults() {
    SplittableRandom rnd = new SplittableRandom(SEED);
    for (int e = 0; e < ENGINES; e++) {
      FakeVllmPublisher pub = FakeVllmPublisher.bound(topic(e), REPLAY_BUFFER);
      engines.add(
          new EngineSim(pub, BLOCK_SIZE, CAPACITY, SEED * 1000 + e, VllmEncoder.tagged(), null)
              .async());
    }
    replicas.add(new Replica("A", "concurrentRadixTree()", KvIndexes::concurrentRadixTree, SEED));
    replicas.add(new Replica("B", "positional(4)", () -> KvIndexes.positional(4), SEED + 1));
    replicas.add(
        new Replica(
            "C", "concurrentCompressedTree()", KvIndexes::concurrentCompressedTree, SEED + 2));

    int engineRestarts = 0;
    for (int round = 0; round < ROUNDS; round++) {
      for (int e = 0; e < ENGINES; e++) {
        EngineSim sim = engines.get(e);
        if (round > 0 && rnd.nextDouble() < ENGINE_RESTART) {
          sim.restart();
          engineRestarts++;
        }
        sim.run(STEPS);
      }
      if (round % ROUTER_RESTART_EVERY == ROUTER_RESTART_EVERY - 1) {
        int victim = (round / ROUTER_RESTART_EVERY) % replicas.size();
        replicas.get(victim).restartFrom(replicas.get((victim + 1) % replicas.size()));
      }
      pace();
      if (ROUNDS >= 200 && (round + 1) % (ROUNDS / 20) == 0) {
        long events = engines.stream().mapToLong(EngineSim::eventsPublished).sum();
        System.out.printf(
            "fault injection: round %d of %d, %d events%n", round + 1, ROUNDS, events);
      }
    }

    for (Replica r : replicas) r.faults(false);
    for (Replica r : replicas) for (FaultyLink l : r.links) l.awaitIdle(WAIT);
    for (EngineSim sim : engines) sim.run(3); // live traffic reveals the last gaps
    for (Replica r : replicas) awaitExact(r);

    long events = 0;
    for (EngineSim sim : engines) events += sim.eventsPublished();
    long dropped = 0;
    long duplicated = 0;
    long delayed = 0;
    for (Replica r : replicas) {
      for (FaultyLink l : r.links) {
        dropped += l.dropped.get();
        duplicated += l.duplicated.get();
        delayed += l.delayed.get();
      }
    }
    int routerRestarts = replicas.stream().mapToInt(r -> r.restarts).sum();
    StringBuilder report = new StringBuilder();
    report.append(
        String.format(
            "fault injection: seed %d, %d engines x %d rounds x %d steps: %d engine events, "
                + "%d batches; faults: %d dropped, %d duplicated, %d delayed, "
                + "%d engine restarts, %d router restarts; divergence 0%n",
            SEED,
            ENGINES,
            ROUNDS,
            STEPS,
            events,
            engines.stream().mapToLong(s -> s.batchesPublished()).sum(),
            dropped,
            duplicated,
            delayed,
            engineRestarts,
            routerRestarts));
    for (Replica r : replicas) {
      long[] t = r.totals();
      report.append(
          String.format(
              "  replica %s (%s, %d restarts warm-started from the other): %d gaps, %d repeats or "
                  + "stale messages skipped, %d replays (%d batches), %d engine restarts seen, "
                  + "%d batches not in a replay buffer when a restarted replica's subscriber "
                  + "asked from 0 (the warm start holds them)%n",
              r.name, r.kindName, r.restarts, t[0], t[1], t[2], t[3], t[4], t[5]));
    }
    System.out.print(report);

    assertThat(dropped).as("dropped").isPositive();
    assertThat(duplicated).as("duplicated").isPositive();
    assertThat(delayed).as("delayed").isPositive();
    assertThat(routerRestarts).isEqualTo(ROUNDS / ROUTER_RESTART_EVERY);
    if (ROUNDS >= 30) {
      assertThat(engineRestarts).as("engine restarts").isPositive();
    }
  }

  /** Keeps each subscriber within half a replay buffer of its engine, so no gap outruns replay. */
  private void pace() {
    long deadline = System.nanoTime() + WAIT.toNanos();
    for (Replica r : replicas) {
      for (int e = 0; e < ENGINES; e++) {
        while (engines.get(e).pub.lastSeq() - r.subs.get(e).lastSequence(topic(e))
            > REPLAY_BUFFER / 2) {
          if (System.nanoTime() > deadline) {
            throw new AssertionError(
                "replica " + r.name + " fell behind engine " + e + ": " + r.subs.get(e).stats());
          }
          FakeVllmPublisher.sleep(5);
        }
      }
    }
  }

  /** Waits until the replica's index holds exactly every engine's blocks; fails with the diff. */
  private void awaitExact(Replica r) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (true) {
      String why = divergence(r);
      if (why == null) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("replica " + r.name + " diverges: " + why);
      }
      FakeVllmPublisher.sleep(20);
    }
  }

  private String divergence(Replica r) {
    List<RouterEvent> dump = r.index.dump();
    BlockHasher hasher = BlockHasher.of(BLOCK_SIZE);
    for (int e = 0; e < ENGINES; e++) {
      EngineSim sim = engines.get(e);
      long applied = r.subs.get(e).lastSequence(topic(e));
      if (applied < sim.pub.lastSeq()) {
        return "engine " + e + ": applied through " + applied + " of " + sim.pub.lastSeq();
      }
      Set<Long> indexed = new HashSet<>();
      Worker w = Worker.of(workerId(e));
      for (RouterEvent ev : dump) {
        if (ev.worker().equals(w) && ev.data() instanceof CacheEvent.Stored s) {
          for (long h : s.blockHashes()) indexed.add(h);
        }
      }
      Set<Long> cached = new HashSet<>();
      for (long h : sim.engine().cache().blockHashes()) cached.add(h);
      if (!indexed.equals(cached)) {
        Set<Long> extra = new HashSet<>(indexed);
        extra.removeAll(cached);
        Set<Long> missing = new HashSet<>(cached);
        missing.removeAll(indexed);
        return "engine "
            + e
            + ": the index holds "
            + extra.size()
            + " blocks the engine does not and misses "
            + missing.size()
            + " of its "
            + cached.size();
      }
      for (int[] p : sim.workload.probes()) {
        int score = r.index.findMatches(hasher.localHashes(p), false).score(w);
        if (score != sim.engine().lookup(p)) {
          return "engine "
              + e
              + ": a probe scores "
              + score
              + ", the engine holds "
              + sim.engine().lookup(p);
        }
      }
    }
    return null;
  }
}
