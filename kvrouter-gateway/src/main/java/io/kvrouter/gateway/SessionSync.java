package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.nats.client.Connection;
import io.nats.client.Dispatcher;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * Session bindings shared among gateways over the {@code --sync} NATS server (docs/gateway.md,
 * "Sessions"): each gateway publishes the bindings it makes and applies the others'.
 *
 * <pre>
 * Implementation notes
 *
 * Core NATS on one subject, kvrouter.sessions (beside sequence sync's kvrouter.seq.*): a binding
 * is one JSON message {"origin", "model", "key", "base_url", "worker_id" (u64 as a string),
 * "dp_rank", "stamp"}. The engine travels as its base URL, which every gateway of the fleet
 * registers, with the rank's worker id and dp rank for a gateway that does not know the URL
 * (Sessions.applyRemote resolves it). stamp orders two bindings of one session made at once on two
 * gateways: every gateway keeps the binding with the larger (stamp, origin), so they agree after
 * both messages arrived. No snapshot: a gateway that starts later learns a session at its next
 * turn elsewhere, or binds it itself.
 *
 * Threads: publish() runs on request threads (jnats' publish is thread-safe and does not block on
 * the network: it writes to the connection's outgoing buffer); one jnats Dispatcher thread decodes
 * and applies the others' messages, skipping its own origin. A message that does not decode is
 * counted (refused) and dropped, the rest goes on.
 * </pre>
 */
final class SessionSync implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(SessionSync.class.getName());

  /** The subject every gateway's bindings go to. */
  static final String SUBJECT = "kvrouter.sessions";

  /** One binding as it travels. */
  record Wire(
      String origin,
      String model,
      String key,
      @Nullable String baseUrl,
      long workerId,
      int dpRank,
      long stamp) {}

  /** Where decoded bindings of other gateways go. */
  interface Sink {
    void apply(Wire m);

    void refused(String why);
  }

  private final Connection nc;
  private final boolean ownsConnection;
  private final String origin;
  private final Dispatcher dispatcher;

  SessionSync(Connection nc, boolean ownsConnection, String origin, Sink sink) {
    this.nc = nc;
    this.ownsConnection = ownsConnection;
    this.origin = origin;
    this.dispatcher =
        nc.createDispatcher(
            msg -> {
              Wire m;
              try {
                m = decode(msg.getData());
              } catch (IOException | RuntimeException e) {
                sink.refused(e.getMessage() == null ? e.toString() : e.getMessage());
                LOG.log(Level.FINE, "a session binding that does not decode", e);
                return;
              }
              if (!m.origin().equals(this.origin)) sink.apply(m);
            });
    dispatcher.subscribe(SUBJECT);
  }

  /** This gateway's name in the messages. */
  String origin() {
    return origin;
  }

  /** Publishes a binding this gateway made. */
  void publish(
      String model, String key, @Nullable String baseUrl, long workerId, int dpRank, long stamp) {
    nc.publish(SUBJECT, encode(new Wire(origin, model, key, baseUrl, workerId, dpRank, stamp)));
  }

  /** Waits until the server has seen everything published so far (for tests). */
  void flush() {
    try {
      nc.flush(Duration.ofSeconds(10));
    } catch (Exception e) {
      throw new IllegalStateException("NATS flush failed", e);
    }
  }

  static byte[] encode(Wire m) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(128);
    try (JsonGenerator g = Json.FACTORY.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("origin", m.origin());
      g.writeStringField("model", m.model());
      g.writeStringField("key", m.key());
      if (m.baseUrl() != null) g.writeStringField("base_url", m.baseUrl());
      g.writeStringField("worker_id", Long.toUnsignedString(m.workerId()));
      g.writeNumberField("dp_rank", m.dpRank());
      g.writeNumberField("stamp", m.stamp());
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /**
   * Decodes one message.
   *
   * @throws IOException when it is not JSON
   * @throws IllegalArgumentException naming the field that is missing or wrong
   */
  static Wire decode(byte[] data) throws IOException {
    String origin = null;
    String model = null;
    String key = null;
    String baseUrl = null;
    String workerId = null;
    long dpRank = -1;
    long stamp = Long.MIN_VALUE;
    try (JsonParser p = Json.FACTORY.createParser(data)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new IllegalArgumentException("a session binding is a JSON object");
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String f = p.currentName();
        JsonToken t = p.nextToken();
        switch (f) {
          case "origin" -> origin = t == JsonToken.VALUE_STRING ? p.getText() : null;
          case "model" -> model = t == JsonToken.VALUE_STRING ? p.getText() : null;
          case "key" -> key = t == JsonToken.VALUE_STRING ? p.getText() : null;
          case "base_url" -> baseUrl = t == JsonToken.VALUE_STRING ? p.getText() : null;
          case "worker_id" -> workerId = t == JsonToken.VALUE_STRING ? p.getText() : null;
          case "dp_rank" -> dpRank = t == JsonToken.VALUE_NUMBER_INT ? p.getLongValue() : -1;
          case "stamp" ->
              stamp = t == JsonToken.VALUE_NUMBER_INT ? p.getLongValue() : Long.MIN_VALUE;
          default -> p.skipChildren();
        }
      }
    }
    if (origin == null) throw new IllegalArgumentException("session binding without origin");
    if (model == null) throw new IllegalArgumentException("session binding without model");
    if (key == null || key.length() > SessionConfig.MAX_KEY_CHARS) {
      throw new IllegalArgumentException("session binding without a key of at most 256 chars");
    }
    if (workerId == null) throw new IllegalArgumentException("session binding without worker_id");
    if (dpRank < 0 || dpRank > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("session binding without a dp_rank");
    }
    if (stamp == Long.MIN_VALUE)
      throw new IllegalArgumentException("session binding without stamp");
    long id;
    try {
      id = Long.parseUnsignedLong(workerId);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          "session binding's worker_id '" + workerId + "' is no u64");
    }
    return new Wire(origin, model, key, baseUrl, id, (int) dpRank, stamp);
  }

  @Override
  public void close() {
    try {
      nc.closeDispatcher(dispatcher);
    } catch (RuntimeException e) {
      LOG.log(Level.FINE, "closing the session dispatcher", e);
    }
    if (ownsConnection) {
      try {
        nc.close();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
