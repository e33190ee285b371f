package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.ForwardingKvIndex;
import io.kvrouter.index.IndexStats;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.transport.TestWaits;
import io.kvrouter.transport.json.RouterEventJson;
import io.nats.client.Connection;
import io.nats.client.JetStreamManagement;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.ObjectStore;
import io.nats.client.PullSubscribeOptions;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.api.DeliverPolicy;
import io.nats.client.api.ObjectInfo;
import io.nats.client.api.StreamState;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Replicas against a real {@code nats-server -js}: mock engines ({@link EngineFleet}) publish
 * through a {@link NatsEventPublisher}; every replica's index must then score every engine's worker
 * as the engine's own lookup, and replicas must agree with each other. Each test starts its own
 * server; every wait has a deadline.
 */
@Timeout(TestWaits.HANG_SECONDS)
class NatsReplicaTest {
  private static final Duration WAIT = TestWaits.WAIT;

  private final List<AutoCloseable> resources = new ArrayList<>();
  private NatsServer server;
  private Connection nc;
  private JetStreamManagement jsm;

  @BeforeEach
  void startServer() throws Exception {
    server = NatsServer.start();
    nc = connect();
    jsm = nc.jetStreamManagement();
  }

  @AfterEach
  void stopServer() throws Exception {
    for (int i = resources.size() - 1; i >= 0; i--) {
      resources.get(i).close();
    }
    if (server != null) server.close();
  }

  private Connection connect() {
    Connection c = server.connect();
    resources.add(c);
    return c;
  }

  private <T extends AutoCloseable> T track(T resource) {
    resources.add(resource);
    return resource;
  }

  private KvIndex index() {
    return track(KvIndexes.concurrentRadixTree());
  }

  private NatsReplica.Builder replica(String id, KvIndex index, NatsEventStream stream) {
    return NatsReplica.builder(connect(), stream, index)
        .replicaId(id)
        .writeSnapshots(false)
        .ackWait(Duration.ofSeconds(5));
  }

  private NatsReplica start(NatsReplica.Builder b) {
    return track(b.start());
  }

  private static void awaitApplied(NatsReplica r, long seq) {
    assertThat(r.awaitApplied(seq, WAIT))
        .as("%s applied through %d (at %d)", r, seq, r.lastAppliedSequence())
        .isTrue();
  }

