package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteArrayFeeder;
import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webserver.CloseConnectionException;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.admission.TokenBucket;
import io.kvrouter.admission.TokenCost;
import io.kvrouter.event.Worker;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.route.PairDecision;
import io.kvrouter.route.PairRouter;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.route.WorkerLoad;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.http.HttpPlumbing;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.EngineDialect;
import io.kvrouter.tokenize.EngineTokenizer;
import io.kvrouter.tokenize.Tokenizer;
import io.kvrouter.tokenize.TokenizerException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.function.Consumer;
import java.util.logging.Level;

/**
 * {@code POST /v1/chat/completions} and {@code /v1/completions}: parse, tokenize, route, forward,
 * relay, with retries before the first byte (docs/gateway.md).
 *
 * <pre>
 * Implementation notes
 *
 * Stateless: everything per request lives on the handler's virtual thread. An attempt is one
 * route + one forward; attempt() frees the routed id in its finally, so each route is freed
 * exactly once. A failure before anything was written to the client (connection refused or
 * reset, a timeout before the first byte, a 5xx or 429 answer, a stream that ends or breaks
 * before its first event) is Retry: the engine's breaker counts it (a 500 carrying the engine's
 * own error only once another engine answered the request otherwise: Refusals) and the next
 * attempt excludes its instance. Once the client's response has started, nothing is retried: an upstream failure
 * ends the stream with an SSE error event (streams) or cuts the body (whole answers), and a
 * client that went away (a write fails) closes the upstream response, which aborts the request
 * on the engine (Helidon's client closes a connection whose entity was not read to the end).
 * A client that stays but does not read is the same once the write timeout closes its connection
 * (Gateway.timed: the blocked write fails); the relay calls ServerHost.writesIdle after each
 * write, before it reads the engine again, so only writes to the client are timed, never the
 * wait for the engine's next bytes.
 *
 * send() resends a request once, on a connection of its own, when the pooled connection it went
 * on expired as it was handed out (Helidon's idle monitor gave up on it; see failure()): that is
 * neither an attempt nor the engine's failure.
 *
 * Admission: a first attempt that the router answers AllBusy waits in the model's queue
 * (admit: Admission.ModelQueue.await) and routes again once granted; a request that arrives while
 * others wait queues behind them before routing. Every freed route (Call.release, a hand-over's
 * prefill) calls ModelQueue.freed, and every ended prefill (Relay.prefillDone: the engine's first
 * token, or the first bytes of a whole answer) ModelQueue.prefillEnded; either grants the next
 * waiter when a rank has room; a granted request that leaves without routing passes its place on.
 * A routed request whose prefix holder is busy (holderWait) may free its route and wait for the
 * holder (ModelQueue.waitForHolder); once granted, its next route is restricted to the holder
 * (Call.holder). While it waits, the client's connection is watched (ServerHost.watchClient) and
 * closed after the answer, once that answer is committed (HttpPlumbing.closeAfterAnswer: a stream's
 * last chunk is written at its commit, which Helidon skips when a handler throws).
 *
 * Eviction (--evict-lower-bands; Admission's class notes): a request of a band below high, sent
 * by forward, registers an Admission.InFlight (c.inFlight) until its first bytes; c.started() at
 * the first read of a whole answer, the first event of a stream, and at the attempt's end moves it
 * to STARTED, or finds it evicted (then nothing of that answer reaches the client, the attempt
 * returns EVICTED after forward's finally freed its route, and run() neither counts it as an
 * attempt nor against the engine, and waits again: resume).
 *
 * A model with prefill or decode ranks (RouterModel.Rank.role) is routed by PairRouter instead
 * of KvRouter.route: an Aggregated decision is an attempt like any other (retried the same way);
 * a Disaggregated one is the hand-over (handOver): prefill request, its kv_transfer_params into
 * the decode request (Handover), relay; never retried. The decision recorded two router entries,
 * requestId#prefill (freed when the prefill answer is in) and requestId (the decode's, freed by
 * the relay as any attempt's); handOver's finally frees whichever is still held, so an error at
 * either step leaves nothing behind.
 * </pre>
 */
final class Proxy {
  private static final int BUF = 16 * 1024;
  private static final int ERROR_BODY_LIMIT = 64 * 1024;

  private final Gateway g;

  Proxy(Gateway g) {
    this.g = g;
  }

  /** Why an attempt did not answer the client. */
  record Retry(String reason, int status, byte[] body, String contentType, boolean timeout) {}

  /** The attempt was evicted (Admission.InFlight): it waits again, then routes again. */
  static final Retry EVICTED = new Retry("evicted", 0, null, null, false);

  /** What one request carries through its attempts. */
  private static final class Call {
    final long t0 = System.nanoTime();
    String path;
    ClientRequest req;
    ModelCatalog.Target target;
    RouterModel model;
    String group;
    String requestId;
    int[] ids;

    /** The model's ranks as the current attempt saw them. */
    List<RouterModel.Rank> ranks;

    /** The current attempt's route is still to be freed. */
    boolean routed;

    /** The body to forward instead of the client's (the decode step of a hand-over), or null. */
    byte[] body;

    /** The pair routing's decision of the current attempt (fleets with roles), or null. */
    PairDecision pair;

    /** The model's admission queue; null when admission is off. */
    Admission.ModelQueue queue;

    /** The request's place in the queue when it waited (the last one), or null. */
    volatile Admission.Waiter waiter;

    /** Its place in the fair queue (what the queue charged), or null: never queued there. */
    Admission.Waiter queued;

    /** The prefix holder it was granted after waiting for it: the next route goes there. */
    Worker holder;

    /** It was granted a place by the queue and has not routed since. */
    boolean granted;

    /** Its connection is watched while it waits: closed after the answer. */
    boolean watched;

    /** What the queue charged for its prefill: prompt tokens less the predicted overlap. */
    long predictedUncached;

    /** Its tenant's token bucket when it was charged there (TenantRates), or null. */
    TokenBucket rateBucket;

    /** What the bucket charged: the predicted uncached prefill plus the expected decode. */
    long rateUncached;

    long rateDecode;

    /** The breaker's share of the attempts' 500s. */
    final Refusals refusals = new Refusals();

    /** The session's table key (docs/gateway.md, "Sessions"), or null: none, or sessions off. */
    String session;

    /** The session's binding the current attempt routed with, or null. */
    SessionTable.Binding bound;

    /** Its trace (RequestTrace.OFF when tracing is off and the client sent no traceparent). */
    RequestTrace trace = RequestTrace.OFF;

    /** Its band and tenant when eviction is on (-1: not known, never evicted). */
    int band = -1;

    String tenant;

    /** The current attempt while an eviction may take it back (nothing sent to the client). */
    Admission.InFlight inFlight;

    /** The current attempt was evicted. */
    boolean evicted;

    /** How often it was evicted, and its time on engines before those evictions. */
    int evictions;

    long engineNanos;

    /**
     * The current attempt's first bytes arrived, or it ended: it can no longer be evicted. False
     * when it was evicted first (then nothing of its answer may reach the client).
     */
    boolean started() {
      Admission.InFlight f = inFlight;
      if (f == null) return !evicted;
      inFlight = null;
      queue.unsent(f);
      if (f.start()) return true;
      evicted = true;
      engineNanos += System.nanoTime() - f.sentNanos;
      return false;
    }

    /** Frees the current attempt's route; once per route. */
    void release() {
      if (routed) {
        routed = false;
        model.router().free(requestId);
        if (queue != null) queue.freed();
      }
    }
  }

  void handle(ClientRequest.Kind kind, String path, ServerRequest sreq, ServerResponse res)
      throws Exception {
    Call c = new Call();
    c.trace = RequestTrace.start(g.tracer, g.propagator, sreq.headers());
    try {
      handle(c, kind, path, sreq, res);
    } catch (Exception e) {
      c.trace.failed(e);
      throw e;
    } finally {
      c.trace.end();
    }
  }

