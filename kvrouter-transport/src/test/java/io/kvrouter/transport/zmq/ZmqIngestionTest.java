package io.kvrouter.transport.zmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.transport.TestWaits;
import io.kvrouter.transport.kvevents.VllmEncoder;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.ZMQException;

/**
 * End-to-end ingestion over real ZMQ sockets on loopback: a vLLM-like publisher driven by a mock
 * engine on one side, a {@link ZmqEventSubscriber} feeding a concurrent index on the other. After
 * each scenario — plain flow, dropped messages, engine restart, garbage, slow joiner, engine blocks
 * twice the router's, bind mode with two engines — the index answers like the engine.
 */
@Timeout(TestWaits.HANG_SECONDS)
class ZmqIngestionTest {
  private static final String TOPIC = "kv-events";
  private static final Duration WAIT = TestWaits.WAIT;

  /** Short, so a connection jeromq leaves mute (zeromq/jeromq#1022) is redone at once. */
  private static final Duration HANDSHAKE = Duration.ofMillis(300);

  /**
   * A replay's answer may take this long before it is abandoned (default 2 s): a busy machine must
   * not turn a slow answer into lost messages. Tests about abandoned replays set their own.
   */
  private static final Duration REPLAY_TIMEOUT = WAIT;

  private final KvIndex index = KvIndexes.concurrentRadixTree();
  private FakeVllmPublisher pub;
  private ZmqEventSubscriber sub;

  @AfterEach
  void tearDown() {
    if (sub != null) sub.close();
    if (pub != null) pub.close();
    index.close();
  }

  private ZmqEventSubscriber.Builder connect(EngineSpec spec, int routerBlockSize) {
    return ZmqEventSubscriber.connect(pub.pubEndpoint(), spec)
        .routerHasher(BlockHasher.of(routerBlockSize))
        .sink(IngestSink.deviceIndex(index))
        .reconnectBackoff(Duration.ofMillis(20), Duration.ofMillis(200))
        .handshakeTimeout(HANDSHAKE)
        .replayTimeout(REPLAY_TIMEOUT);
  }

  private EngineSpec spec(long workerId, int blockSize) {
    return EngineSpec.of(workerId, blockSize).withTopic(TOPIC).withReplay(pub.replayEndpoint());
  }

  @Test
  void plainFlow() {
    pub = FakeVllmPublisher.bound(TOPIC);
    sub = connect(spec(7, 4), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 1, VllmEncoder.arrayLike(), null);
    int published = sim.run(150);

    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    IngestStats s = sub.stats();
    assertThat(s.batches()).isEqualTo(published).isEqualTo(pub.lastSeq() + 1);
    assertThat(s.storedEvents()).isPositive();
    assertThat(s.removedEvents()).as("the small pool evicts").isPositive();
    assertThat(s.gaps()).isZero();
    assertThat(s.lostMessages()).isZero();
    assertThat(s.decodeErrors()).isZero();
    assertThat(s.badFrames()).isZero();
    assertThat(s.restarts()).isZero();
    assertThat(s.connections()).isEqualTo(1);
  }

