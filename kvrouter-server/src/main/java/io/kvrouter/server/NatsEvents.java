package io.kvrouter.server;

import io.kvrouter.index.KvIndex;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.kvevents.TieredEvent;
import io.kvrouter.transport.nats.NatsConnections;
import io.kvrouter.transport.nats.NatsEventPublisher;
import io.kvrouter.transport.nats.NatsEventStream;
import io.kvrouter.transport.nats.NatsReplica;
import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import io.nats.client.api.PublishAck;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * {@code serve --events nats://host:port}: every index is a replica of a NATS JetStream subject,
 * and {@code POST /events} publishes to that subject instead of applying in-process, so several
 * servers on one stream hold the same indexes (docs/ingestion.md §9-§14 for the replica itself).
 *
 * <pre>
 * Implementation notes
 *
 * One jnats connection per server (made in connect(), before the server serves; it reconnects
 * by itself, forever). Registry.register() calls follow() under its membership lock when it
 * creates an index: that starts a NatsReplica (snapshot restore, durable consumer, the replica's
 * own thread, which from then on is a writer of the index next to nothing else: /events does
 * not apply locally in this mode and ZMQ endpoints are refused at registration) and a publisher
 * for the index's subject. The Feed is stored in ModelIndex.nats before the index is visible.
 * When the index is dropped (last rank unregistered) or the server stops, Registry closes the
 * feed outside the index's write lock (close() joins the replica's thread, which may be applying).
 *
 * Subjects: kvrouter.events.<model>.<routing group>, each part with the characters a subject
 * token cannot hold ('.', '*', '>', whitespace) replaced by '_'. The replica id (snapshot object
 * and consumer names) is the server's --replica-id.
 * </pre>
 */
final class NatsEvents implements AutoCloseable {
  private static final Pattern REPLICA_ID = Pattern.compile("[A-Za-z0-9_-]+");

  /** The replica and publisher of one index. */
  record Feed(NatsEventStream stream, NatsReplica replica, NatsEventPublisher publisher)
      implements AutoCloseable {
    @Override
    public void close() {
      replica.close();
    }
  }

  private final String url;
  private final String replicaId;
  private final Connection nc;

  private final Duration ackTimeout;

  private NatsEvents(String url, String replicaId, Connection nc, Duration ackTimeout) {
    this.url = url;
    this.replicaId = replicaId;
    this.nc = nc;
    this.ackTimeout = ackTimeout;
  }

  /** Checks {@code --events}: {@code nats://host:port} (or several, comma-separated). */
  static String checkUrl(String events) {
    return NatsConnections.checkUrl("events", events);
  }

  /** Checks {@code --replica-id}: letters, digits, '-' and '_' (it names NATS objects). */
  static String checkReplicaId(String id) {
    if (!REPLICA_ID.matcher(id).matches()) {
      throw new IllegalArgumentException(
          "replica-id: '" + id + "' may hold only letters, digits, '-' and '_'");
    }
    return id;
  }

  /**
   * Connects to the NATS server(s) at {@code url}.
   *
   * @throws IllegalStateException naming the URL when no server answers within 5 s
   */
  static NatsEvents connect(String url, String replicaId, Duration applyWait) {
    return new NatsEvents(
        url,
        replicaId,
        NatsConnections.connect("events", url, "kvrouter-" + replicaId),
        ackTimeout(applyWait));
  }

  /**
   * How long one publish attempt waits for the stream's acknowledgement: a third of {@code
   * applyWait} (the publisher makes three), between 250 ms and 5 s, so that a batch NATS does not
   * acknowledge is answered in about {@code --nats-apply-wait-ms}.
   */
  static Duration ackTimeout(Duration applyWait) {
    long ms = Math.max(250, Math.min(5000, applyWait.toMillis() / 3));
    return Duration.ofMillis(ms);
  }

  /** How long one publish attempt waits for its acknowledgement ({@link #ackTimeout(Duration)}). */
  Duration ackTimeout() {
    return ackTimeout;
  }

  /** The connection (for the registration log, which shares it). */
  Connection connection() {
    return nc;
  }

  /** The replica id: names this server's consumers, snapshots and log threads. */
  String replicaId() {
    return replicaId;
  }