  private void handle(
      Call c, ClientRequest.Kind kind, String path, ServerRequest sreq, ServerResponse res)
      throws Exception {
    c.path = path;
    c.requestId = g.requestId(sreq);
    c.group = sreq.headers().first(Gateway.X_GROUP).orElse(null);
    res.header(Gateway.X_REQUEST_ID, c.requestId);
    c.trace.parseStart();
    byte[] body = g.host.body(sreq);
    long t = System.nanoTime();
    c.req = ClientRequest.parse(kind, body, g.config.maxRequestValues());
    c.trace.parsed(c.req, body.length);
    long values = c.req.values;
    if (!g.values.take(values)) {
      res.header(HeaderNames.RETRY_AFTER, "1");
      throw new OpenAiError(
          429,
          "server_error",
          "gateway_busy",
          null,
          "the requests in flight hold "
              + g.values.held()
              + " JSON values of messages and tools; this one's "
              + values
              + " would pass the gateway's "
              + g.values.limit()
              + "; retry shortly");
    }
    try {
      handle(c, sreq, res, t);
    } finally {
      g.values.give(values);
    }
  }

  /** The rest of handle(), while the request's parsed values are held in the budget. */
  private void handle(Call c, ServerRequest sreq, ServerResponse res, long t) throws Exception {
    c.target = g.target(c.req, c.group);
    long t1 = System.nanoTime();
    g.metrics.parseStage.observe((t1 - t) / 1e9);
    c.model = g.host.model(c.target.baseModel(), c.group);
    if (c.model == null) {
      throw OpenAiError.unavailable(
          "no_engines",
          "no engine is registered for model '"
              + c.target.baseModel()
              + "' (POST /register with its base_url, or --engine)");
    }
    if (g.sessions != null) c.session = g.sessions.key(c.target.baseModel(), c.req, sreq);
    c.trace.tokenizeStart(c.target.tokenizer());
    c.ids = tokenize(c);
    c.trace.tokenized(c.ids.length);
    g.metrics.tokenizeStage.observe((System.nanoTime() - t1) / 1e9);
    c.model.samplePrompt(c.ids, c.target.lora(), c.req.cacheSalt); // GET /dashboard's hot prefixes
    c.queue = g.admission == null ? null : g.admission.queue(c.model);
    // a bad priority header is refused whether or not the request waits (a lookup, no allocation)
    if (sreq.headers().contains(Gateway.X_PRIORITY)) g.band(sreq, c.req);
    if (c.queue != null && g.admission.config().maxEvictions() > 0) {
      c.band = g.band(sreq, c.req);
      c.tenant = g.tenant(sreq, c.req);
    }
    if (g.rates != null) limitRate(c, sreq, res);
    try {
      run(c, sreq, res);
    } catch (OpenAiError e) {
      refundRate(c); // the gateway refused it: no engine answered, nothing to charge
      if (!c.watched) throw e;
      c.trace.failed(e);
      Gateway.sendError(res, e);
      throw HttpPlumbing.closeAfterAnswer(sreq, res);
    } finally {
      if (c.granted) {
        // granted a place and left before routing: the place goes to the next waiter
        c.granted = false;
        c.queue.routed(false);
        c.queue.freed();
      }
    }
    // a request that waited: its connection, which its client watch reads, ends with the answer.
    // A streamed answer's last chunk is written at its commit, and Helidon commits only after a
    // handler that returns: closeAfterAnswer commits it first (a bare CloseConnectionException
    // would close the socket without the chunked body's end)
    if (c.watched) throw HttpPlumbing.closeAfterAnswer(sreq, res);
  }

  // ------------------------------------------------------------------ admission

  /**
   * Waits in the model's admission queue (docs/gateway.md, "Admission") until granted a place, or
   * until a route of the model was freed since {@code generation} (then routes again at once).
   *
   * @param busy the router's answer that found every engine busy (its overlaps price the prefill);
   *     null for a request that queues behind others without having routed
   * @throws OpenAiError 429 with Retry-After when the queue is full or the wait reached its bound
   * @throws CloseConnectionException when the client left while waiting
   */
  private void admit(
      Call c, long generation, RouteDecision.AllBusy busy, ServerRequest sreq, ServerResponse res) {
    Admission adm = g.admission;
    int band = g.band(sreq, c.req);
    String tenant = g.tenant(sreq, c.req);
    int overlapBlocks = 0;
    if (busy != null) {
      for (int i = 0, n = busy.candidates().size(); i < n; i++) {
        overlapBlocks = Math.max(overlapBlocks, busy.candidates().get(i).overlapBlocks());
      }
    } else {
      overlapBlocks =
          c.model
              .router()
              .overlaps(c.ids, Gateway.options(c.target, c.req.cacheSalt, null))
              .maxScore();
    }
    c.predictedUncached = TokenCost.uncached(c.ids.length, overlapBlocks, c.model.blockSize());
    long decode = c.req.maxTokens >= 0 ? c.req.maxTokens : adm.config().defaultDecodeTokens();
    Admission.Outcome o = null;
    c.trace.queueStart(band, tenant);
    try {
      o =
          c.queue.await(
              generation,
              band,
              tenant,
              c.predictedUncached + decode,
              c.t0,
              w -> {
                c.queued = w;
                watch(c, res).accept(w);
              });
    } catch (OpenAiError e) {
      res.header(HeaderNames.RETRY_AFTER, Long.toString(adm.retryAfterSeconds()));
      throw e;
    } finally {
      c.trace.queued(o);
    }
    switch (o) {
      case RETRY -> {}
      case GRANTED -> c.granted = true;
      case GONE -> throw new CloseConnectionException("the client left while its request waited");
    }
  }

  /**
   * An evicted request (its route freed by its attempt) waits again at the head of its band
   * (docs/gateway.md, "Evicting lower-band work in flight"), its wait bound from its arrival plus
   * its time on engines; returns once granted (then it routes again).
   *
   * @throws OpenAiError 429 with Retry-After when the wait reached its bound
   * @throws CloseConnectionException when the client left while waiting
   */
  private void resume(Call c, ServerResponse res) {
    c.evictions++;
    c.evicted = false;
    Admission.Outcome o = null;
    c.trace.queueStart(c.band, c.tenant);
    try {
      o = c.queue.resume(c.band, c.tenant, c.t0 + c.engineNanos, watch(c, res));
    } catch (OpenAiError e) {
      res.header(HeaderNames.RETRY_AFTER, Long.toString(g.admission.retryAfterSeconds()));
      throw e;
    } finally {
      c.trace.queued(o);
    }
    switch (o) {
      case RETRY -> {}
      case GRANTED -> c.granted = true;
      case GONE -> throw new CloseConnectionException("the client left while its request waited");
    }
  }

  /** Once a request waits: watches its client (a client that leaves leaves the queue at once). */
  private Consumer<Admission.Waiter> watch(Call c, ServerResponse res) {
    return w -> {
      c.waiter = w;
      if (!c.watched) {
        c.watched = g.host.watchClient(() -> c.queue.gone(c.waiter));
        if (c.watched) res.header(HeaderNames.CONNECTION, "close");
      }
    };
  }

