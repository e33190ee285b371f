package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.kvrouter.index.TieredScores;
import io.kvrouter.transport.TestWaits;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.StorageTier;
import io.nats.client.Connection;
import io.nats.client.JetStream;
import io.nats.client.ObjectStore;
import io.nats.client.api.ObjectInfo;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Events of every tier on the NATS stream (docs/ingestion.md, "Tiers on the stream"), against a
 * real {@code nats-server -js}: two replicas over tiered indexes of different kinds agree with the
 * expected per-tier scores after host and disk events, a message written without {@code
 * storage_tier} (as before tiers) is a device event, and a replica restarted from a snapshot has
 * the same tiers and the same scores as the one that kept running, including a tier that the
 * snapshot holds no block of.
 */
@Timeout(TestWaits.HANG_SECONDS)
class NatsTiersTest {
  private static final Duration WAIT = TestWaits.WAIT;
  private static final int BS = 4;
  private static final Worker W1 = new Worker(1, 0);
  private static final Worker W2 = new Worker(2, 0);

  private final List<AutoCloseable> resources = new ArrayList<>();
  private NatsServer server;

  @BeforeEach
  void startServer() {
    server = NatsServer.start();
  }

  @AfterEach
  void stopServer() throws Exception {
    for (int i = resources.size() - 1; i >= 0; i--) resources.get(i).close();
    if (server != null) server.close();
  }

  private <T extends AutoCloseable> T track(T resource) {
    resources.add(resource);
    return resource;
  }

  private NatsReplica start(String id, TieredIndex index, NatsEventStream stream) {
    return track(
        NatsReplica.builder(track(server.connect()), stream, index)
            .replicaId(id)
            .writeSnapshots(false)
            .ackWait(Duration.ofSeconds(5))
            .start());
  }

  /** Every rank's cumulative blocks P_1..P_4 for {@code local}, e.g. {@code {1=[4, 6, 6, 6]}}. */
  private static String tiers(TieredIndex index, long[] local) {
    index.flush();
    TieredScores s = index.findTiered(local);
    TreeMap<Long, String> out = new TreeMap<>();
    for (int i = 0; i < s.size(); i++) {
      int[] p = new int[Tier.values().length];
      for (Tier t : Tier.values()) p[t.ordinal()] = s.blocks(i, t);
      out.put(s.worker(i).workerId(), Arrays.toString(p));
    }
    return out.toString();
  }

  private static void awaitApplied(NatsReplica r, long seq) {
    assertThat(r.awaitApplied(seq, WAIT))
        .as("%s applied through %d (at %d)", r, seq, r.lastAppliedSequence())
        .isTrue();
  }

  @Test
  void replicasAgreeOnEveryTierAndARestartFromASnapshotKeepsThem() throws Exception {
    int[] tokens = new int[8 * BS];
    for (int i = 0; i < tokens.length; i++) tokens[i] = 100 + i;
    long[] local = BlockHasher.of(BS).localHashes(tokens);
    long[] seq = SequenceHasher.sequenceHashes(local);
    NatsEventStream stream = NatsEventStream.forModel("tiers");
    Connection nc = track(server.connect());
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);

    TieredIndex indexA = track(TieredIndex.of(KvIndexes::concurrentRadixTree));
    TieredIndex indexB = track(TieredIndex.of(KvIndexes::concurrentCompressedTree));
    Connection ncA = track(server.connect()); // closed below to stop replica a
    NatsReplica a =
        track(
            NatsReplica.builder(ncA, stream, indexA)
                .replicaId("a")
                .writeSnapshots(false)
                .ackWait(Duration.ofSeconds(5))
                .start());
    NatsReplica b = start("b", indexB, stream);

    // W1: 4 blocks on the device, all 8 on the host, then the host loses block 6;
    // W2: all 8 on disk, which it then loses; an old-style message (no storage_tier) is device
    long[] first4 = Arrays.copyOf(seq, 4);
    long[] local4 = Arrays.copyOf(local, 4);
    JetStream js = nc.jetStream();
    js.publish(
        stream.subject(),
        RouterEventJson.writeEventBytes(
            new RouterEvent(W1, 1, CacheEvent.storedAtRoot(first4, local4))));
    pub.publish(StorageTier.HOST, new RouterEvent(W1, 2, CacheEvent.storedAtRoot(seq, local)));
    pub.publish(StorageTier.HOST, new RouterEvent(W1, 3, CacheEvent.removed(seq[6])));
    pub.publish(StorageTier.DISK, new RouterEvent(W2, 4, CacheEvent.storedAtRoot(seq, local)));
    awaitApplied(a, pub.lastSequence());
    awaitApplied(b, pub.lastSequence());
    String expected = "{1=[4, 6, 6, 6], 2=[0, 0, 8, 8]}";
    assertThat(tiers(indexA, local)).isEqualTo(expected);
    assertThat(tiers(indexB, local)).isEqualTo(expected);

    // W2 loses its disk copies: the index keeps its disk tier with nothing on it
    pub.publish(StorageTier.DISK, new RouterEvent(W2, 5, CacheEvent.removed(seq)));
    awaitApplied(a, pub.lastSequence());
    SnapshotInfo snap = a.snapshot().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertThat(snap.sequence()).isEqualTo(pub.lastSequence());
    ObjectStore os = nc.objectStore(NatsReplica.DEFAULT_BUCKET);
    ObjectInfo info = os.getInfo(snap.objectName());
    assertThat(info.getHeaders().getFirst(Snapshots.H_TIERS)).isEqualTo("device,host_pinned,disk");
    ByteArrayOutputStream content = new ByteArrayOutputStream();
    os.get(snap.objectName(), content);
    assertThat(content.toString(StandardCharsets.UTF_8))
        .contains("\"storage_tier\":\"host_pinned\"")
        .doesNotContain("\"storage_tier\":\"disk\"");

    // a stops; meanwhile W1's device copies from block 2 on go and W2 gets 3 blocks on the host
    ncA.close();
    a.close();
    pub.publish(new RouterEvent(W1, 6, CacheEvent.removed(seq[2])));
    pub.publish(
        StorageTier.HOST,
        new RouterEvent(
            W2, 7, CacheEvent.storedAtRoot(Arrays.copyOf(seq, 3), Arrays.copyOf(local, 3))));
    long last = pub.lastSequence();

    TieredIndex indexA2 = track(TieredIndex.of(KvIndexes::concurrentRadixTree));
    NatsReplica a2 = start("a", indexA2, stream);
    assertThat(a2.restoredSequence()).isEqualTo(snap.sequence());
    assertThat(a2.stats().restoredEvents()).isEqualTo(snap.events());
    awaitApplied(a2, last);
    awaitApplied(b, last);
    expected = "{1=[2, 6, 6, 6], 2=[0, 3, 3, 3]}";
    assertThat(tiers(indexB, local)).isEqualTo(expected);
    assertThat(tiers(indexA2, local)).isEqualTo(expected);
    assertThat(indexA2.slowestTier())
        .as("the disk tier, empty in the snapshot, came from its header")
        .isEqualTo(Tier.DISK)
        .isEqualTo(indexB.slowestTier());
    assertThat(indexA2.blockCount(W2, Tier.HOST))
        .isEqualTo(3)
        .isEqualTo(indexB.blockCount(W2, Tier.HOST));
    // (W1's host block 7, behind the hole at 6, scores nothing and is not in the snapshot: the
    // restarted replica counts 6 host blocks of W1 where b counts 7, as any dump leaves such
    // blocks out)
  }
}