  /** The subject of an index's events. */
  static NatsEventStream streamOf(ModelKey key) {
    return NatsEventStream.forModel(key.modelName(), key.routingGroup());
  }

  /**
   * Starts following {@code key}'s subject into {@code index}: restores the newest snapshot,
   * creates the durable consumer, starts the replica's thread (which reports ready once the backlog
   * is applied).
   *
   * @throws ApiException 503 when NATS refuses or cannot be reached
   */
  Feed follow(ModelKey key, KvIndex index) {
    NatsEventStream stream = streamOf(key);
    try {
      NatsReplica replica = NatsReplica.builder(nc, stream, index).replicaId(replicaId).start();
      return new Feed(stream, replica, NatsEventPublisher.existing(nc, stream, ackTimeout));
    } catch (RuntimeException e) {
      throw new ApiException(
          503,
          "cannot follow "
              + key.describe()
              + " on NATS ("
              + url
              + ", stream "
              + stream.stream()
              + ", subject "
              + stream.subject()
              + "): "
              + e.getMessage()
              + "; nothing was registered");
    }
  }

  /**
   * Publishes {@code events} in order to the feed's subject, each with its tier ({@code
   * storage_tier} on those beyond the device), and waits (up to {@code wait}) until this server's
   * replica applied them, so that a /query sent after the answer sees them.
   *
   * <p>With a {@code batchId} (from the request's {@code Idempotency-Key} and its body), event i
   * has the message id {@code kvrouter-batch:<subject>:<batchId>:<i>}: a retry of the same batch
   * within the stream's duplicate window stores none of the events the first attempt stored.
   * Without one, each event gets an id of its own, which only makes the publisher's own retries
   * safe.
   *
   * @param batchId null, or an id that names this batch (its key and content) in the stream
   * @return the stream sequence of the last event and how many events the stream already held
   * @throws ApiException 503 when an event was refused or its store not confirmed (the ones before
   *     it were stored), or when the events were not applied in time
   */
  static Published publish(Feed feed, List<TieredEvent> events, Duration wait, String batchId) {
    long last = 0;
    int duplicates = 0;
    String subject = feed.stream().subject();
    for (int i = 0; i < events.size(); i++) {
      try {
        TieredEvent te = events.get(i);
        PublishAck ack =
            batchId == null
                ? feed.publisher().publish(te.tier(), te.event())
                : feed.publisher()
                    .publish(
                        te.tier(),
                        te.event(),
                        "kvrouter-batch:" + subject + ":" + batchId + ":" + i);
        if (ack.isDuplicate()) duplicates++;
        last = Math.max(last, ack.getSeqno());
      } catch (JetStreamApiException e) {
        // the stream answered and refused it: not stored
        throw new ApiException(
            503,
            "NATS refused event ["
                + i
                + "] on subject "
                + subject
                + ": "
                + e.getMessage()
                + (i == 0 ? "; nothing was published" : "; events [0, " + i + ") were published"));
      } catch (IOException | RuntimeException e) {
        // no acknowledgement (a timeout, a lost connection): the store may have happened
        throw new ApiException(
            503,
            "NATS did not confirm storing event ["
                + i
                + "] on subject "
                + subject
                + ": "
                + e.getMessage()
                + "; the store was not confirmed: event ["
                + i
                + "] may have been published"
                + (i == 0 ? "" : " (events [0, " + i + ") were)")
                + ". "
                + (batchId == null
                    ? "Send batches with an Idempotency-Key header so that a retry stores no"
                        + " event twice"
                    : "Retry the same batch with the same Idempotency-Key: events already"
                        + " stored are not stored again"));
      }
    }
    if (last > 0 && !feed.replica().awaitApplied(last, wait)) {
      throw new ApiException(
          503,
          String.format(
              Locale.ROOT,
              "published %d events (through stream sequence %d) but this server's replica did"
                  + " not apply them within %d ms; other replicas may have",
              events.size(),
              last,
              wait.toMillis()));
    }
    return new Published(last, duplicates);
  }

  /**
   * What {@link #publish} did.
   *
   * @param lastSequence the stream sequence of the last event
   * @param duplicates events the stream already held (a retried batch), not stored again
   */
  record Published(long lastSequence, int duplicates) {}

  /** Closes the connection (the feeds are closed by the Registry first). */
  @Override
  public void close() {
    try {
      nc.close();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