  /**
   * Whether the routed request {@code r} should rather wait for the busy rank holding the longest
   * prefix of its prompt (docs/routing.md, "Waiting for the prefix holder"): only when a rank was
   * busy, that rank holds more of the prompt than the chosen one, and the request may go there.
   * When it waits, its route is freed and it returns once granted (c.holder set: route there) or
   * told to route again; null when it starts now on {@code r}.
   *
   * @throws OpenAiError 429 with Retry-After when the wait reached its bound
   * @throws CloseConnectionException when the client left while waiting
   */
  private Admission.Outcome waitForHolder(
      Call c,
      long generation,
      RouteDecision.Routed r,
      Allowed a,
      ServerRequest sreq,
      ServerResponse res) {
    if (c.queue == null
        || r.busy().isEmpty()
        || !g.admission.holderWait()
        || c.session != null
        || c.pair != null) {
      return null;
    }
    OverlapScores ov =
        c.model.router().overlaps(c.ids, Gateway.options(c.target, c.req.cacheSalt, null));
    Worker holder = null;
    int best = r.overlapBlocks();
    for (int i = 0, n = ov.size(); i < n; i++) {
      if (ov.scoreAt(i) > best) {
        best = ov.scoreAt(i);
        holder = ov.worker(i);
      }
    }
    if (holder == null
        || !r.busy().contains(holder)
        || (a.ids != null && !a.ids.contains(holder.workerId()))) {
      return null;
    }
    WorkerLoad here;
    WorkerLoad held;
    try {
      here = c.model.router().load(r.worker());
      held = c.model.router().load(holder);
    } catch (IllegalArgumentException gone) {
      return null; // a rank was unregistered meanwhile
    }
    long prompt = c.ids.length;
    // the chosen rank's backlog counts this request's own prefill since its route: not its wait
    long own = Math.max(0, prompt - r.overlapTokens());
    long hereBacklog = Math.max(0, here.activePrefillTokens() - own);
    int band = g.band(sreq, c.req);
    String tenant = g.tenant(sreq, c.req);
    Admission.Outcome o = null;
    boolean[] parked = new boolean[1];
    try {
      o =
          c.queue.waitForHolder(
              generation,
              holder,
              prompt,
              r.overlapTokens(),
              hereBacklog,
              (long) best * c.model.blockSize(),
              held,
              band,
              tenant,
              c.t0,
              () -> {
                // it waits: its route is freed, its wait traced
                c.routed = false;
                c.model.router().free(c.requestId);
                parked[0] = true;
                c.trace.queueStart(band, tenant);
              },
              watch(c, res));
    } catch (OpenAiError e) {
      res.header(HeaderNames.RETRY_AFTER, Long.toString(g.admission.retryAfterSeconds()));
      throw e;
    } finally {
      if (parked[0]) c.trace.queued(o);
    }
    if (o == null) return null;
    switch (o) {
      case RETRY -> {}
      case GRANTED -> {
        c.granted = true;
        c.holder = holder;
      }
      case GONE -> throw new CloseConnectionException("the client left while its request waited");
    }
    return o;
  }

  // ------------------------------------------------------------------ token-rate limits

  /**
   * Charges the request to its tenant's token bucket (docs/gateway.md, "Token-rate limits"): its
   * uncached prefill as the router predicts it now plus its expected decode tokens, the queue's
   * cost.
   *
   * @throws OpenAiError 429 rate_limit_exceeded, with Retry-After from the bucket, when the bucket
   *     cannot pay it
   */
  private void limitRate(Call c, ServerRequest sreq, ServerResponse res) {
    String tenant = g.tenant(sreq, c.req);
    TokenBucket b = g.rates.bucket(tenant);
    if (b == null) return;
    int overlapBlocks =
        c.model
            .router()
            .overlaps(c.ids, Gateway.options(c.target, c.req.cacheSalt, null))
            .maxScore();
    long uncached = TokenCost.uncached(c.ids.length, overlapBlocks, c.model.blockSize());
    long decode =
        c.req.maxTokens >= 0 ? c.req.maxTokens : g.config.admission().defaultDecodeTokens();
    long cost = uncached + decode;
    long wait = b.tryTake(cost);
    if (wait > 0) {
      g.admission.rateLimited(tenant);
      res.header(HeaderNames.RETRY_AFTER, Long.toString(TenantRates.retryAfterSeconds(wait)));
      throw g.rates.refusal(tenant, cost, b, wait);
    }
    c.rateBucket = b;
    c.rateUncached = uncached;
    c.rateDecode = decode;
  }

  /** Gives the request's charge back to its tenant's bucket (once). */
  private static void refundRate(Call c) {
    TokenBucket b = c.rateBucket;
    if (b == null) return;
    c.rateBucket = null;
    b.adjust(-(c.rateUncached + c.rateDecode));
  }

  /**
   * Settles the request's charge on what the engine reported (once): uncached prompt tokens ({@code
   * prompt_tokens - cached_tokens}; the prediction when cached_tokens is not reported) plus {@code
   * completion_tokens} (the expected decode when not reported).
   */
  private static void settleRate(Call c, Usage usage) {
    TokenBucket b = c.rateBucket;
    if (b == null) return;
    c.rateBucket = null;
    b.adjust(
        TokenCost.settlement(
            usage.promptTokens,
            usage.cachedTokens,
            usage.completionTokens,
            c.rateUncached,
            c.rateDecode));
  }

  private int[] tokenize(Call c) {
    ClientRequest r = c.req;
    if (r.kind == ClientRequest.Kind.COMPLETION && r.promptIds != null) return r.promptIds;
    try {
      if (c.target.tokenizer() != null) {
        Tokenizer tok = c.target.tokenizer();
        // a prompt certainly longer than every engine's context is refused before it is tokenized
        long context = tok.maxCharsPerToken() > 0 ? g.engines.largestModelLen(c.model) : -1;
        // on the tokenizing threads: a huge prompt must not hold a carrier thread (nor its check:
        // an NFC tokenizer's is one pass over the text)
        ChatRequest chat = r.kind == ClientRequest.Kind.CHAT ? asRendered(c, r.chat) : null;
        return g.tokenizers.run(
            () -> {
              String text = chat == null ? r.promptText : tok.renderChat(chat);
              ContextPrecheck.check(tok, text, context);
              return chat == null
                  ? tok.encode(text, r.addSpecialTokens)
                  : tok.encode(text, chat.addSpecialTokens()); // as applyChatTemplate
            });
      }
      String url = g.anyUsableEngine(c.model);
      if (url == null) throw noEngine(c, null);
      EngineTokenizer et = g.engineTokenizer(url, r.model);
      try {
        return r.kind == ClientRequest.Kind.CHAT
            ? et.tokenizeChat(
                    g.config.chat().forModel(c.target.baseModel()).applyToolChoice(r.chat))
                .tokens()
            : et.tokenizePrompt(r.promptText, r.addSpecialTokens).tokens();
      } catch (TokenizerException e) {
        throw g.engineTokenizeFailed(e);
      }
    } catch (TokenizerException e) {
      throw OpenAiError.invalid(
          null, r.kind == ClientRequest.Kind.CHAT ? "messages" : "prompt", e.getMessage());
    }
  }

  /**
   * The chat as the model's engines render it: llama.cpp continues a trailing assistant message
   * (EngineDialect.asRendered). The engines' dialect is looked up only for such a chat.
   */
  private ChatRequest asRendered(Call c, ChatRequest chat) {
    if (EngineDialect.LLAMA_CPP.asRendered(chat) == chat) return chat; // renders the same anyway
    EngineDialect d = g.engines.dialect(c.model);
    return d == null ? chat : d.asRendered(chat);
  }

  /** The attempts. */
  private void run(Call c, ServerRequest sreq, ServerResponse res) {
    try {
      run(c, sreq, res, c.refusals);
    } finally {
      c.refusals.end(); // an engine's 500 no other engine of the request was asked to confirm
    }
  }

  /**
   * The breaker's share of one request's attempts (docs/RELIABILITY.md, issue 31): a 500 that
   * carries the engine's own error is counted against that engine only once another engine has
   * answered the same request otherwise; when a second engine also answers it 500 with an error,
   * the request is what fails (vLLM answers 500 to some inputs it cannot handle), and neither
   * engine's breaker counts it. Without a second engine asked, it is counted as before. One per
   * request, on its thread.
   */
  private static final class Refusals {
    /** The engine whose 500 waits for another engine's answer; null: none. */
    private EngineState held;

    /** Two engines refused this request with a 500: later ones are not counted either. */
    private boolean requestFails;

    static boolean isRefusal(Retry r) {
      return r.status == 500 && r.body != null && r.body.length > 0;
    }

    /** An attempt on {@code st} failed with {@code r}. */
    void failed(EngineState st, Retry r) {
      long now = System.nanoTime();
      if (!isRefusal(r)) {
        end();
        st.failed(now);
      } else if (requestFails) {
        st.releaseProbe();
      } else if (held != null) {
        requestFails = true;
        held.releaseProbe();
        held = null;
        st.releaseProbe();
        Gateway.LOG.fine("two engines answered one request 500: not counted against them");
      } else {
        held = st;
      }
    }

