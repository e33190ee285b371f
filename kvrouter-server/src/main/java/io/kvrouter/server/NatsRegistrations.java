package io.kvrouter.server;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.route.EngineRole;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.kvevents.ClearScope;
import io.kvrouter.transport.nats.NatsEventPublisher;
import io.kvrouter.transport.nats.NatsEventStream;
import io.kvrouter.transport.nats.NatsLog;
import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import io.nats.client.NUID;
import io.nats.client.api.PublishAck;
import io.nats.client.impl.Headers;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.logging.Logger;

/**
 * With {@code serve --events nats://...}: the registrations of every replica as one ordered log on
 * the event stream, subject {@value #SUBJECT}, so that every replica holds the same registrations
 * and a restarted one learns them from the stream before it serves (docs/service.md, "Several
 * replicas on NATS JetStream").
 *
 * <pre>
 * Implementation notes
 *
 * A message is one operation: header Kvrouter-Op ("register" or "unregister"), header
 * Kvrouter-Request (the id the publishing replica waits on), and as payload the JSON body of the
 * POST /register or POST /unregister that makes it, written here from the parsed request (json())
 * and read back with Requests' own parsers, which skip fields they do not know: a newer server's
 * extra fields do not stop an older one, and a field added to Requests.Register is carried once
 * json() writes it. An operation of another kind is counted (outcome "unknown") and skipped.
 *
 * Threads: the request's thread (register/unregister) puts a future for its request id in
 * pending, publishes, and waits on the future up to --nats-apply-wait-ms; the NatsLog thread
 * applies every message of the subject in stream order through Registry.applyRegister /
 * applyUnregister (which take the membership lock) and completes the future of its request id
 * when this replica published it, with the index or the removed ranks, or the ApiException that
 * the operation met (a 409 or 404 that every replica meets too, since all apply the same
 * operations in the same order to the same state). A registration whose index's NATS subject
 * cannot be followed (a 503: NATS itself is failing) is retried on the log thread with a growing
 * pause until it works or the log closes, so that replicas do not drift apart.
 *
 * An unregistration is also a Cleared event of each removed rank on its index's subject, published
 * by the replica that made it once its log thread applied it: the replicas' index replicas apply
 * the event stream independently of this log, and the Cleared makes every one of them (and one
 * that restarts from a snapshot taken before) drop the rank's blocks at the same place in the
 * event stream.
 * </pre>
 */
