package io.kvrouter.server;

import io.helidon.http.DirectHandler;
import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.http.RequestException;
import io.helidon.http.Status;
import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The HTTP side of every endpoint: routing with 404 and 405, the bearer token of mutating
 * endpoints, the 503 of a server that is not serving yet, request bodies (limit, Content-Type, slow
 * and vanishing clients), the mapping of failures to {@code {"error": ...}} answers, and the
 * request metrics. The endpoints themselves ({@link Api}) only parse, act and write.
 *
 * <pre>
 * Implementation notes
 *
 * Helidon runs every request's handler on its own virtual thread. Every route goes through
 * handler(), which checks the bearer token of mutating endpoints, runs the endpoint, turns an
 * ApiException into {"error": ...} with its status (and anything unexpected into a logged 500),
 * and records the request in the metrics under the endpoint's path pattern (never the raw path,
 * to bound label cardinality). Endpoints send their own success answer and return its status.
 * paths lists the added paths in order, for the message of the 404 of unknown paths; it is
 * written while the routing is built (one thread, before the server starts) and read after.
 *
 * Bodies are read whole (a body over the limit is a 413: declared lengths beyond the limit plus
 * SWALLOW_BYTES are refused by Helidon, which closes the connection; smaller ones, and chunked
 * bodies that grow past the limit, by body(), after which Helidon drains what is left so the
 * client reads the 413 instead of a reset), then parsed by Requests or RouterEventJson before
 * anything changes, so a bad request changes nothing. body() refuses a Content-Type that is not
 * JSON (415), and a body read that fails because the client hung up (400) or the ReadDeadline cut
 * it off (408) becomes an ApiException marked connectionLost: counted, never a 500, answered only
 * if the socket still takes it. Holds no request state: thread-safe.
 * </pre>
 */
final class HttpPlumbing {
  private static final Logger LOG = Logger.getLogger(HttpPlumbing.class.getName());
  private static final String JSON = "application/json";

  /**
   * How much of a body over the limit the server reads and drops before it answers 413, so that a
   * client still sending gets the answer rather than a reset connection (as Tomcat's
   * maxSwallowSize). Beyond the limit plus this, Helidon answers 413 at once and closes.
   */
  static final long SWALLOW_BYTES = 2L << 20;

  /** One endpoint's work; sends its own success answer and returns its status. */
  @FunctionalInterface
  interface Endpoint {
    int handle(ServerRequest req, ServerResponse res) throws Exception;
  }

  /** Who may call an endpoint, and when. */
  enum Access {
    /** Anyone, once the server serves. */
    READ,
    /** With the bearer token (when one is configured), once the server serves. */
    MUTATING,
    /** Anyone, also during a warm start (the operations endpoints). */
    ALWAYS
  }

  private final ServerMetrics metrics;
  private final BearerAuth auth;
  private final long maxBodyBytes;
  private final ReadDeadline deadline;
  private final Supplier<KvRouterServer.Readiness> ready;
  private final BooleanSupplier serving;
  private final List<String> paths = new ArrayList<>();

  HttpPlumbing(
      ServerMetrics metrics,
      BearerAuth auth,
      long maxBodyBytes,
      ReadDeadline deadline,
      Supplier<KvRouterServer.Readiness> ready,
      BooleanSupplier serving) {
    this.metrics = metrics;
    this.auth = auth;
    this.maxBodyBytes = maxBodyBytes;
    this.deadline = deadline;
    this.ready = ready;
    this.serving = serving;
  }

  /** The payload limit to give Helidon for a body limit of {@code maxBodyBytes}. */
  static long helidonPayloadLimit(long maxBodyBytes) {
    return maxBodyBytes > Long.MAX_VALUE - SWALLOW_BYTES
        ? Long.MAX_VALUE
        : maxBodyBytes + SWALLOW_BYTES;
  }

  // ------------------------------------------------------------------ routing