    /** The request ended (or another engine answered it otherwise): a held 500 is counted. */
    void end() {
      if (held != null) {
        held.failed(System.nanoTime());
        held = null;
      }
    }
  }

  private void run(Call c, ServerRequest sreq, ServerResponse res, Refusals refusals) {
    Set<Long> tried = null;
    Retry last = null;
    int attempts = 0;
    String lastEngine = "none";
    String lastUrl = null;
    // requests wait for the model already: this one queues behind them, not past them
    if (c.queue != null && c.queue.busy()) admit(c, -1, null, sreq, res);
    while (attempts < g.config.maxAttempts()) {
      long generation = c.queue == null ? 0 : c.queue.generation();
      long now = System.nanoTime();
      Allowed a = allowed(c, tried, now);
      if (a.none()) {
        if (last == null && a.queueFull > 0 && c.queue != null) {
          // every engine it may use is busy by its own queue (--busy-engine-waiting): wait
          if (c.granted) {
            c.granted = false;
            c.queue.routed(false);
          }
          admit(c, generation, null, sreq, res);
          continue;
        }
        if (last != null) break;
        throw noEngine(c, a);
      }
      RouteDecision d;
      long tr = System.nanoTime();
      c.trace.routeStart(attempts + 1);
      try {
        d = route(c, a);
      } catch (IllegalArgumentException dup) {
        // the client's x-request-id is in flight already: keep it in logs, route under a new one
        // (any other refusal of the router is not retried under another id)
        String m = dup.getMessage();
        if (m == null || !m.contains("already in flight")) throw dup;
        c.requestId = c.requestId + "~" + g.nextSuffix();
        continue;
      }
      g.metrics.routeStage.observe((System.nanoTime() - tr) / 1e9);
      c.trace.routed(d, c.pair);
      boolean fromQueue = c.granted;
      if (fromQueue) {
        c.granted = false;
        c.queue.routed(
            !(d instanceof RouteDecision.AllBusy || d instanceof RouteDecision.NoWorkers));
      }
      if (d == null) {
        // outside the try: an IllegalArgumentException of the hand-over is no duplicate id
        handOver(c, (PairDecision.Disaggregated) c.pair, res);
        return;
      }
      c.routed = d instanceof RouteDecision.Routed;
      if (!(d instanceof RouteDecision.Routed r)) {
        if (last != null) break;
        if (d instanceof RouteDecision.AllBusy busy && c.queue != null) {
          admit(c, generation, busy, sreq, res); // waits for a place, then routes again
          continue;
        }
        if (fromQueue) c.queue.freed(); // its place goes to the next waiter
        throw refusal(c, d, a);
      }
      if (attempts == 0 && waitForHolder(c, generation, r, a, sreq, res) != null) continue;
      String url = c.model.baseUrl(r.worker());
      EngineState st = url == null ? null : g.engine(url);
      if (st == null || !st.acquire(now)) {
        // lost a race with another request for a half-open probe (or the rank lost its URL)
        c.release();
        tried = add(tried, r.worker());
        continue;
      }
      attempts++;
      if (c.session != null) {
        g.sessions.routed(c.target.baseModel(), c.session, r.worker(), url, c.bound);
      }
      lastEngine = Long.toUnsignedString(r.worker().workerId());
      lastUrl = url;
      if (attempts > 1) g.metrics.retries.labelValues(c.target.baseModel()).inc();
      g.lora.beforeSend(c.target.lora(), url, r.worker().workerId());
      Retry retry = attempt(c, r, url, st, attempts, res);
      if (retry == EVICTED) {
        // a request of a higher band took its place: not the engine's failure, not an attempt
        attempts--;
        st.releaseProbe();
        resume(c, res);
        continue;
      }
      if (retry == null) return; // (run's finally counts a 500 held before this answer)
      last = retry;
      refusals.failed(st, retry);
      g.metrics.attemptFailures.labelValues(c.target.baseModel(), lastEngine, retry.reason).inc();
      Gateway.LOG.log(
          Level.FINE,
          () -> "request " + c.requestId + ": attempt on " + url + " failed: " + retry.reason);
      tried = add(tried, r.worker());
    }
    refusals.end(); // before the client has its answer
    fail(c, res, last, attempts, lastEngine, lastUrl);
  }

  /**
   * Routes one attempt: with prefill and decode roles among the ranks through the pair routing
   * (c.pair is its decision), else the model's router. Null when the pair routing hands the request
   * over (c.pair is then the Disaggregated decision).
   *
   * @throws IllegalArgumentException when the router refuses, e.g. a request id in flight already
   */
  private RouteDecision route(Call c, Allowed a) {
    if (!disaggregated(c.ranks)) {
      Worker holder = c.holder;
      c.holder = null;
      RouteOptions o =
          Gateway.options(
              c.target,
              c.req.cacheSalt,
              holder != null && (a.ids == null || a.ids.contains(holder.workerId()))
                  ? Set.of(holder.workerId())
                  : a.ids);
      if (c.session != null) {
        SessionTable.Binding b = g.sessions.binding(c.session);
        c.bound = b;
        if (b != null && usable(c, a, b)) {
          // hard: the session's engine alone (the admission queue waits while it is busy); soft:
          // the session scorer prefers it
          o =
              g.sessions.hard()
                  ? new RouteOptions(o.loraName(), o.namespace(), b.only(), b.worker())
                  : o.withAffinity(b.worker());
        }
      }
      return c.model.router().route(c.requestId, c.ids, o);
    }
    c.pair = pairRoute(c, a);
    if (c.pair instanceof PairDecision.Disaggregated) return null;
    return c.pair instanceof PairDecision.Aggregated ag
        ? ag.routed()
        : ((PairDecision.Refused) c.pair).decision();
  }

  /**
   * Whether the session's rank may take this attempt: registered, healthy, not draining, breaker
   * closed and not tried yet (else the session moves, and is bound where it goes).
   */
  private static boolean usable(Call c, Allowed a, SessionTable.Binding b) {
    if (a.ids != null) return a.ids.contains(b.id());
    for (int i = 0, n = c.ranks.size(); i < n; i++) {
      if (c.ranks.get(i).worker().equals(b.worker())) return true;
    }
    return false;
  }

  /** The 503 of a first attempt the router did not route ({@code d}: why). */
  private OpenAiError refusal(Call c, RouteDecision d, Allowed a) {
    if (d instanceof RouteDecision.AllBusy busy) {
      return OpenAiError.unavailable(
          "all_busy",
          "every engine of model '"
              + c.target.baseModel()
              + "' is busy ("
              + busy.candidates().size()
              + " over the busy thresholds); retry later");
    }
    if (c.pair instanceof PairDecision.Refused) {
      return OpenAiError.unavailable(
          "no_decode_engines",
          "no decode (or both) engine of model '"
              + c.target.baseModel()
              + "' can take the request: its prefill engines cannot serve it alone");
    }
    return noEngine(c, a);
  }

  /** Answers the client when every attempt failed before the first byte ({@code last}: why). */
  private void fail(
      Call c, ServerResponse res, Retry last, int attempts, String lastEngine, String lastUrl) {
    // the engine that failed last, as the operator knows it (its URL) and as /workers shows it
    String which = "engine " + lastUrl + " (instance " + lastEngine + ")";
    if (last.body != null) {
      res.status(Status.create(last.status));
      if (last.contentType != null) res.header(HeaderNames.CONTENT_TYPE, last.contentType);
      res.header(Gateway.X_ATTEMPTS, Integer.toString(attempts));
      count(c, lastEngine, last.status, attempts);
      res.send(last.body);
      return;
    }
    OpenAiError e =
        last.timeout
            ? new OpenAiError(
                504,
                "server_error",
                "engine_timeout",
                null,
                "no engine of model '"
                    + c.target.baseModel()
                    + "' answered within "
                    + g.config.engineTimeout().toMillis()
                    + " ms ("
                    + attempts
                    + " attempt(s), the last on "
                    + which
                    + "; --engine-timeout-ms)")
            : new OpenAiError(
                502,
                "server_error",
                "engine_unreachable",
                null,
                "the engines tried for model '"
                    + c.target.baseModel()
                    + "' failed ("
                    + attempts
                    + " attempt(s); last: "
                    + which
                    + ": "
                    + last.reason
                    + ")");
    count(c, lastEngine, e.status, attempts);
    res.header(Gateway.X_ATTEMPTS, Integer.toString(attempts));
    Gateway.sendError(res, e);
  }

