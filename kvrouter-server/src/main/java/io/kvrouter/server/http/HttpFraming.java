package io.kvrouter.server.http;

import io.helidon.http.DirectHandler;
import io.helidon.http.HeaderNames;
import io.helidon.http.HeaderValues;
import io.helidon.http.Headers;
import io.helidon.http.HttpPrologue;
import io.helidon.http.RequestException;
import io.helidon.http.Status;
import io.helidon.http.WritableHeaders;
import io.helidon.webserver.ConnectionContext;
import io.helidon.webserver.http1.Http1ConnectionListener;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Checks the message framing of every request before Helidon routes it (RFC 9112 §6.3): a {@code
 * Content-Length} that is not exactly one decimal number, two of them, one next to {@code
 * Transfer-Encoding}, or a {@code Transfer-Encoding} whose final coding is not {@code chunked} is a
 * 400 and the connection is closed (a coding other than chunked before it: 501). It also keeps, per
 * connection thread, what the direct handler and the body reader need to know about the request in
 * progress: its connection (whose reader the chunked decoder reads), whether its request line was
 * parsed, whether it was answered, and the refusal this class made.
 *
 * <pre>
 * Implementation notes
 *
 * Registered with Helidon's HTTP/1 configuration as its receive listener, chained before
 * ReadDeadline by then() (so a refused request never reaches the deadline's header check; Helidon
 * 4.3 calls no listener at all when given several), and (sendSide()) as its send listener. Helidon runs
 * each HTTP/1 connection on one virtual thread that also runs the handlers and the direct
 * handler, so the State lives in a ThreadLocal of this object and is only touched by its thread:
 * prologue() starts a request (lineSeen, no refusal, not answered), headers() checks framing and
 * throws a RequestException (Helidon answers it through the direct handler and closes), status()
 * of sendSide() marks the request answered. A failure while Helidon parses a request line
 * (a method with a control byte makes Helidon's Method.create throw, which it reports as an
 * internal error) therefore finds lineSeen false: the direct handler answers it 400, not 500.
 *
 * Helidon 4.3 compares Transfer-Encoding to "chunked" case-sensitively; a request saying
 * "Chunked" (legal: coding names are case-insensitive) has its header rewritten to "chunked" here,
 * since Helidon would otherwise treat the body as absent and parse it as the next request.
 * Holds no shared mutable state: thread-safe.
 * </pre>
 */
final class HttpFraming implements Http1ConnectionListener {
  /** What is known about the request in progress on one connection thread. */
  static final class State {
    ConnectionContext ctx;
    boolean lineSeen;
    boolean answered;
    boolean chunked;
    boolean closeAfter;

    /** The request's path is under /v1/ (the gateway's OpenAI API): refusals in OpenAI's shape. */
    boolean openAi;

    String refusal;
    int refusalStatus;
  }

  private final ThreadLocal<State> current = new ThreadLocal<>();

  /** The current thread's state, or null when it has not started a request. */
  State current() {
    return current.get();
  }

  @Override
  public void prologue(ConnectionContext ctx, HttpPrologue prologue) {
    State s = current.get();
    if (s == null) {
      s = new State();
      current.set(s);
    }
    s.ctx = ctx;
    s.lineSeen = true;
    s.answered = false;
    s.chunked = false;
    s.closeAfter = false;
    s.openAi = prologue.uriPath().rawPath().startsWith("/v1/");
    s.refusal = null;
    s.refusalStatus = 0;
  }

  @Override
  public void headers(ConnectionContext ctx, Headers headers) {
    State s = current.get();
    String problem = problem(headers);
    if (problem == null) {
      if (s != null) s.chunked = headers.contains(HeaderNames.TRANSFER_ENCODING);
      return;
    }
    int status = problem.startsWith(NOT_IMPLEMENTED) ? 501 : 400;
    if (s != null) {
      s.refusal = status == 501 ? problem.substring(NOT_IMPLEMENTED.length()) : problem;
      s.refusalStatus = status;
    }
    throw RequestException.builder()
        .type(DirectHandler.EventType.BAD_REQUEST)
        .status(Status.create(status))
        .setKeepAlive(false)
        .message(problem)
        .safeMessage(true)
        .build();
  }

