package io.kvrouter.transport.nats;

import io.nats.client.Connection;
import io.nats.client.Nats;
import io.nats.client.Options;
import java.io.IOException;
import java.net.URI;
import java.time.Duration;

/**
 * How kvrouter's commands reach NATS: one check of a {@code --events} URL list and one way to
 * connect, so that {@code serve} and {@code simulate} accept the same URLs and fail with the same
 * messages.
 */
public final class NatsConnections {
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);

  private NatsConnections() {}

  /**
   * Checks a NATS server URL, or several separated by commas: each {@code nats://host:port} or
   * {@code tls://host:port}. Returns it trimmed.
   *
   * @param what the option's name, to start the message with (e.g. {@code "events"})
   * @throws IllegalArgumentException naming the option and the value
   */
  public static String checkUrl(String what, String urls) {
    String v = urls.trim();
    for (String u : v.split(",")) {
      URI uri;
      try {
        uri = URI.create(u.trim());
      } catch (IllegalArgumentException e) {
        uri = null;
      }
      if (uri == null
          || !("nats".equals(uri.getScheme()) || "tls".equals(uri.getScheme()))
          || uri.getHost() == null) {
        throw new IllegalArgumentException(
            what
                + ": '"
                + urls
                + "' is not a NATS server URL; expected nats://host:port (e.g."
                + " nats://127.0.0.1:4222)");
      }
    }
    return v;
  }

  /**
   * Connects to the server(s) at {@code urls} (checked with {@link #checkUrl}), waiting at most 5
   * s; the connection reconnects by itself, forever, every 250 ms. What jnats reports is logged in
   * one line per incident on this class's logger ({@link NatsLogListener}); while connecting,
   * nothing is logged: a failure is the exception.
   *
   * @param what the option's name, to start an error message with
   * @param connectionName the name the server shows for this client
   * @throws IllegalArgumentException when {@code urls} is not a NATS URL list
   * @throws IllegalStateException naming the URL when no server answers
   */
  public static Connection connect(String what, String urls, String connectionName) {
    String v = checkUrl(what, urls);
    Options.Builder o =
        new Options.Builder()
            .connectionTimeout(CONNECT_TIMEOUT)
            .maxReconnects(-1)
            .reconnectWait(Duration.ofMillis(250))
            .connectionName(connectionName);
    NatsLogListener listener = new NatsLogListener(connectionName);
    o.errorListener(listener).connectionListener(listener);
    for (String u : v.split(",")) o.server(u.trim());
    try {
      Connection c = Nats.connect(o.build());
      listener.connected(c);
      return c;
    } catch (IOException e) {
      throw new IllegalStateException(
          what
              + ": cannot connect to NATS at "
              + v
              + ": "
              + (e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage())
              + " (is nats-server running there with JetStream, -js?)",
          e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(what + ": interrupted while connecting to " + v, e);
    }
  }
}