  private static Set<Long> add(Set<Long> tried, Worker w) {
    if (tried == null) tried = new HashSet<>();
    tried.add(w.workerId());
    return tried;
  }

  private void count(Call c, String engine, int status, int attempt) {
    g.metrics
        .requests
        .labelValues(
            c.target.baseModel(), engine, Integer.toString(status), Integer.toString(attempt))
        .inc();
  }

  /** Where a request may go: null ids = anywhere; and why nothing, when nothing. */
  private record Allowed(
      Set<Long> ids,
      int ranks,
      int noUrl,
      int unhealthy,
      int open,
      int tried,
      int draining,
      int queueFull) {
    boolean none() {
      return ids != null && ids.isEmpty();
    }
  }

  private Allowed allowed(Call c, Set<Long> tried, long now) {
    List<RouterModel.Rank> ranks = c.model.ranks();
    c.ranks = ranks;
    // first pass without allocating: in the common case nothing is excluded
    int excluded = 0;
    for (int i = 0, n = ranks.size(); i < n; i++) {
      if (excluded(ranks.get(i), tried, now) != 0) excluded++;
    }
    if (ranks.isEmpty()) return new Allowed(Set.of(), 0, 0, 0, 0, 0, 0, 0);
    if (excluded == 0) return new Allowed(null, ranks.size(), 0, 0, 0, 0, 0, 0);
    int[] why = new int[7];
    Set<Long> out = new HashSet<>();
    Set<Long> all = new HashSet<>();
    for (RouterModel.Rank r : ranks) {
      int k = excluded(r, tried, now);
      all.add(r.worker().workerId());
      if (k != 0) {
        why[k]++;
        out.add(r.worker().workerId());
      }
    }
    all.removeAll(out);
    return new Allowed(
        Set.copyOf(all), ranks.size(), why[1], why[3], why[4], why[2], why[5], why[6]);
  }

  /**
   * 0: usable; 1: no base URL; 2: tried; 3: unhealthy; 4: breaker open (or probe taken); 5:
   * draining; 6: its engine says its own queue is at --busy-engine-waiting.
   */
  private int excluded(RouterModel.Rank r, Set<Long> tried, long now) {
    if (r.baseUrl() == null) return 1;
    if (tried != null && tried.contains(r.worker().workerId())) return 2;
    EngineState s = g.engine(r.baseUrl());
    if (!s.healthy()) return 3;
    if (s.draining()) return 5;
    if (!s.usable(now)) return 4;
    long limit = g.config.busyEngineWaiting();
    return EngineQueueWatch.busy(s.engineWaiting(), limit) ? 6 : 0;
  }

  private OpenAiError noEngine(Call c, Allowed a) {
    String model = c.target.baseModel();
    if (a == null || a.ranks == 0) {
      return OpenAiError.unavailable(
          "no_engines",
          "no engine is registered for model '"
              + model
              + "' (POST /register with its base_url, or --engine)");
    }
    if (a.draining > 0 && a.draining + a.noUrl == a.ranks) {
      return OpenAiError.unavailable(
          "no_engines",
          "every engine of model '"
              + model
              + "' is being drained (taken out of the fleet)"
              + (a.noUrl > 0 ? ", or has no base_url" : ""));
    }
    if (a.noUrl == a.ranks) {
      return OpenAiError.unavailable(
          "no_engines",
          "no engine of model '"
              + model
              + "' was registered with a base_url, so the gateway cannot forward to any");
    }
    if (a.unhealthy > 0 && a.open == 0) {
      return OpenAiError.unavailable(
          "all_unhealthy",
          "every engine of model '"
              + model
              + "' is unhealthy ("
              + a.unhealthy
              + " failing their health checks"
              + (a.noUrl > 0 ? ", " + a.noUrl + " without base_url" : "")
              + ")");
    }
    if (a.queueFull > 0) {
      return OpenAiError.unavailable(
          "all_busy",
          "every engine of model '"
              + model
              + "' that may take the request is busy: "
              + a.queueFull
              + " say at least --busy-engine-waiting requests wait in their own queue"
              + (a.open + a.unhealthy > 0
                  ? ", " + (a.open + a.unhealthy) + " unhealthy or with an open breaker"
                  : "")
              + "; retry later");
    }
    return OpenAiError.unavailable(
        "circuit_open",
        "no engine of model '"
            + model
            + "' can take the request: "
            + a.open
            + " with an open circuit breaker, "
            + a.unhealthy
            + " unhealthy"
            + (a.noUrl > 0 ? ", " + a.noUrl + " without base_url" : ""));
  }

  // ------------------------------------------------------------------ prefill/decode fleets

  /** Whether the model's ranks include prefill or decode engines (then PairRouter routes). */
  private static boolean disaggregated(List<RouterModel.Rank> ranks) {
    for (int i = 0, n = ranks.size(); i < n; i++) {
      if (ranks.get(i).role() != EngineRole.BOTH) return true;
    }
    return false;
  }

  private PairDecision pairRoute(Call c, Allowed a) {
    Set<Long> prefill = new HashSet<>();
    Set<Long> decode = new HashSet<>();
    for (RouterModel.Rank r : c.ranks) {
      (r.role() == EngineRole.PREFILL ? prefill : decode).add(r.worker().workerId());
    }
    PairDecision d =
        new PairRouter(c.model.router(), g.config.disaggregation())
            .route(
                c.requestId,
                c.ids,
                Gateway.options(c.target, c.req.cacheSalt, a.ids),
                prefill,
                decode);
    Gateway.LOG.log(Level.FINE, () -> "request " + c.requestId + ": " + d.why());
    return d;
  }

  /**
   * The hand-over of vLLM's disaggregated serving proxy (NixlConnector): the prefill request
   * (Handover.prefillBody) to the prefill engine, its answer's kv_transfer_params into the client's
   * request to the decode engine, whose answer is relayed. Not retried: a failure at either step
   * answers the client with an error. Both router entries are freed whatever happens.
   */
  private void handOver(Call c, PairDecision.Disaggregated x, ServerResponse res) {
    c.routed = true; // the decode, under c.requestId
    String pid = x.prefillRequestId();
    boolean prefillHeld = true;
    String pEngine = Long.toUnsignedString(x.prefill().worker().workerId());
    String dEngine = Long.toUnsignedString(x.decode().worker().workerId());
    try {
      // the prefill engine's body before either engine's probe is taken: a body the rewrite
      // refuses is the client's 400 and must leave both breakers as they were
      final byte[] prefillBody;
      try {
        prefillBody = Handover.prefillBody(c.req.upstreamBody());
      } catch (IllegalArgumentException e) {
        throw OpenAiError.invalid("invalid_body", null, e.getMessage());
      }
      String purl = c.model.baseUrl(x.prefill().worker());
      String durl = c.model.baseUrl(x.decode().worker());
      EngineState pst = purl == null ? null : g.engine(purl);
      EngineState dst = durl == null ? null : g.engine(durl);
      long now = System.nanoTime();
      if (pst == null || dst == null || !pst.acquire(now)) {
        count(c, pEngine, 503, 1);
        throw OpenAiError.unavailable(
            "circuit_open", "prefill engine " + pEngine + " cannot take the request now");
      }
      if (!dst.acquire(now)) {
        pst.releaseProbe();
        count(c, dEngine, 503, 1);
        throw OpenAiError.unavailable(
            "circuit_open", "decode engine " + dEngine + " cannot take the request now");
      }
      byte[] params;
      try {
        params = prefill(c, x.prefill().worker(), prefillBody, purl, pst, pEngine, res);
      } catch (RuntimeException e) {
        dst.releaseProbe();
        throw e;
      }
      if (params == PREFILL_ANSWERED) {
        dst.releaseProbe();
        return;
      }
      c.model.router().free(pid);
      if (c.queue != null) c.queue.freed(); // the prefill engine has room again
      prefillHeld = false;
      try {
        c.body = Handover.decodeBody(c.req.upstreamBody(), params);
      } catch (RuntimeException e) {
        dst.releaseProbe(); // the decode engine was never asked: its half-open probe is free again
        throw e;
      }
      Retry retry = attempt(c, x.decode(), durl, dst, 1, res);
      if (retry != null) {
        dst.failed(System.nanoTime());
        g.metrics.attemptFailures.labelValues(c.target.baseModel(), dEngine, retry.reason).inc();
        int code = retry.timeout ? 504 : 502;
        count(c, dEngine, code, 1);
        throw new OpenAiError(
            code,
            "server_error",
            retry.timeout ? "decode_engine_timeout" : "decode_engine_failed",
            null,
            "the decode engine "
                + dEngine
                + " failed after the prefill on "
                + pEngine
                + " ("
                + retry.reason
                + (retry.body != null && retry.body.length > 0 ? ": " + snippet(retry.body) : "")
                + ")");
      }
    } finally {
      if (prefillHeld) {
        c.model.router().free(pid);
        if (c.queue != null) c.queue.freed();
      }
      c.release();
    }
  }

