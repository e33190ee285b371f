package io.kvrouter.server;

import io.kvrouter.server.http.ReadDeadline;
import java.time.Duration;
import java.util.Objects;

/**
 * The HTTP edge's settings that {@code serve} and {@code gateway} share: where the service listens,
 * the limits on request bodies, the read deadline, the admin token and the shutdown grace. One
 * value: {@link KvRouterServer.Config#edge()} holds it (the gateway's server too), the command
 * line's flags build it; {@code RoutingSettings} is its counterpart for routing.
 *
 * <pre>
 * Implementation notes
 *
 * An immutable record; the compact constructor validates every component (the messages name the
 * setting as the API does), so a value that exists is a valid one. An empty token is normalised
 * to null (none). maxInflightBodyBytes 0 means "the default", resolved by
 * effectiveMaxInflightBodyBytes() against the running JVM's heap. defaults() is a method, not a
 * constant: the read timeout's default is read from the JVM property
 * kvrouter.http.readTimeoutMillis (ReadDeadline.configured()) each time. Built once at start-up;
 * read by any thread.
 * </pre>
 *
 * @param host address to bind; default {@code 127.0.0.1} (loopback only)
 * @param port TCP port; 0 picks a free one; default {@value #DEFAULT_PORT}
 * @param maxBodyBytes request bodies over this many bytes get 413; default 8 MiB
 * @param maxInflightBodyBytes the request bodies held at once, across all connections, take at most
 *     this many bytes; a body that would grow past it gets 503; 0 (the default): a quarter of the
 *     JVM's maximum heap, and never less than {@code maxBodyBytes}
 * @param authToken bearer token every mutating endpoint requires; null or empty: none
 * @param readTimeout a request must arrive whole within this time from its request line, and an
 *     idle connection is closed after about as long (slow clients); default 30 s, or the JVM
 *     property {@code kvrouter.http.readTimeoutMillis}
 * @param shutdownGrace how long requests in flight may take to finish at shutdown; default 10 s
 */
public record EdgeSettings(
    String host,
    int port,
    long maxBodyBytes,
    long maxInflightBodyBytes,
    String authToken,
    Duration readTimeout,
    Duration shutdownGrace) {

  /** The default port, as Dynamo's standalone indexer uses. */
  public static final int DEFAULT_PORT = 8090;

  /** The default body limit, 8 MiB. */
  public static final long DEFAULT_MAX_BODY_BYTES = 8L << 20;

  /** The default of {@link #shutdownGrace()}, 10 s. */
  public static final Duration DEFAULT_SHUTDOWN_GRACE = Duration.ofSeconds(10);

  /** Validates every component. */
  public EdgeSettings {
    Objects.requireNonNull(host, "host");
    if (host.isBlank()) throw new IllegalArgumentException("host must not be blank");
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException("port must be in 0..65535, got " + port);
    }
    if (maxBodyBytes < 1) {
      throw new IllegalArgumentException("maxBodyBytes must be >= 1, got " + maxBodyBytes);
    }
    if (maxInflightBodyBytes < 0) {
      throw new IllegalArgumentException(
          "maxInflightBodyBytes must be >= 1 (or 0 for the default), got " + maxInflightBodyBytes);
    }
    authToken = authToken == null || authToken.isEmpty() ? null : authToken;
    Objects.requireNonNull(readTimeout, "readTimeout");
    if (readTimeout.isNegative() || readTimeout.isZero()) {
      throw new IllegalArgumentException("readTimeout must be > 0, got " + readTimeout);
    }
    Objects.requireNonNull(shutdownGrace, "shutdownGrace");
    if (shutdownGrace.isNegative()) {
      throw new IllegalArgumentException("shutdownGrace must be >= 0, got " + shutdownGrace);
    }
  }

  /** Every setting at its default (the read timeout as the JVM property says now). */
  public static EdgeSettings defaults() {
    return new EdgeSettings(
        "127.0.0.1",
        DEFAULT_PORT,
        DEFAULT_MAX_BODY_BYTES,
        0,
        null,
        ReadDeadline.configured(),
        DEFAULT_SHUTDOWN_GRACE);
  }

  /** A copy with {@link #host()} replaced. */
  public EdgeSettings withHost(String v) {
    return new EdgeSettings(
        v, port, maxBodyBytes, maxInflightBodyBytes, authToken, readTimeout, shutdownGrace);
  }

  /** A copy with {@link #port()} replaced. */
  public EdgeSettings withPort(int v) {
    return new EdgeSettings(
        host, v, maxBodyBytes, maxInflightBodyBytes, authToken, readTimeout, shutdownGrace);
  }

  /** A copy with {@link #maxBodyBytes()} replaced. */
  public EdgeSettings withMaxBodyBytes(long v) {
    return new EdgeSettings(
        host, port, v, maxInflightBodyBytes, authToken, readTimeout, shutdownGrace);
  }

  /** A copy with {@link #maxInflightBodyBytes()} replaced (0: the default). */
  public EdgeSettings withMaxInflightBodyBytes(long v) {
    return new EdgeSettings(host, port, maxBodyBytes, v, authToken, readTimeout, shutdownGrace);
  }

  /** A copy with {@link #authToken()} replaced (null or empty: none). */
  public EdgeSettings withAuthToken(String v) {
    return new EdgeSettings(
        host, port, maxBodyBytes, maxInflightBodyBytes, v, readTimeout, shutdownGrace);
  }

  /** A copy with {@link #readTimeout()} replaced. */
  public EdgeSettings withReadTimeout(Duration v) {
    return new EdgeSettings(
        host, port, maxBodyBytes, maxInflightBodyBytes, authToken, v, shutdownGrace);
  }

  /** A copy with {@link #shutdownGrace()} replaced. */
  public EdgeSettings withShutdownGrace(Duration v) {
    return new EdgeSettings(
        host, port, maxBodyBytes, maxInflightBodyBytes, authToken, readTimeout, v);
  }

  /**
   * {@link #maxInflightBodyBytes()}, or its default when 0: a quarter of the maximum heap, at least
   * {@link #maxBodyBytes()}.
   */
  public long effectiveMaxInflightBodyBytes() {
    if (maxInflightBodyBytes > 0) return maxInflightBodyBytes;
    return Math.max(maxBodyBytes, Runtime.getRuntime().maxMemory() / 4);
  }

  /** Like {@link KvRouterServer.Config#toString()}: never shows the token. */
  @Override
  public String toString() {
    return "EdgeSettings[host="
        + host
        + ", port="
        + port
        + ", maxBodyBytes="
        + maxBodyBytes
        + ", maxInflightBodyBytes="
        + maxInflightBodyBytes
        + ", authToken="
        + (authToken == null ? "(none)" : "****** (set)")
        + ", readTimeout="
        + readTimeout
        + ", shutdownGrace="
        + shutdownGrace
        + "]";
  }
}
