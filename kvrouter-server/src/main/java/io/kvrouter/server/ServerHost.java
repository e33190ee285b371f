package io.kvrouter.server;

import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.ServerRequest;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.transport.kvevents.ClearScope;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;

/** What a {@link ServerExtension} may use of the server it extends. Thread-safe. */
public interface ServerHost {
  /** A request the server refused while reading it: the status to answer and why. */
  final class HttpError extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final boolean connectionLost;

    HttpError(int status, String message, boolean connectionLost) {
      super(message, null, false, false);
      this.status = status;
      this.connectionLost = connectionLost;
    }

    /** The HTTP status to answer. */
    public int status() {
      return status;
    }

    /** Whether the client is gone or was cut off (an answer may not reach it). */
    public boolean connectionLost() {
      return connectionLost;
    }
  }

  /** The index of {@code (modelName, routingGroup)} (null: {@code "default"}), or null. */
  RouterModel model(String modelName, String routingGroup);

  /** Every live index, ordered by model name then routing group. */
  List<RouterModel> models();

  /**
   * The request's whole body, read as the server reads its own (the body limit, the read deadline,
   * JSON content types only).
   *
   * @throws HttpError 413, 415, 408 or 400 as the server's endpoints answer them
   */
  byte[] body(ServerRequest req);

  /**
   * Watches the connection of the request this thread handles (call it after reading its body) for
   * the client leaving before its answer: {@code onGone} runs, on another thread, when the client
   * closes the connection. The watch reads the connection until it ends, so the caller must close
   * it after answering ({@code Connection: close}); {@code onGone} may then run once more, late,
   * and must ignore that. For requests that wait long before their answer starts (the gateway's
   * admission queue).
   *
   * @return false when the connection cannot be watched
   */
  default boolean watchClient(Runnable onGone) {
    return false;
  }

  /**
   * {@code h}, the handler of one of the extension's routes, with its answer's writes timed as the
   * server's own endpoints' are: a write that makes no progress for the server's write timeout
   * ({@link KvRouterServer.Config#writeTimeout()}: its client does not read) closes the connection,
   * counted in {@code kvrouter_http_write_timeouts_total{endpoint}} and logged at most once a
   * minute. The write then fails as a client reset would, in the handler. An answer that waits
   * between its writes (a relayed stream) calls {@link #writesIdle} after each write.
   */
  default Handler timedWrites(String endpoint, Handler h) {
    return h;
  }

  /**
   * The answer this thread writes, in a {@link #timedWrites} handler, wrote what it had and now
   * waits for something other than its client: its write timeout is off until its next write.
   */
  default void writesIdle() {}

  /** The registry {@code GET /metrics} writes: register the extension's metrics here. */
  PrometheusRegistry metricsRegistry();

  /**
   * One rank's registration, as {@code POST /register}'s body gives it: {@code routingGroup} null
   * for {@code "default"}; {@code endpoint} (the KV events' ZMQ endpoint), {@code replayEndpoint}
   * and {@code topic} null for none; {@code clearScope} ({@code all_blocks_cleared}) other than
   * {@link ClearScope#DEVICE} needs an endpoint; {@code kvSource} ({@code kv_source}) null lets the
   * server decide (predicted for a base URL without endpoint, docs/service.md). Checked by {@link
   * #register}, not here.
   */
  record Registration(
      String modelName,
      String routingGroup,
      int blockSize,
      long instanceId,
      int dpRank,
      String baseUrl,
      String endpoint,
      String replayEndpoint,
      String topic,
      EngineRole role,
      ClearScope clearScope,
      KvSource kvSource) {

    /** A registration whose KV source the server decides. */
    public Registration(
        String modelName,
        String routingGroup,
        int blockSize,
        long instanceId,
        int dpRank,
        String baseUrl,
        String endpoint,
        String replayEndpoint,
        String topic,
        EngineRole role,
        ClearScope clearScope) {
      this(
          modelName,
          routingGroup,
          blockSize,
          instanceId,
          dpRank,
          baseUrl,
          endpoint,
          replayEndpoint,
          topic,
          role,
          clearScope,
          null);
    }

    /**
     * A rank served at {@code baseUrl} in the default routing group, with no KV events endpoint,
     * role {@link EngineRole#BOTH}.
     */
    public static Registration of(
        String modelName, int blockSize, long instanceId, int dpRank, String baseUrl) {
      return new Registration(
          modelName,
          null,
          blockSize,
          instanceId,
          dpRank,
          baseUrl,
          null,
          null,
          null,
          EngineRole.BOTH,
          ClearScope.DEVICE);
    }

    /** This registration with the KV events' ZMQ endpoint and its replay endpoint (or null). */
    public Registration withEvents(String endpoint, String replayEndpoint) {
      return new Registration(
          modelName,
          routingGroup,
          blockSize,
          instanceId,
          dpRank,
          baseUrl,
          endpoint,
          replayEndpoint,
          topic,
          role,
          clearScope,
          kvSource);
    }

    /**
     * This registration with its KV source named ({@code events}: its events come through {@code
     * POST /events}; {@code predicted}; null: the server decides).
     */
    public Registration withKvSource(KvSource source) {
      return new Registration(
          modelName,
          routingGroup,
          blockSize,
          instanceId,
          dpRank,
          baseUrl,
          endpoint,
          replayEndpoint,
          topic,
          role,
          clearScope,
          source);
    }
  }

  /**
   * Registers one rank as {@code POST /register} does (waiting for its ZMQ connection as the
   * server's {@code --zmq-connect-timeout-ms} says).
   *
   * @throws HttpError with the status and message {@code POST /register} would answer
   */
  RouterModel register(Registration r);

  /**
   * Unregisters ranks as {@code POST /unregister} does: the rank {@code dpRank} of {@code
   * instanceId} (every rank when negative) of {@code modelName} in {@code routingGroup} (every
   * group when null).
   *
   * @return how many ranks were removed (at least 1)
   * @throws HttpError 404 when nothing matches, or as {@code POST /unregister} would answer
   */
  int unregister(String modelName, String routingGroup, long instanceId, int dpRank);

  /** Whether the server serves (false during a warm start and once stopping). */
  boolean serving();

  /** The server's configuration. */
  KvRouterServer.Config config();
}