  /** A marker: the prefill engine's answer was relayed to the client (a 4xx). */
  private static final byte[] PREFILL_ANSWERED = new byte[0];

  /**
   * Sends the prefill request; returns the answer's kv_transfer_params (null: none), or
   * PREFILL_ANSWERED when the engine refused the request (4xx) and that answer went to the client.
   *
   * @throws OpenAiError 502 or 504 when the prefill engine failed
   */
  private byte[] prefill(
      Call c,
      Worker w,
      byte[] prefillBody,
      String url,
      EngineState st,
      String engine,
      ServerResponse res) {
    int status;
    byte[] answer;
    String ctype;
    c.trace.upstreamStart("prefill", url, c.path, w, 1);
    try (HttpClientResponse up = send(c, w, url, prefillBody)) {
      status = up.status().code();
      c.trace.upstreamStatus(status);
      ctype = up.headers().first(HeaderNames.CONTENT_TYPE).orElse("application/json");
      answer = up.inputStream().readNBytes(PREFILL_ANSWER_LIMIT);
      c.trace.firstByte();
    } catch (IOException | RuntimeException e) {
      c.trace.upstreamFailed(e);
      c.trace.upstreamEnd(null);
      Retry r = failure(e instanceof RuntimeException re ? re : new RuntimeException(e));
      st.failed(System.nanoTime());
      g.metrics.attemptFailures.labelValues(c.target.baseModel(), engine, r.reason).inc();
      int code = r.timeout ? 504 : 502;
      count(c, engine, code, 1);
      throw new OpenAiError(
          code,
          "server_error",
          r.timeout ? "prefill_engine_timeout" : "prefill_engine_unreachable",
          null,
          "the prefill engine "
              + engine
              + (r.timeout
                  ? " did not answer within " + g.config.engineTimeout().toMillis() + " ms"
                  : " could not be reached: " + e.getMessage()));
    }
    c.trace.upstreamEnd(
        status >= 500 || status == 429
            ? new Retry("status_" + status, status, null, null, false)
            : null);
    if (status >= 500 || status == 429) {
      st.failed(System.nanoTime());
      g.metrics.attemptFailures.labelValues(c.target.baseModel(), engine, "status_" + status).inc();
      count(c, engine, 502, 1);
      throw new OpenAiError(
          502,
          "server_error",
          "prefill_engine_failed",
          null,
          "the prefill engine " + engine + " answered " + status + ": " + snippet(answer));
    }
    st.succeeded();
    if (status != 200) {
      // the engine refused the request itself (400, 404 ...): the decode engine would too
      res.status(Status.create(status));
      res.header(HeaderNames.CONTENT_TYPE, ctype);
      res.header(Gateway.X_PREFILL_WORKER, engine);
      count(c, engine, status, 1);
      res.send(answer);
      return PREFILL_ANSWERED;
    }
    return Handover.kvTransferParams(answer);
  }

  private static final int PREFILL_ANSWER_LIMIT = 4 * 1024 * 1024;

  private static String snippet(byte[] b) {
    String s = new String(b, 0, Math.min(b.length, 300), StandardCharsets.UTF_8);
    return s.strip();
  }

  // ------------------------------------------------------------------ one attempt

  /** Forwards to one engine; null when the client got its answer (or is gone). */
  private Retry attempt(
      Call c, RouteDecision.Routed r, String url, EngineState st, int attempt, ServerResponse res) {
    c.trace.upstreamStart(c.body != null ? "decode" : "both", url, c.path, r.worker(), attempt);
    Retry retry = null;
    try {
      retry = forward(c, r, url, st, attempt, res);
      if (!c.started()) retry = EVICTED; // whatever the attempt saw: it was evicted first
      return retry;
    } catch (RuntimeException e) {
      c.started(); // no longer evictable (and an eviction's interrupt cleared)
      c.trace.upstreamFailed(e);
      throw e;
    } finally {
      c.trace.upstreamEnd(retry);
    }
  }

  /** One attempt's request and relay (attempt's body). */
  private Retry forward(
      Call c, RouteDecision.Routed r, String url, EngineState st, int attempt, ServerResponse res) {
    String engine = Long.toUnsignedString(r.worker().workerId());
    try {
      long ts = System.nanoTime();
      if (c.band > 0 && c.body == null) {
        c.evicted = false;
        c.inFlight =
            c.queue.sent(
                c.band,
                c.tenant,
                r.worker(),
                Math.max(0, c.ids.length - r.overlapTokens()),
                ts - c.t0 - c.engineNanos,
                c.evictions);
      }
      HttpClientResponse up;
      try {
        up = send(c, r.worker(), url, c.body != null ? c.body : c.req.upstreamBody());
      } catch (RuntimeException e) {
        return failure(e);
      }
      try (up) {
        EngineAnswer a;
        try {
          a = EngineAnswer.of(up); // past interim 1xx answers; a body framed by the close ends
        } catch (IOException | RuntimeException e) {
          return brokenOff(e);
        }
        int status = a.status;
        // another engine answered this request otherwise: a 500 held before was that engine's
        if (status != 500) c.refusals.end();
        c.trace.upstreamStatus(status);
        if (status >= 500 || status == 429) {
          byte[] err;
          try {
            err = readCapped(a.body);
          } catch (IOException | RuntimeException e) {
            err = new byte[0];
          }
          return new Retry("status_" + status, status, err, a.contentType, false);
        }
        String ctype = a.contentType != null ? a.contentType : "application/json";
        boolean sse = c.req.stream && status == 200 && ctype.startsWith("text/event-stream");
        Relay relay = new Relay(c, r, url, engine, st, attempt, status, ctype, ts, res);
        Retry retry = sse ? relay.stream(a.body) : relay.whole(a.body, a.contentLength);
        if (relay.clientGone) st.releaseProbe();
        return relay.clientGone ? null : retry;
      }
    } finally {
      c.release();
    }
  }

  /**
   * Sends {@code body} to the engine and reads the answer's status line and headers; a request
   * whose pooled connection expired as it was handed out is sent once more (Gateway.submit).
   */
  private HttpClientResponse send(Call c, Worker w, String url, byte[] body) {
    return g.submit(() -> request(c, w, url), body, c.requestId, url);
  }

