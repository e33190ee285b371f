package io.kvrouter.server.http;

import io.helidon.common.buffers.DataReader;
import io.helidon.common.socket.SocketWriterException;
import io.helidon.http.DirectHandler;
import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.http.RequestException;
import io.helidon.http.Status;
import io.helidon.webserver.CloseConnectionException;
import io.helidon.webserver.ServerConnectionException;
import io.helidon.webserver.WebServerConfig;
import io.helidon.webserver.http.DirectHandlers;
import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.RoutingResponse;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.helidon.webserver.http1.Http1Config;
import java.io.IOException;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The HTTP side of every endpoint: routing with 404 and 405, the bearer token of mutating
 * endpoints, the 503 of a server that is not serving yet, request bodies (limit, Content-Type, slow
 * and vanishing clients), the mapping of failures to {@code {"error": ...}} answers, and the
 * request metrics; and the listeners and limits of the web server those depend on ({@link
 * #configure}). The endpoints themselves (the server's Api, a ServerExtension's) only parse, act
 * and write.
 *
 * <pre>
 * Implementation notes
 *
 * One per server, made before its web server: it owns the server's ReadDeadline, HttpFraming,
 * BodyBudget and BearerAuth; configure() hands the first two (and the direct handler) to Helidon,
 * close() stops the deadline's sweeper after the web server stopped. Only this class and
 * ApiException, Utf8 and ReadDeadline.configured() are public in this package; the server's
 * endpoints (io.kvrouter.server.Api) are added through add(), an extension's read bodies through
 * the server's ServerHost, which calls body().
 *
 * Helidon runs every request's handler on its own virtual thread. Every route goes through
 * handler(), which checks the bearer token of mutating endpoints, runs the endpoint, turns an
 * ApiException into {"error": ...} with its status (and anything unexpected into a logged 500),
 * and records the request in the metrics under the endpoint's path pattern (never the raw path,
 * to bound label cardinality). Endpoints send their own success answer and return its status.
 * paths lists the added paths in order, for the message of the 404 of unknown paths; it is
 * written while the routing is built (one thread, before the server starts) and read after.
 *
 * Bodies are read whole by BodyReader (a buffer that grows with the bytes received, under the
 * server's BodyBudget; a body over the limit is a 413: declared lengths beyond the limit plus
 * SWALLOW_BYTES are refused by Helidon, which closes the connection; smaller ones, and chunked
 * bodies that grow past the limit, by body(), after which the rest is drained so the client reads
 * the 413 instead of a reset), checked to be strict UTF-8 (Utf8), then parsed by Requests or
 * RouterEventJson before anything changes, so a bad request changes nothing. body() refuses a
 * Content-Type that is not JSON (415), and a body read that fails because the client hung up
 * (400) or the ReadDeadline cut it off (408) becomes an ApiException marked connectionLost:
 * counted, never a 500, answered only if the socket still takes it.
 *
 * Connections: after the answer, handler() closes the connection (it throws Helidon's
 * CloseConnectionException, which Helidon lets through to the code that closes the socket) when
 * the request said "Connection: close" (any case, any position in the list), when the answer is
 * connectionLost or a framing error, or when the chunked decoder consumed a last chunk Helidon
 * would not recognize (HttpFraming.State.closeAfter). Helidon 4.3 itself writes "Connection:
 * close" on such answers but keeps reading the socket. Before closing on the client's request an
 * unread body is drained (bounded by the limit and the read deadline), so that the client reads
 * the answer rather than a reset. A streamed answer (an endpoint that wrote to res.outputStream(),
 * as /metrics and /dump) leaves res.isSent() false after its stream is closed (Helidon writes
 * its last bytes when it commits the response, after the handler), so an endpoint that returned
 * normally counts as answered too, and its answer is committed before the connection is closed.
 *
 * Client resets: an endpoint that fails because the client's connection broke while its answer
 * was written (clientGone: the server's socket writer failed, a SocketException, a broken pipe)
 * is counted by Metrics.clientReset, not as an answered request (never a 5xx), logged in one
 * line at most once per LOG_INTERVAL (a RateLimitedLog, no stack trace), and its connection
 * closed. A write the WriteDeadline cut off (the client did not read for the write timeout; it
 * fails as a reset would) is counted by Metrics.writeTimeout instead, logged by its own
 * RateLimitedLog, and its connection closed. handler() times the answer's writes (enter() before
 * the endpoint, exit() once the answer is committed: a stream is committed in handler(), not by
 * Helidon after it, so that its last write is timed too), and stops before a drain. Routes an
 * extension adds itself (the gateway's) get the same through timedWrites(): their answers are
 * timed, committed while timed, and counted and logged the same way; one that waits between its
 * writes (a relayed SSE stream) calls writesIdle() after each write, so only writes are timed.
 *
 * Requests Helidon refuses before routing come to directHandler(), which uses the per-thread
 * HttpFraming.State to tell them apart: a refusal HttpFraming made (its own message), a request
 * line Helidon could not parse (reported by Helidon as an internal error; lineSeen is false then:
 * a 400), a deadline that fired (408), HTTP/1.0 (505, except GET /health, answered 200 as the
 * endpoint would, for health checkers that still send HTTP/1.0). Each is counted under endpoint "unrouted"
 * and logged through a RateLimitedLog: one line per LOG_INTERVAL at most, no stack trace.
 * OutOfMemoryError in an endpoint goes to onOutOfMemory (the server passes OutOfMemoryExit, which
 * ends the process when installed), then is rethrown.
 * </pre>
 */
public final class HttpPlumbing {
  private static final Logger LOG = Logger.getLogger(HttpPlumbing.class.getName());
  private static final String JSON = "application/json";

  /** How a stopping server's reason starts (its Readiness): its 503s say it is stopping. */
  private static final String STOPPING = "shutting down";

  /**
   * How much of a body over the limit the server reads and drops before it answers 413, so that a
   * client still sending gets the answer rather than a reset connection (as Tomcat's
   * maxSwallowSize). Beyond the limit plus this, Helidon answers 413 at once and closes.
   */
  static final long SWALLOW_BYTES = 2L << 20;

  /** One endpoint's work; sends its own success answer and returns its status. */
  @FunctionalInterface
  public interface Endpoint {
    int handle(ServerRequest req, ServerResponse res) throws Exception;
  }

  /** Who may call an endpoint, and when. */
  public enum Access {
    /** Anyone, once the server serves. */
    READ,
    /** With the bearer token (when one is configured), once the server serves. */
    MUTATING,
    /** Anyone, also during a warm start (the operations endpoints). */
    ALWAYS
  }

  /** At most one log line about refused requests per this interval. */
  static final long LOG_INTERVAL_NANOS = 60_000_000_000L;

  /** Where answered requests are counted. */
  @FunctionalInterface
  public interface Metrics {
    /** Counts one answered request of {@code endpoint} (a path pattern, or "unrouted"). */
    void http(String endpoint, int status, long nanos);

    /** Counts one answer of {@code endpoint} that the client reset or closed while it was sent. */
    default void clientReset(String endpoint) {}

    /**
     * Counts one connection closed because its client did not read the answer of {@code endpoint}
     * within the write timeout.
     */
    default void writeTimeout(String endpoint) {}
  }

  private final Metrics metrics;
  private final BearerAuth auth;
  private final long maxBodyBytes;
  private final Duration readTimeout;
  private final Duration writeTimeout;
  private final ReadDeadline deadline;
  private final HttpFraming framing;
  private final BodyBudget budget;
  private final BodyReader bodies;
  private final RateLimitedLog refusals = new RateLimitedLog(LOG, LOG_INTERVAL_NANOS);
  private final RateLimitedLog resets = new RateLimitedLog(LOG, LOG_INTERVAL_NANOS);
  private final RateLimitedLog writeTimeouts = new RateLimitedLog(LOG, LOG_INTERVAL_NANOS);
  private final WriteDeadline writes;
  private final ThreadLocal<BodyBudget.Lease> lease = new ThreadLocal<>();
  private final Supplier<String> notServing;
  private final BooleanSupplier serving;
  private final Consumer<OutOfMemoryError> onOutOfMemory;
  private final List<String> paths = new ArrayList<>();

  /**
   * The edge of one server.
   *
   * @param metrics counts every answered request
   * @param authToken the bearer token of mutating endpoints; null or empty: none
   * @param maxBodyBytes request bodies over this get 413
   * @param readTimeout a request must arrive whole within this (ReadDeadline), and idle connections
   *     are closed after about as long
   * @param maxInflightBodyBytes the most bytes all bodies being received may hold at once
   * @param notServing why the server does not serve yet (in the 503 of endpoints not ALWAYS)
   * @param serving whether it serves
   * @param onOutOfMemory called with an OutOfMemoryError an endpoint threw, before it is rethrown
   * @param writeTimeout a connection whose answer's write makes no progress for this long (its
   *     client does not read) is closed (WriteDeadline)
   */
  public HttpPlumbing(
      Metrics metrics,
      String authToken,
      long maxBodyBytes,
      Duration readTimeout,
      long maxInflightBodyBytes,
      Supplier<String> notServing,
      BooleanSupplier serving,
      Consumer<OutOfMemoryError> onOutOfMemory,
      Duration writeTimeout) {
    this.metrics = metrics;
    this.writeTimeout = writeTimeout;
    this.writes = new WriteDeadline(writeTimeout);
    this.auth = new BearerAuth(authToken);
    this.maxBodyBytes = maxBodyBytes;
    this.readTimeout = readTimeout;
    this.deadline = new ReadDeadline(readTimeout);
    this.framing = new HttpFraming();
    this.budget = new BodyBudget(maxInflightBodyBytes);
    this.bodies = new BodyReader(maxBodyBytes, budget, framing);
    this.notServing = notServing;
    this.serving = serving;
    this.onOutOfMemory = onOutOfMemory;
  }

  /**
   * Gives the web server this edge's limits and listeners: the payload limit, the idle timeout (the
   * read timeout), one HTTP/1 configuration with the framing check and the read deadline as its
   * receive listener and the framing check's send side, and the direct handler of requests refused
   * before routing.
   */
  public void configure(WebServerConfig.Builder server) {
    DirectHandlers.Builder direct = DirectHandlers.builder();
    for (DirectHandler.EventType t : DirectHandler.EventType.values()) {
      direct.addHandler(t, directHandler());
    }
    server
        .maxPayloadSize(helidonPayloadLimit(maxBodyBytes))
        // slow clients: see ReadDeadline (docs/service.md, "Security and limits")
        .idleConnectionTimeout(readTimeout)
        .idleConnectionPeriod(ReadDeadline.idleCheckPeriod(readTimeout))
        // only this HTTP/1 configuration: with a discovered one next to it, Helidon would wait
        // for a new connection's first bytes to choose between the two, outside its idle timer
        .protocolsDiscoverServices(false)
        // framing checks first, then the read deadline (docs/service.md, "The HTTP edge")
        .addProtocol(
            Http1Config.builder()
                .addReceiveListener(framing.then(deadline))
                .addSendListener(writes.after(framing.sendSide()))
                .build())
        .directHandlers(direct.build());
  }

  /**
   * Stops the read and write deadlines' sweeper threads; call it last, after the server stopped.
   */
  public void close() {
    deadline.close();
    writes.close();
  }

  /**
   * Watches the connection of the request this thread is handling, whose body has been read, for
   * the client leaving: a virtual thread reads the connection, and {@code onGone} runs (on it) when
   * the read fails or meets the end of the stream. Data the client sends meanwhile (a pipelined
   * request) ends the watch quietly. The read goes on after the caller has answered, so the caller
   * must close the connection after its answer ({@code Connection: close}, then {@link
   * #closeAfterAnswer}, which commits the answer first: a streamed answer's last chunk is written
   * at its commit, which a bare CloseConnectionException skips); closing it ends the read, which
   * then runs {@code onGone} once more: the caller ignores calls that come late.
   *
   * @return false when the connection cannot be watched (no connection state on this thread)
   */
  public boolean watchClient(Runnable onGone) {
    HttpFraming.State st = framing.current();
    if (st == null || st.ctx == null) return false;
    DataReader reader = st.ctx.dataReader();
    Thread.ofVirtual()
        .name("kvrouter-client-watch")
        .start(
            () -> {
              try {
                reader.pullData();
              } catch (RuntimeException gone) {
                onGone.run();
              }
            });
    return true;
  }

  /**
   * {@code h}, the handler of a route added without {@link #add} (an extension's own, which answers
   * itself), with its answer's writes timed as add()'s are (WriteDeadline): a write that makes no
   * progress for the write timeout closes the connection, which is counted by {@link
   * Metrics#writeTimeout} under {@code endpoint} and logged rate-limited. A streamed answer is
   * committed here, while still timed; a commit that fails because the client left closes the
   * connection quietly. An answer that waits between its writes (a relayed stream) must call {@link
   * #writesIdle} after each write, before it waits.
   */
  public Handler timedWrites(String endpoint, Handler h) {
    return (req, res) -> {
      writes.enter();
      try {
        answerTimed(endpoint, h, req, res);
      } finally {
        writes.exit();
      }
    };
  }

  private void answerTimed(String endpoint, Handler h, ServerRequest req, ServerResponse res)
      throws Exception {
    try {
      h.handle(req, res);
    } catch (Exception x) {
      // a write the deadline cut off fails as a reset would, wherever the handler met it
      if (writes.timedOut()) throw writeTimedOut(endpoint);
      throw x;
    }
    if (!res.isSent() && res instanceof RoutingResponse routed) {
      try {
        // a stream's last bytes are written at its commit: here, while they are timed
        routed.commit();
      } catch (RuntimeException gone) {
        if (writes.timedOut()) throw writeTimedOut(endpoint);
        throw new CloseConnectionException("the client left during the answer", gone);
      }
    }
    if (writes.exit()) throw writeTimedOut(endpoint);
  }

  /**
   * The answer this thread writes (in a {@link #timedWrites} handler) has written what it had and
   * now waits for something other than its client (an engine's next bytes): its write deadline is
   * off until its next write.
   */
  public void writesIdle() {
    writes.idle();
  }

  /** Connections closed because their client did not read an answer (for tests). */
  public long writeDeadlineClosed() {
    return writes.closed();
  }

  /** Answers being written now whose writes are timed (for tests). */
  public int writesTimed() {
    return writes.armed();
  }

  /** Connections the read deadline cut off (for tests). */
  public long readDeadlineClosed() {
    return deadline.closed();
  }

  /** Request bodies being read now, also those still waiting for their first byte. */
  public int bodiesBeingRead() {
    return budget.reading();
  }

  /** Bytes the request bodies being received hold now. */
  public long bodyBytesHeld() {
    return budget.held();
  }

  /** The most bytes request bodies may hold at once. */
  public long bodyBytesBudget() {
    return budget.capacity();
  }

  /** {@code s} with control and non-ASCII characters as {@code \\uXXXX}, cut after {@code max}. */
  public static String printable(String s, int max) {
    return HttpFraming.printable(s, max);
  }

  /** The payload limit to give Helidon for a body limit of {@code maxBodyBytes}. */
  public static long helidonPayloadLimit(long maxBodyBytes) {
    return maxBodyBytes > Long.MAX_VALUE - SWALLOW_BYTES
        ? Long.MAX_VALUE
        : maxBodyBytes + SWALLOW_BYTES;
  }

  // ------------------------------------------------------------------ routing

  /** Adds {@code path} for {@code method}, and a 405 naming the method for every other one. */
  public void add(HttpRouting.Builder r, Method method, String path, Access access, Endpoint e) {
    paths.add(path);
    Endpoint gated =
        access == Access.ALWAYS
            ? e
            : (req, res) -> {
              if (!serving.getAsBoolean()) {
                String got = notServing.get();
                String why = got == null ? "starting" : got; // it started meanwhile
                throw new ApiException(
                    503,
                    why.startsWith(STOPPING)
                        ? "the server is " + why
                        : "the server is not serving yet: "
                            + why
                            + " (GET /ready turns 200 when it is)");
              }
              return e.handle(req, res);
            };
    r.route(method, path, handler(path, access == Access.MUTATING, gated));
    r.any(
        path,
        handler(
            path,
            false,
            (req, res) -> {
              res.header(HeaderNames.ALLOW, method.text());
              throw new ApiException(
                  405,
                  req.prologue().method().text()
                      + " is not allowed on "
                      + path
                      + "; use "
                      + method.text());
            }));
  }

  /** Adds the 404 of every path not added before, naming the known ones; add it last. */
  public void addUnmatched(HttpRouting.Builder r) {
    String known = String.join(", ", paths);
    r.any(
        handler(
            "unmatched",
            false,
            (req, res) -> {
              throw ApiException.notFound(
                  "no endpoint "
                      + req.prologue().method().text()
                      + " "
                      + req.path().path()
                      + " (endpoints: "
                      + known
                      + ")");
            }));
  }

  private Handler handler(String name, boolean mutating, Endpoint e) {
    return (req, res) -> {
      // the answer's writes are timed from here until it is committed (WriteDeadline)
      writes.enter();
      try {
        answer(name, mutating, e, req, res);
      } finally {
        writes.exit();
      }
    };
  }

  private void answer(
      String name, boolean mutating, Endpoint e, ServerRequest req, ServerResponse res)
      throws Exception {
    long t0 = System.nanoTime();
    int status;
    boolean asked = wantsClose(req);
    boolean close = asked;
    boolean streamed = false;
    if (asked) res.header(HeaderNames.CONNECTION, "close");
    BodyBudget.Lease held = budget.lease();
    lease.set(held);
    try {
      if (mutating && !auth.permits(req.headers().first(HeaderNames.AUTHORIZATION).orElse(null))) {
        res.header(HeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"kvrouter\"");
        throw new ApiException(
            401,
            "this endpoint needs the header 'Authorization: Bearer <token>' with the server's"
                + " token (--auth-token; on a gateway without one, its --api-key)");
      }
      status = e.handle(req, res);
      streamed = true; // the endpoint sent its answer (isSent() stays false for a stream)
    } catch (ApiException x) {
      status = x.status();
      if (!x.connectionLost()) {
        send(res, status, ErrorJson.error(x.getMessage()));
      } else {
        close = true;
        asked = false; // the body is broken or gone: nothing to drain
        answerClosing(res, status, x.getMessage());
      }
    } catch (RequestException x) {
      // Helidon's refusal of the entity (a chunked body past its payload limit): answered here,
      // and the connection closed, since the rest of the body cannot be read
      status = x.status().code();
      if (res.isSent()) throw new CloseConnectionException("request failed after its answer", x);
      close = true;
      asked = false;
      answerClosing(res, status, status == 413 ? bodies.tooLarge() : x.getMessage());
    } catch (OutOfMemoryError x) {
      onOutOfMemory.accept(x);
      throw x;
    } catch (RuntimeException | IOException x) {
      if (clientGone(x)) {
        // the client reset or closed while its answer was written: one counted, rate-limited
        // line, no stack trace, not a 5xx; the connection cannot be used any more
        deadline.received();
        if (writes.timedOut()) throw writeTimedOut(name);
        metrics.clientReset(name);
        resets.note(() -> resetLine(name, x));
        throw new CloseConnectionException("the client left during the answer");
      }
      if (x instanceof IOException io) throw io;
      if (res.isSent()) throw x;
      LOG.log(Level.WARNING, "internal error on " + name, x);
      status = 500;
      send(res, 500, ErrorJson.error("internal error: " + x));
    } finally {
      lease.remove();
      held.close();
    }
    metrics.http(name, status, System.nanoTime() - t0);
    HttpFraming.State st = framing.current();
    if (st != null && st.closeAfter) close = true;
    if (close && !res.isSent() && !streamed) return;
    if (streamed && !res.isSent() && res instanceof RoutingResponse routed) {
      try {
        // a stream's last bytes are written at its commit, not at its close(): committed here,
        // while its writes are timed, rather than by Helidon after the handler
        routed.commit();
      } catch (RuntimeException gone) {
        if (writes.timedOut()) throw writeTimedOut(name);
        // the client is gone: closing
        deadline.received();
        throw new CloseConnectionException("the client left during the answer", gone);
      }
    }
    boolean cut = writes.exit(); // the answer is out: a drain below is not a write
    if (cut) throw writeTimedOut(name);
    if (close) {
      if (asked) drainIfClean(req, st);
      deadline.received(); // the connection ends here
      throw new CloseConnectionException("the answer closes the connection");
    }
  }

  /** Counts and logs (rate-limited) a connection cut off by the write deadline; closes it. */
  private CloseConnectionException writeTimedOut(String name) {
    metrics.writeTimeout(name);
    writeTimeouts.note(
        () ->
            "closed a connection whose client did not read its answer of "
                + name
                + " within the write timeout ("
                + writeTimeout.toMillis()
                + " ms; counted in kvrouter_http_write_timeouts_total)");
    return new CloseConnectionException("the client did not read its answer");
  }

  private static void answerClosing(ServerResponse res, int status, String message) {
    res.header(HeaderNames.CONNECTION, "close");
    try {
      send(res, status, ErrorJson.error(message));
    } catch (RuntimeException gone) {
      // the client is gone: nothing to answer, nothing to log
    }
  }

  /**
   * Reads what is left of a Content-Length body before the connection is closed on the client's
   * request, so that the client is not reset before it reads the answer. Chunked bodies and bodies
   * cut off are not drained: their framing is broken or decoded by BodyReader.
   */
  private void drainIfClean(ServerRequest req, HttpFraming.State st) {
    if (st == null || st.chunked || st.closeAfter || deadline.timedOut()) return;
    try {
      if (req.content().hasEntity() && !req.content().consumed()) req.content().consume();
    } catch (RuntimeException e) {
      // closing anyway
    }
  }

  /**
   * Ends the connection after the answer of a route added without {@link #add} (an extension's own
   * guard): commits the answer (a streamed one's last bytes are written at its commit), reads what
   * is left of a Content-Length body so the client is not reset before it reads the answer, and
   * returns the exception to throw from the handler, which makes Helidon close the socket.
   */
  public static CloseConnectionException closeAfterAnswer(ServerRequest req, ServerResponse res) {
    if (!res.isSent() && res instanceof RoutingResponse routed) {
      try {
        routed.commit();
      } catch (RuntimeException gone) {
        // the client is gone: closing anyway
      }
    }
    try {
      if (!req.headers().contains(HeaderNames.TRANSFER_ENCODING)
          && req.content().hasEntity()
          && !req.content().consumed()) {
        req.content().consume();
      }
    } catch (RuntimeException e) {
      // closing anyway
    }
    return new CloseConnectionException("the answer closes the connection");
  }

  /** Whether the request's Connection header lists "close" (RFC 9110 7.6.1, any case). */
  public static boolean wantsClose(ServerRequest req) {
    for (String v : req.headers().all(HeaderNames.CONNECTION, List::of)) {
      for (String t : v.split(",", -1)) {
        if (t.trim().equalsIgnoreCase("close")) return true;
      }
    }
    return false;
  }

  /**
   * A query parameter, or null; a 400 naming it when it is given more than once (which one the
   * client meant cannot be told).
   */
  public static String param(ServerRequest req, String name) {
    List<String> all = req.query().all(name, List::of);
    if (all.size() > 1) {
      throw ApiException.badRequest(
          "query parameter '" + name + "' is given " + all.size() + " times; give it once");
    }
    return all.isEmpty() ? null : all.getFirst();
  }

  // ------------------------------------------------------------------ bodies

  /**
   * The whole body, strict UTF-8. A Content-Type other than JSON is a 415 (none at all is taken as
   * JSON); a body over the limit a 413, one past the in-flight budget a 503, malformed chunks or
   * UTF-8 a 400; a body that does not arrive within the read timeout is a 408, one cut short by the
   * client a 400, both on a connection that is already closed.
   */
  public byte[] body(ServerRequest req) throws IOException {
    byte[] b = bytes(req);
    String bad = Utf8.check(b, b.length);
    if (bad != null) throw ApiException.badRequest(bad);
    return b;
  }

  /**
   * As {@link #body}, without the UTF-8 check: for {@code /events}, which reports malformed UTF-8
   * as a decode error of its batch ({@link Utf8#check} is the caller's).
   */
  public byte[] bytes(ServerRequest req) throws IOException {
    if (!req.content().hasEntity()) return new byte[0];
    if (req.headers().contentLength().orElse(-1) > maxBodyBytes) {
      // unread: Helidon drains it (at most SWALLOW_BYTES over the limit, see helidonPayloadLimit)
      // so that the client, still sending, gets this answer instead of a reset connection
      throw new ApiException(413, bodies.tooLarge());
    }
    String type = req.headers().first(HeaderNames.CONTENT_TYPE).orElse(null);
    if (type != null && !isJson(type)) {
      // refused unread: Helidon drains the body after the answer, still under the read deadline
      throw new ApiException(
          415,
          "the request body must be JSON (Content-Type: application/json), got Content-Type: "
              + (type.length() <= 60 ? type : type.substring(0, 57) + "..."));
    }
    BodyBudget.Lease held = lease.get();
    if (held == null) held = budget.lease(); // not inside handler(): nothing to give back to
    byte[] b;
    try {
      b = bodies.read(req, held);
      deadline.received();
    } catch (ApiException e) {
      if (deadline.timedOut()) {
        deadline.received();
        throw ApiException.connectionLost(
            408, "the request body did not arrive within the read timeout");
      }
      // a refusal that leaves the body to Helidon's drain (503 past the budget) keeps the
      // deadline armed, so a client that stalls there is still cut off; others read it all, or
      // close the connection
      if (e.connectionLost() || e.status() != 503) deadline.received();
      throw e;
    } catch (RequestException e) {
      if (deadline.received()) {
        throw ApiException.connectionLost(
            408, "the request body did not arrive within the read timeout");
      }
      throw e; // Helidon refused the entity (handler() answers and closes)
    } catch (RuntimeException | IOException e) {
      if (deadline.received()) {
        throw ApiException.connectionLost(
            408, "the request body did not arrive within the read timeout");
      }
      // the client closed the connection (or it broke) before sending the declared body
      throw ApiException.connectionLost(
          400, "the connection closed before the whole request body arrived: " + e);
    }
    return b;
  }

  /** {@code application/json} or {@code application/*+json}, with any parameters. */
  static boolean isJson(String contentType) {
    int semi = contentType.indexOf(';');
    String t = (semi < 0 ? contentType : contentType.substring(0, semi)).trim();
    return t.equalsIgnoreCase(JSON)
        || (t.regionMatches(true, 0, "application/", 0, 12)
            && t.regionMatches(true, t.length() - 5, "+json", 0, 5));
  }

  // ------------------------------------------------------------------ answers

  /** Sends a JSON answer and returns its status. */
  public static int send(ServerResponse res, int status, byte[] json) {
    res.status(Status.create(status));
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(json);
    return status;
  }

  /** Sets the status and JSON content type of an answer the endpoint streams itself. */
  public static void startJson(ServerResponse res) {
    res.status(Status.OK_200);
    res.header(HeaderNames.CONTENT_TYPE, JSON);
  }

  /**
   * Answers requests refused before routing with the same {@code {"error": ...}} as the endpoints
   * (on {@code /v1/*} paths, the gateway's, in OpenAI's shape {@code {"error": {"message", "type",
   * "param", "code"}}}), counted under endpoint {@code "unrouted"}: bad framing (HttpFraming: 400,
   * or 501), a request line or header Helidon cannot parse (400), a declared body over the limit
   * (413), HTTP/1.0 (505), a request cut off by its read deadline (408). Helidon closes the
   * connection after it.
   */
  private DirectHandler directHandler() {
    return (request, eventType, defaultStatus, responseHeaders, message) -> {
      HttpFraming.State st = framing.current();
      // the connection ends with this answer: its deadline no longer matters
      boolean timedOut = deadline.timedOut();
      deadline.received();
      if (st != null && st.answered && !st.lineSeen && timedOut) {
        // cut off after its answer (while Helidon drained the body): never a second answer
        throw new CloseConnectionException("read deadline after the answer");
      }
      Status status = defaultStatus;
      String text;
      if (timedOut) {
        status = Status.REQUEST_TIMEOUT_408;
        text = "the request did not arrive within the read timeout";
      } else if (st != null && st.refusal != null && st.lineSeen) {
        status = Status.create(st.refusalStatus);
        text = st.refusal;
      } else if (eventType == DirectHandler.EventType.HTTP_VERSION_NOT_SUPPORTED
          && isHealth(request)) {
        // health checkers and load balancers that still speak HTTP/1.0 get /health (RFC 9112
        // 2.5: an HTTP/1.1 answer to a 1.0 request); the connection is closed after it
        metrics.http("/health", 200, 0);
        return DirectHandler.TransportResponse.builder()
            .status(Status.OK_200)
            .headers(responseHeaders)
            .header(HeaderNames.CONTENT_TYPE, JSON)
            .header(HeaderNames.CONNECTION, "close")
            .entity(HEALTH)
            .build();
      } else if (eventType == DirectHandler.EventType.HTTP_VERSION_NOT_SUPPORTED) {
        status = Status.HTTP_VERSION_NOT_SUPPORTED_505;
        text =
            "HTTP/1.0 is not supported: send HTTP/1.1 (behind nginx: proxy_http_version 1.1;"
                + " with ab: use another load generator)";
      } else if (eventType == DirectHandler.EventType.INTERNAL_ERROR
          && (st == null || !st.lineSeen)) {
        // Helidon fails inside its request-line parser on a method with a control character
        status = Status.BAD_REQUEST_400;
        text = "malformed request line (RFC 9112 3): the method must be a token";
      } else if (status.code() == 413) {
        text = bodies.tooLarge();
      } else if (eventType == DirectHandler.EventType.BAD_REQUEST) {
        text =
            "malformed request"
                + (message == null || message.isEmpty() ? "" : ": " + firstLine(message));
      } else {
        text = message == null || message.isEmpty() ? status.reasonPhrase() : message;
      }
      metrics.http("unrouted", status.code(), 0);
      if (status.code() != 500) {
        int code = status.code();
        refusals.note(() -> "refused a malformed request: " + code + " " + text);
      }
      return DirectHandler.TransportResponse.builder()
          .status(status)
          .headers(responseHeaders)
          .header(HeaderNames.CONTENT_TYPE, JSON)
          .entity(
              openAiPath(request) || (st != null && st.lineSeen && st.openAi)
                  ? ErrorJson.openAi(status.code(), text)
                  : ErrorJson.error(text))
          .build();
    };
  }

  /** The log line of a client reset during the answer of {@code endpoint}. */
  private static String resetLine(String endpoint, Throwable x) {
    Throwable root = x;
    while (root.getCause() != null && root.getCause() != root) root = root.getCause();
    return "a client left while its answer of "
        + endpoint
        + " was written: "
        + root.getClass().getSimpleName()
        + ": "
        + firstLine(String.valueOf(root.getMessage()))
        + " (counted in kvrouter_http_client_resets_total)";
  }

  /** The answer of {@code GET /health} (the server's Api writes the same). */
  private static final byte[] HEALTH = "{\"status\":\"ok\"}\n".getBytes(StandardCharsets.US_ASCII);

  /** Whether a request refused before routing is {@code GET /health}, with any query. */
  private static boolean isHealth(DirectHandler.TransportRequest request) {
    if (request == null || request.path() == null) return false;
    String path = request.path();
    int q = path.indexOf('?');
    if (q >= 0) path = path.substring(0, q);
    return path.equals("/health") && "GET".equals(request.method());
  }

  /** Whether a request refused before routing was for the OpenAI API (the gateway's /v1/*). */
  private static boolean openAiPath(DirectHandler.TransportRequest request) {
    String path = request == null ? null : request.path();
    return path != null && path.startsWith("/v1/");
  }

  private static String firstLine(String s) {
    int nl = s.indexOf('\n');
    return HttpFraming.printable(nl < 0 ? s : s.substring(0, nl), 200);
  }

  /**
   * Whether {@code x} says the client's connection broke (reset, or closed) while the server wrote
   * to it: the server's socket writer failed, or a socket error a write meets.
   */
  static boolean clientGone(Throwable x) {
    for (Throwable t = x; t != null; t = t.getCause()) {
      if (t instanceof SocketWriterException || t instanceof ServerConnectionException) return true;
      if (t instanceof SocketException) return true;
      if (t instanceof IOException) {
        String m = String.valueOf(t.getMessage());
        if (m.contains("Broken pipe") || m.contains("Connection reset")) return true;
      }
      if (t.getCause() == t) break;
    }
    return false;
  }
}
