package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.route.WorkerLoad;
import io.kvrouter.transport.TestWaits;
import io.nats.client.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Replicas in one JVM on a real nats-server share their requests in flight: routed on one, load on
 * every one; a killed replica's requests are dropped by the survivors; a restarted or late one
 * converges from snapshots.
 */
class NatsSequenceSyncTest {
  static final int BS = 4;
  static final Duration BEAT = Duration.ofMillis(100);

  /**
   * Silence after which a peer is dropped: 30 heartbeats, not the default 3, so that a heartbeat
   * thread held up for a few hundred milliseconds on a loaded machine does not drop a live peer
   * (and its requests) in the middle of a test; a killed peer still goes within seconds.
   */
  static final Duration PEER_TIMEOUT = BEAT.multipliedBy(30);

  static final Duration WAIT = TestWaits.WAIT;
  static final String SUBJECT = NatsSequenceSync.subject("m.x", "default");

  NatsServer server;
  final List<AutoCloseable> open = new ArrayList<>();

  @BeforeEach
  void start() {
    server = NatsServer.start();
  }

  @AfterEach
  void stop() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) {
      try {
        open.get(i).close();
      } catch (Exception ignored) {
        // already closed by the test
      }
    }
    server.close();
  }

  /** One replica: a router with workers 1 and 2, its own connection, its sync. */
  record Replica(KvRouter router, Connection nc, NatsSequenceSync sync) {}

  Replica replica(String id) {
    return replica(id, PEER_TIMEOUT);
  }

  Replica replica(String id, Duration peerTimeout) {
    KvRouter r = KvRouter.builder(BS).build();
    r.registerWorker(1, 1, BS);
    r.registerWorker(2, 1, BS);
    return start(id, r, peerTimeout);
  }

  /** A replica in approximate mode whose workers 1 and 2 have 10 KV blocks each. */
  Replica approximate(String id) {
    KvRouter r = KvRouter.builder(BS).approximate().build();
    r.registerWorker(1, 1, BS, 10);
    r.registerWorker(2, 1, BS, 10);
    return start(id, r, PEER_TIMEOUT);
  }

  Replica start(String id, KvRouter r, Duration peerTimeout) {
    Connection nc = server.connect();
    NatsSequenceSync s =
        NatsSequenceSync.builder(nc, SUBJECT, r.sequenceSync(id))
            .heartbeat(BEAT)
            .peerTimeout(peerTimeout)
            .start();
    open.add(nc);
    open.add(s);
    return new Replica(r, nc, s);
  }

  static int[] tokens(int from, int n) {
    return IntStream.range(from, from + n).toArray();
  }

  static void route(Replica x, String id, int from, int n, long worker) {
    assertThat(
            x.router.route(id, tokens(from, n), RouteOptions.defaults().withAllowedWorkers(worker)))
        .isInstanceOf(RouteDecision.Routed.class);
  }

  static void awaitSameLoads(Replica of, Replica... others) throws InterruptedException {
    for (Replica o : others) {
      assertThat(o.sync.await(() -> o.router.loads().equals(of.router.loads()), WAIT))
          .as("loads of %s = %s", o.sync.sync().replicaId(), of.router.loads())
          .isTrue();
    }
  }

  @Test
  void routedOnAIsLoadOnBAndFreedOnAIsGoneOnB() throws Exception {
    Replica a = replica("a");
    Replica b = replica("b");
    assertThat(a.sync.await(a.sync::ready, WAIT)).isTrue();
    assertThat(b.sync.await(b.sync::ready, WAIT)).isTrue();
    route(a, "r1", 1, 10, 1); // 2 blocks, 10 prefill tokens
    route(b, "r1", 100, 16, 2); // b's own r1
    route(a, "r2", 1, 10, 1); // shares r1's blocks
    awaitSameLoads(a, b);
    awaitSameLoads(b, a);
    assertThat(b.router.load(Worker.of(1))).isEqualTo(new WorkerLoad(Worker.of(1), 2, 20, 2));
    assertThat(b.router.load(Worker.of(2))).isEqualTo(new WorkerLoad(Worker.of(2), 4, 16, 1));
    a.router.markPrefillCompleted("r1");
    a.router.free("r2");
    awaitSameLoads(a, b);
    assertThat(b.router.load(Worker.of(1))).isEqualTo(new WorkerLoad(Worker.of(1), 2, 0, 1));
    a.router.free("r1");
    b.router.free("r1");
    awaitSameLoads(a, b);
    awaitSameLoads(b, a);
    assertThat(b.router.inFlight()).isZero();
    assertThat(a.sync.stats().ownSkipped()).isPositive(); // its own batches came back, unapplied
    assertThat(b.sync.stats().sync().peerChangesApplied()).isEqualTo(5);
  }

  static Map<Worker, Integer> predicted(Replica x, int[] prompt) {
    return x.router.overlaps(prompt, RouteOptions.defaults()).scores();
  }

  @Test
  void approximatePredictionsAndCorrectionsAreSharedAndAJoinerTakesTheModel() throws Exception {
    Replica a = approximate("a");
    Replica b = approximate("b");
    assertThat(a.sync.await(a.sync::ready, WAIT)).isTrue();
    assertThat(b.sync.await(b.sync::ready, WAIT)).isTrue();
    int[] prompt = tokens(1, 33); // 8 full blocks
    assertThat(predicted(b, prompt)).isEmpty();
    route(a, "r1", 1, 33, 1);
    assertThat(predicted(a, prompt)).isEqualTo(Map.of(Worker.of(1), 8));
    assertThat(b.sync.await(() -> predicted(b, prompt).equals(predicted(a, prompt)), WAIT))
        .as("b predicts a's decision: %s", predicted(b, prompt))
        .isTrue();
    a.router.free("r1");
    awaitSameLoads(a, b);
    // b's own decision for the same prompt: the rank a sent it to, with the whole prefix cached
    RouteDecision.Routed d = (RouteDecision.Routed) b.router.route("s1", prompt);
    assertThat(d.worker()).isEqualTo(Worker.of(1));
    assertThat(d.overlapTokens()).isEqualTo(32);
    // worker 1's engine reports one block cached of 8 predicted: the capacity of 10 shrinks by 7
    // and the LRU trims worker 1 to its 3 newest blocks (the prefix), on b and then on a
    b.router.observeCachedTokens(Worker.of(1), prompt, RouteOptions.defaults(), 32, 4);
    assertThat(predicted(b, prompt)).isEqualTo(Map.of(Worker.of(1), 3));
    assertThat(a.sync.await(() -> predicted(a, prompt).equals(Map.of(Worker.of(1), 3)), WAIT))
        .as("a applies b's correction: %s", predicted(a, prompt))
        .isTrue();
    // a late replica takes the model (blocks and learned capacity) from the snapshots
    Replica c = approximate("c");
    assertThat(c.sync.await(c.sync::ready, WAIT)).isTrue();
    assertThat(predicted(c, prompt)).isEqualTo(Map.of(Worker.of(1), 3));
    route(c, "t1", 1000, 16, 1); // 4 new blocks on worker 1: capacity 3 keeps the newest 3
    int[] other = tokens(1000, 16);
    assertThat(predicted(c, other)).isEqualTo(Map.of(Worker.of(1), 3));
    assertThat(predicted(c, prompt)).isEmpty();
    for (Replica x : List.of(a, b)) {
      assertThat(x.sync.await(() -> predicted(x, other).equals(predicted(c, other)), WAIT))
          .isTrue();
      assertThat(predicted(x, prompt)).isEmpty();
    }
    assertThat(a.sync.stats().sync().peerPredictionsApplied()).isGreaterThanOrEqualTo(3);
  }

  @Test
  void aKilledReplicasRequestsAreDroppedByTheSurvivor() throws Exception {
    Replica a = replica("a");
    Replica b = replica("b");
    route(a, "r1", 1, 8, 1);
    route(a, "r2", 50, 8, 2);
    awaitSameLoads(a, b);
    assertThat(b.router.inFlight()).isEqualTo(2);
    a.nc.close(); // killed: no goodbye, no more heartbeats
    assertThat(b.sync.await(() -> b.router.inFlight() == 0, WAIT)).isTrue();
    assertThat(b.sync.stats().peers()).isZero();
    assertThat(b.sync.stats().sync().peersDropped()).isEqualTo(1);
  }

  @Test
  void aClosedReplicaSaysGoodbye() throws Exception {
    Replica a = replica("a");
    Replica b = replica("b", Duration.ofMinutes(5)); // silence would take far longer than WAIT
    route(a, "r1", 1, 8, 1);
    awaitSameLoads(a, b);
    a.sync.close();
    assertThat(b.sync.await(() -> b.router.inFlight() == 0, WAIT)).isTrue();
    // before a silence timeout could have dropped it: by the goodbye
    assertThat(b.sync.stats().sync().peersDropped()).isEqualTo(1);
  }

  @Test
  void aRestartedReplicaAndALateOneConverge() throws Exception {
    Replica a = replica("a");
    Replica b = replica("b");
    route(a, "r1", 1, 8, 1);
    route(b, "s1", 20, 12, 2);
    b.router.markPrefillCompleted("s1");
    route(b, "s2", 60, 8, 1);
    b.router.free("s2");
    awaitSameLoads(a, b);
    awaitSameLoads(b, a);
    // a dies and comes back under the same id: its old requests are gone, b forgets them
    a.nc.close();
    Replica a2 = replica("a");
    assertThat(a2.sync.await(a2.sync::ready, WAIT)).isTrue();
    assertThat(a2.router.inFlight()).isEqualTo(1); // b's s1, from b's snapshot
    assertThat(a2.sync.stats().snapshotsFetched()).isEqualTo(1);
    awaitSameLoads(a2, b);
    route(a2, "r1", 1, 8, 2);
    // c joins late: b's and a2's requests come from their snapshots
    Replica c = replica("c");
    assertThat(c.sync.await(c.sync::ready, WAIT)).isTrue();
    // ready means taken up: both peers' requests are here already
    assertThat(c.router.loads()).isEqualTo(a2.router.loads());
    awaitSameLoads(b, a2, c);
    assertThat(c.router.inFlight()).isEqualTo(2);
    assertThat(c.router.load(Worker.of(2))).isEqualTo(new WorkerLoad(Worker.of(2), 5, 8, 2));
  }
}