  /**
   * The request to {@code w}'s engine at {@code url}. When other ranks of the model share that URL
   * (one data-parallel engine behind one HTTP server: vLLM's internal load balancer, or SGLang's
   * data-parallel controller), or the rank is not 0 (a data-parallel engine whose other ranks are
   * not registered yet, or gone), {@code X-data-parallel-rank} names the rank the router chose,
   * which both engines honour; without it the engine would pick a rank itself and the KV overlap
   * the choice was made for would be lost. An engine serving one rank of its own (vLLM's external
   * load balancing) ignores the header.
   */
  private HttpClientRequest request(Call c, Worker w, String url) {
    HttpClientRequest rq =
        g.client
            .post()
            .uri(url + c.path)
            .readTimeout(g.config.engineTimeout())
            .header(HeaderNames.CONTENT_TYPE, "application/json")
            .header(Gateway.X_REQUEST_ID, c.requestId);
    if (w.dpRank() > 0 || c.model.sharesBaseUrl(w)) {
      rq.header(Gateway.X_DATA_PARALLEL_RANK, Integer.toString(w.dpRank()));
    }
    if (g.config.engineApiKey() != null) {
      rq.header(HeaderNames.AUTHORIZATION, "Bearer " + g.config.engineApiKey());
    }
    c.trace.inject(rq);
    return rq;
  }

  static final String STALE = "stale_connection";

