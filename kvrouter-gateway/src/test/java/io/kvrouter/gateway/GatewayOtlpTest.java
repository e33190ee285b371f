package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayStubTest.post;
import static io.kvrouter.gateway.GatewayStubTest.register;
import static io.kvrouter.gateway.GatewayStubTest.tiny;
import static io.kvrouter.gateway.GatewayTracingTest.CHAT;
import static io.kvrouter.gateway.GatewayTracingTest.TRACEPARENT;
import static io.kvrouter.gateway.GatewayTracingTest.TRACE_ID;
import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import io.kvrouter.server.KvRouterServer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The gateway's spans reach a real OTLP/HTTP receiver: an in-test HTTP server taking {@code POST
 * /v1/traces} as the OpenTelemetry Collector does, fed by the SDK's OTLP exporter (protobuf, on the
 * JDK's HttpClient as in the command line). The protobuf is not decoded: span names, attribute keys
 * and the trace id's 16 bytes appear in it as they are.
 */
class GatewayOtlpTest {

  @Test
  void theSpansOfAChatArriveAtAnOtlpReceiver() throws Exception {
    List<byte[]> received = new CopyOnWriteArrayList<>();
    List<String> types = new CopyOnWriteArrayList<>();
    HttpServer receiver = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    receiver.createContext(
        "/v1/traces",
        x -> {
          types.add(x.getRequestMethod() + " " + x.getRequestHeaders().getFirst("Content-Type"));
          received.add(x.getRequestBody().readAllBytes());
          x.sendResponseHeaders(200, -1); // an empty ExportTraceServiceResponse
          x.close();
        });
    receiver.start();
    try {
      OtlpHttpSpanExporter exporter =
          OtlpHttpSpanExporter.builder()
              .setEndpoint("http://127.0.0.1:" + receiver.getAddress().getPort() + "/v1/traces")
              .build();
      try (OpenTelemetrySdk otel =
              OpenTelemetrySdk.builder()
                  .setTracerProvider(
                      SdkTracerProvider.builder()
                          .addSpanProcessor(BatchSpanProcessor.builder(exporter).build())
                          .build())
                  .setPropagators(
                      ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
                  .build();
          StubEngine e = new StubEngine();
          Gateway g =
              Gateway.start(
                  KvRouterServer.Config.builder().port(0).build(),
                  GatewayConfig.builder().model("tiny", tiny()).build(),
                  null,
                  otel)) {
        register(g, 1, e.url());
        assertThat(post(g, "/v1/chat/completions", CHAT, "traceparent", TRACEPARENT).statusCode())
            .isEqualTo(200);
        // the server span ends after the answer: wait for it, then flush the batch
        GatewayStubTest.await(
            "the server span",
            () -> {
              CompletableResultCode f = otel.getSdkTracerProvider().forceFlush();
              f.join(10, TimeUnit.SECONDS);
              return contains(received, "POST /v1/chat/completions");
            });
        assertThat(types).isNotEmpty().allMatch(t -> t.equals("POST application/x-protobuf"));
        for (String s :
            List.of(
                "kvrouter.parse",
                "kvrouter.tokenize",
                "kvrouter.route",
                "kvrouter.upstream",
                "kvrouter.prediction_check",
                "kvrouter.first_byte",
                "gen_ai.request.model",
                "gen_ai.usage.input_tokens",
                "io.kvrouter.gateway",
                "io.kvrouter.server")) {
          assertThat(contains(received, s)).as(s).isTrue();
        }
        assertThat(contains(received, HexFormat.of().parseHex(TRACE_ID))).isTrue();
        assertThat(e.traceparents.get(0)).startsWith("00-" + TRACE_ID + "-");
      }
    } finally {
      receiver.stop(0);
    }
  }

  private static boolean contains(List<byte[]> bodies, String s) {
    return contains(bodies, s.getBytes(StandardCharsets.UTF_8));
  }

  private static boolean contains(List<byte[]> bodies, byte[] needle) {
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    for (byte[] b : bodies) all.writeBytes(b);
    byte[] h = all.toByteArray();
    outer:
    for (int i = 0; i + needle.length <= h.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (h[i + j] != needle[j]) continue outer;
      }
      return true;
    }
    return false;
  }
}
