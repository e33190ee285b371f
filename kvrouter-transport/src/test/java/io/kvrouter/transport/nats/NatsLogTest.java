package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.transport.TestWaits;
import io.nats.client.Connection;
import io.nats.client.impl.Headers;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link NatsLog} against a real {@code nats-server -js}: a log started on a subject that already
 * holds messages hands them all over, in order, before it is ready; later messages follow; other
 * subjects of the stream are not read; a restart of nats-server is ridden out; a handler that
 * throws skips one message.
 */
@Timeout(TestWaits.HANG_SECONDS)
class NatsLogTest {
  private static final Duration WAIT = TestWaits.WAIT;

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  @SuppressWarnings(
      "try") // jnats' Connection.close() declares InterruptedException; the test throws Exception
  void replaysTheSubjectThenFollowsIt() throws Exception {
    NatsEventStream subject = NatsEventStream.forModel("_log");
    NatsEventStream other = NatsEventStream.forModel("other");
    try (NatsServer server = NatsServer.start();
        Connection nc = server.connect()) {
      List<String> seen = new CopyOnWriteArrayList<>();
      List<String> opsSeen = new CopyOnWriteArrayList<>();
      NatsLog.Handler handler =
          (seq, headers, data) -> {
            String s = new String(data, StandardCharsets.UTF_8);
            if (s.equals("boom")) throw new IllegalStateException("bad message");
            seen.add(seq + ":" + s);
            opsSeen.add(headers == null ? "-" : headers.getFirst("Op"));
          };
      long last;
      try (NatsLog writer = NatsLog.start(nc, subject, "w", (s, h, d) -> {})) {
        assertThat(writer.ready()).isTrue(); // nothing to replay
        Headers h = new Headers().put("Op", "put");
        writer.publish(h, utf8("a"), null);
        NatsEventPublisher.create(nc, other)
            .publish(new RouterEvent(Worker.of(1), 0, CacheEvent.cleared()));
        writer.publish(null, utf8("boom"), null);
        last = writer.publish(h, utf8("b"), "id-b").getSeqno();
        // the same message id again: the stream keeps one
        assertThat(writer.publish(h, utf8("b"), "id-b").isDuplicate()).isTrue();
      }
      try (NatsLog log = NatsLog.start(nc, subject, "r", handler)) {
        assertThat(log.startSequence()).isEqualTo(last);
        assertThat(log.awaitReady(WAIT)).isTrue();
        assertThat(seen).containsExactly("1:a", last + ":b");
        assertThat(opsSeen).containsExactly("put", "put");
        assertThat(log.handlerErrors()).isEqualTo(1);
        assertThat(log.lastAppliedSequence()).isEqualTo(last);

        server.restart();
        long next = 0;
        for (int attempt = 0; next == 0; attempt++) {
          try {
            next = log.publish(null, utf8("c"), "id-c").getSeqno();
          } catch (IOException e) {
            if (attempt > 20) throw e; // the connection is being made again
          }
        }
        assertThat(log.awaitApplied(next, WAIT)).isTrue();
        assertThat(seen).containsExactly("1:a", last + ":b", next + ":c");
        assertThat(log.handled()).isEqualTo(4);
      }
    }
  }
}
