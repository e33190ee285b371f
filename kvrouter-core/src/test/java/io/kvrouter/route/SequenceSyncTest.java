package io.kvrouter.route;

import static io.kvrouter.route.KvRouterTest.tokens;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import io.kvrouter.route.SequenceChange.Released;
import io.kvrouter.route.SequenceChange.Routed;
import io.kvrouter.route.SequenceSync.Outcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The apply rules of {@link SequenceSync}: once, in order, never its own, never negative. */
class SequenceSyncTest {
  static final int BS = 4;
  static final Worker W1 = Worker.of(1);
  static final Worker W2 = Worker.of(2);

  final AtomicLong clock = new AtomicLong(1_000_000_000L);

  KvRouter router() {
    KvRouter r =
        KvRouter.builder(BS).requestExpiry(Duration.ofSeconds(10)).nanoClock(clock::get).build();
    r.registerWorker(1, 1, BS);
    r.registerWorker(2, 1, BS);
    return r;
  }

  /** One drained batch of a replica's outbox. */
  record Batch(String peer, long incarnation, long first, List<SequenceChange> changes) {}

  static Batch drain(SequenceSync s) {
    List<SequenceChange> out = new ArrayList<>();
    long first = s.drain(out);
    return new Batch(s.replicaId(), s.incarnation(), first, out);
  }

  static Outcome deliver(Batch b, SequenceSync to) {
    return to.apply(b.peer, b.incarnation, b.first, b.changes);
  }

  static RouteDecision.Routed route(KvRouter r, String id, int[] tokens, long worker) {
    return (RouteDecision.Routed)
        r.route(id, tokens, RouteOptions.defaults().withAllowedWorkers(worker));
  }

  @Test
  void aRequestRoutedOnAIsLoadOnBUntilAFreesIt() {
    KvRouter a = router();
    KvRouter b = router();
    SequenceSync sa = a.sequenceSync("a");
    SequenceSync sb = b.sequenceSync("b");
    route(a, "r1", tokens(1, 10), 1); // 2 full blocks, 10 prefill tokens
    route(b, "r1", tokens(100, 8), 2); // the same id on b: another request
    assertThat(deliver(drain(sa), sb)).isEqualTo(Outcome.APPLIED);
    assertThat(deliver(drain(sb), sa)).isEqualTo(Outcome.APPLIED);
    assertThat(a.loads()).isEqualTo(b.loads());
    assertThat(a.load(W1)).isEqualTo(new WorkerLoad(W1, 2, 10, 1));
    assertThat(a.load(W2)).isEqualTo(new WorkerLoad(W2, 2, 8, 1));

    a.markPrefillCompleted("r1");
    deliver(drain(sa), sb);
    assertThat(b.load(W1)).isEqualTo(new WorkerLoad(W1, 2, 0, 1));

    assertThat(a.free("r1")).isTrue();
    deliver(drain(sa), sb);
    assertThat(b.load(W1).isIdle()).isTrue();
    assertThat(b.load(W2)).isEqualTo(new WorkerLoad(W2, 2, 8, 1)); // b's own r1 is untouched
    assertThat(a.loads()).isEqualTo(b.loads());
    // b cannot free a's request, nor reach a peer key
    assertThat(b.free(SequenceSync.key("a", "r1"))).isFalse();
  }

  @Test
  void ownBatchesAreIgnored() {
    KvRouter a = router();
    SequenceSync sa = a.sequenceSync("a");
    route(a, "r1", tokens(1, 8), 1);
    Batch own = drain(sa);
    assertThat(own.changes).hasSize(1);
    assertThat(deliver(own, sa)).isEqualTo(Outcome.OWN);
    assertThat(a.load(W1)).isEqualTo(new WorkerLoad(W1, 2, 8, 1));
    assertThat(sa.peers()).isEmpty();
  }

  @Test
  void duplicatesAreAppliedOnce() {
    KvRouter a = router();
    KvRouter b = router();
    SequenceSync sa = a.sequenceSync("a");
    SequenceSync sb = b.sequenceSync("b");
    route(a, "r1", tokens(1, 8), 1);
    Batch first = drain(sa);
    assertThat(deliver(first, sb)).isEqualTo(Outcome.APPLIED);
    assertThat(deliver(first, sb)).isEqualTo(Outcome.DUPLICATE);
    assertThat(b.load(W1)).isEqualTo(new WorkerLoad(W1, 2, 8, 1));
    a.free("r1");
    Batch freed = drain(sa);
    deliver(freed, sb);
    deliver(freed, sb);
    deliver(first, sb); // an old routed again: must not come back
    assertThat(b.load(W1).isIdle()).isTrue();
    assertThat(sb.stats().duplicates()).isEqualTo(3);
  }

