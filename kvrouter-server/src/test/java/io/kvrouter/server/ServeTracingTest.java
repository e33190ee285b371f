package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.SpanProcessor;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code serve} traced (docs/observability.md, "Traces"): a server span per request continuing the
 * client's {@code traceparent}, a {@code kvrouter.route} child of {@code POST /route} with the
 * decision, and no span of the probes.
 */
class ServeTracingTest {
  private static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
  private static final String CLIENT_SPAN = "00f067aa0ba902b7";
  private static final HttpClient CLIENT = HttpClient.newHttpClient();

  @Test
  void routeIsAChildOfTheServerSpanUnderTheClientsTrace() throws Exception {
    InMemorySpanExporter spans = InMemorySpanExporter.create();
    Ended ended = new Ended();
    try (OpenTelemetrySdk otel = sdk(spans, ended);
        KvRouterServer s =
            KvRouterServer.start(KvRouterServer.Config.builder().port(0).build(), null, otel)) {
      assertThat(
              post(
                  s,
                  "/register",
                  "{\"instance_id\":7,\"model_name\":\"t\",\"block_size\":4}",
                  null))
          .isEqualTo(201);
      assertThat(get(s, "/health")).isEqualTo(200);
      assertThat(
              post(
                  s,
                  "/route",
                  "{\"model_name\":\"t\",\"request_id\":\"r1\",\"token_ids\":[1,2,3,4,5,6,7,8,9]}",
                  "00-" + TRACE_ID + "-" + CLIENT_SPAN + "-01"))
          .isEqualTo(200);
      List<SpanData> all = await(ended, spans, 3);
      assertThat(all)
          .extracting(SpanData::getName)
          .containsExactlyInAnyOrder("POST /register", "POST /route", "kvrouter.route");
      SpanData server = one(all, "POST /route");
      SpanData route = one(all, "kvrouter.route");
      assertThat(server.getKind()).isEqualTo(SpanKind.SERVER);
      assertThat(server.getTraceId()).isEqualTo(TRACE_ID);
      assertThat(server.getParentSpanId()).isEqualTo(CLIENT_SPAN);
      assertThat(server.getAttributes().get(AttributeKey.longKey("http.response.status_code")))
          .isEqualTo(200L);
      assertThat(server.getAttributes().get(AttributeKey.stringKey("http.route")))
          .isEqualTo("/route");
      assertThat(route.getTraceId()).isEqualTo(TRACE_ID);
      assertThat(route.getParentSpanId()).isEqualTo(server.getSpanId());
      assertThat(route.getAttributes().get(RouteSpans.OUTCOME)).isEqualTo("routed");
      assertThat(route.getAttributes().get(RouteSpans.WORKER_ID)).isEqualTo("7");
      assertThat(route.getAttributes().get(RouteSpans.CANDIDATES)).isEqualTo(1L);
      assertThat(route.getAttributes().get(AttributeKey.longKey("kvrouter.blocks"))).isEqualTo(2L);
      assertThat(route.getEvents())
          .extracting(EventData::getName)
          .containsExactly(RouteSpans.CANDIDATE_EVENT);
      // each named term's share of the candidate's cost, and together the cost
      Attributes c = route.getEvents().get(0).getAttributes();
      double sum = 0;
      for (String term : List.of("prefill", "decode", "pressure")) {
        Double v = c.get(AttributeKey.doubleKey(RouteSpans.SCORE_PREFIX + term));
        assertThat(v).as(term).isNotNull();
        sum += v;
      }
      assertThat(sum).isCloseTo(c.get(RouteSpans.COST), within(1e-9));
      // the register span started a trace of its own: no traceparent came with it
      assertThat(one(all, "POST /register").getTraceId()).isNotEqualTo(TRACE_ID);
    }
  }

  @Test
  void nullAndTheNoopInstanceAreOff() {
    assertThat(HttpTracing.of(null)).isNull();
    assertThat(HttpTracing.of(OpenTelemetry.noop())).isNull();
    InMemorySpanExporter spans = InMemorySpanExporter.create();
    try (OpenTelemetrySdk otel = sdk(spans, new Ended())) {
      assertThat(HttpTracing.of(otel)).isNotNull();
    }
  }

  static OpenTelemetrySdk sdk(InMemorySpanExporter spans, Ended ended) {
    return OpenTelemetrySdk.builder()
        .setTracerProvider(
            SdkTracerProvider.builder()
                // processors run in the order added: a span is exported before it is counted
                .addSpanProcessor(SimpleSpanProcessor.create(spans))
                .addSpanProcessor(ended)
                .build())
        .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
        .build();
  }

  /**
   * The spans once {@code n} have ended: a server span ends after its answer is sent, so the client
   * may see the answer first. The 30 s bound is a safety net.
   */
  static List<SpanData> await(Ended ended, InMemorySpanExporter spans, int n)
      throws InterruptedException {
    assertThat(ended.count.tryAcquire(n, 30, TimeUnit.SECONDS))
        .as(n + " spans end; ended: " + spans.getFinishedSpanItems())
        .isTrue();
    return spans.getFinishedSpanItems();
  }

  /** Counts the spans that ended (each after it was exported), so a test waits without polling. */
  static final class Ended implements SpanProcessor {
    final Semaphore count = new Semaphore(0);

    @Override
    public void onStart(Context parent, ReadWriteSpan span) {}

    @Override
    public boolean isStartRequired() {
      return false;
    }

    @Override
    public void onEnd(ReadableSpan span) {
      count.release();
    }

    @Override
    public boolean isEndRequired() {
      return true;
    }
  }

  static SpanData one(List<SpanData> all, String name) {
    List<SpanData> found = all.stream().filter(s -> s.getName().equals(name)).toList();
    assertThat(found).as(name).hasSize(1);
    return found.get(0);
  }

  private static int post(KvRouterServer s, String path, String json, String traceparent)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(s.url() + path))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json));
    if (traceparent != null) b.header("traceparent", traceparent);
    return CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofString()).statusCode();
  }

  private static int get(KvRouterServer s, String path) throws Exception {
    return CLIENT
        .send(
            HttpRequest.newBuilder(URI.create(s.url() + path)).build(),
            HttpResponse.BodyHandlers.ofString())
        .statusCode();
  }
}
