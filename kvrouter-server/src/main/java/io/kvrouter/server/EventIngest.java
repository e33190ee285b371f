package io.kvrouter.server;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.json.EventDecodeException;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;

/**
 * {@code POST /events}: decodes a batch of Dynamo RouterEvents, checks it against the target index
 * and its registrations, and applies it whole, or with {@code --events nats://...} publishes it to
 * the index's NATS subject and waits until this server's replica applied it.
 *
 * <pre>
 * Implementation notes
 *
 * ingest() runs on the request's virtual thread up to the hand-off: it submits decode, check and
 * apply (or publish) to the server's ingest executor (platform threads it owns) and waits, so a
 * large batch does not hold one of the few carrier threads that serve queries (virtual threads
 * are not preempted; platform threads are, by the OS). The executor is shut down by the server
 * at stop; a batch submitted after that is a 503. Holds no state of its own besides its settings;
 * the index's lock (ModelIndex) makes check and apply atomic against unregistration. Every
 * refusal is counted in kvrouter_event_batches_rejected_total with its reason. With NATS, a
 * batch's Idempotency-Key and a digest of its body name its events in the stream (batchId), so
 * that JetStream's duplicate window drops the events of a retry that the first attempt stored.
 * </pre>
 */
final class EventIngest {
  private final Registry registry;
  private final ServerMetrics metrics;
  private final ExecutorService ingest;
  private final boolean acceptUnregistered;
  private final Duration natsApplyWait;

  /**
   * @param ingest the threads that decode and apply batches
   * @param acceptUnregistered apply events of ranks that are not registered
   * @param natsApplyWait with NATS, how long to wait for this server's replica to apply a batch
   */
  EventIngest(
      Registry registry,
      ServerMetrics metrics,
      ExecutorService ingest,
      boolean acceptUnregistered,
      Duration natsApplyWait) {
    this.registry = registry;
    this.metrics = metrics;
    this.ingest = ingest;
    this.acceptUnregistered = acceptUnregistered;
    this.natsApplyWait = natsApplyWait;
  }

  /**
   * The index {@code /events?model_name=...&routing_group=...} names.
   *
   * @throws ApiException 400 when {@code model_name} is missing
   */
  ModelKey target(String modelName, String routingGroup) {
    if (modelName == null || modelName.isEmpty()) {
      metrics.eventBatchRejected("bad_request");
      throw ApiException.badRequest(
          "model_name: missing query parameter (POST /events?model_name=...&routing_group=...)");
    }
    return new ModelKey(modelName, routingGroup);
  }

  /** The longest {@code Idempotency-Key} header {@code POST /events} takes. */
  static final int MAX_IDEMPOTENCY_KEY = 200;

  /**
   * Checks the {@code Idempotency-Key} header: 1 to {@value #MAX_IDEMPOTENCY_KEY} visible ASCII
   * characters; null when absent.
   *
   * @throws ApiException 400 for any other value
   */
  String idempotencyKey(String header) {
    if (header == null) return null;
    boolean ok = !header.isEmpty() && header.length() <= MAX_IDEMPOTENCY_KEY;
    for (int i = 0; ok && i < header.length(); i++) {
      char c = header.charAt(i);
      ok = c > 0x20 && c < 0x7f;
    }
    if (!ok) {
      metrics.eventBatchRejected("bad_request");
      throw ApiException.badRequest(
          "Idempotency-Key: expected 1 to "
              + MAX_IDEMPOTENCY_KEY
              + " visible ASCII characters (no spaces); nothing was applied");
    }
    return header;
  }

  /**
   * Decodes, checks and applies (or publishes) the batch {@code body} for the index of {@code key},
   * on an ingest thread; returns the number of events. {@code idempotencyKey} is the request's
   * checked {@code Idempotency-Key} (null: none). With NATS, a batch posted again with the same key
   * and the same body within the stream's duplicate window stores none of its events twice
   * (docs/service.md, {@code POST /events}); in process the key is not needed (a refused batch
   * applied nothing) and is ignored.
   *
   * @throws ApiException 400 for an empty or malformed batch, 404 for an unknown index or an
   *     unregistered rank (nothing applied then), 503 when the server stops (nothing applied) or
   *     NATS fails (the message says what was stored)
   */
  int ingest(ModelKey key, byte[] body, String idempotencyKey) {
    if (body.length == 0) {
      metrics.eventBatchRejected("bad_request");
      throw ApiException.badRequest(
          "the request body is empty; expected a JSON array of Dynamo RouterEvents");
    }
    Future<Integer> f;
    try {
      f = ingest.submit(() -> decodeAndApply(key, body, idempotencyKey));
    } catch (RejectedExecutionException e) {
      throw new ApiException(503, "the server is stopping; nothing was applied");
    }
    try {
      return f.get();
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException r) throw r;
      throw new IllegalStateException(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while events were applied", e);
    }
  }

  /** Decodes a batch, checks it and applies or publishes it whole; runs on an ingest thread. */
  private int decodeAndApply(ModelKey key, byte[] body, String idempotencyKey) {
    List<TieredEvent> tiered;
    List<RouterEvent> events;
    try {
      tiered = RouterEventJson.readTieredEvents(body);
      events = new ArrayList<>(tiered.size());
      for (TieredEvent te : tiered) events.add(te.event());
    } catch (EventDecodeException e) {
      metrics.decodeError();
      metrics.eventBatchRejected("decode_error");
      throw ApiException.badRequest("events: " + e.getMessage() + "; nothing was applied");
    }
    ModelIndex m = registry.get(key);
    if (m == null) {
      metrics.eventBatchRejected("unknown_model");
      throw ApiException.notFound(
          "unknown "
              + key.describe()
              + ": no worker is registered for it (POST /register creates it); nothing was"
              + " applied");
    }
    try {
      if (m.nats == null) {
        m.applyTieredEvents(tiered, events, acceptUnregistered);
      } else {
        m.checkWorkers(events, acceptUnregistered);
      }
    } catch (ApiException e) {
      metrics.eventBatchRejected(m.closed ? "unknown_model" : "unregistered_worker");
      throw e;
    }
    if (m.nats != null) {
      // every replica of the subject applies them, this one included, before the answer; each
      // message carries its storage_tier, so the replicas put it on the same tier
      NatsEvents.Published p =
          NatsEvents.publish(m.nats, tiered, natsApplyWait, batchId(idempotencyKey, body));
      metrics.natsPublishDuplicates(p.duplicates());
    }
    metrics.eventsReceived(events.size());
    return events.size();
  }

  /**
   * The batch's id in the stream: the key and a digest of the body, so that a key reused for
   * another batch does not make the stream drop that batch as a copy; null without a key.
   */
  static String batchId(String idempotencyKey, byte[] body) {
    if (idempotencyKey == null) return null;
    byte[] d;
    try {
      d = MessageDigest.getInstance("SHA-256").digest(body);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e); // every JDK has SHA-256
    }
    return idempotencyKey + ":" + HexFormat.of().formatHex(d, 0, 12);
  }
}