  @Test
  void droppedMessagesAreReplayed() {
    pub = FakeVllmPublisher.bound(TOPIC);
    // gaps must be what recovers the drops: with the default 1-s tail probe, a second of silence
    // on a busy machine let a probe fetch a drop before the next message revealed it (no gap)
    sub = connect(spec(7, 4), 4).tailProbeAfter(Duration.ofHours(1)).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 2, VllmEncoder.tagged(), 0);
    int dropped = 0;
    for (int round = 0; round < 10; round++) {
      int n = 1 + round % 3;
      pub.dropNext(n);
      dropped += n;
      sim.run(15);
    }
    sim.run(30); // the last drops are followed by messages that reveal them

    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    IngestStats s = sub.stats();
    assertThat(s.gaps()).isPositive();
    assertThat(s.replays()).isGreaterThanOrEqualTo(s.gaps());
    assertThat(s.replayedMessages()).isGreaterThanOrEqualTo(dropped);
    assertThat(s.lostMessages()).isZero();
    assertThat(s.batches()).isEqualTo(pub.lastSeq() + 1);
  }

  /**
   * Replay requests other than tail probes: two per completed connection (no gap happens in the
   * test that uses it).
   */
  private long connectionReplays() {
    IngestStats s = sub.stats();
    return s.replays() - s.tailProbes();
  }

  @Test
  void theLostTailOfABurstIsRecoveredWhenTheEngineFallsSilent() {
    pub = FakeVllmPublisher.bound(TOPIC);
    sub = connect(spec(7, 4), 4).tailProbeAfter(Duration.ofMillis(200)).start();
    pub.awaitSubscriptions(1, WAIT);
    assertThat(sub.nanosSinceLastMessage(TOPIC)).isEqualTo(-1);
    EngineSim sim = new EngineSim(pub, 4, 64, 11, VllmEncoder.arrayLike(), null);
    sim.run(40);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(sub.nanosSinceLastMessage(TOPIC)).isNotNegative();
    // the connection's two catch-ups (at once, and a second later) are behind us: from here on
    // only tail probes ask the replay buffer
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (connectionReplays() < 2 * sub.stats().connections() && System.nanoTime() < deadline) {
      FakeVllmPublisher.sleep(10);
    }
    assertThat(connectionReplays()).isGreaterThanOrEqualTo(2 * sub.stats().connections());
    assertThat(sub.stats().tailRecovered()).isZero();
    long applied = sub.lastSequence(TOPIC);

    // the end of a burst never reaches the live socket (as past a PUB high-water mark) but stays
    // in the engine's replay buffer, and the engine then publishes nothing: no gap ever shows
    pub.dropNext(1000);
    int tail = sim.run(12);
    assertThat(tail).isPositive();
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    IngestStats s = sub.stats();
    assertThat(sub.lastSequence(TOPIC)).isEqualTo(pub.lastSeq()).isEqualTo(applied + tail);
    assertThat(s.tailRecovered()).isEqualTo(tail);
    assertThat(s.tailProbes()).isPositive();
    assertThat(s.gaps()).isZero();
    assertThat(s.lostMessages()).isZero();
  }

  @Test
  void aRestartedEngineIsClearedAndFollowedAgain() {
    pub = FakeVllmPublisher.bound(TOPIC);
    sub = connect(spec(7, 4), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 3, VllmEncoder.arrayLike(), null);
    sim.run(100);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(index.stats().blocksIndexed()).isPositive();

    // the engine comes back empty and says nothing: the reconnect's catch-up finds a replay
    // buffer without the last batch applied, so the router clears the worker
    int subscriptions = pub.subscriptions();
    sim.restart();
    pub.awaitSubscriptions(subscriptions + 1, WAIT);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(index.stats().blocksIndexed()).isZero();
    assertThat(sub.stats().restarts()).isEqualTo(1);
    assertThat(sub.stats().reconnects()).isGreaterThanOrEqualTo(1);

    sim.run(100);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(sub.stats().restarts()).isEqualTo(1);
    assertThat(sub.stats().lostMessages()).isZero();
  }

  @Test
  void aRestartThatPublishesAtOnceIsSeenToo() {
    pub = FakeVllmPublisher.bound(TOPIC);
    sub = connect(spec(7, 4), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 4, VllmEncoder.arrayLike(), null);
    sim.run(60);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    sim.restart();
    sim.run(40); // may well go out before the subscriber is back: then replay brings it
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(sub.stats().restarts()).isEqualTo(1);
  }

  @Test
  void garbageIsCountedAndSkipped() {
    pub = FakeVllmPublisher.bound(TOPIC);
    sub = connect(spec(7, 4), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 5, VllmEncoder.tagged(), null);
    byte[] topic = TOPIC.getBytes(StandardCharsets.UTF_8);
    byte[] seq = ByteBuffer.allocate(8).putLong(3).array();
    byte[] negative = ByteBuffer.allocate(8).putLong(-5).array();
    List<byte[]> malformed =
        List.of(
            HexFormat.of()
                .parseHex("93cb3ff00000000000009197ab426c6f636b53746f726564920102c0940102030402"),
            HexFormat.of().parseHex("ffffffff00"),
            HexFormat.of().parseHex("a568656c6c6f"),
            HexFormat.of()
                .parseHex("93cb3ff00000000000009193ac426c6f636b52656d6f766564a46f6f7073c000"),
            new byte[0]);
    Random rnd = new Random(5);
    int rounds = 8;
    int garbage = 0;
    int bad = 0;
    for (int round = 0; round < rounds; round++) {
      sim.run(10);
      pub.sendRaw(topic);
      pub.sendRaw(topic, seq);
      pub.sendRaw(topic, seq, new byte[] {1}, new byte[] {2});
      pub.sendRaw(topic, new byte[7], new byte[] {(byte) 0x90});
      pub.sendRaw(topic, negative, new byte[] {(byte) 0x90});
      pub.sendRaw(
          "kv-events-other".getBytes(StandardCharsets.UTF_8), seq, new byte[] {(byte) 0x90});
      bad += 6;
      pub.publish(malformed.get(round % malformed.size()));
      byte[] noise = new byte[1 + rnd.nextInt(40)];
      rnd.nextBytes(noise);
      noise[0] = (byte) 0xc1; // never valid msgpack
      pub.publish(noise);
      garbage += 2;
    }
    sim.run(20);

    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    IngestStats s = sub.stats();
    assertThat(s.badFrames()).isEqualTo(bad);
    assertThat(s.decodeErrors()).isEqualTo(garbage);
    assertThat(s.batches() + s.decodeErrors()).isEqualTo(pub.lastSeq() + 1);
    assertThat(s.lostMessages()).isZero();
  }

  @Test
  void aLateSubscriberReplaysFromZero() {
    pub = FakeVllmPublisher.bound(TOPIC);
    EngineSim sim = new EngineSim(pub, 4, 64, 6, VllmEncoder.arrayLike(), 0);
    int before = sim.run(100);

    sub = connect(spec(7, 4), 4).start();
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(sub.stats().replayedMessages()).isEqualTo(before);
    assertThat(sub.stats().lostMessages()).isZero();

    pub.awaitSubscriptions(1, WAIT);
    sim.run(50);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(sub.stats().batches()).isEqualTo(pub.lastSeq() + 1);
  }

  @Test
  void repeatedAndLateMessagesAreNotTakenForRestarts() {
    pub = FakeVllmPublisher.bound(TOPIC);
    sub = connect(spec(7, 4), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 11, VllmEncoder.tagged(), null);
    int repeats = 0;
    for (int round = 0; round < 6; round++) {
      sim.run(10);
      pub.resend(pub.lastSeq()); // the same message twice in a row
      pub.dropNext(1);
      sim.run(3); // the dropped batch comes back through replay...
      pub.resend(pub.lastSeq() - 2); // ...and then arrives late on the live socket
      pub.resend(pub.lastSeq() - 8); // an older one, long applied
      repeats += 3;
    }
    sim.run(5);

    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    // a replay may bring the last batches before the live queue, repeats included, is drained
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (sub.stats().duplicates() < repeats && System.nanoTime() < deadline) {
      FakeVllmPublisher.sleep(10);
    }
    IngestStats s = sub.stats();
    assertThat(s.restarts()).as("restarts").isZero();
    // replays may also bring batches before their live copies arrive
    assertThat(s.duplicates()).isGreaterThanOrEqualTo(repeats);
    assertThat(s.lostMessages()).isZero();
    assertThat(s.batches()).isEqualTo(pub.lastSeq() + 1);
  }

  @Test
  void aLateMessageFromBeforeARestartIsSkipped() {
    pub = FakeVllmPublisher.bound(TOPIC);
    sub = connect(spec(7, 4), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 12, VllmEncoder.tagged(), null);
    sim.run(60);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    long oldSeq = pub.lastSeq();
    byte[] oldPayload = pub.payload(oldSeq);

    int subscriptions = pub.subscriptions();
    sim.restart();
    pub.awaitSubscriptions(subscriptions + 1, WAIT);
    sim.run(10);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    long restarts = sub.stats().restarts();
    assertThat(pub.lastSeq()).isLessThan(oldSeq - 1);

    // a message of the old engine, held up somewhere, arrives with a sequence number ahead
    pub.sendRaw(
        TOPIC.getBytes(StandardCharsets.UTF_8),
        ByteBuffer.allocate(8).putLong(oldSeq).array(),
        oldPayload);
    sim.run(10);
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(sub.stats().restarts()).as("no second restart").isEqualTo(restarts);
    assertThat(sub.stats().lostMessages()).isZero();
  }

  @Test
  void aNewSubscriberOnAWarmIndexRebuildsTheEngineFromZero() {
    pub = FakeVllmPublisher.bound(TOPIC);
    EngineSim sim = new EngineSim(pub, 4, 64, 13, VllmEncoder.arrayLike(), null);
    sim.run(40);
    // what a peer's dump said of this worker before the engine restarted: blocks it no longer has
    long[] stale = {0x1111L, 0x2222L, 0x3333L};
    index.apply(
        new RouterEvent(Worker.of(7), 1, CacheEvent.storedAtRoot(stale, new long[] {1, 2, 3})));
    assertThat(index.stats().blocksIndexed()).isEqualTo(3);

    sub = connect(spec(7, 4), 4).start(); // replays the engine's whole history from 0
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(index.stats().blocksIndexed()).isEqualTo(sim.engine().cachedBlocks());
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).scores()).isEmpty();
  }

  @Test
  void engineBlocksTwiceTheRoutersAreSplit() {
    pub = FakeVllmPublisher.bound(TOPIC);
    pub.replyWithTopic(true); // replies as [empty, topic, seq, payload]
    sub = connect(spec(7, 8), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim =
        new EngineSim(
            pub, 8, 48, 7, new VllmEncoder(false, true, VllmEncoder.HashStyle.SIGNED, "", 3), 0);
    for (int round = 0; round < 5; round++) {
      pub.dropNext(1);
      sim.run(25);
    }
    SyncCheck.awaitInSync(sub, index, BlockHasher.of(4), SyncCheck.of(sim, 7));
    assertThat(sub.stats().gaps()).isPositive();
    assertThat(sub.stats().lostMessages()).isZero();
    assertThat(index.stats().blocksIndexed()).isGreaterThan(sim.engine().cachedBlocks());
  }

  @Test
  void bindModeTakesEnginesThatConnect() {
    FakeVllmPublisher a = FakeVllmPublisher.connecting("engine-a");
    FakeVllmPublisher b = FakeVllmPublisher.connecting("engine-b");
    try {
      sub =
          ZmqEventSubscriber.bind(
                  "tcp://127.0.0.1:*",
                  List.of(
                      EngineSpec.of(1, 4).withTopic("engine-a").withReplay(a.replayEndpoint()),
                      EngineSpec.of(2, 4).withTopic("engine-b").withReplay(b.replayEndpoint())))
              .routerHasher(BlockHasher.of(4))
              .sink(IngestSink.deviceIndex(index))
              .handshakeTimeout(HANDSHAKE)
              .start();
      EngineSim simA = new EngineSim(a, 4, 48, 8, VllmEncoder.arrayLike(), null);
      EngineSim simB = new EngineSim(b, 4, 48, 9, VllmEncoder.tagged(), null);
      simA.run(20); // before anyone connects: only replay can bring these
      a.connectPub(sub.endpoint());
      b.connectPub(sub.endpoint());
      a.awaitSubscriptions(1, WAIT);
      b.awaitSubscriptions(1, WAIT);
      for (int i = 0; i < 60; i++) {
        simA.run(1);
        simB.run(1);
      }
      SyncCheck.awaitInSync(
          sub, index, BlockHasher.of(4), SyncCheck.of(simA, 1), SyncCheck.of(simB, 2));
      assertThat(sub.stats().connections()).isGreaterThanOrEqualTo(2);
      assertThat(sub.stats().lostMessages()).isZero();
    } finally {
      a.close();
      b.close();
    }
  }

  @Test
  void withoutAReplayEndpointLossIsCountedAndIngestionGoesOn() {
    pub = FakeVllmPublisher.bound(TOPIC);
    // registered without a topic: in connect mode that takes the engine's "kv-events"
    sub = connect(EngineSpec.of(7, 4), 4).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 10, VllmEncoder.arrayLike(), null);
    sim.run(20);
    pub.dropNext(3);
    sim.run(40);
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (sub.lastSequence("") < pub.lastSeq() && System.nanoTime() < deadline) {
      FakeVllmPublisher.sleep(10);
    }
    IngestStats s = sub.stats();
    assertThat(sub.lastSequence("")).isEqualTo(pub.lastSeq());
    assertThat(s.badFrames()).isZero();
    assertThat(s.gaps()).isEqualTo(1);
    assertThat(s.lostMessages()).isEqualTo(3);
    assertThat(s.replays()).isZero();
    assertThat(s.batches()).isEqualTo(pub.lastSeq() + 1 - 3);
  }

  @Test
  void aReplayThatGetsNoAnswerIsAbandonedAndCounted() {
    pub = FakeVllmPublisher.bound(TOPIC);
    pub.answerReplays(false);
    sub = connect(spec(7, 4), 4).replayTimeout(Duration.ofMillis(200)).start();
    pub.awaitSubscriptions(1, WAIT);
    EngineSim sim = new EngineSim(pub, 4, 64, 11, VllmEncoder.arrayLike(), null);
    sim.run(10);
    pub.dropNext(2);
    sim.run(30);
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (sub.lastSequence(TOPIC) < pub.lastSeq() && System.nanoTime() < deadline) {
      FakeVllmPublisher.sleep(10);
    }
    IngestStats s = sub.stats();
    assertThat(sub.lastSequence(TOPIC)).isEqualTo(pub.lastSeq());
    assertThat(s.replayFailures()).isGreaterThanOrEqualTo(1);
    assertThat(s.lostMessages()).isEqualTo(2);
    assertThat(pub.replayRequests()).isGreaterThanOrEqualTo(1);
  }

  @Test
  void closeIsPromptEvenDuringAReplay() {
    pub = FakeVllmPublisher.bound(TOPIC);
    pub.answerReplays(false);
    // the replay waits an hour for its answer: a close that waited for it would never end here
    Duration replayTimeout = Duration.ofHours(1);
    sub = connect(spec(7, 4), 4).replayTimeout(replayTimeout).start();
    pub.awaitSubscriptions(1, WAIT);
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (pub.replayRequests() < 1 && System.nanoTime() < deadline) {
      FakeVllmPublisher.sleep(5); // the connection's catch-up now waits for an answer
    }
    assertThat(pub.replayRequests()).isGreaterThanOrEqualTo(1);
    long t0 = System.nanoTime();
    sub.close();
    Duration took = Duration.ofNanos(System.nanoTime() - t0);
    // a bound sized by the replay's hour, not by the machine's speed (a loaded one is slow)
    assertThat(took).as("close took %s", took).isLessThan(WAIT);
    sub.close(); // idempotent
    assertThat(sub.stats().replayFailures()).as("a shutdown is no failure").isZero();
  }

  @Test
  void registrationRefusesWhatCannotWork() {
    pub = FakeVllmPublisher.bound(TOPIC);
    assertThatThrownBy(() -> connect(spec(7, 24), 16).start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("engine block size 24 is not a multiple of the router block size 16");
    assertThatThrownBy(
            () ->
                ZmqEventSubscriber.bind(
                        "tcp://127.0.0.1:*", List.of(EngineSpec.of(1, 4), EngineSpec.of(2, 4)))
                    .routerHasher(BlockHasher.of(4))
                    .sink(IngestSink.deviceIndex(index))
                    .start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("two engines publish with topic \"\"");
    sub =
        ZmqEventSubscriber.bind("tcp://127.0.0.1:*", List.of(EngineSpec.of(1, 4)))
            .routerHasher(BlockHasher.of(4))
            .sink(IngestSink.deviceIndex(index))
            .start();
    assertThatThrownBy(
            () ->
                ZmqEventSubscriber.bind(sub.endpoint(), List.of(EngineSpec.of(1, 4)))
                    .routerHasher(BlockHasher.of(4))
                    .sink(IngestSink.deviceIndex(index))
                    .start())
        .isInstanceOf(ZMQException.class);
    assertThatThrownBy(
            () ->
                ZmqEventSubscriber.connect("tcp://127.0.0.1:1", EngineSpec.of(1, 4))
                    .reconnectBackoff(Duration.ofSeconds(2), Duration.ofSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("need 0 < initial <= max");
    assertThatThrownBy(
            () ->
                ZmqEventSubscriber.connect("tcp://127.0.0.1:1", EngineSpec.of(1, 4))
                    .sink(IngestSink.deviceIndex(index))
                    .start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("routerHasher is required");
    assertThatThrownBy(() -> connect(spec(7, 4).withReplay("bogus://nowhere"), 4).start())
        .isInstanceOf(ZMQException.class);
    assertThatThrownBy(() -> sub.lastSequence("nope"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no engine publishes with topic \"nope\"");
  }
}
