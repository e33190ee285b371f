package io.kvrouter.server;

import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.http.ServerRequestHeaders;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.TextMapGetter;
import io.opentelemetry.context.propagation.TextMapPropagator;
import org.jspecify.annotations.Nullable;

/**
 * The server span of every request (docs/observability.md, "Traces"): a Helidon filter that
 * continues the client's W3C {@code traceparent} (the OpenTelemetry instance's propagators), starts
 * a SERVER span named {@code METHOD ROUTE} with the HTTP semantic-convention attributes, makes it
 * current on the request's virtual thread while the handler runs, and ends it with the response's
 * status. The probes and the metrics (GET /health, /ready, /metrics) are not traced.
 *
 * <pre>
 * Implementation notes
 *
 * Installed only when tracing is on (KvRouterServer: an OpenTelemetry instance other than null or
 * the no-op one): with tracing off there is no filter and no span object at all. Helidon SE 4 runs
 * a handler to its end on the request's virtual thread, so the span is current (a ThreadLocal of
 * the OpenTelemetry context) for everything the handler does, and a stream's span ends after its
 * last byte. Children are started by whoever handles the request (Api's route span, the gateway's
 * stages) under Context.current(). Immutable; shared by every request.
 * </pre>
 */
final class HttpTracing {
  static final String SCOPE = "io.kvrouter.server";

  static final AttributeKey<String> HTTP_REQUEST_METHOD =
      AttributeKey.stringKey("http.request.method");
  static final AttributeKey<String> HTTP_ROUTE = AttributeKey.stringKey("http.route");
  static final AttributeKey<Long> HTTP_RESPONSE_STATUS_CODE =
      AttributeKey.longKey("http.response.status_code");
  static final AttributeKey<String> URL_PATH = AttributeKey.stringKey("url.path");
  static final AttributeKey<String> URL_SCHEME = AttributeKey.stringKey("url.scheme");
  static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");

  private static final HeaderName TRACEPARENT = HeaderNames.create("traceparent");
  private static final HeaderName TRACESTATE = HeaderNames.create("tracestate");
  private static final HeaderName BAGGAGE = HeaderNames.create("baggage");

  /** The client's headers as the propagators read them. */
  private static final TextMapGetter<ServerRequestHeaders> HEADERS =
      new TextMapGetter<>() {
        @Override
        public @Nullable String get(@Nullable ServerRequestHeaders carrier, String key) {
          if (carrier == null) return null;
          HeaderName name =
              switch (key) {
                case "traceparent" -> TRACEPARENT;
                case "tracestate" -> TRACESTATE;
                case "baggage" -> BAGGAGE;
                default -> HeaderNames.create(key);
              };
          return carrier.first(name).orElse(null);
        }
      };

  private final Tracer tracer;
  private final TextMapPropagator propagator;

  private HttpTracing(OpenTelemetry otel) {
    this.tracer = otel.getTracer(SCOPE);
    this.propagator = otel.getPropagators().getTextMapPropagator();
  }

  /** Tracing with {@code otel}; null when it is off ({@code otel} null or the no-op instance). */
  static @Nullable HttpTracing of(@Nullable OpenTelemetry otel) {
    return on(otel) ? new HttpTracing(otel) : null;
  }

  /** Whether {@code otel} traces: not null and not {@link OpenTelemetry#noop()}. */
  static boolean on(@Nullable OpenTelemetry otel) {
    return otel != null && otel != OpenTelemetry.noop();
  }

  /** The tracer of the service's own spans (Api's route span). */
  Tracer tracer() {
    return tracer;
  }

  /** The filter to add to the routing. */
  @SuppressWarnings("try") // the scope makes the span current while the handler runs
  void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
    String path = req.path().path();
    if (path.equals("/health") || path.equals("/ready") || path.equals("/metrics")) {
      chain.proceed();
      return;
    }
    String method = req.prologue().method().text();
    Context parent = propagator.extract(Context.root(), req.headers(), HEADERS);
    Span span =
        tracer
            .spanBuilder(method)
            .setParent(parent)
            .setSpanKind(SpanKind.SERVER)
            .setAttribute(HTTP_REQUEST_METHOD, method)
            .setAttribute(URL_PATH, path)
            .setAttribute(URL_SCHEME, "http")
            .startSpan();
    Throwable failed = null;
    try (Scope unused = span.makeCurrent()) {
      chain.proceed();
    } catch (RuntimeException e) {
      failed = e;
      throw e;
    } finally {
      String route = req.matchingPattern().orElse(null);
      if (route != null) {
        span.updateName(method + " " + route);
        span.setAttribute(HTTP_ROUTE, route);
      }
      int status = res.status().code();
      span.setAttribute(HTTP_RESPONSE_STATUS_CODE, status);
      if (failed != null && !res.isSent()) {
        // (an exception after the answer went out only ends the connection: the status says)
        span.recordException(failed);
        span.setAttribute(ERROR_TYPE, failed.getClass().getName());
        span.setStatus(StatusCode.ERROR);
      } else if (status >= 500) {
        span.setAttribute(ERROR_TYPE, Integer.toString(status));
        span.setStatus(StatusCode.ERROR);
      }
      span.end();
    }
  }
}