  @Test
  void aGapAppliesNothingUntilTheMissingBatchOrASnapshot() {
    KvRouter a = router();
    KvRouter b = router();
    SequenceSync sa = a.sequenceSync("a");
    SequenceSync sb = b.sequenceSync("b");
    route(a, "r1", tokens(1, 8), 1);
    Batch one = drain(sa);
    route(a, "r2", tokens(50, 8), 2);
    Batch two = drain(sa);
    a.free("r1");
    Batch three = drain(sa);
    deliver(one, sb);
    // three before two: its free of r1 must wait, or r1 would stay and r2 be lost
    assertThat(deliver(three, sb)).isEqualTo(Outcome.NEEDS_SNAPSHOT);
    assertThat(b.load(W1)).isEqualTo(new WorkerLoad(W1, 2, 8, 1));
    assertThat(deliver(two, sb)).isEqualTo(Outcome.APPLIED);
    assertThat(deliver(three, sb)).isEqualTo(Outcome.APPLIED);
    assertThat(b.loads()).isEqualTo(a.loads());
    assertThat(sb.stats().gaps()).isEqualTo(1);
  }

  @Test
  void aLateJoinerLoadsASnapshotThenSkipsWhatItHolds() {
    KvRouter a = router();
    SequenceSync sa = a.sequenceSync("a");
    route(a, "r1", tokens(1, 8), 1);
    route(a, "r2", tokens(50, 12), 2);
    a.markPrefillCompleted("r2");
    route(a, "r3", tokens(90, 4), 1);
    a.free("r3");
    Batch missed = drain(sa); // sent before b joined
    KvRouter b = router();
    SequenceSync sb = b.sequenceSync("b");
    route(a, "r4", tokens(200, 8), 2);
    Batch pending = drain(sa); // published, not yet delivered when b asks for the snapshot
    SequenceSync.Snapshot snap = sa.snapshot();
    assertThat(snap.upToSequence()).isEqualTo(6);
    assertThat(snap.entries()).extracting(Routed::requestId).containsExactly("r1", "r2", "r4");
    assertThat(deliver(pending, sb)).isEqualTo(Outcome.NEEDS_SNAPSHOT); // unknown, not from 1
    sb.load("a", sa.incarnation(), snap);
    assertThat(deliver(missed, sb)).isEqualTo(Outcome.DUPLICATE);
    assertThat(deliver(pending, sb)).isEqualTo(Outcome.DUPLICATE);
    assertThat(b.loads()).isEqualTo(a.loads());
    a.free("r4");
    assertThat(deliver(drain(sa), sb)).isEqualTo(Outcome.APPLIED);
    assertThat(b.loads()).isEqualTo(a.loads());
    assertThat(b.load(W2)).isEqualTo(new WorkerLoad(W2, 3, 0, 1)); // r2, prefill done
  }

  @Test
  void aRestartedPeerReplacesItsOldRequests() {
    KvRouter b = router();
    SequenceSync sb = b.sequenceSync("b");
    KvRouter a1 = router();
    SequenceSync sa1 = a1.sequenceSync("a");
    route(a1, "r1", tokens(1, 8), 1);
    deliver(drain(sa1), sb);
    assertThat(b.load(W1).requests()).isEqualTo(1);
    KvRouter a2 = router(); // a died and came back under the same id: nothing in flight
    SequenceSync sa2 = a2.sequenceSync("a");
    assertThat(sa2.incarnation()).isNotEqualTo(sa1.incarnation());
    assertThat(deliver(drain(sa2), sb)).isEqualTo(Outcome.APPLIED); // heartbeat from 1
    assertThat(b.load(W1).isIdle()).isTrue();
    assertThat(b.loads()).isEqualTo(a2.loads());
  }

