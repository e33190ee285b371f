package io.kvrouter.cli;

import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.autoconfigure.AutoConfiguredOpenTelemetrySdk;
import java.util.Map;
import picocli.CommandLine.Option;

/**
 * The {@code --otel} flag of {@code serve} and {@code gateway} (docs/observability.md, "Traces"):
 * off by default; on, the OpenTelemetry SDK is configured by the standard {@code OTEL_*}
 * environment variables (and {@code otel.*} system properties) through the SDK's autoconfiguration,
 * with these defaults the environment overrides: the service name ({@code kvrouter} or {@code
 * kvrouter-gateway}), traces exported by OTLP over HTTP ({@code http/protobuf}, to {@code
 * http://localhost:4318/v1/traces}: the JDK's HttpClient sends them, so {@code grpc} is not
 * available), no metrics and no logs (Prometheus' {@code /metrics} has those). A picocli mixin.
 */
final class TracingOptions {
  @Option(
      names = "--otel",
      description =
          "Export OpenTelemetry traces: a span per request and per stage (docs/observability.md),"
              + " configured by the OTEL_* environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,"
              + " OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, OTEL_TRACES_EXPORTER ...); OTLP"
              + " over HTTP by default. Off: no spans; the gateway still forwards a client's"
              + " traceparent to the engine under a new span id.")
  boolean otel;

  /**
   * The SDK {@code --otel} asks for, or null when it is off.
   *
   * @param serviceName the default of {@code OTEL_SERVICE_NAME}
   * @throws IllegalArgumentException when the OTEL_* settings are wrong (the message says which)
   */
  OpenTelemetrySdk start(String serviceName) {
    if (!otel) return null;
    try {
      return AutoConfiguredOpenTelemetrySdk.builder()
          .addPropertiesSupplier(
              () ->
                  Map.of(
                      "otel.service.name", serviceName,
                      "otel.exporter.otlp.protocol", "http/protobuf",
                      "otel.metrics.exporter", "none",
                      "otel.logs.exporter", "none"))
          .disableShutdownHook()
          .build()
          .getOpenTelemetrySdk();
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          "--otel: the OpenTelemetry SDK cannot be configured from the OTEL_* settings: "
              + e.getMessage(),
          e);
    }
  }
}