final class NatsRegistrations implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(NatsRegistrations.class.getName());
  private static final JsonFactory JSON = new JsonFactory();

  /** The subject of the registration log on kvrouter's event stream. */
  static final String SUBJECT = NatsEventStream.DEFAULT_SUBJECT_PREFIX + "._registrations";

  static final String OP = "Kvrouter-Op";
  static final String REQUEST = "Kvrouter-Request";
  static final String REGISTER = "register";
  static final String UNREGISTER = "unregister";

  private static final int ATTEMPTS = 3;

  private final Connection nc;
  private final Registry registry;
  private final ServerMetrics metrics;
  private final Duration wait;
  private final ConcurrentHashMap<String, CompletableFuture<Object>> pending =
      new ConcurrentHashMap<>();
  private final NatsLog log;
  private volatile boolean closed;

  private NatsRegistrations(
      Connection nc, Registry registry, ServerMetrics metrics, Duration wait, String replicaId) {
    this.nc = nc;
    this.registry = registry;
    this.metrics = metrics;
    this.wait = wait;
    this.log = NatsLog.start(nc, stream(), "registrations-" + replicaId, this::apply);
  }

  /** Where the log lives: kvrouter's event stream, subject {@value #SUBJECT}. */
  static NatsEventStream stream() {
    NatsEventStream events = NatsEventStream.defaults();
    return new NatsEventStream(events.stream(), events.streamSubjects(), SUBJECT);
  }

  /**
   * Starts following the registration log; every registration it holds is applied to {@code
   * registry} on the log's thread ({@link #awaitReady} waits for them).
   *
   * @param wait how long a registration waits for this replica to apply it
   * @throws IllegalStateException when NATS refuses or cannot be reached
   */
  static NatsRegistrations start(
      Connection nc, Registry registry, ServerMetrics metrics, Duration wait, String replicaId) {
    try {
      return new NatsRegistrations(nc, registry, metrics, wait, replicaId);
    } catch (UncheckedIOException e) {
      throw new IllegalStateException(e.getMessage(), e);
    }
  }

  /** Whether the registrations the stream held at start are applied. */
  boolean ready() {
    return log.ready();
  }

  /** Waits until {@link #ready()}; false on timeout. */
  boolean awaitReady(Duration timeout) {
    return log.awaitReady(timeout);
  }

  /** Operations the stream held when this replica started (its last sequence on the subject). */
  long startSequence() {
    return log.startSequence();
  }

  /** Operations read from the log, this replica's own included. */
  long handled() {
    return log.handled();
  }

  // ------------------------------------------------------------------ the request side

  /**
   * Publishes a registration (already checked against this replica's state) and waits for this
   * replica to apply it.
   *
   * @throws ApiException what applying it met (409), or 503 when NATS did not confirm the store or
   *     this replica did not apply it in time
   */
  ModelIndex register(Requests.Register r) {
    return (ModelIndex) publishAndWait(REGISTER, json(r), r.key().describe());
  }

  /**
   * Publishes an unregistration and waits for this replica to apply it, then publishes a Cleared
   * event of each removed rank on its index's subject.
   *
   * @throws ApiException 404 when nothing matched by the time it was applied, 503 as {@link
   *     #register}
   */
  @SuppressWarnings("unchecked")
  List<Registry.Removed> unregister(Requests.Unregister u) {
    List<Registry.Removed> removed =
        (List<Registry.Removed>)
            publishAndWait(UNREGISTER, json(u), "model '" + u.modelName() + "'");
    for (Registry.Removed gone : removed) {
      try {
        NatsEventPublisher.existing(
                nc, NatsEvents.streamOf(gone.key()), NatsEvents.ackTimeout(wait))
            .publish(new RouterEvent(gone.worker(), 0, CacheEvent.cleared()));
      } catch (IOException | JetStreamApiException | RuntimeException e) {
        // the rank is unregistered everywhere; its blocks stay on replicas until it is cleared
        LOG.warning(
            "NATS: the Cleared event of unregistered instance "
                + Long.toUnsignedString(gone.worker().workerId())
                + " dp_rank "
                + gone.worker().dpRank()
                + " of "
                + gone.key().describe()
                + " was not confirmed: "
                + e.getMessage()
                + "; other replicas may keep its blocks until a cleared event is posted");
      }
    }
    return removed;
  }

  private Object publishAndWait(String op, byte[] body, String what) {
    String id = NUID.nextGlobal();
    CompletableFuture<Object> done = new CompletableFuture<>();
    pending.put(id, done);
    try {
      Headers h = new Headers().put(OP, op).put(REQUEST, id);
      long seq = publish(h, body, "kvrouter-registration:" + id, op, what);
      Object outcome;
      try {
        outcome = done.get(wait.toNanos(), TimeUnit.NANOSECONDS);
      } catch (TimeoutException e) {
        throw new ApiException(
            503,
            String.format(
                Locale.ROOT,
                "the %s of %s is stored on NATS (stream sequence %d) but this server did not"
                    + " apply it within %d ms; it applies it when it gets there, and so do the"
                    + " other replicas",
                op.equals(REGISTER) ? "registration" : "unregistration",
                what,
                seq,
                wait.toMillis()));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new ApiException(503, "interrupted while waiting for the " + op + " of " + what);
      } catch (ExecutionException e) {
        throw new IllegalStateException(e.getCause()); // never: completed normally only
      }
      if (outcome instanceof ApiException e) {
        // a fresh exception, so the stack trace is this request's
        throw new ApiException(e.status(), e.getMessage());
      }
      return outcome;
    } finally {
      pending.remove(id);
    }
  }

  private long publish(Headers h, byte[] body, String msgId, String op, String what) {
    IOException last = null;
    for (int i = 0; i < ATTEMPTS; i++) {
      try {
        PublishAck ack = log.publish(h, body, msgId, NatsEvents.ackTimeout(wait));
        return ack.getSeqno();
      } catch (IOException e) {
        last = e;
      } catch (JetStreamApiException e) {
        throw new ApiException(
            503,
            "NATS refused the " + op + " of " + what + ": " + e.getMessage() + "; nothing changed");
      }
    }
    throw new ApiException(
        503,
        "NATS did not confirm storing the "
            + op
            + " of "
            + what
            + " on "
            + SUBJECT
            + ": "
            + last.getMessage()
            + "; the store was not confirmed: it may have been published (then every replica"
            + " applies it). Sending the same request again is safe");
  }

  // ------------------------------------------------------------------ the log's thread

  private void apply(long seq, Headers h, byte[] data) {
    String op = h == null ? null : h.getFirst(OP);
    String request = h == null ? null : h.getFirst(REQUEST);
    Object outcome;
    String result;
    try {
      if (REGISTER.equals(op)) {
        outcome = applyRegister(Requests.register(data));
      } else if (UNREGISTER.equals(op)) {
        outcome = registry.applyUnregister(Requests.unregister(data));
      } else {
        metrics.registrationLog(op == null ? "none" : "unknown", "skipped");
        LOG.warning(
            "NATS: message "
                + seq
                + " of "
                + SUBJECT
                + " is not an operation this server knows ("
                + OP
                + ": "
                + op
                + "); skipped");
        return;
      }
      result = "applied";
    } catch (ApiException e) {
      outcome = e;
      result = e.status() == 400 ? "malformed" : "refused";
    } catch (RuntimeException e) {
      // a bug: the waiting request gets a 500 at once, and the log logs it and goes on
      metrics.registrationLog(op, "failed");
      complete(request, new ApiException(500, op + " failed on this server: " + e));
      throw e;
    }
    metrics.registrationLog(op, result);
    complete(request, outcome);
  }

  private void complete(String request, Object outcome) {
    CompletableFuture<Object> f = request == null ? null : pending.get(request);
    if (f != null) f.complete(outcome);
  }

  /** Applies a registration; retries while the index's NATS subject cannot be followed. */
  private Object applyRegister(Requests.Register r) {
    long pauseMs = 100;
    while (true) {
      try {
        return registry.applyRegister(r);
      } catch (ApiException e) {
        if (e.status() != 503 || closed) throw e;
        LOG.warning(e.getMessage() + "; trying again in " + pauseMs + " ms");
      }
      try {
        Thread.sleep(pauseMs); // a backoff while NATS fails, not a synchronisation
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new ApiException(503, "interrupted");
      }
      pauseMs = Math.min(pauseMs * 2, 5000);
    }
  }

  // ------------------------------------------------------------------ wire form

  /** A registration as the {@code POST /register} body that makes it. */
  static byte[] json(Requests.Register r) {
    return write(
        g -> {
          g.writeFieldName("instance_id");
          g.writeNumber(Long.toUnsignedString(r.worker().workerId()));
          g.writeNumberField("dp_rank", r.worker().dpRank());
          g.writeStringField("model_name", r.key().modelName());
          g.writeStringField("routing_group", r.key().routingGroup());
          g.writeNumberField("block_size", r.blockSize());
          g.writeNumberField("capacity_blocks", r.capacityBlocks());
          if (r.baseUrl() != null) g.writeStringField("base_url", r.baseUrl());
          if (r.role() != EngineRole.BOTH) g.writeStringField("role", r.role().wireName());
          if (r.kvSource() != null) g.writeStringField("kv_source", r.kvSource().wireName());
          if (r.endpoint() != null) {
            g.writeStringField("endpoint", r.endpoint());
            if (r.replayEndpoint() != null) {
              g.writeStringField("replay_endpoint", r.replayEndpoint());
            }
            if (r.topic() != null) g.writeStringField("topic", r.topic());
            g.writeNumberField("engine_block_size", r.engineBlockSize());
            if (r.clearScope() != ClearScope.DEVICE) {
              g.writeStringField("all_blocks_cleared", r.clearScope().wireName());
            }
          }
        });
  }

  /** An unregistration as the {@code POST /unregister} body that makes it. */
  static byte[] json(Requests.Unregister u) {
    return write(
        g -> {
          g.writeFieldName("instance_id");
          g.writeNumber(Long.toUnsignedString(u.instanceId()));
          g.writeStringField("model_name", u.modelName());
          if (u.routingGroup() != null) g.writeStringField("routing_group", u.routingGroup());
          if (u.dpRank() >= 0) g.writeNumberField("dp_rank", u.dpRank());
        });
  }

  private interface Fields {
    void write(JsonGenerator g) throws IOException;
  }

  private static byte[] write(Fields fields) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(256);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      fields.write(g);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e); // never: in memory
    }
    return out.toByteArray();
  }

  /** Stops the log's thread (after the operation it is applying). */
  @Override
  public void close() {
    closed = true;
    log.close();
    for (CompletableFuture<Object> f : pending.values()) {
      f.complete(new ApiException(503, "the server is stopping"));
    }
  }
}
