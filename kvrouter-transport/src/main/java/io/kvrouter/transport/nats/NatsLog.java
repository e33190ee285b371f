package io.kvrouter.transport.nats;

import io.nats.client.Connection;
import io.nats.client.ConnectionListener;
import io.nats.client.ConsumeOptions;
import io.nats.client.IterableConsumer;
import io.nats.client.JetStream;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.JetStreamOptions;
import io.nats.client.Message;
import io.nats.client.OrderedConsumerContext;
import io.nats.client.PublishOptions;
import io.nats.client.api.DeliverPolicy;
import io.nats.client.api.OrderedConsumerConfiguration;
import io.nats.client.api.PublishAck;
import io.nats.client.impl.Headers;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * A small ordered log on one subject of a JetStream stream: every replica that follows it sees
 * every message of the subject, from the first one the stream holds, in stream order, on one thread
 * of its own. kvrouter's servers keep their registrations in one ({@code
 * kvrouter.events._registrations}), so that a restarted replica learns them from the stream.
 *
 * <pre>{@code
 * NatsLog log = NatsLog.start(nc, stream, "registry-r1", (seq, headers, data) -> apply(data));
 * log.awaitReady(Duration.ofSeconds(30));   // everything the subject held at start is handled
 * long seq = log.publish(headers, payload, msgId).getSeqno();
 * log.awaitApplied(seq, Duration.ofSeconds(10));
 * }</pre>
 *
 * <p>{@link #ready()} turns true once every message the subject held when the log started has been
 * handed to the handler. A handler that throws has the message counted in {@link #handlerErrors()}
 * and logged; the log goes on with the next one. The connection belongs to the caller.
 */
public final class NatsLog implements AutoCloseable {
  /*
   * Implementation notes
   *
   * Reading: a jnats ordered consumer (ephemeral, no acks, flow control and heartbeats; jnats
   * re-creates it after a gap or a lost connection at the stream sequence after the last one it
   * delivered) filtered on the subject, deliver-all. start() creates the stream when it is
   * missing, reads the subject's last sequence (the ready target: 0 when the subject is empty),
   * creates the consumer and starts the log's thread ("kvrouter-natslog-<name>"), which
   * pulls one message at a time (waits sliced to 100 ms so close() is seen), calls the handler,
   * then publishes the sequence to Progress (the same lost-wake-up-free waiters as NatsReplica).
   * A failure of the consumer itself (not the handler's) makes the thread open a new ordered
   * consumer at lastApplied + 1 after a pause that doubles up to 2 s.
   *
   * The handler runs on the log's thread only; lastApplied and ready are Progress's volatiles;
   * the counters are atomics. close() stops the loop and joins the thread (the handler may be
   * running: it is waited for up to 10 s).
   */

  private static final Logger LOG = Logger.getLogger(NatsLog.class.getName());
  private static final int NO_MESSAGE_FOUND = 10037;
  private static final Duration POLL = Duration.ofMillis(100);
  private static final long PULL_EXPIRY_MS = 2000;

  /** What the log's thread does with each message. */
  @FunctionalInterface
  public interface Handler {
    /**
     * One message of the subject, in stream order.
     *
     * @param sequence its stream sequence
     * @param headers its headers (null when it has none)
     * @param data its payload
     */
    void accept(long sequence, @Nullable Headers headers, byte[] data) throws Exception;
  }

  private final Connection nc;
  private final JetStream js;
  private final NatsEventStream stream;
  private final String name;
  private final Handler handler;
  private final long startTarget;
  private final Progress progress = new Progress();
  private final AtomicLong handled = new AtomicLong();
  private final AtomicLong handlerErrors = new AtomicLong();
  private final AtomicLong consumerErrors = new AtomicLong();
  private final Thread thread;
  private final ConnectionListener reconnects;
  private volatile boolean running = true;
  private volatile boolean reconnected;

  private NatsLog(Connection nc, NatsEventStream stream, String name, Handler handler)
      throws IOException, JetStreamApiException {
    this.nc = nc;
    this.js = nc.jetStream();
    this.stream = stream;
    this.name = name;
    this.handler = handler;
    JetStreamManagement jsm = nc.jetStreamManagement();
    stream.ensure(jsm);
    this.startTarget = lastSequence(jsm);
    if (startTarget == 0) progress.ready(true);
    IterableConsumer first = open(1);
    this.reconnects =
        (conn, event) -> {
          if (event == ConnectionListener.Events.RECONNECTED) reconnected = true;
        };
    nc.addConnectionListener(reconnects);
    this.thread = new Thread(() -> run(first), "kvrouter-natslog-" + name);
    thread.setDaemon(true);
    thread.start();
  }

  /**
   * Starts following {@code stream}'s subject from its first message.
   *
   * @param name names the thread and the log lines
   * @throws UncheckedIOException when NATS cannot be reached
   * @throws IllegalStateException when JetStream refuses, or the stream does not capture the
   *     subject
   */
  public static NatsLog start(Connection nc, NatsEventStream stream, String name, Handler handler) {
    Objects.requireNonNull(nc, "connection");
    Objects.requireNonNull(stream, "stream");
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(handler, "handler");
    try {
      return new NatsLog(nc, stream, name, handler);
    } catch (IOException e) {
      throw new UncheckedIOException("log " + stream.subject() + " could not start", e);
    } catch (JetStreamApiException e) {
      throw new IllegalStateException(
          "log " + stream.subject() + " could not start: " + e.getMessage(), e);
    }
  }

  private long lastSequence(JetStreamManagement jsm) throws IOException, JetStreamApiException {
    try {
      return jsm.getLastMessage(stream.stream(), stream.subject()).getSeq();
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() == NO_MESSAGE_FOUND) return 0;
      throw e;
    }
  }

  private IterableConsumer open(long fromSequence) throws IOException, JetStreamApiException {
    OrderedConsumerConfiguration c =
        new OrderedConsumerConfiguration().filterSubject(stream.subject());
    if (fromSequence <= 1) {
      c.deliverPolicy(DeliverPolicy.All);
    } else {
      c.deliverPolicy(DeliverPolicy.ByStartSequence).startSequence(fromSequence);
    }
    OrderedConsumerContext ctx = nc.getStreamContext(stream.stream()).createOrderedConsumer(c);
    // short pulls: their heartbeats (half the expiry) notice a consumer that a restarted server
    // lost
    return ctx.iterate(ConsumeOptions.builder().expiresIn(PULL_EXPIRY_MS).build());
  }

  // ------------------------------------------------------------------ public API

  /** The stream and subject of the log. */
  public NatsEventStream stream() {
    return stream;
  }

  /**
   * Publishes one message to the log's subject and waits until the stream stored it.
   *
   * @param headers the message's headers, or null for none
   * @param messageId the {@code Nats-Msg-Id} (the stream keeps one copy per id within its duplicate
   *     window), or null
   * @throws IOException when the store was not confirmed (it may have happened)
   * @throws JetStreamApiException when the stream refused the message
   */
  public PublishAck publish(@Nullable Headers headers, byte[] data, @Nullable String messageId)
      throws IOException, JetStreamApiException {
    return publish(headers, data, messageId, null);
  }

  /**
   * {@link #publish(Headers, byte[], String)} waiting at most {@code ackTimeout} for the
   * acknowledgement (null: the connection's JetStream request timeout).
   */
  public PublishAck publish(
      @Nullable Headers headers,
      byte[] data,
      @Nullable String messageId,
      @Nullable Duration ackTimeout)
      throws IOException, JetStreamApiException {
    PublishOptions.Builder o = PublishOptions.builder().expectedStream(stream.stream());
    if (messageId != null) o.messageId(messageId);
    // a synchronous publish waits as long as its JetStream context's request timeout
    JetStream context =
        ackTimeout == null
            ? js
            : nc.jetStream(JetStreamOptions.builder().requestTimeout(ackTimeout).build());
    return context.publish(stream.subject(), headers, data, o.build());
  }

  /** Whether every message the subject held at start has been handed to the handler. */
  public boolean ready() {
    return progress.ready();
  }

  /** Waits until {@link #ready()}; false on timeout or after close. */
  public boolean awaitReady(Duration timeout) {
    return progress.awaitReady(timeout);
  }

  /** Waits until the message at {@code sequence} (and all before it) was handled. */
  public boolean awaitApplied(long sequence, Duration timeout) {
    return progress.awaitApplied(sequence, timeout);
  }

  /** The stream sequence of the last message handled; 0 before the first. */
  public long lastAppliedSequence() {
    return progress.lastApplied();
  }

  /** The subject's last stream sequence when the log started (0: it was empty). */
  public long startSequence() {
    return startTarget;
  }

  /** Messages handed to the handler. */
  public long handled() {
    return handled.get();
  }

  /** Messages the handler threw on. */
  public long handlerErrors() {
    return handlerErrors.get();
  }

  /** Consumer failures (each followed by a new consumer at the next sequence). */
  public long consumerErrors() {
    return consumerErrors.get();
  }

  /** Stops the log's thread (after the message it is handling) and joins it. Idempotent. */
  @Override
  public void close() {
    running = false;
    if (Thread.currentThread() != thread) {
      try {
        thread.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    nc.removeConnectionListener(reconnects);
    progress.stop();
  }

  // ------------------------------------------------------------------ the log's thread

  private void run(IterableConsumer first) {
    @Nullable IterableConsumer consumer = first; // null: none open, open one at the next turn
    long backoffMs = 100;
    try {
      while (running) {
        try {
          if (reconnected) {
            // the server may have lost the ephemeral consumer: read on from a new one
            reconnected = false;
            stopQuietly(consumer);
            consumer = null;
          }
          IterableConsumer c = consumer;
          if (c == null) {
            c = open(progress.lastApplied() + 1);
            consumer = c;
          }
          Message m = c.nextMessage(POLL);
          backoffMs = 100;
          if (m == null) continue;
          long seq = m.metaData().streamSequence();
          if (seq <= progress.lastApplied()) continue; // a redelivery after a re-created consumer
          handle(seq, m);
          progress.applied(seq);
          if (!progress.ready() && seq >= startTarget) progress.ready(true);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        } catch (Exception e) {
          long n = consumerErrors.incrementAndGet();
          if (n <= 10 || n % 1000 == 0) {
            LOG.log(
                Level.WARNING,
                "NATS log {0} ({1}): consumer failed ({2}); reading again after sequence {3}",
                new Object[] {name, stream.subject(), e.toString(), progress.lastApplied()});
          }
          stopQuietly(consumer);
          consumer = null;
          if (!pause(backoffMs)) return;
          backoffMs = Math.min(backoffMs * 2, 2000);
        }
      }
    } finally {
      stopQuietly(consumer);
    }
  }

  private void handle(long seq, Message m) {
    handled.incrementAndGet();
    try {
      handler.accept(seq, m.getHeaders(), m.getData() == null ? new byte[0] : m.getData());
    } catch (Exception e) {
      long n = handlerErrors.incrementAndGet();
      if (n <= 10 || n % 1000 == 0) {
        LOG.log(
            Level.WARNING,
            "NATS log " + name + " (" + stream.subject() + "): message " + seq + " skipped",
            e);
      }
    }
  }

  private boolean pause(long ms) {
    long end = System.nanoTime() + ms * 1_000_000;
    while (running) {
      long left = end - System.nanoTime();
      if (left <= 0) return true;
      try {
        Thread.sleep(Math.min(50, Math.max(1, left / 1_000_000)));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return false;
  }

  private static void stopQuietly(@Nullable IterableConsumer c) {
    if (c == null) return;
    try {
      c.close();
    } catch (Exception e) {
      // closing a consumer of a lost connection: nothing left to do
    }
  }

  @Override
  public String toString() {
    return "NatsLog[" + name + " on " + stream.stream() + "/" + stream.subject() + "]";
  }
}