  /**
   * The send listener: marks the request answered when its status goes out. (A listener of its own,
   * since a send listener's headers() sees the response headers, which this class's headers() must
   * not check.)
   */
  Http1ConnectionListener sendSide() {
    return new Http1ConnectionListener() {
      @Override
      public void status(ConnectionContext ctx, Status status) {
        State s = current.get();
        if (s != null && status.code() >= 200) {
          s.answered = true;
          s.lineSeen = false;
        }
      }
    };
  }

  private static final String NOT_IMPLEMENTED = "501:";

  /**
   * One receive listener that runs this one's checks, then {@code next}'s. Helidon must be given a
   * single receive listener: 4.3's composite of several (Http1ConnectionListenerUtil's
   * ListFrameListener) forwards no call to any of them.
   */
  Http1ConnectionListener then(Http1ConnectionListener next) {
    HttpFraming first = this;
    return new Http1ConnectionListener() {
      @Override
      public void prologue(ConnectionContext ctx, HttpPrologue prologue) {
        first.prologue(ctx, prologue);
        next.prologue(ctx, prologue);
      }

      @Override
      public void headers(ConnectionContext ctx, Headers headers) {
        first.headers(ctx, headers);
        next.headers(ctx, headers);
      }
    };
  }

  /**
   * Why the framing of a request with these headers is refused (a 400; prefixed {@code "501:"} for
   * a 501), or null when it is sound. May rewrite {@code Transfer-Encoding: Chunked} to lower case.
   */
  static String problem(Headers headers) {
    List<String> lengths = headers.all(HeaderNames.CONTENT_LENGTH, List::of);
    boolean te = headers.contains(HeaderNames.TRANSFER_ENCODING);
    if (!lengths.isEmpty()) {
      if (te) {
        return "the request has both Content-Length and Transfer-Encoding, which RFC 9112 (6.3)"
            + " forbids: send one of them";
      }
      if (lengths.size() > 1) {
        return "the request has "
            + lengths.size()
            + " Content-Length fields ("
            + quoted(lengths)
            + "); send exactly one (RFC 9112 6.3)";
      }
      String v = lengths.getFirst().trim();
      if (!isLength(v)) {
        return "Content-Length must be one decimal number of bytes below 2^63 (RFC 9112 6.3),"
            + " got "
            + quoted(List.of(v));
      }
    }
    if (te) {
      List<String> codings = new ArrayList<>();
      for (String v : headers.all(HeaderNames.TRANSFER_ENCODING, List::of)) {
        for (String c : v.split(",", -1)) codings.add(c.trim().toLowerCase(Locale.ROOT));
      }
      if (codings.isEmpty() || !codings.getLast().equals("chunked")) {
        return "Transfer-Encoding "
            + quoted(codings)
            + " does not end with chunked, so the body's length cannot be known (RFC 9112 6.3)";
      }
      if (codings.size() > 1) {
        return NOT_IMPLEMENTED
            + "Transfer-Encoding "
            + quoted(codings)
            + ": only chunked is implemented (RFC 9112 6.1)";
      }
      if (!headers.contains(HeaderValues.TRANSFER_ENCODING_CHUNKED)) {
        if (!(headers instanceof WritableHeaders<?> w)) {
          return "Transfer-Encoding must be 'chunked'";
        }
        w.set(HeaderValues.TRANSFER_ENCODING_CHUNKED);
      }
    }
    return null;
  }

  /** 1 to 18 decimal digits after leading zeros: a value below 2^63 that Helidon parses alike. */
  private static boolean isLength(String v) {
    if (v.isEmpty()) return false;
    int start = 0;
    while (start < v.length() - 1 && v.charAt(start) == '0') start++;
    if (v.length() - start > 18) return false;
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      if (c < '0' || c > '9') return false;
    }
    return true;
  }

  private static String quoted(List<String> values) {
    StringBuilder sb = new StringBuilder();
    for (String v : values) {
      if (!sb.isEmpty()) sb.append(", ");
      sb.append('\'').append(printable(v, 40)).append('\'');
    }
    return sb.toString();
  }

  /** {@code s} with control and non-ASCII characters as {@code \\uXXXX}, cut after {@code max}. */
  static String printable(String s, int max) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      if (sb.length() >= max) return sb.append("...").toString();
      char c = s.charAt(i);
      if (c >= 0x20 && c < 0x7f) sb.append(c);
      else sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
    }
    return sb.toString();
  }
}
