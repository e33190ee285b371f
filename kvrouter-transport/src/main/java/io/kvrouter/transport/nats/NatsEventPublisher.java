package io.kvrouter.transport.nats;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.StorageTier;
import io.nats.client.Connection;
import io.nats.client.JetStream;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamOptions;
import io.nats.client.NUID;
import io.nats.client.PublishOptions;
import io.nats.client.api.PublishAck;
import io.nats.client.impl.Headers;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Publishes router events to a JetStream stream, one event per message in NVIDIA Dynamo's JSON wire
 * form ({@link RouterEventJson}), and waits for the stream to store each one. An event about copies
 * beyond the device carries Dynamo's {@code storage_tier} ({@link #publish(StorageTier,
 * RouterEvent, String)}); a device event is written without it, as before tiers existed.
 *
 * <pre>{@code
 * Connection nc = Nats.connect("nats://127.0.0.1:4222");
 * NatsEventPublisher pub = NatsEventPublisher.create(nc, NatsEventStream.forModel("llama"));
 * PrefixCache engine = new PrefixCache(Worker.of(1), 16, 4096, pub);   // a Consumer<RouterEvent>
 * }</pre>
 *
 * <p>{@link #publish} returns once the stream has stored the event (or throws): the order in which
 * one thread publishes is the order in the stream. Each message carries a {@code Nats-Msg-Id}
 * unique to this publisher, so a publish retried after a lost acknowledgement is stored once
 * (within the stream's duplicate window). Thread-safe; the events of one worker should come from
 * one thread, so that their order is defined. The connection belongs to the caller.
 */
public final class NatsEventPublisher implements Consumer<RouterEvent> {
  /*
   * Implementation notes
   *
   * Synchronous publishing: one round trip per event (JetStream's PubAck). Asynchronous
   * publishing with a window would be faster, but a failed publish in the middle of a window
   * leaves a gap that a retry can only fill out of order, and the index needs each worker's
   * events in order. The message id is <publisher NUID>-<counter>: unique per publisher
   * instance, so an engine that restarts with event ids from 1 again is never mistaken for a
   * duplicate; a retry reuses the id, so the server drops the copy when the first attempt was
   * stored after all. The counters are AtomicLongs, the only mutable state.
   */

  private static final int ATTEMPTS = 3;

  private final JetStream js;
  private final NatsEventStream stream;
  private final String idPrefix = NUID.nextGlobal() + "-";
  private final AtomicLong counter = new AtomicLong();
  private final AtomicLong published = new AtomicLong();
  private final AtomicLong lastSequence = new AtomicLong();

  private NatsEventPublisher(Connection nc, NatsEventStream stream, @Nullable Duration ackTimeout)
      throws IOException {
    // a synchronous publish waits as long as its JetStream context's request timeout
    this.js =
        ackTimeout == null
            ? nc.jetStream()
            : nc.jetStream(JetStreamOptions.builder().requestTimeout(ackTimeout).build());
    this.stream = stream;
  }

  /**
   * A publisher to {@code stream}'s subject; creates the stream when it does not exist.
   *
   * @throws IllegalStateException when the stream exists but does not capture the subject, or
   *     JetStream refuses the request
   * @throws UncheckedIOException when the server cannot be reached
   */
  public static NatsEventPublisher create(Connection nc, NatsEventStream stream) {
    Objects.requireNonNull(nc, "connection");
    Objects.requireNonNull(stream, "stream");
    try {
      stream.ensure(nc.jetStreamManagement());
      return new NatsEventPublisher(nc, stream, null);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot set up stream " + stream.stream(), e);
    } catch (JetStreamApiException e) {
      throw new IllegalStateException(
          "cannot set up stream " + stream.stream() + ": " + e.getMessage(), e);
    }
  }

  /**
   * A publisher to {@code stream}'s subject that assumes the stream exists (for publishers without
   * the right to manage streams); a publish fails when no stream captures the subject.
   */
  public static NatsEventPublisher existing(Connection nc, NatsEventStream stream) {
    return existing(nc, stream, null);
  }

  /**
   * {@link #existing(Connection, NatsEventStream)} that waits at most {@code ackTimeout} for each
   * attempt's acknowledgement (null: the connection's JetStream request timeout), so that a publish
   * during an outage fails after about three times that.
   */
  public static NatsEventPublisher existing(
      Connection nc, NatsEventStream stream, @Nullable Duration ackTimeout) {
    Objects.requireNonNull(nc, "connection");
    Objects.requireNonNull(stream, "stream");
    try {
      return new NatsEventPublisher(nc, stream, ackTimeout);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Where events go. */
  public NatsEventStream stream() {
    return stream;
  }

  /**
   * Publishes one event and waits until the stream stored it; retries twice on a timeout with the
   * same message id.
   *
   * @return the stream's acknowledgement (its {@code getSeqno()} is the event's stream sequence)
   * @throws IOException when the stream did not acknowledge any attempt (timeout, no stream)
   * @throws JetStreamApiException when the stream refused the message
   */
  public PublishAck publish(RouterEvent event) throws IOException, JetStreamApiException {
    return publish(event, idPrefix + counter.incrementAndGet());
  }

  /**
   * {@link #publish(RouterEvent)} with the caller's {@code Nats-Msg-Id}: the stream stores a
   * message whose id it already stored within its duplicate window (JetStream's {@code
   * duplicate_window}, 2 minutes unless the stream says otherwise) only once, and acknowledges the
   * copy with the first one's sequence and {@link PublishAck#isDuplicate()} true. A caller that
   * retries a batch whose store was not confirmed gives each event the id it gave it the first
   * time, so the events that were stored after all are not stored twice.
   *
   * @param messageId unique in the whole stream for this event (other subjects included)
   */
  public PublishAck publish(RouterEvent event, String messageId)
      throws IOException, JetStreamApiException {
    return publish(StorageTier.DEVICE, event, messageId);
  }

  /** {@link #publish(RouterEvent)} of an event about the copies on {@code tier}. */
  public PublishAck publish(StorageTier tier, RouterEvent event)
      throws IOException, JetStreamApiException {
    return publish(tier, event, idPrefix + counter.incrementAndGet());
  }

  /**
   * {@link #publish(RouterEvent, String)} of an event about the copies on {@code tier}: the message
   * carries {@code "storage_tier"} (Dynamo's names: {@code host_pinned}, {@code disk}, {@code
   * external}) unless the tier is the device. Replicas apply it to that tier; a {@code Cleared}
   * clears every tier of the rank whatever it names, as Dynamo's indexer does.
   */
  public PublishAck publish(StorageTier tier, RouterEvent event, String messageId)
      throws IOException, JetStreamApiException {
    Objects.requireNonNull(tier, "tier");
    Objects.requireNonNull(event, "event");
    Objects.requireNonNull(messageId, "messageId");
    byte[] payload = RouterEventJson.writeEventBytes(tier, event);
    PublishOptions opts =
        PublishOptions.builder().expectedStream(stream.stream()).messageId(messageId).build();
    for (int attempt = 1; ; attempt++) {
      try {
        PublishAck ack = js.publish(stream.subject(), (Headers) null, payload, opts);
        if (!ack.isDuplicate()) published.incrementAndGet();
        lastSequence.accumulateAndGet(ack.getSeqno(), Math::max);
        return ack;
      } catch (IOException e) {
        if (attempt >= ATTEMPTS) {
          throw new IOException(
              "event not stored on stream "
                  + stream.stream()
                  + " (subject "
                  + stream.subject()
                  + ") after "
                  + ATTEMPTS
                  + " attempts: "
                  + e.getMessage(),
              e);
        }
      }
    }
  }

  /**
   * {@link #publish} for use as an engine's event listener.
   *
   * @throws UncheckedIOException when the stream did not acknowledge the event
   * @throws IllegalStateException when the stream refused it
   */
  @Override
  public void accept(RouterEvent event) {
    try {
      publish(event);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (JetStreamApiException e) {
      throw new IllegalStateException(
          "stream " + stream.stream() + " refused an event: " + e.getMessage(), e);
    }
  }

  /** Events stored so far (acknowledged duplicates not counted). */
  public long published() {
    return published.get();
  }

  /** The highest stream sequence this publisher got back, 0 before the first publish. */
  public long lastSequence() {
    return lastSequence.get();
  }
}
