package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.transport.TestWaits;
import io.kvrouter.transport.json.RouterEventJson;
import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.api.MessageInfo;
import io.nats.client.api.PublishAck;
import io.nats.client.api.StorageType;
import io.nats.client.api.StreamConfiguration;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The publisher and stream set-up against a real {@code nats-server -js}. */
@Timeout(TestWaits.HANG_SECONDS)
class NatsEventPublisherTest {
  private NatsServer server;
  private Connection nc;
  private JetStreamManagement jsm;

  @BeforeEach
  void startServer() throws IOException {
    server = NatsServer.start();
    nc = server.connect();
    jsm = nc.jetStreamManagement();
  }

  @AfterEach
  void stopServer() throws InterruptedException {
    if (nc != null) nc.close();
    if (server != null) server.close();
  }

  @Test
  void publishesDynamoJsonOneEventPerMessage() throws Exception {
    NatsEventStream stream = NatsEventStream.forModel("m");
    NatsEventPublisher pub = NatsEventPublisher.create(nc, stream);
    RouterEvent stored =
        new RouterEvent(
            new Worker(7, 1), 3, CacheEvent.storedAtRoot(new long[] {-1L}, new long[] {42}));
    RouterEvent removed = new RouterEvent(Worker.of(7), 4, CacheEvent.removed(5, 6));
    PublishAck first = pub.publish(stored);
    pub.accept(removed);
    pub.accept(new RouterEvent(Worker.of(8), 1, CacheEvent.cleared()));

    assertThat(first.getStream()).isEqualTo("KVROUTER_EVENTS");
    assertThat(first.getSeqno()).isEqualTo(1);
    assertThat(pub.lastSequence()).isEqualTo(3);
    assertThat(pub.published()).isEqualTo(3);
    MessageInfo m1 = jsm.getMessage(stream.stream(), 1);
    assertThat(m1.getSubject()).isEqualTo("kvrouter.events.m");
    assertThat(new String(m1.getData(), StandardCharsets.UTF_8))
        .isEqualTo(
            "{\"worker_id\":7,\"event\":{\"event_id\":3,\"data\":{\"stored\":{\"parent_hash\":null,"
                + "\"blocks\":[{\"block_hash\":18446744073709551615,\"tokens_hash\":42}]}},"
                + "\"dp_rank\":1}}");
    assertThat(m1.getHeaders().getFirst("Nats-Msg-Id")).isNotBlank();
    assertThat(RouterEventJson.readEvent(jsm.getMessage(stream.stream(), 2).getData()))
        .isEqualTo(removed);
  }

  @Test
  void aStreamThatDoesNotCaptureTheSubjectIsReported() throws Exception {
    jsm.addStream(
        StreamConfiguration.builder()
            .name("OTHER")
            .subjects("elsewhere.>")
            .storageType(StorageType.Memory)
            .build());
    NatsEventStream stream = new NatsEventStream("OTHER", "kvrouter.events.>", "kvrouter.events.m");
    assertThatThrownBy(() -> NatsEventPublisher.create(nc, stream))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("OTHER")
        .hasMessageContaining("kvrouter.events.m");
  }

  @Test
  void publishingWithoutAStreamFails() {
    NatsEventPublisher pub = NatsEventPublisher.existing(nc, NatsEventStream.forModel("nowhere"));
    assertThatThrownBy(() -> pub.publish(new RouterEvent(Worker.of(1), 1, CacheEvent.cleared())))
        .isInstanceOfAny(IOException.class, JetStreamApiException.class);
    assertThat(pub.published()).isZero();
  }

  @Test
  void aReplicaFollowsEventsPublishedTheWayDynamoDoes() throws Exception {
    NatsEventStream stream = NatsEventStream.dynamo("dynamo", "backend");
    stream.ensure(jsm);
    // what a Dynamo worker publishes on <stream>.queue, with a field kvrouter does not know
    String dynamo =
        "{\"worker_id\":3,\"event\":{\"event_id\":1,\"data\":{\"stored\":{\"parent_hash\":null,"
            + "\"blocks\":[{\"block_hash\":11,\"tokens_hash\":101,\"mm_extra_info\":null},"
            + "{\"block_hash\":12,\"tokens_hash\":102}]}},\"dp_rank\":0}}";
    nc.jetStream()
        .publish(
            "namespace-dynamo-component-backend-kv-events.queue",
            dynamo.getBytes(StandardCharsets.UTF_8));
    try (KvIndex index = KvIndexes.concurrentRadixTree();
        NatsReplica r =
            NatsReplica.builder(nc, stream, index).replicaId("r").writeSnapshots(false).start()) {
      assertThat(r.awaitReady(TestWaits.WAIT)).isTrue();
      assertThat(index.findMatches(new long[] {101, 102, 103}, false).score(Worker.of(3)))
          .isEqualTo(2);
      assertThat(r.stats().applied()).isEqualTo(1);
    }
  }
}