  @Test
  void aSilentPeerIsDroppedAndAPeersRequestsExpire() {
    KvRouter a = router();
    KvRouter b = router();
    SequenceSync sa = a.sequenceSync("a");
    SequenceSync sb = b.sequenceSync("b");
    route(a, "r1", tokens(1, 8), 1);
    deliver(drain(sa), sb);
    clock.addAndGet(Duration.ofSeconds(2).toNanos());
    assertThat(sb.dropSilent(Duration.ofSeconds(3).toNanos())).isEmpty();
    assertThat(b.load(W1).requests()).isEqualTo(1);
    clock.addAndGet(Duration.ofSeconds(1).toNanos());
    assertThat(sb.dropSilent(Duration.ofSeconds(3).toNanos())).containsExactly("a");
    assertThat(b.load(W1).isIdle()).isTrue();
    assertThat(sb.peers()).isEmpty();

    // the peer is back (a partition healed): not from 1, so only a snapshot takes it up again
    route(a, "r2", tokens(40, 8), 2);
    Batch after = drain(sa);
    assertThat(deliver(after, sb)).isEqualTo(Outcome.NEEDS_SNAPSHOT);
    sb.load("a", sa.incarnation(), sa.snapshot());
    assertThat(b.loads()).isEqualTo(a.loads());

    // never freed: expires on both, and a's expiry is a change of its own
    clock.addAndGet(Duration.ofSeconds(11).toNanos());
    assertThat(a.inFlight()).isZero();
    Batch expired = drain(sa);
    assertThat(expired.changes).containsExactly(new Released("r1", true), new Released("r2", true));
    assertThat(b.inFlight()).isZero();
    assertThat(deliver(expired, sb)).isEqualTo(Outcome.APPLIED);
    assertThat(b.loads()).isEqualTo(a.loads());
  }

  @Test
  void aPeerRequestOnAnUnregisteredRankIsSkippedAndLocalIdsCannotLookLikePeerKeys() {
    KvRouter a = router();
    a.registerWorker(3, 1, BS);
    KvRouter b = router(); // no worker 3
    SequenceSync sa = a.sequenceSync("a");
    SequenceSync sb = b.sequenceSync("b");
    route(a, "r1", tokens(1, 8), 3);
    a.free("r1");
    assertThat(deliver(drain(sa), sb)).isEqualTo(Outcome.APPLIED);
    assertThat(sb.stats().unknownRank()).isEqualTo(1);
    assertThat(b.inFlight()).isZero();
    assertThatThrownBy(() -> a.route("\u0001a\u0001x", tokens(1, 8)))
        .isInstanceOf(IllegalArgumentException.class);
    // dropping a rank releases its requests: peers hear of it
    route(a, "r2", tokens(1, 8), 3);
    deliver(drain(sa), sb);
    a.unregisterWorker(3);
    assertThat(drain(sa).changes).containsExactly(new Released("r2", false));
  }

  /**
   * A replica routes, completes and frees at random; its batches reach the other duplicated,
   * delayed and reordered, with snapshots on gaps. Whatever the delivery, loads are never negative
   * and equal the origin's once everything is delivered.
   */
  @Test
  void anyDeliveryOrderConvergesToTheOriginsLoads() {
    long seed = System.nanoTime();
    try {
      SplittableRandom rnd = new SplittableRandom(seed);
      for (int round = 0; round < 20; round++) {
        KvRouter a = router();
        KvRouter b = router();
        SequenceSync sa = a.sequenceSync("a");
        SequenceSync sb = b.sequenceSync("b");
        List<String> live = new ArrayList<>();
        List<Batch> wire = new ArrayList<>();
        int next = 0;
        for (int step = 0; step < 60; step++) {
          int op = rnd.nextInt(4);
          if (op <= 1 || live.isEmpty()) {
            String id = "q" + next++;
            route(a, id, tokens(rnd.nextInt(4) * 8, 4 + rnd.nextInt(12)), 1 + rnd.nextInt(2));
            live.add(id);
          } else if (op == 2) {
            a.markPrefillCompleted(live.get(rnd.nextInt(live.size())));
          } else {
            a.free(live.remove(rnd.nextInt(live.size())));
          }
          if (rnd.nextInt(3) == 0) wire.add(drain(sa));
          // deliver some of the wire in a random order, sometimes twice
          while (!wire.isEmpty() && rnd.nextInt(2) == 0) {
            Batch x = rnd.nextInt(4) == 0 ? wire.get(rnd.nextInt(wire.size())) : wire.remove(0);
            if (deliver(x, sb) == Outcome.NEEDS_SNAPSHOT && rnd.nextBoolean()) {
              sb.load("a", sa.incarnation(), sa.snapshot());
            }
            for (WorkerLoad l : b.loads()) {
              assertThat(l.activeBlocks()).isNotNegative();
              assertThat(l.activePrefillTokens()).isNotNegative();
            }
          }
        }
        wire.add(drain(sa));
        for (Batch x : wire) {
          if (deliver(x, sb) == Outcome.NEEDS_SNAPSHOT) {
            sb.load("a", sa.incarnation(), sa.snapshot());
          }
        }
        assertThat(b.loads()).isEqualTo(a.loads());
      }
    } catch (AssertionError e) {
      throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
    }
  }
}
