package io.kvrouter.cli;

import io.kvrouter.server.EdgeSettings;
import io.kvrouter.server.KvRouterServer;
import java.time.Duration;
import picocli.CommandLine.Option;

/**
 * The HTTP edge's flags that {@code serve} and {@code gateway} share: the address and port, the
 * admin token, the shutdown grace and the request body limit. Declared once here as a picocli
 * mixin; {@link #applyTo} sets them on the server's configuration, whose {@link EdgeSettings} they
 * are part of.
 *
 * <pre>
 * Implementation notes
 *
 * The two commands differ in their defaults (port 8090 and 8080, grace 10 s and 30 s): each
 * passes its own to the constructor, and picocli shows the field's initial value as
 * ${DEFAULT-VALUE}. The help texts here are serve's; the gateway words three of them its own way
 * in its resource bundle (GatewayHelp.properties, by each option's descriptionKey: picocli
 * looks a description up in the command's bundle first, the annotation's is the fallback).
 * --max-body-size takes a size with units (SizeConverter) in both commands; plain bytes are a
 * size too. The other edge flags are not here: --max-inflight-body-size is serve's alone,
 * --read-timeout-ms is in ReplicaOptions.
 * </pre>
 */
final class EdgeOptions {
  /** Environment variable that supplies the bearer token when --auth-token is not given. */
  static final String TOKEN_ENV = "KVROUTER_AUTH_TOKEN";

  @Option(
      names = "--host",
      descriptionKey = "host",
      paramLabel = "ADDR",
      description =
          "Address to bind (default: ${DEFAULT-VALUE}, loopback: only this machine can connect)."
              + " Any local address works: 0.0.0.0 (every interface) or one interface's, to take"
              + " requests from other machines; then set --auth-token too, or put a proxy in"
              + " front.")
  String host = "127.0.0.1";

  @Option(
      names = "--port",
      paramLabel = "PORT",
      description = "TCP port, 0 for any free one (default: ${DEFAULT-VALUE}).")
  int port;

  @Option(
      names = "--auth-token",
      descriptionKey = "auth-token",
      paramLabel = "TOKEN",
      description =
          "Bearer token required on every mutating endpoint (default: $"
              + TOKEN_ENV
              + " if set, else none).")
  String authToken;

  @Option(
      names = "--shutdown-grace-seconds",
      descriptionKey = "shutdown-grace-seconds",
      paramLabel = "S",
      description =
          "On SIGTERM, how long requests in flight may take to finish (default:"
              + " ${DEFAULT-VALUE}).")
  long shutdownGraceSeconds;

  @Option(
      names = "--max-body-size",
      paramLabel = "SIZE",
      converter = SizeConverter.class,
      description =
          "Largest request body; larger ones get 413. Bytes, or with KiB/MiB/GiB"
              + " (default: 8MiB).")
  long maxBodyBytes = EdgeSettings.DEFAULT_MAX_BODY_BYTES;

  /** The flags with a command's defaults. */
  EdgeOptions(int port, long shutdownGraceSeconds) {
    this.port = port;
    this.shutdownGraceSeconds = shutdownGraceSeconds;
  }

  /** --auth-token, else $KVROUTER_AUTH_TOKEN, else null. */
  String token() {
    return authToken != null ? authToken : System.getenv(TOKEN_ENV);
  }

  /** Sets these flags' values on {@code b}. */
  KvRouterServer.Config.Builder applyTo(KvRouterServer.Config.Builder b) {
    return b.host(host)
        .port(port)
        .authToken(token())
        .maxBodyBytes(maxBodyBytes)
        .shutdownGrace(Duration.ofSeconds(shutdownGraceSeconds));
  }
}