  /** Adds {@code path} for {@code method}, and a 405 naming the method for every other one. */
  void add(HttpRouting.Builder r, Method method, String path, Access access, Endpoint e) {
    paths.add(path);
    Endpoint gated =
        access == Access.ALWAYS
            ? e
            : (req, res) -> {
              if (!serving.getAsBoolean()) {
                throw new ApiException(
                    503,
                    "the server is not serving yet: "
                        + ready.get().reason()
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
  void addUnmatched(HttpRouting.Builder r) {
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
      long t0 = System.nanoTime();
      int status;
      try {
        if (mutating
            && !auth.permits(req.headers().first(HeaderNames.AUTHORIZATION).orElse(null))) {
          res.header(HeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"kvrouter\"");
          throw new ApiException(
              401,
              "this endpoint needs the header 'Authorization: Bearer <token>' with the server's"
                  + " token (--auth-token)");
        }
        status = e.handle(req, res);
      } catch (ApiException x) {
        status = x.status();
        if (!x.connectionLost()) {
          send(res, status, JsonOut.error(x.getMessage()));
        } else {
          res.header(HeaderNames.CONNECTION, "close");
          try {
            send(res, status, JsonOut.error(x.getMessage()));
          } catch (RuntimeException gone) {
            // the client is gone: nothing to answer, nothing to log
          }
        }
      } catch (RequestException x) {
        status = x.status().code();
        if (status != 413 || res.isSent()) throw x;
        res.header(HeaderNames.CONNECTION, "close");
        send(res, 413, JsonOut.error(tooLarge()));
      } catch (RuntimeException x) {
        if (res.isSent()) throw x;
        LOG.log(Level.WARNING, "internal error on " + name, x);
        status = 500;
        send(res, 500, JsonOut.error("internal error: " + x));
      }
      metrics.http(name, status, System.nanoTime() - t0);
    };
  }

  /** A query parameter, or null. */
  static String param(ServerRequest req, String name) {
    return req.query().first(name).orElse(null);
  }

  // ------------------------------------------------------------------ bodies

  private String tooLarge() {
    return "the request body is larger than the limit of "
        + maxBodyBytes
        + " bytes (--max-body-size)";
  }

  /**
   * The whole body. A Content-Type other than JSON is a 415 (none at all is taken as JSON); a body
   * that does not arrive within the read timeout is a 408, one cut short by the client a 400, both
   * on a connection that is already closed.
   */
  byte[] body(ServerRequest req) throws IOException {
    if (!req.content().hasEntity()) return new byte[0];
    if (req.headers().contentLength().orElse(-1) > maxBodyBytes) {
      // unread: Helidon drains it (at most SWALLOW_BYTES over the limit, see helidonPayloadLimit)
      // so that the client, still sending, gets this answer instead of a reset connection
      throw new ApiException(413, tooLarge());
    }
    String type = req.headers().first(HeaderNames.CONTENT_TYPE).orElse(null);
    if (type != null && !isJson(type)) {
      // refused unread: Helidon drains the body after the answer, still under the read deadline
      throw new ApiException(
          415,
          "the request body must be JSON (Content-Type: application/json), got Content-Type: "
              + (type.length() <= 60 ? type : type.substring(0, 57) + "..."));
    }
    try {
      byte[] b = readBody(req, maxBodyBytes);
      deadline.received();
      if (b == null) throw new ApiException(413, tooLarge()); // chunked, over the limit
      return b;
    } catch (ApiException e) {
      throw e;
    } catch (RequestException e) {
      if (deadline.received()) {
        throw ApiException.connectionLost(
            408, "the request body did not arrive within the read timeout");
      }
      throw e; // a chunked body over the limit (413 in handler()), a malformed chunk
    } catch (RuntimeException | IOException e) {
      if (deadline.received()) {
        throw ApiException.connectionLost(
            408, "the request body did not arrive within the read timeout");
      }
      // the client closed the connection (or it broke) before sending the declared body
      throw ApiException.connectionLost(
          400, "the connection closed before the whole request body arrived: " + e);
    }
  }

  /** {@code application/json} or {@code application/*+json}, with any parameters. */
  static boolean isJson(String contentType) {
    int semi = contentType.indexOf(';');
    String t = (semi < 0 ? contentType : contentType.substring(0, semi)).trim();
    return t.equalsIgnoreCase(JSON)
        || (t.regionMatches(true, 0, "application/", 0, 12)
            && t.regionMatches(true, t.length() - 5, "+json", 0, 5));
  }

  /** The body, or null when it has no declared length and turns out longer than {@code limit}. */
  private static byte[] readBody(ServerRequest req, long limit) throws IOException {
    try (InputStream in = req.content().inputStream()) {
      long declared = req.headers().contentLength().orElse(-1);
      if (declared < 0 || declared > Integer.MAX_VALUE - 16) {
        byte[] b = in.readNBytes((int) Math.min(limit + 1, Integer.MAX_VALUE - 16));
        return b.length > limit ? null : b;
      }
      // one array of the declared size (Helidon has checked it against the limit), not chunks
      byte[] b = new byte[(int) declared];
      int n = in.readNBytes(b, 0, b.length);
      return n == b.length ? b : Arrays.copyOf(b, n);
    }
  }

  // ------------------------------------------------------------------ answers

  /** Sends a JSON answer (a document of {@link JsonOut}) and returns its status. */
  static int send(ServerResponse res, int status, byte[] json) {
    res.status(Status.create(status));
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(json);
    return status;
  }

  /** Sets the status and JSON content type of an answer the endpoint streams itself. */
  static void startJson(ServerResponse res) {
    res.status(Status.OK_200);
    res.header(HeaderNames.CONTENT_TYPE, JSON);
  }

  /**
   * Answers requests Helidon refuses before routing (a declared body over the limit: 413; an
   * unparsable request line: 400) with the same {@code {"error": ...}} as the endpoints, counted
   * under endpoint {@code "unrouted"}.
   */
  DirectHandler directHandler() {
    return (request, eventType, defaultStatus, responseHeaders, message) -> {
      // a connection cut off by its read deadline fails inside Helidon (an "internal error"):
      // it is the client's fault, and the answer cannot reach it anyway
      Status status = deadline.timedOut() ? Status.REQUEST_TIMEOUT_408 : defaultStatus;
      metrics.http("unrouted", status.code(), 0);
      String text =
          status.code() == 413
              ? tooLarge()
              : status.code() == 408
                  ? "the request did not arrive within the read timeout"
                  : (message == null || message.isEmpty() ? status.reasonPhrase() : message);
      return DirectHandler.TransportResponse.builder()
          .status(status)
          .headers(responseHeaders)
          .header(HeaderNames.CONTENT_TYPE, JSON)
          .entity(JsonOut.error(text))
          .build();
    };
  }
}