  /**
   * Why a send or a read failed before the first byte reached the client. A failure that came
   * through an ExecutionException is Helidon's idle monitor of a pooled connection (it reads the
   * idle socket on its own thread and gives up after the read timeout of the connection's last
   * request): that connection expired as it was handed to this request, the engine did not time
   * out, so it is "stale_connection", not "timeout" (a false 504 before).
   */
  static Retry failure(RuntimeException e) {
    boolean timeout = false;
    boolean monitor = false;
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof SocketTimeoutException) timeout = true;
      if (t instanceof ExecutionException) monitor = true;
    }
    if (monitor) return new Retry(STALE, 0, null, null, false);
    return new Retry(timeout ? "timeout" : "connect", 0, null, null, timeout);
  }

  /**
   * An engine that sent its status line and then failed before the answer's first bytes (or a
   * stream's first event): a timeout as {@link #failure}, anything else {@code broken_off} (not
   * {@code connect}: the connection was made and answered).
   */
  static Retry brokenOff(Exception e) {
    Retry r = failure(e instanceof RuntimeException re ? re : new RuntimeException(e));
    return r.reason.equals("connect") ? new Retry("broken_off", 0, null, null, false) : r;
  }

  private static byte[] readCapped(InputStream in) throws IOException {
    return in.readNBytes(ERROR_BODY_LIMIT);
  }

  /** Relays one engine answer to the client. */
  private final class Relay {
    final Call c;
    final RouteDecision.Routed r;
    final String url;
    final String engine;
    final EngineState st;
    final int attempt;
    final int status;
    final String ctype;
    final long sentAt;
    final ServerResponse res;
    boolean clientGone;
    boolean prefillDone;
    Usage usage;

    /** When the last event relayed to the client was written (nanoTime; 0: none yet). */
    private long lastEvent;

    Relay(
        Call c,
        RouteDecision.Routed r,
        String url,
        String engine,
        EngineState st,
        int attempt,
        int status,
        String ctype,
        long sentAt,
        ServerResponse res) {
      this.c = c;
      this.r = r;
      this.url = url;
      this.engine = engine;
      this.st = st;
      this.attempt = attempt;
      this.status = status;
      this.ctype = ctype;
      this.sentAt = sentAt;
      this.res = res;
    }

    /**
     * The engine's answer has begun (its first bytes, or the first event of a stream, arrived): the
     * engine counts as working, before the client can see the answer. Not at the status line, since
     * an engine that sends its headers and then dies or stalls must count as failed.
     */
    private void headers() {
      c.trace.firstByte();
      st.succeeded();
      g.metrics.upstreamStage.observe((System.nanoTime() - sentAt) / 1e9);
      res.status(Status.create(status));
      res.header(HeaderNames.CONTENT_TYPE, ctype);
      res.header(Gateway.X_WORKER, Long.toUnsignedString(r.worker().workerId()));
      res.header(Gateway.X_DP_RANK, Integer.toString(r.worker().dpRank()));
      res.header(Gateway.X_OVERLAP, Integer.toString(r.overlapTokens()));
      res.header(Gateway.X_ATTEMPTS, Integer.toString(attempt));
      if (c.pair != null) {
        res.header(Gateway.X_PATH, c.pair.path());
        if (c.pair instanceof PairDecision.Aggregated ag) {
          res.header(Gateway.X_PATH_REASON, ag.reason().wireName());
        } else if (c.pair instanceof PairDecision.Disaggregated x) {
          res.header(Gateway.X_PATH_REASON, PairDecision.Reason.DISAGGREGATED.wireName());
          res.header(
              Gateway.X_PREFILL_WORKER, Long.toUnsignedString(x.prefill().worker().workerId()));
        }
      }
      if (c.req.stream) {
        res.header(HeaderNames.CACHE_CONTROL, "no-cache");
      }
    }

    private void prefillDone() {
      if (prefillDone) return;
      prefillDone = true;
      // the engine's prefill tokens in flight drop: a waiter may fit now
      if (c.model.router().markPrefillCompleted(c.requestId) && c.queue != null) {
        c.queue.prefillEnded();
      }
      g.metrics.ttft.labelValues(c.target.baseModel()).observe((System.nanoTime() - c.t0) / 1e9);
    }

    /** The answer is complete: free the route, count, compare the prediction. */
    private void finish(int answered) {
      c.release();
      count(c, engine, answered, attempt);
      Admission.Waiter w = c.queued;
      if (w != null
          && usage != null
          && status == 200
          && usage.promptTokens >= 0
          && usage.cachedTokens >= 0) {
        // what the queue charged for the prefill, corrected by what the engine really cached
        long actual = Math.max(0, usage.promptTokens - usage.cachedTokens);
        c.queue.charge(w, actual - c.predictedUncached);
      }
      if (usage != null && status == 200) settleRate(c, usage);
      if (g.sessions != null
          && usage != null
          && usage.id != null
          && status == 200
          && g.sessions.config().source() == SessionConfig.Source.PREVIOUS_RESPONSE_ID) {
        // the next turn names this answer's id as its previous_response_id
        g.sessions.answered(c.target.baseModel(), usage.id, r.worker(), url);
      }
      c.trace.usage(usage);
      // a decode engine that pulled the prompt's KV reports it cached: nothing to compare
      if (usage != null && status == 200 && !(c.pair instanceof PairDecision.Disaggregated)) {
        c.trace.predictionStart();
        RouterModel.Rank rank = rank();
        int ebs = rank == null ? c.model.blockSize() : Math.max(1, rank.engineBlockSize());
        g.predictions.record(
            c.model,
            r.worker(),
            url,
            g.engines.granule(url, ebs),
            rank != null && rank.kvSource() == KvSource.PREDICTED,
            r.overlapTokens(),
            c.ids,
            Gateway.options(c.target, c.req.cacheSalt, null),
            usage);
        c.trace.predicted(r.overlapTokens(), usage);
      }
    }

    /** The rank that answered, as the attempt saw the model's ranks; null when it left since. */
    private RouterModel.Rank rank() {
      for (RouterModel.Rank k : c.ranks) {
        if (k.worker().equals(r.worker())) return k;
      }
      return null;
    }

    /** A whole (non-SSE) answer: relayed as it arrives; usage read on the way. */
    Retry whole(InputStream in, long length) {
      byte[] buf = new byte[BUF];
      int n;
      try {
        n = in.read(buf);
      } catch (IOException | RuntimeException e) {
        return brokenOff(e);
      }
      if (!c.started()) return EVICTED;
      prefillDone();
      headers();
      if (length >= 0) res.header(HeaderNames.CONTENT_LENGTH, Long.toString(length));
      JsonParser np = null;
      ByteArrayFeeder feeder = null;
      Usage u = null;
      if (status == 200 && ctype.startsWith("application/json")) {
        try {
          np = Json.FACTORY.createNonBlockingByteArrayParser();
          feeder = (ByteArrayFeeder) np.getNonBlockingInputFeeder();
          u = new Usage();
        } catch (IOException e) {
          np = null;
        }
      }
      OutputStream out;
      try {
        out = res.outputStream();
      } catch (RuntimeException e) {
        clientGone = true;
        return null;
      }
      g.metrics.openStreams.inc();
      try {
        while (n >= 0) {
          if (n > 0) {
            if (np != null) np = feed(np, feeder, u, buf, n);
            try {
              out.write(buf, 0, n);
            } catch (IOException | RuntimeException e) {
              clientGone = true;
              count(c, engine, 499, attempt);
              return null;
            }
          }
          g.host.writesIdle(); // waiting for the engine: the client's write timeout is off
          try {
            n = in.read(buf);
          } catch (IOException | RuntimeException e) {
            // the engine broke off after the answer started: nothing to retry; the client sees a
            // short body (or a closed connection)
            Gateway.LOG.warning(
                "request " + c.requestId + ": engine " + url + " broke off its answer: " + e);
            count(c, engine, 502, attempt);
            // not closed: the client must not take the short body for the whole answer, so the
            // response is abandoned and the server drops the connection, quietly (Helidon's
            // CloseConnectionException), without the end of the body
            throw new CloseConnectionException("the engine broke off its answer", e);
          }
        }
        if (np != null) {
          try {
            feeder.endOfInput();
            JsonToken t;
            while ((t = np.nextToken()) != null && t != JsonToken.NOT_AVAILABLE) u.token(t, np);
          } catch (IOException e) {
            // not JSON: nothing learnt
          }
          usage = u;
        }
        // the router's bookkeeping before the client sees the end of the answer
        finish(status);
        closeQuietly(out);
        return null;
      } finally {
        g.metrics.openStreams.dec();
      }
    }

    private JsonParser feed(JsonParser np, ByteArrayFeeder f, Usage u, byte[] buf, int n) {
      try {
        f.feedInput(buf, 0, n);
        JsonToken t;
        while ((t = np.nextToken()) != null && t != JsonToken.NOT_AVAILABLE) u.token(t, np);
        return np;
      } catch (IOException e) {
        return null; // not JSON after all: forward it as it is, learn nothing
      }
    }

    /** An SSE stream: events relayed one by one; the usage chunk the gateway asked for dropped. */
    Retry stream(InputStream in) {
      SseBuffer sse = new SseBuffer();
      byte[] buf = new byte[BUF];
      // before the first byte reaches the client: a failure here is retried elsewhere
      try {
        while (!sse.hasEvent()) {
          int n = in.read(buf);
          if (n < 0) {
            if (sse.size() == 0) return new Retry("empty_stream", 0, null, null, false);
            break;
          }
          if (!sse.append(buf, n)) return eventTooLarge(sse);
        }
      } catch (IOException | RuntimeException e) {
        return brokenOff(e);
      }
      if (!c.started()) return EVICTED;
      headers();
      OutputStream out;
      try {
        out = res.outputStream();
      } catch (RuntimeException e) {
        clientGone = true;
        return null;
      }
      g.metrics.openStreams.inc();
      try {
        boolean eof = false;
        while (true) {
          boolean wrote = relayEvents(sse, out);
          if (eof) {
            if (sse.size() > 0) out.write(sse.array(), sse.start(), sse.size());
            break;
          }
          if (wrote) out.flush();
          g.host.writesIdle(); // waiting for the engine: the client's write timeout is off
          int n;
          try {
            n = in.read(buf);
          } catch (IOException | RuntimeException e) {
            brokeOff(out, e);
            return null;
          }
          if (n < 0) {
            eof = true;
          } else if (!sse.append(buf, n)) {
            endTooLarge(out, sse);
            return null;
          }
        }
        finish(status);
        out.close();
      } catch (IOException | RuntimeException e) {
        // a write to the client failed: it went away; closing the upstream aborts the request
        clientGone = true;
        count(c, engine, 499, attempt);
        return null;
      } finally {
        g.metrics.openStreams.dec();
      }
      return null;
    }

    /**
     * Writes every whole event the buffer holds to the client (but the usage chunk the gateway
     * asked for itself), noting the usage, the first token and the inter-token latency; returns
     * whether it wrote any.
     */
    private boolean relayEvents(SseBuffer sse, OutputStream out) throws IOException {
      boolean wrote = false;
      int end;
      while ((end = sse.nextEventEnd()) >= 0) {
        int start = sse.start();
        int ds = SseBuffer.dataStart(sse.array(), start, end);
        boolean drop = false;
        if (ds >= 0 && sse.array()[ds] == '{') {
          int de = SseBuffer.dataEnd(sse.array(), ds, end);
          if (SseBuffer.contains(sse.array(), ds, de, USAGE)) {
            Usage u = Usage.scan(sse.array(), ds, de - ds);
            if (u.usage) usage = u;
            drop = c.req.injectedUsage && u.usageOnly();
          }
          if (!drop) {
            long now = System.nanoTime();
            if (!prefillDone) prefillDone();
            else g.metrics.itl.labelValues(c.target.baseModel()).observe((now - lastEvent) / 1e9);
            lastEvent = now;
          }
        }
        if (!drop) {
          out.write(sse.array(), start, end - start);
          wrote = true;
        }
        sse.consume(end);
      }
      return wrote;
    }

    /**
     * The engine's first event is longer than the bound (a line that never ends): a failure of the
     * engine, with the client's error saying what it sent.
     */
    private Retry eventTooLarge(SseBuffer sse) {
      Gateway.LOG.warning(
          "request "
              + c.requestId
              + ": engine "
              + url
              + " streamed an event of more than "
              + sse.maxBytes()
              + " bytes without its end; the stream is refused");
      return new Retry(
          EVENT_TOO_LARGE,
          502,
          OpenAiError.body(tooLargeMessage(sse), "server_error", null, EVENT_TOO_LARGE),
          "application/json",
          false);
    }

    /** The same after the client got its first events: the stream ends with an error event. */
    private void endTooLarge(OutputStream out, SseBuffer sse) throws IOException {
      Gateway.LOG.warning(
          "request "
              + c.requestId
              + ": engine "
              + url
              + " streamed an event of more than "
              + sse.maxBytes()
              + " bytes without its end; the stream is cut");
      byte[] error = OpenAiError.body(tooLargeMessage(sse), "server_error", null, EVENT_TOO_LARGE);
      out.write(DATA);
      out.write(error, 0, trimmedLength(error));
      out.write(BLANK);
      c.release();
      st.failed(System.nanoTime());
      g.metrics.attemptFailures.labelValues(c.target.baseModel(), engine, EVENT_TOO_LARGE).inc();
      count(c, engine, 502, attempt);
      out.close();
    }

    /**
     * The engine broke off its stream after the client got its first bytes: ends the client's
     * stream with an error event (no retry after a first byte), frees the route, counts a 502.
     */
    private void brokeOff(OutputStream out, Exception e) throws IOException {
      Gateway.LOG.warning(
          "request " + c.requestId + ": engine " + url + " broke off its stream: " + e);
      String error =
          new String(
                  OpenAiError.body(
                      "the engine stopped answering mid-stream: "
                          + (e.getMessage() != null ? e.getMessage() : e.toString()),
                      "server_error",
                      null,
                      "engine_stream_interrupted"),
                  StandardCharsets.UTF_8)
              .trim();
      out.write(("data: " + error + "\n\n").getBytes(StandardCharsets.UTF_8));
      c.release();
      count(c, engine, 502, attempt);
      out.close();
    }
  }

  private static final byte[] USAGE = "\"usage\"".getBytes(StandardCharsets.UTF_8);
  private static final byte[] DATA = "data: ".getBytes(StandardCharsets.UTF_8);
  private static final byte[] BLANK = "\n\n".getBytes(StandardCharsets.UTF_8);
  static final String EVENT_TOO_LARGE = "engine_event_too_large";

  private static String tooLargeMessage(SseBuffer sse) {
    return "the engine streamed an event of more than "
        + sse.maxBytes()
        + " bytes without its end (a line that does not end?); the gateway refuses it";
  }

  /** The length of {@code b} without its trailing whitespace (a line break). */
  private static int trimmedLength(byte[] b) {
    int n = b.length;
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == ' ')) n--;
    return n;
  }

  private static void closeQuietly(OutputStream out) {
    try {
      out.close();
    } catch (IOException | RuntimeException e) {
      // gone
    }
  }
}
