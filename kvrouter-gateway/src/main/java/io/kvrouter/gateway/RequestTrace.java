package io.kvrouter.gateway;

import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.http.ServerRequestHeaders;
import io.helidon.webclient.api.HttpClientRequest;
import io.kvrouter.event.Worker;
import io.kvrouter.route.PairDecision;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.server.RouteSpans;
import io.kvrouter.tokenize.Tokenizer;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapPropagator;
import io.opentelemetry.context.propagation.TextMapSetter;
import java.net.URI;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The trace of one gateway request (docs/observability.md, "Traces"): the stage spans under the
 * server span (parse, tokenize, route, queue wait, each upstream attempt with its first byte,
 * prediction check) and the {@code traceparent} of the engine request. Three kinds: {@link #OFF}
 * (tracing off and no client {@code traceparent}: every method does nothing), {@link Forward}
 * (tracing off, the client sent a valid {@code traceparent}: the engine request carries the
 * client's trace id under a new span id, so the engine's spans join the client's trace) and {@link
 * Traced} (spans, exported by the OpenTelemetry SDK the gateway was started with).
 *
 * <pre>
 * Implementation notes
 *
 * One per request, used only by the request's own (virtual) thread; Proxy calls the hooks in the
 * order the stages run. With tracing off the request holds the shared OFF instance: no object, no
 * header lookup beyond Headers.contains, no span. Traced keeps at most one stage span open (a
 * stage's start ends an open one) and one upstream span; end() closes whatever is still open (a
 * stage that threw), so every span ends exactly once. The server span is the one HttpTracing's
 * filter made current; its attributes (gen_ai.*) are set here. Stage spans are children of the
 * server span (explicit parent, not Context.current()); the engine request's traceparent names the
 * open upstream span, or the server span when none is open.
 * </pre>
 */
abstract class RequestTrace {
  static final HeaderName TRACEPARENT = HeaderNames.create("traceparent");
  static final HeaderName TRACESTATE = HeaderNames.create("tracestate");

  /** Tracing off, nothing to propagate. */
  static final RequestTrace OFF = new RequestTrace() {};

  /**
   * The trace of a request: Traced when {@code tracer} is not null (tracing on), else Forward when
   * the client sent a valid {@code traceparent}, else OFF.
   */
  static RequestTrace start(Tracer tracer, TextMapPropagator propagator, ServerRequestHeaders h) {
    if (tracer != null) return new Traced(tracer, propagator);
    if (!h.contains(TRACEPARENT)) return OFF;
    String tp = h.first(TRACEPARENT).orElse(null);
    if (tp == null || !valid(tp)) return OFF;
    return new Forward(tp, h.contains(TRACESTATE) ? h.first(TRACESTATE).orElse(null) : null);
  }

  /** Body read and parsed (the parse span starts). */
  void parseStart() {}

  /** The body is parsed: {@code r} is what it asks for. */
  void parsed(ClientRequest r, int bodyBytes) {}

  /** Tokenizing starts, with the model's own tokenizer or null (an engine's /tokenize). */
  void tokenizeStart(Tokenizer t) {}

  void tokenized(int tokens) {}

  /** One routing of attempt {@code attempt} starts. */
  void routeStart(int attempt) {}

  /** The router's decision ({@code d}), or the pair routing's ({@code pair}; null: none). */
  void routed(RouteDecision d, PairDecision pair) {}

  /** The request waits in its model's admission queue. */
  void queueStart(int band, String tenant) {}

  /** The wait ended with {@code o}; null: refused (queue full, or the wait reached its bound). */
  void queued(Admission.Outcome o) {}

  /** An upstream request to {@code url + path} (the rank {@code w}) starts. */
  void upstreamStart(String role, String url, String path, Worker w, int attempt) {}

  /** Adds the {@code traceparent} (and {@code tracestate}) of the engine request. */
  void inject(HttpClientRequest rq) {}

  /** The engine answered with {@code status}. */
  void upstreamStatus(int status) {}

  /** The engine's first bytes (a stream's first event) arrived. */
  void firstByte() {}

  /** The upstream request failed with {@code e}. */
  void upstreamFailed(Throwable e) {}

  /** The upstream request ended: answered (null) or to be retried for {@code retry}. */
  void upstreamEnd(Proxy.Retry retry) {}

  /** The prediction check of the answer starts. */
  void predictionStart() {}

  /** Predicted cached prompt tokens against what the engine reported. */
  void predicted(long predictedTokens, Usage u) {}

  /** The engine's usage, on the server span. */
  void usage(Usage u) {}

  /** The request failed with {@code e} (an open stage ends with it). */
  void failed(Throwable e) {}

  /** The request is done: closes whatever is still open. */
  void end() {}

  /**
   * Whether {@code tp} is a W3C traceparent this gateway continues: version 00 (or a later one,
   * read as 00), a non-zero 32-hex trace id, a non-zero 16-hex parent id, 2-hex flags.
   */
  static boolean valid(String tp) {
    if (tp.length() < 55) return false;
    if (tp.length() > 55 && tp.charAt(55) != '-') return false;
    if (tp.charAt(2) != '-' || tp.charAt(35) != '-' || tp.charAt(52) != '-') return false;
    if (!hex(tp, 0, 2) || tp.startsWith("ff")) return false;
    if (tp.startsWith("00") && tp.length() != 55) return false;
    return hex(tp, 3, 35)
        && !zero(tp, 3, 35)
        && hex(tp, 36, 52)
        && !zero(tp, 36, 52)
        && hex(tp, 53, 55);
  }

  private static boolean hex(String s, int from, int to) {
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
  }

  private static boolean zero(String s, int from, int to) {
    for (int i = from; i < to; i++) {
      if (s.charAt(i) != '0') return false;
    }
    return true;
  }

  /** Tracing off, a client traceparent: forwarded with a new span id per engine request. */
  static final class Forward extends RequestTrace {
    private final String traceId;
    private final String flags;
    private final String tracestate;

    Forward(String traceparent, String tracestate) {
      this.traceId = traceparent.substring(3, 35);
      this.flags = traceparent.substring(53, 55);
      this.tracestate = tracestate;
    }

    @Override
    void inject(HttpClientRequest rq) {
      long id;
      do {
        id = ThreadLocalRandom.current().nextLong();
      } while (id == 0);
      String span = String.format("%016x", id);
      rq.header(TRACEPARENT, "00-" + traceId + "-" + span + "-" + flags);
      if (tracestate != null) rq.header(TRACESTATE, tracestate);
    }
  }

  /** Tracing on. */
  static final class Traced extends RequestTrace {
    static final AttributeKey<String> OPERATION = AttributeKey.stringKey("gen_ai.operation.name");
    static final AttributeKey<String> MODEL = AttributeKey.stringKey("gen_ai.request.model");
    static final AttributeKey<Long> MAX_TOKENS = AttributeKey.longKey("gen_ai.request.max_tokens");
    static final AttributeKey<Long> INPUT_TOKENS =
        AttributeKey.longKey("gen_ai.usage.input_tokens");
    static final AttributeKey<Long> OUTPUT_TOKENS =
        AttributeKey.longKey("gen_ai.usage.output_tokens");
    static final AttributeKey<Long> CACHED_INPUT =
        AttributeKey.longKey("gen_ai.usage.cache_read.input_tokens");
    static final AttributeKey<Boolean> STREAM = AttributeKey.booleanKey("kvrouter.stream");
    static final AttributeKey<Long> BODY_SIZE = AttributeKey.longKey("http.request.body.size");
    static final AttributeKey<Long> PROMPT_TOKENS = AttributeKey.longKey("kvrouter.prompt.tokens");
    static final AttributeKey<String> TOKENIZER = AttributeKey.stringKey("kvrouter.tokenizer");
    static final AttributeKey<Long> SEGMENT_HITS =
        AttributeKey.longKey("kvrouter.tokenizer.segment_cache.hits");
    static final AttributeKey<Long> SEGMENT_MISSES =
        AttributeKey.longKey("kvrouter.tokenizer.segment_cache.misses");
    static final AttributeKey<Long> ATTEMPT = AttributeKey.longKey("kvrouter.attempt");
    static final AttributeKey<String> PATH = AttributeKey.stringKey("kvrouter.path");
    static final AttributeKey<Long> BAND = AttributeKey.longKey("kvrouter.queue.band");
    static final AttributeKey<String> TENANT = AttributeKey.stringKey("kvrouter.queue.tenant");
    static final AttributeKey<String> QUEUE_OUTCOME =
        AttributeKey.stringKey("kvrouter.queue.outcome");
    static final AttributeKey<String> ROLE = AttributeKey.stringKey("kvrouter.upstream.role");
    static final AttributeKey<String> SERVER_ADDRESS = AttributeKey.stringKey("server.address");
    static final AttributeKey<Long> SERVER_PORT = AttributeKey.longKey("server.port");
    static final AttributeKey<String> URL_FULL = AttributeKey.stringKey("url.full");
    static final AttributeKey<Long> STATUS = AttributeKey.longKey("http.response.status_code");
    static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");
    static final AttributeKey<String> RETRY_REASON =
        AttributeKey.stringKey("kvrouter.retry.reason");
    static final AttributeKey<Long> PREDICTED =
        AttributeKey.longKey("kvrouter.prediction.predicted_tokens");
    static final AttributeKey<Long> REPORTED =
        AttributeKey.longKey("kvrouter.prediction.reported_tokens");
    static final AttributeKey<Long> MISS = AttributeKey.longKey("kvrouter.prediction.error_tokens");

    static final String FIRST_BYTE = "kvrouter.first_byte";

    /** The engine request's headers as the propagator writes them. */
    private static final TextMapSetter<HttpClientRequest> SETTER =
        (rq, key, value) -> {
          if (rq != null) {
            rq.header(
                switch (key) {
                  case "traceparent" -> TRACEPARENT;
                  case "tracestate" -> TRACESTATE;
                  default -> HeaderNames.create(key);
                },
                value);
          }
        };

    private final Tracer tracer;
    private final TextMapPropagator propagator;
    private final Context parent;
    private final Span server;
    private Span stage;
    private Span upstream;
    private Tokenizer tokenizer;
    private Tokenizer.CacheStats before;
    private String operation = "chat";
    private String model;

    Traced(Tracer tracer, TextMapPropagator propagator) {
      this.tracer = tracer;
      this.propagator = propagator;
      this.parent = Context.current();
      this.server = Span.fromContext(parent);
    }

    private void begin(String name) {
      endStage();
      stage = tracer.spanBuilder(name).setParent(parent).startSpan();
    }

    private void endStage() {
      if (stage != null) {
        stage.end();
        stage = null;
      }
    }

    @Override
    void parseStart() {
      begin("kvrouter.parse");
    }

    @Override
    void parsed(ClientRequest r, int bodyBytes) {
      operation = r.kind == ClientRequest.Kind.CHAT ? "chat" : "text_completion";
      model = r.model;
      server.setAttribute(OPERATION, operation);
      if (r.model != null) server.setAttribute(MODEL, r.model);
      if (r.maxTokens >= 0) server.setAttribute(MAX_TOKENS, r.maxTokens);
      server.setAttribute(STREAM, r.stream);
      if (stage != null) stage.setAttribute(BODY_SIZE, bodyBytes);
      endStage();
    }

    @Override
    void tokenizeStart(Tokenizer t) {
      begin("kvrouter.tokenize");
      tokenizer = t;
      if (t != null) {
        stage.setAttribute(TOKENIZER, t.name());
        before = t.cacheStats();
      } else {
        stage.setAttribute(TOKENIZER, "engine");
      }
    }

    @Override
    void tokenized(int tokens) {
      server.setAttribute(INPUT_TOKENS, tokens);
      if (stage != null) {
        stage.setAttribute(PROMPT_TOKENS, tokens);
        if (tokenizer != null && before != null && before.enabled()) {
          Tokenizer.CacheStats after = tokenizer.cacheStats();
          stage.setAttribute(SEGMENT_HITS, after.hits() - before.hits());
          stage.setAttribute(SEGMENT_MISSES, after.misses() - before.misses());
        }
      }
      endStage();
    }

    @Override
    void routeStart(int attempt) {
      begin("kvrouter.route");
      stage.setAttribute(ATTEMPT, attempt);
    }

    @Override
    void routed(RouteDecision d, PairDecision pair) {
      if (stage == null) return;
      if (pair != null) stage.setAttribute(PATH, pair.path());
      if (d != null) RouteSpans.decision(stage, d);
      else if (pair instanceof PairDecision.Disaggregated x) RouteSpans.decision(stage, x.decode());
      endStage();
    }

    @Override
    void queueStart(int band, String tenant) {
      begin("kvrouter.queue_wait");
      stage.setAttribute(BAND, band);
      stage.setAttribute(TENANT, tenant);
    }

    @Override
    void queued(Admission.Outcome o) {
      if (stage != null) {
        stage.setAttribute(
            QUEUE_OUTCOME, o == null ? "rejected" : o.name().toLowerCase(Locale.ROOT));
      }
      endStage();
    }

    @Override
    void upstreamStart(String role, String url, String path, Worker w, int attempt) {
      endStage();
      endUpstream();
      URI u = URI.create(url);
      upstream =
          tracer
              .spanBuilder("kvrouter.upstream")
              .setParent(parent)
              .setSpanKind(SpanKind.CLIENT)
              .setAttribute(ROLE, role)
              .setAttribute(ATTEMPT, attempt)
              .setAttribute(RouteSpans.WORKER_ID, Long.toUnsignedString(w.workerId()))
              .setAttribute(RouteSpans.DP_RANK, w.dpRank())
              .setAttribute(SERVER_ADDRESS, u.getHost() == null ? url : u.getHost())
              .setAttribute(SERVER_PORT, u.getPort() >= 0 ? u.getPort() : 80)
              .setAttribute(URL_FULL, url + path)
              .setAttribute(OPERATION, operation)
              .startSpan();
      if (model != null) upstream.setAttribute(MODEL, model);
    }

    @Override
    void inject(HttpClientRequest rq) {
      Context c = upstream != null ? parent.with(upstream) : parent;
      propagator.inject(c, rq, SETTER);
    }

    @Override
    void upstreamStatus(int status) {
      if (upstream != null) upstream.setAttribute(STATUS, status);
    }

    @Override
    void firstByte() {
      if (upstream != null) upstream.addEvent(FIRST_BYTE);
    }

    @Override
    void upstreamFailed(Throwable e) {
      if (upstream != null) {
        upstream.recordException(e);
        upstream.setAttribute(ERROR_TYPE, e.getClass().getName());
        upstream.setStatus(StatusCode.ERROR);
      }
    }

    @Override
    void upstreamEnd(Proxy.Retry retry) {
      if (upstream == null) return;
      if (retry != null) {
        upstream.setAttribute(RETRY_REASON, retry.reason());
        upstream.setAttribute(ERROR_TYPE, retry.reason());
        upstream.setStatus(StatusCode.ERROR, retry.reason());
      }
      endUpstream();
    }

    private void endUpstream() {
      if (upstream != null) {
        upstream.end();
        upstream = null;
      }
    }

    @Override
    void predictionStart() {
      begin("kvrouter.prediction_check");
    }

    @Override
    void predicted(long predictedTokens, Usage u) {
      if (stage != null) {
        stage.setAttribute(PREDICTED, predictedTokens);
        if (u != null && u.cachedTokens >= 0) {
          stage.setAttribute(REPORTED, u.cachedTokens);
          stage.setAttribute(MISS, u.cachedTokens - predictedTokens);
        }
      }
      endStage();
    }

    @Override
    void usage(Usage u) {
      if (u == null || !u.usage) return;
      Span s = upstream != null ? upstream : null;
      if (u.promptTokens >= 0) {
        server.setAttribute(INPUT_TOKENS, u.promptTokens);
        if (s != null) s.setAttribute(INPUT_TOKENS, u.promptTokens);
      }
      if (u.completionTokens >= 0) {
        server.setAttribute(OUTPUT_TOKENS, u.completionTokens);
        if (s != null) s.setAttribute(OUTPUT_TOKENS, u.completionTokens);
      }
      if (u.cachedTokens >= 0) {
        server.setAttribute(CACHED_INPUT, u.cachedTokens);
        if (s != null) s.setAttribute(CACHED_INPUT, u.cachedTokens);
      }
    }

    @Override
    void failed(Throwable e) {
      Span s = stage != null ? stage : upstream;
      if (s != null) {
        s.recordException(e);
        s.setStatus(StatusCode.ERROR);
      }
      if (e instanceof OpenAiError x)
        server.setAttribute(ERROR_TYPE, x.code == null ? x.type : x.code);
    }

    @Override
    void end() {
      endStage();
      endUpstream();
    }
  }
}