  private static void eventually(String what, BooleanSupplier condition) throws Exception {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime() - deadline).as("timed out waiting for: " + what).isNegative();
      Thread.sleep(10);
    }
  }

  private StreamState state(NatsEventStream stream) throws Exception {
    return jsm.getStreamInfo(stream.stream()).getStreamState();
  }

  private ConsumerInfo consumerInfo(NatsEventStream stream, String consumer) {
    try {
      return jsm.getConsumerInfo(stream.stream(), consumer);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Waits until the replica thread has looked at its snapshot schedule in a turn that began after
   * this call: the first check may belong to a turn already under way, the second cannot.
   */
  private static void awaitFreshScheduleCheck(NatsReplica r) throws Exception {
    r.nextScheduleCheck().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    r.nextScheduleCheck().get(WAIT.toSeconds(), TimeUnit.SECONDS);
  }

  // ------------------------------------------------------------------ agreement

  @Test
  void twoReplicasOfDifferentIndexKindsAgreeWithTheEngines() {
    NatsEventStream stream = NatsEventStream.defaults();
    KvIndex treeIndex = index();
    KvIndex poolIndex = track(KvIndexes.threadPool(KvIndexes.positional(4), 2));
    NatsReplica a = start(replica("a", treeIndex, stream));
    NatsReplica b = start(replica("b", poolIndex, stream));
    assertThat(a.ready()).as("an empty stream has no backlog").isTrue();
    assertThat(b.ready()).isTrue();

    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    EngineFleet fleet = new EngineFleet(1, pub);
    fleet.run(500);
    assertThat(fleet.storedEvents()).isPositive();
    assertThat(fleet.removedEvents()).as("the small pools evict").isPositive();
    assertThat(fleet.clearedEvents()).as("the workload clears now and then").isPositive();

    awaitApplied(a, pub.lastSequence());
    awaitApplied(b, pub.lastSequence());
    fleet.assertIndexMatches("tree replica", treeIndex);
    fleet.assertIndexMatches("thread-pool positional replica", poolIndex);
    fleet.assertSameAnswers(treeIndex, poolIndex);

    for (NatsReplica r : List.of(a, b)) {
      NatsReplicaStats s = r.stats();
      assertThat(s.applied()).isEqualTo(pub.published()).isEqualTo(fleet.history().size());
      assertThat(s.messages()).isEqualTo(s.applied());
      assertThat(s.duplicates()).isZero();
      assertThat(s.malformed()).isZero();
      assertThat(s.applyErrors()).isZero();
      assertThat(s.gaps()).isZero();
      assertThat(s.resubscribes()).isZero();
      assertThat(s.snapshotsWritten()).as("snapshots are off").isZero();
    }
    assertThat(a.stream().stream()).isEqualTo("KVROUTER_EVENTS");
    assertThat(pub.stream().subject()).isEqualTo("kvrouter.events.default");
  }

  @Test
  void aReplicaStartingOnABacklogIsReadyOnlyOnceItCaughtUp() {
    NatsEventStream stream = NatsEventStream.forModel("backlog");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    EngineFleet fleet = new EngineFleet(2, pub);
    fleet.run(400);

    KvIndex index = index();
    NatsReplica r = start(replica("late", index, stream));
    assertThat(r.restoredSequence()).as("no snapshot yet").isZero();
    assertThat(r.awaitReady(WAIT)).isTrue();
    assertThat(r.lastAppliedSequence())
        .as("ready means the backlog is applied")
        .isEqualTo(pub.lastSequence());
    fleet.assertIndexMatches("late replica", index);
  }

  // ------------------------------------------------------------------ snapshots and restarts

  @Test
  void aReplicaStoppedAndRestartedRecoversFromSnapshotAndStream() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("restart");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    EngineFleet fleet = new EngineFleet(3, pub);
    KvIndex indexA = index();
    KvIndex indexB = index();
    Connection ncA = server.connect(); // closed below to kill replica a
    NatsReplica a =
        NatsReplica.builder(ncA, stream, indexA).replicaId("a").writeSnapshots(false).start();
    NatsReplica b = start(replica("b", indexB, stream));

    fleet.run(200);
    awaitApplied(a, pub.lastSequence());
    SnapshotInfo snap = a.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(snap.sequence()).isEqualTo(pub.lastSequence());
    assertThat(snap.objectName()).isEqualTo("kvrouter.events.restart/a");
    assertThat(snap.events()).isPositive();

    fleet.run(150);
    awaitApplied(a, pub.lastSequence());
    String oldConsumer = a.consumerName();
    // kill a: its connection goes away first, so its consumer stays behind like a crash leaves it
    ncA.close();
    a.close();
    assertThat(jsm.getConsumerNames(stream.stream())).contains(oldConsumer);

    fleet.run(150); // while a is down
    long last = pub.lastSequence();
    KvIndex indexA2 = index();
    NatsReplica a2 = start(replica("a", indexA2, stream));
    assertThat(a2.restoredSequence()).isEqualTo(snap.sequence());
    assertThat(a2.awaitReady(WAIT)).isTrue();
    assertThat(a2.lastAppliedSequence()).isEqualTo(last);
    NatsReplicaStats s = a2.stats();
    assertThat(s.snapshotsRestored()).isEqualTo(1);
    assertThat(s.restoredEvents()).isEqualTo(snap.events());
    assertThat(s.applied())
        .as("only the events after the snapshot come from the stream")
        .isEqualTo(last - snap.sequence());

    awaitApplied(b, last);
    fleet.assertIndexMatches("restarted replica", indexA2);
    fleet.assertIndexMatches("replica that kept running", indexB);
    fleet.assertSameAnswers(indexA2, indexB);
    assertThat(jsm.getConsumerNames(stream.stream()))
        .as("the restarted replica deleted the consumer its first run left")
        .doesNotContain(oldConsumer)
        .containsExactlyInAnyOrder(a2.consumerName(), b.consumerName());
  }

  @Test
  void aSnapshotPurgesTheStreamUpToItsSequenceAndANewReplicaStartsFromIt() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("purge");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    EngineFleet fleet = new EngineFleet(4, pub);
    KvIndex index = index();
    NatsReplica a = start(replica("a", index, stream));
    fleet.run(150);
    awaitApplied(a, pub.lastSequence());

    SnapshotInfo snap = a.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(snap.sequence()).isEqualTo(pub.lastSequence());
    assertThat(snap.purgedThrough())
        .as("no other consumer holds it back")
        .isEqualTo(snap.sequence());
    StreamState st = state(stream);
    assertThat(st.getFirstSequence()).isEqualTo(snap.sequence() + 1);
    assertThat(st.getMsgCount()).isZero();
    assertThat(a.stats().purgedMessages()).isEqualTo(snap.sequence());
    assertThat(a.stats().snapshotsWritten()).isEqualTo(1);
    assertThat(a.lastSnapshotSequence()).isEqualTo(snap.sequence());

    // the object: the dump as a JSON array, the sequence in its headers
    ObjectStore os = nc.objectStore(NatsReplica.DEFAULT_BUCKET);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ObjectInfo oi = os.get(a.snapshotObjectName(), out);
    assertThat(oi.getHeaders().getFirst("Kvrouter-Stream-Sequence"))
        .isEqualTo(Long.toString(snap.sequence()));
    assertThat(oi.getHeaders().getFirst("Kvrouter-Format")).isEqualTo("router-events-json-v1");
    List<RouterEvent> dumped = RouterEventJson.readEvents(out.toByteArray());
    assertThat(dumped).hasSize(snap.events());
    KvIndex rebuilt = index();
    dumped.forEach(rebuilt::apply);
    fleet.assertIndexMatches("index rebuilt from the object", rebuilt);

    fleet.run(100);
    KvIndex indexC = index();
    NatsReplica c = start(replica("c", indexC, stream));
    assertThat(c.restoredSequence()).isEqualTo(snap.sequence());
    assertThat(c.awaitReady(WAIT)).isTrue();
    assertThat(c.lastAppliedSequence()).isEqualTo(pub.lastSequence());
    awaitApplied(a, pub.lastSequence());
    fleet.assertIndexMatches("replica started from the snapshot", indexC);
    fleet.assertSameAnswers(index, indexC);
  }

  @Test
  void purgingStopsAtWhatAnotherConsumerHasNotProcessed() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("laggard");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    jsm.addOrUpdateConsumer(
        stream.stream(),
        ConsumerConfiguration.builder()
            .durable("laggard")
            .filterSubject(stream.subject())
            .deliverPolicy(DeliverPolicy.All)
            .ackPolicy(AckPolicy.Explicit)
            .build());
    KvIndex index = index();
    NatsReplica a = start(replica("a", index, stream));
    EngineFleet fleet = new EngineFleet(5, pub);
    fleet.run(100);
    long last = pub.lastSequence();
    awaitApplied(a, last);

    SnapshotInfo first = a.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(first.sequence()).isEqualTo(last);
    assertThat(first.purgedThrough()).as("the laggard has processed nothing").isZero();
    assertThat(state(stream).getMsgCount()).isEqualTo(last);

    // the laggard processes its first 10 messages
    JetStreamSubscription sub =
        nc.jetStream()
            .subscribe(stream.subject(), PullSubscribeOptions.bind(stream.stream(), "laggard"));
    int acked = 0;
    while (acked < 10) {
      for (Message m : sub.fetch(10 - acked, Duration.ofSeconds(2))) {
        m.ackSync(Duration.ofSeconds(2));
        acked++;
      }
    }
    SnapshotInfo second = a.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(second.purgedThrough()).isEqualTo(10);
    assertThat(state(stream).getFirstSequence()).isEqualTo(11);

    sub.unsubscribe();
    jsm.deleteConsumer(stream.stream(), "laggard");
    SnapshotInfo third = a.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(third.purgedThrough()).isEqualTo(last);
    assertThat(state(stream).getMsgCount()).isZero();
  }

  @Test
  void snapshotsAreWrittenAfterTheThresholdAndPeriodically() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("schedule");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    AtomicLong clock = new AtomicLong(); // the schedule's clock: moves only when the test says
    Duration interval = Duration.ofMinutes(1);
    NatsReplica byCount =
        start(
            replica("count", index(), stream)
                .writeSnapshots(true)
                .snapshotThreshold(40)
                .snapshotInterval(interval)
                .clock(clock::get));
    NatsReplica byTime =
        start(
            replica("time", index(), stream)
                .writeSnapshots(true)
                .snapshotThreshold(1_000_000)
                .snapshotInterval(interval)
                .clock(clock::get));
    EngineFleet fleet = new EngineFleet(6, pub);
    while (pub.lastSequence() < 130) fleet.run(10);
    long last = pub.lastSequence();
    awaitApplied(byCount, last);
    awaitApplied(byTime, last);

    eventually(
        "a threshold snapshot less than 40 messages behind",
        () -> byCount.lastSnapshotSequence() > last - 40);
    assertThat(byCount.stats().snapshotsWritten())
        .as("one per 40 messages, or fewer when the next came due while one was in flight")
        .isBetween(2L, last / 40);

    awaitFreshScheduleCheck(byTime);
    assertThat(byTime.stats().snapshotsWritten())
        .as("events applied, but the interval has not passed")
        .isZero();
    clock.addAndGet(interval.toNanos());
    eventually("a periodic snapshot of everything", () -> byTime.lastSnapshotSequence() == last);
    assertThat(byTime.stats().snapshotsWritten()).isEqualTo(1);

    clock.addAndGet(10 * interval.toNanos());
    awaitFreshScheduleCheck(byTime);
    assertThat(byTime.stats().snapshotsWritten())
        .as("ten intervals later, but nothing new applied: no new periodic snapshot")
        .isEqualTo(1);
    eventually(
        "the stream purged up to the snapshots",
        () -> {
          try {
            return state(stream).getFirstSequence() > 100;
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        });
  }

  @Test
  void snapshotsOfAStreamThatWasDeletedAndCreatedAgainAreIgnored() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("recreated");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    NatsReplica a = start(replica("a", index(), stream));
    new EngineFleet(7, pub).run(100);
    awaitApplied(a, pub.lastSequence());
    SnapshotInfo old = a.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(old.sequence()).isGreaterThan(20);
    a.close();

    jsm.deleteStream(stream.stream());
    NatsEventPublisher pub2 = NatsEventPublisher.create(nc, stream);
    EngineFleet fresh = new EngineFleet(8, pub2);
    while (pub2.lastSequence() < 10) fresh.run(1);
    assertThat(pub2.lastSequence()).isLessThan(old.sequence());

    KvIndex index = index();
    NatsReplica b = start(replica("b", index, stream));
    assertThat(b.restoredSequence()).as("the old stream's snapshot does not count").isZero();
    assertThat(b.awaitReady(WAIT)).isTrue();
    fresh.assertIndexMatches("replica of the new stream", index);
  }

  // ------------------------------------------------------------------ at least once

  @Test
  void republishingEventsChangesNothing() {
    NatsEventStream stream = NatsEventStream.forModel("dup");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    KvIndex index = index();
    NatsReplica r = start(replica("r", index, stream));
    EngineFleet fleet = new EngineFleet(9, pub);
    fleet.run(300);
    awaitApplied(r, pub.lastSequence());
    fleet.assertIndexMatches("before", index);
    IndexStats before = index.stats();

    List<RouterEvent> history = List.copyOf(fleet.history());
    for (RouterEvent e : history) pub.accept(e); // everything again
    for (RouterEvent e : history.subList(history.size() / 2, history.size())) pub.accept(e);
    for (int i = history.size() - 20; i < history.size(); i++) {
      pub.accept(history.get(i)); // each of the last events twice in a row
      pub.accept(history.get(i));
    }
    awaitApplied(r, pub.lastSequence());
    fleet.assertIndexMatches("after the duplicates", index);
    assertThat(index.stats().blocksIndexed()).isEqualTo(before.blocksIndexed());
    assertThat(r.stats().applied()).isEqualTo(pub.published());
  }

  @Test
  void aRedeliveredMessageIsSkippedByItsStreamSequence() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("redelivery");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    GatedIndex index = new GatedIndex(index());
    NatsReplica r = start(replica("r", index, stream).ackWait(Duration.ofMillis(300)));
    EngineFleet fleet = new EngineFleet(10, pub);
    index.hold(); // the next event blocks the replica's thread
    fleet.run(60);
    assertThat(index.awaitBlocked()).isTrue();
    String consumer = r.consumerName();
    eventually(
        "the server redelivers what it delivered and saw no ack for (ack wait 300 ms)",
        () -> consumerInfo(stream, consumer).getRedelivered() > 0);
    index.release();
    awaitApplied(r, pub.lastSequence());
    eventually("redeliveries arrive", () -> r.stats().duplicates() > 0);
    fleet.assertIndexMatches("after redeliveries", index);
    NatsReplicaStats s = r.stats();
    assertThat(s.applied()).isEqualTo(pub.published());
    assertThat(s.gaps()).as("redeliveries do not leave holes in the consumer sequence").isZero();
  }

  @Test
  void aMalformedMessageIsCountedTerminatedAndSkipped() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("malformed");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    KvIndex index = index();
    NatsReplica r = start(replica("r", index, stream).ackWait(Duration.ofMillis(300)));
    EngineFleet fleet = new EngineFleet(11, pub);
    fleet.run(40);
    long bad1 =
        nc.jetStream()
            .publish(stream.subject(), "not json".getBytes(StandardCharsets.UTF_8))
            .getSeqno();
    long bad2 =
        nc.jetStream()
            .publish(stream.subject(), "{\"worker_id\":\"x\"}".getBytes(StandardCharsets.UTF_8))
            .getSeqno();
    long bad3 = nc.jetStream().publish(stream.subject(), new byte[0]).getSeqno();
    fleet.run(40);
    assertThat(bad1).isLessThan(bad2).isLessThan(bad3).isLessThan(pub.lastSequence());
    awaitApplied(r, pub.lastSequence());

    fleet.assertIndexMatches("after malformed messages", index);
    assertThat(r.running()).isTrue();
    assertThat(r.stats().malformed()).isEqualTo(3);
    assertThat(r.stats().applied()).isEqualTo(pub.published());
    // the server redelivers only what awaits an ack: once nothing does, nothing can come again
    // (a malformed message left unanswered would come back after the 300 ms ack wait, be
    // counted as a duplicate and acked, and only then leave the pending set)
    eventually(
        "every delivery acknowledged or terminated",
        () -> consumerInfo(stream, r.consumerName()).getNumAckPending() == 0);
    assertThat(consumerInfo(stream, r.consumerName()).getRedelivered()).isZero();
    assertThat(r.stats().malformed()).isEqualTo(3);
    assertThat(r.stats().duplicates()).as("terminated messages are not redelivered").isZero();
  }

  // ------------------------------------------------------------------ consumer trouble

  @Test
  void aDeletedConsumerIsCreatedAgainWithoutLosingEvents() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("deleted");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    KvIndex index = index();
    NatsReplica r = start(replica("r", index, stream));
    EngineFleet fleet = new EngineFleet(12, pub);
    fleet.run(100);
    awaitApplied(r, pub.lastSequence());
    String first = r.consumerName();

    jsm.deleteConsumer(stream.stream(), first);
    fleet.run(100);
    awaitApplied(r, pub.lastSequence());
    fleet.assertIndexMatches("after the consumer was recreated", index);
    NatsReplicaStats s = r.stats();
    assertThat(s.resubscribes()).isEqualTo(1);
    assertThat(s.resyncs()).as("no snapshot, so nothing can have been purged").isZero();
    assertThat(r.consumerName()).isNotEqualTo(first);
    assertThat(jsm.getConsumerNames(stream.stream())).containsExactly(r.consumerName());
  }

  @Test
  void aReplicaWhoseConsumerVanishedPastAPurgeRebuildsFromTheSnapshot() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("resync");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    GatedIndex indexA = new GatedIndex(index());
    KvIndex indexB = index();
    NatsReplica a = start(replica("a", indexA, stream));
    NatsReplica b = start(replica("b", indexB, stream));
    EngineFleet fleet = new EngineFleet(13, pub);
    fleet.run(60);
    awaitApplied(a, pub.lastSequence());
    long aStopsAfter = pub.lastSequence();

    indexA.hold(); // a's thread blocks on the next event
    fleet.runUntilPublished();
    assertThat(indexA.awaitBlocked()).isTrue();
    jsm.deleteConsumer(stream.stream(), a.consumerName());
    fleet.run(150);
    awaitApplied(b, pub.lastSequence());
    SnapshotInfo snap = b.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(snap.purgedThrough())
        .as("a's consumer is gone, so nothing holds the purge back")
        .isEqualTo(pub.lastSequence());
    assertThat(a.lastAppliedSequence()).isEqualTo(aStopsAfter);

    fleet.run(50);
    indexA.release();
    awaitApplied(a, pub.lastSequence());
    assertThat(a.awaitReady(WAIT)).isTrue();
    NatsReplicaStats s = a.stats();
    assertThat(s.resyncs()).isEqualTo(1);
    assertThat(a.restoredSequence()).isEqualTo(snap.sequence());
    fleet.assertIndexMatches("rebuilt replica", indexA);
    awaitApplied(b, pub.lastSequence());
    fleet.assertSameAnswers(indexA, indexB);
  }

  @Test
  void replicasReconnectAfterTheServerRestartsAndCatchUp() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("restart-server");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    KvIndex indexA = index();
    KvIndex indexB = index();
    NatsReplica a = start(replica("a", indexA, stream));
    NatsReplica b = start(replica("b", indexB, stream));
    EngineFleet fleet = new EngineFleet(14, pub);
    fleet.run(100);
    awaitApplied(a, pub.lastSequence());
    awaitApplied(b, pub.lastSequence());

    server.restart();
    eventually("the publisher reconnected", () -> nc.getStatus() == Connection.Status.CONNECTED);
    eventually(
        "JetStream answers again",
        () -> {
          try {
            return jsm.getStreamInfo(stream.stream()).getStreamState().getLastSequence() > 0;
          } catch (Exception e) {
            return false;
          }
        });
    fleet.run(100);
    awaitApplied(a, pub.lastSequence());
    awaitApplied(b, pub.lastSequence());
    fleet.assertIndexMatches("replica a after the server restart", indexA);
    fleet.assertIndexMatches("replica b after the server restart", indexB);
    assertThat(a.stats().applied()).isEqualTo(pub.published());
    assertThat(b.stats().applied()).isEqualTo(pub.published());
  }

  // ------------------------------------------------------------------ test support

  /** An index whose writes can be held up: after hold(), the next apply waits until release(). */
  private static final class GatedIndex extends ForwardingKvIndex {
    private volatile CountDownLatch gate = new CountDownLatch(0);
    private final CountDownLatch blocked = new CountDownLatch(1);

    GatedIndex(KvIndex inner) {
      super(inner);
    }

    void hold() {
      gate = new CountDownLatch(1);
    }

    void release() {
      gate.countDown();
    }

    boolean awaitBlocked() throws InterruptedException {
      return blocked.await(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    }

    @Override
    public void apply(RouterEvent event) {
      CountDownLatch g = gate;
      if (g.getCount() > 0) {
        blocked.countDown();
        try {
          if (!g.await(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("gate never opened");
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException(e);
        }
      }
      super.apply(event);
    }
  }
}
