package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@code --otel}: off by default; on, the SDK is configured from the OTEL_* settings (here their
 * system-property form, otel.*, which the autoconfiguration reads the same way) with OTLP over HTTP
 * as the default protocol, the command's service name, and the sampler they name.
 */
class TracingOptionsTest {

  @Test
  void offByDefaultAndAFlagOfBothCommands() {
    assertThat(new TracingOptions().start("kvrouter")).isNull();
    ServeCommand serve = new ServeCommand();
    new CommandLine(serve).parseArgs("--otel");
    assertThat(serve.tracing.otel).isTrue();
    GatewayCommand gateway = new GatewayCommand();
    new CommandLine(gateway).parseArgs("--model", "m", "--otel");
    assertThat(gateway.tracing.otel).isTrue();
  }

  @Test
  void onTheSpansGoByOtlpHttpToTheConfiguredEndpoint() throws Exception {
    List<String> received = new CopyOnWriteArrayList<>();
    HttpServer receiver = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    receiver.createContext(
        "/v1/traces",
        x -> {
          received.add(
              x.getRequestHeaders().getFirst("Content-Type")
                  + " "
                  + new String(x.getRequestBody().readAllBytes(), StandardCharsets.ISO_8859_1));
          x.sendResponseHeaders(200, -1);
          x.close();
        });
    receiver.start();
    Map<String, String> props =
        Map.of(
            "otel.exporter.otlp.endpoint",
            "http://127.0.0.1:" + receiver.getAddress().getPort(),
            "otel.traces.sampler",
            "parentbased_traceidratio",
            "otel.traces.sampler.arg",
            "1.0");
    props.forEach(System::setProperty);
    try {
      TracingOptions t = new TracingOptions();
      t.otel = true;
      OpenTelemetrySdk sdk = t.start("kvrouter-gateway");
      assertThat(sdk.getSdkTracerProvider().getSampler().getDescription())
          .contains("TraceIdRatioBased{1.000000}");
      sdk.getTracer("test").spanBuilder("probe-span").startSpan().end();
      sdk.close(); // flushes the batch
      assertThat(received).hasSize(1);
      assertThat(received.get(0))
          .startsWith("application/x-protobuf ")
          .contains("probe-span")
          .contains("kvrouter-gateway");
    } finally {
      props.keySet().forEach(System::clearProperty);
      receiver.stop(0);
    }
  }

  @Test
  void aWrongSettingIsAClearError() {
    System.setProperty("otel.traces.sampler", "sometimes");
    try {
      TracingOptions t = new TracingOptions();
      t.otel = true;
      assertThatThrownBy(() -> t.start("kvrouter"))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("--otel: the OpenTelemetry SDK cannot be configured")
          .hasMessageContaining("sometimes");
    } finally {
      System.clearProperty("otel.traces.sampler");
    }
    // gRPC: the command line ships the JDK's HTTP sender only
    System.setProperty("otel.exporter.otlp.protocol", "grpc");
    try {
      TracingOptions t = new TracingOptions();
      t.otel = true;
      assertThatThrownBy(() -> t.start("kvrouter"))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("--otel: the OpenTelemetry SDK cannot be configured");
    } finally {
      System.clearProperty("otel.exporter.otlp.protocol");
    }
  }
}
