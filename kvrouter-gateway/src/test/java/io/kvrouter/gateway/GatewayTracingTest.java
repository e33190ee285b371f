package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayStubTest.holds;
import static io.kvrouter.gateway.GatewayStubTest.post;
import static io.kvrouter.gateway.GatewayStubTest.register;
import static io.kvrouter.gateway.GatewayStubTest.tiny;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouteSpans;
import io.kvrouter.server.RouterModel;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The gateway's traces (docs/observability.md, "Traces"), with the SDK's in-memory exporter: the
 * span tree of a chat whose first attempt fails, its parents and attributes, the engine requests'
 * traceparents, and the traceparent forwarded with tracing off.
 */
class GatewayTracingTest {
  static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
  static final String CLIENT_SPAN = "00f067aa0ba902b7";
  static final String TRACEPARENT = "00-" + TRACE_ID + "-" + CLIENT_SPAN + "-01";
  static final String CHAT =
      "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there, how are"
          + " you today\"}],\"stream\":true,\"max_tokens\":3}";

  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  static OpenTelemetrySdk sdk(InMemorySpanExporter spans) {
    return OpenTelemetrySdk.builder()
        .setTracerProvider(
            SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(spans)).build())
        .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
        .build();
  }

  Gateway gateway(OpenTelemetry otel) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder().model("tiny", tiny()).build(),
            null,
            otel);
    open.add(g);
    return g;
  }

  StubEngine stub() {
    StubEngine s = new StubEngine();
    open.add(s);
    return s;
  }

  /** The chat's prompt token ids, as the gateway's /tokenize gives them. */
  static int[] chatTokens(Gateway g) throws Exception {
    HttpResponse<String> r = post(g, "/tokenize", CHAT);
    assertThat(r.statusCode()).isEqualTo(200);
    Matcher m = Pattern.compile("\"tokens\":\\[([0-9,]*)]").matcher(r.body());
    assertThat(m.find()).as(r.body()).isTrue();
    String[] parts = m.group(1).split(",");
    int[] t = new int[parts.length];
    for (int i = 0; i < parts.length; i++) t[i] = Integer.parseInt(parts[i]);
    return t;
  }

  /** The span named {@code name} once it has ended (a server span ends after its answer). */
  static SpanData awaitSpan(InMemorySpanExporter spans, String name) {
    GatewayStubTest.await(
        name, () -> spans.getFinishedSpanItems().stream().anyMatch(s -> s.getName().equals(name)));
    return named(spans.getFinishedSpanItems(), name).get(0);
  }

  static List<SpanData> named(List<SpanData> all, String name) {
    return all.stream()
        .filter(s -> s.getName().equals(name))
        .sorted(Comparator.comparingLong(SpanData::getStartEpochNanos))
        .toList();
  }

  static <T> T attr(SpanData s, AttributeKey<T> k) {
    return s.getAttributes().get(k);
  }

  @Test
  void aChatWithARetryIsOneTreeUnderTheClientsTrace() throws Exception {
    InMemorySpanExporter spans = InMemorySpanExporter.create();
    OpenTelemetrySdk otel = sdk(spans);
    open.add(otel);
    Gateway g = gateway(otel);
    StubEngine bad = stub();
    StubEngine good = stub();
    bad.status.set(500);
    good.cachedTokens.set(4);
    RouterModel m = register(g, 1, bad.url());
    register(g, 2, good.url());
    int[] prompt = chatTokens(g);
    assertThat(prompt.length).isGreaterThanOrEqualTo(8);
    holds(m, 1, prompt); // the failing engine holds the prompt: the router picks it first
    awaitSpan(spans, "POST /tokenize");
    spans.reset();

    HttpResponse<String> r =
        post(g, "/v1/chat/completions", CHAT, "traceparent", TRACEPARENT, "tracestate", "k=v");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("x-kvrouter-attempts")).hasValue("2");

    SpanData server = awaitSpan(spans, "POST /v1/chat/completions");
    List<SpanData> all = spans.getFinishedSpanItems();
    assertThat(server.getKind()).isEqualTo(SpanKind.SERVER);
    assertThat(server.getTraceId()).isEqualTo(TRACE_ID);
    assertThat(server.getParentSpanId()).isEqualTo(CLIENT_SPAN);
    assertThat(attr(server, AttributeKey.stringKey("gen_ai.operation.name"))).isEqualTo("chat");
    assertThat(attr(server, AttributeKey.stringKey("gen_ai.request.model"))).isEqualTo("tiny");
    assertThat(attr(server, AttributeKey.longKey("gen_ai.request.max_tokens"))).isEqualTo(3L);
    // the engine's usage (the stub answers 12 prompt, 3 completion, 4 cached tokens)
    assertThat(attr(server, AttributeKey.longKey("gen_ai.usage.input_tokens"))).isEqualTo(12L);
    assertThat(attr(server, AttributeKey.longKey("gen_ai.usage.output_tokens"))).isEqualTo(3L);
    assertThat(attr(server, AttributeKey.longKey("gen_ai.usage.cache_read.input_tokens")))
        .isEqualTo(4L);
    assertThat(attr(server, AttributeKey.longKey("http.response.status_code"))).isEqualTo(200L);

    // every other span is a child of the server span, in the same trace
    assertThat(all)
        .extracting(SpanData::getName)
        .containsExactlyInAnyOrder(
            "POST /v1/chat/completions",
            "kvrouter.parse",
            "kvrouter.tokenize",
            "kvrouter.route",
            "kvrouter.upstream",
            "kvrouter.route",
            "kvrouter.upstream",
            "kvrouter.prediction_check");
    for (SpanData s : all) {
      assertThat(s.getTraceId()).as(s.getName()).isEqualTo(TRACE_ID);
      if (s != server)
        assertThat(s.getParentSpanId()).as(s.getName()).isEqualTo(server.getSpanId());
    }
    SpanData parse = named(all, "kvrouter.parse").get(0);
    assertThat(attr(parse, AttributeKey.longKey("http.request.body.size")))
        .isEqualTo((long) CHAT.length());
    SpanData tokenize = named(all, "kvrouter.tokenize").get(0);
    assertThat(attr(tokenize, AttributeKey.longKey("kvrouter.prompt.tokens")))
        .isEqualTo((long) prompt.length);
    assertThat(attr(tokenize, AttributeKey.stringKey("kvrouter.tokenizer"))).isNotEqualTo("engine");

    List<SpanData> routes = named(all, "kvrouter.route");
    assertThat(attr(routes.get(0), AttributeKey.longKey("kvrouter.attempt"))).isEqualTo(1L);
    assertThat(attr(routes.get(0), RouteSpans.OUTCOME)).isEqualTo("routed");
    assertThat(attr(routes.get(0), RouteSpans.WORKER_ID)).isEqualTo("1");
    assertThat(attr(routes.get(0), RouteSpans.OVERLAP_BLOCKS))
        .isEqualTo((long) (prompt.length / GatewayStubTest.BS));
    assertThat(attr(routes.get(0), RouteSpans.CANDIDATES)).isEqualTo(2L);
    assertThat(routes.get(0).getEvents())
        .extracting(EventData::getName)
        .containsExactly(RouteSpans.CANDIDATE_EVENT, RouteSpans.CANDIDATE_EVENT);
    // the retry routes again without the failed engine
    assertThat(attr(routes.get(1), AttributeKey.longKey("kvrouter.attempt"))).isEqualTo(2L);
    assertThat(attr(routes.get(1), RouteSpans.WORKER_ID)).isEqualTo("2");
    assertThat(attr(routes.get(1), RouteSpans.OVERLAP_BLOCKS)).isEqualTo(0L);
    assertThat(attr(routes.get(1), RouteSpans.CANDIDATES)).isEqualTo(1L);

    List<SpanData> ups = named(all, "kvrouter.upstream");
    SpanData failed = ups.get(0);
    SpanData answered = ups.get(1);
    assertThat(failed.getKind()).isEqualTo(SpanKind.CLIENT);
    assertThat(attr(failed, RouteSpans.WORKER_ID)).isEqualTo("1");
    assertThat(attr(failed, AttributeKey.longKey("http.response.status_code"))).isEqualTo(500L);
    assertThat(attr(failed, AttributeKey.stringKey("kvrouter.retry.reason")))
        .isEqualTo("status_500");
    assertThat(attr(failed, AttributeKey.stringKey("server.address"))).isEqualTo("127.0.0.1");
    assertThat(attr(failed, AttributeKey.stringKey("url.full")))
        .isEqualTo(bad.url() + "/v1/chat/completions");
    assertThat(failed.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(failed.getEvents()).isEmpty();
    assertThat(attr(answered, RouteSpans.WORKER_ID)).isEqualTo("2");
    assertThat(attr(answered, AttributeKey.longKey("http.response.status_code"))).isEqualTo(200L);
    assertThat(attr(answered, AttributeKey.stringKey("kvrouter.retry.reason"))).isNull();
    assertThat(answered.getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);
    assertThat(answered.getEvents())
        .extracting(EventData::getName)
        .containsExactly("kvrouter.first_byte");
    assertThat(attr(answered, AttributeKey.longKey("gen_ai.usage.output_tokens"))).isEqualTo(3L);
    assertThat(failed.getEndEpochNanos()).isLessThanOrEqualTo(answered.getStartEpochNanos());

    SpanData check = named(all, "kvrouter.prediction_check").get(0);
    assertThat(attr(check, AttributeKey.longKey("kvrouter.prediction.predicted_tokens")))
        .isEqualTo(0L);
    assertThat(attr(check, AttributeKey.longKey("kvrouter.prediction.reported_tokens")))
        .isEqualTo(4L);
    assertThat(attr(check, AttributeKey.longKey("kvrouter.prediction.error_tokens"))).isEqualTo(4L);

    // each engine request carries the traceparent of its own upstream span, and the tracestate
    assertThat(bad.traceparents)
        .containsExactly("00-" + TRACE_ID + "-" + failed.getSpanId() + "-01");
    assertThat(good.traceparents)
        .containsExactly("00-" + TRACE_ID + "-" + answered.getSpanId() + "-01");
    assertThat(good.tracestates).containsExactly("k=v");
    // the tree as text, for a person (docs/observability.md shows one)
    Path out = Path.of("target", "trace-chat-with-retry.txt");
    Files.writeString(out, SpanTree.render(all));
    assertThat(Files.readString(out)).startsWith("POST /v1/chat/completions  SERVER");
  }

  @Test
  void withoutAClientTraceparentTheServerSpanStartsATrace() throws Exception {
    InMemorySpanExporter spans = InMemorySpanExporter.create();
    OpenTelemetrySdk otel = sdk(spans);
    open.add(otel);
    Gateway g = gateway(otel);
    StubEngine e = stub();
    register(g, 1, e.url());
    assertThat(post(g, "/v1/chat/completions", CHAT).statusCode()).isEqualTo(200);
    SpanData server = awaitSpan(spans, "POST /v1/chat/completions");
    SpanData up = named(spans.getFinishedSpanItems(), "kvrouter.upstream").get(0);
    assertThat(server.getParentSpanContext().isValid()).isFalse();
    assertThat(e.traceparents)
        .containsExactly(
            "00-"
                + server.getTraceId()
                + "-"
                + up.getSpanId()
                + "-"
                + up.getSpanContext().getTraceFlags().asHex());
    // sampled (a new trace's flags may also mark its id random: 03)
    assertThat(up.getSpanContext().getTraceFlags().isSampled()).isTrue();
  }

  @Test
  void tracingOffForwardsTheClientsTraceUnderANewSpanId() throws Exception {
    Gateway g = gateway(null);
    StubEngine e = stub();
    register(g, 1, e.url());
    assertThat(
            post(g, "/v1/chat/completions", CHAT, "traceparent", TRACEPARENT, "tracestate", "k=v")
                .statusCode())
        .isEqualTo(200);
    assertThat(
            post(
                    g,
                    "/v1/chat/completions",
                    CHAT,
                    "traceparent",
                    "00-" + TRACE_ID + "-" + CLIENT_SPAN + "-00")
                .statusCode())
        .isEqualTo(200);
    // none, or a malformed one: nothing is forwarded
    assertThat(post(g, "/v1/chat/completions", CHAT).statusCode()).isEqualTo(200);
    assertThat(
            post(g, "/v1/chat/completions", CHAT, "traceparent", "00-" + TRACE_ID + "-nope-01")
                .statusCode())
        .isEqualTo(200);
    assertThat(e.traceparents).hasSize(4);
    Pattern forwarded = Pattern.compile("00-" + TRACE_ID + "-([0-9a-f]{16})-(0[01])");
    Matcher first = forwarded.matcher(e.traceparents.get(0));
    Matcher second = forwarded.matcher(e.traceparents.get(1));
    assertThat(first.matches()).as(e.traceparents.get(0)).isTrue();
    assertThat(second.matches()).as(e.traceparents.get(1)).isTrue();
    assertThat(first.group(1)).isNotEqualTo(CLIENT_SPAN).isNotEqualTo("0000000000000000");
    assertThat(first.group(2)).isEqualTo("01");
    assertThat(second.group(1)).isNotEqualTo(CLIENT_SPAN).isNotEqualTo(first.group(1));
    assertThat(second.group(2)).isEqualTo("00"); // the client's sampling decision is kept
    assertThat(e.tracestates.get(0)).isEqualTo("k=v");
    assertThat(e.traceparents.subList(2, 4)).containsExactly("-", "-");
  }

  @Test
  void theTraceparentsThisGatewayContinues() {
    assertThat(RequestTrace.valid(TRACEPARENT)).isTrue();
    assertThat(RequestTrace.valid("01-" + TRACE_ID + "-" + CLIENT_SPAN + "-01-later")).isTrue();
    assertThat(RequestTrace.valid("00-" + TRACE_ID + "-" + CLIENT_SPAN + "-01-later")).isFalse();
    assertThat(RequestTrace.valid("ff-" + TRACE_ID + "-" + CLIENT_SPAN + "-01")).isFalse();
    assertThat(RequestTrace.valid("00-" + "0".repeat(32) + "-" + CLIENT_SPAN + "-01")).isFalse();
    assertThat(RequestTrace.valid("00-" + TRACE_ID + "-" + "0".repeat(16) + "-01")).isFalse();
    assertThat(
            RequestTrace.valid(
                "00-" + TRACE_ID.toUpperCase(Locale.ROOT) + "-" + CLIENT_SPAN + "-01"))
        .isFalse();
    assertThat(RequestTrace.valid("00-" + TRACE_ID + "-" + CLIENT_SPAN + "-1")).isFalse();
    assertThat(RequestTrace.valid("")).isFalse();
  }

  @Test
  void theNoopInstanceIsTracingOff() throws Exception {
    Gateway g = gateway(OpenTelemetry.noop());
    assertThat(g.tracer).isNull();
    StubEngine e = stub();
    register(g, 1, e.url());
    assertThat(post(g, "/v1/chat/completions", CHAT, "traceparent", TRACEPARENT).statusCode())
        .isEqualTo(200);
    // forwarded under a new span id, as with no OpenTelemetry at all
    assertThat(e.traceparents.get(0))
        .startsWith("00-" + TRACE_ID + "-")
        .doesNotContain(CLIENT_SPAN);
  }
}
