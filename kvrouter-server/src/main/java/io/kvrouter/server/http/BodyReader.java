package io.kvrouter.server.http;

import io.helidon.common.buffers.BufferData;
import io.helidon.common.buffers.DataReader;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerRequest;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Reads a request body into one array that grows as bytes arrive, never sized by what the request
 * announces: a client that declares 8 MiB and sends nothing costs no buffer. Every growth takes its
 * bytes from the server's {@link BodyBudget}; past it the request is refused (503). Chunked bodies
 * are decoded here, per RFC 9112 §7.1 (chunk extensions and trailer fields are read and ignored),
 * because Helidon 4.3's own decoder refuses chunk extensions.
 *
 * <pre>
 * Implementation notes
 *
 * Runs on the request's connection thread, inside the endpoint (HttpPlumbing.body()).
 *
 * Content-Length bodies are read through Helidon's entity stream, which hands out what the socket
 * delivered, so the first array is allocated only once the first byte is in (FIRST bytes, or the
 * declared length if smaller), and doubles up to the declared length (which Helidon and body()
 * have checked against the limit). The final array is exactly the declared length.
 *
 * Chunked bodies are read from the connection's DataReader directly (HttpFraming.State.ctx),
 * bypassing Helidon's chunk parser. Helidon still owns the request entity, and after the handler
 * it drains whatever entity it thinks is left, so the decoder leaves the common last chunk,
 * exactly "0\r\n\r\n", in the reader and lets Helidon's stream read it: Helidon then sees its
 * entity end normally and the connection stays usable. A last chunk with an extension or trailer
 * fields is read here, and State.closeAfter makes HttpPlumbing close the connection after the
 * answer (Helidon's entity would otherwise read the next request as chunks). Helidon's stream is
 * opened before decoding so that a client waiting on "Expect: 100-continue" gets its 100.
 * A chunk size line is at most MAX_LINE bytes, the trailer section at most MAX_TRAILERS. A
 * framing error is an ApiException that closes the connection (the rest of the stream cannot be
 * trusted): 400, or 413 for a chunk beyond the limit. A chunked body over the limit by at most
 * HttpPlumbing.SWALLOW_BYTES is read to its end and dropped, so its 413 keeps the connection, as
 * for a Content-Length body.
 * </pre>
 */
final class BodyReader {
  /** The first buffer of a body, once its first byte arrived. */
  static final int FIRST = 16 << 10;

  /** The longest chunk size line (size and extensions), in bytes. */
  static final int MAX_LINE = 4096;

  /** The largest trailer section of a chunked body, in bytes. */
  static final int MAX_TRAILERS = 16 << 10;

  private static final byte[] LAST_CHUNK = "0\r\n\r\n".getBytes(StandardCharsets.US_ASCII);

  private final long maxBodyBytes;
  private final BodyBudget budget;
  private final HttpFraming framing;

  BodyReader(long maxBodyBytes, BodyBudget budget, HttpFraming framing) {
    this.maxBodyBytes = maxBodyBytes;
    this.budget = budget;
    this.framing = framing;
  }

  /** The message of a body over the limit. */
  String tooLarge() {
    return "the request body is larger than the limit of "
        + maxBodyBytes
        + " bytes (--max-body-size)";
  }

  /**
   * The whole body (its entity is known to be present), held under {@code lease}.
   *
   * @throws ApiException 413 over the limit, 503 past the budget, 400 (closing) for bad chunks
   * @throws IOException or a RuntimeException when the connection fails (the caller maps them)
   */
  byte[] read(ServerRequest req, BodyBudget.Lease lease) throws IOException {
    budget.startReading();
    try {
      // not closed: closing Helidon's stream early reads on (it waits for the next bytes), and
      // Helidon drains whatever is left of the entity after the handler anyway
      InputStream in = req.content().inputStream();
      HttpFraming.State st = framing.current();
      if (req.headers().contains(HeaderNames.TRANSFER_ENCODING) && st != null && st.ctx != null) {
        return chunked(st, in, lease);
      }
      long declared = req.headers().contentLength().orElse(-1);
      return sized(in, declared < 0 ? maxBodyBytes : declared, lease);
    } finally {
      budget.stopReading();
    }
  }

  private byte[] sized(InputStream in, long declared, BodyBudget.Lease lease) throws IOException {
    int first = in.read(); // waits for the first byte with nothing allocated
    if (first < 0) return new byte[0];
    Buffer b = new Buffer(declared, lease, false);
    b.ensure(1);
    b.a[b.n++] = (byte) first;
    while (b.n < declared) {
      b.ensure(1);
      int r = in.read(b.a, b.n, b.a.length - b.n);
      if (r < 0) break;
      b.n += r;
    }
    return b.bytes();
  }

  private byte[] chunked(HttpFraming.State st, InputStream in, BodyBudget.Lease lease)
      throws IOException {
    DataReader r = st.ctx.dataReader();
    Buffer b = new Buffer(maxBodyBytes, lease, true);
    long total = 0;
    try {
      while (true) {
        if (r.startsWith(LAST_CHUNK)) {
          // Helidon's stream reads the last chunk, so that it knows its entity ended
          if (in.read() != -1) throw new IllegalStateException("chunked body read twice");
          break;
        }
        long size = chunkSize(r);
        if (size == 0) {
          trailers(r);
          st.closeAfter = true;
          break;
        }
        if (total + size > maxBodyBytes + HttpPlumbing.SWALLOW_BYTES) {
          throw ApiException.connectionLost(413, tooLarge());
        }
        boolean keep = total + size <= maxBodyBytes;
        for (long left = size; left > 0; ) {
          r.ensureAvailable();
          int k = (int) Math.min(left, r.available());
          if (keep) {
            b.ensure(k);
            BufferData d = r.readBuffer(k);
            d.read(b.a, b.n, k);
            b.n += k;
          } else {
            r.skip(k);
          }
          left -= k;
        }
        total += size;
        if (!r.startsWithNewLine()) {
          throw closing("the chunk of " + size + " bytes is not followed by CRLF");
        }
        r.skip(2);
      }
    } catch (DataReader.IncorrectNewLineException e) {
      throw closing("a CR or LF alone in the chunked framing");
    } catch (DataReader.InsufficientDataAvailableException e) {
      throw ApiException.connectionLost(
          400, "the connection closed before the whole chunked request body arrived");
    }
    if (total > maxBodyBytes) throw new ApiException(413, tooLarge());
    return b.bytes();
  }

  /** Reads one chunk size line with its extensions; returns the size. */
  private long chunkSize(DataReader r) {
    int eol = r.findNewLine(MAX_LINE + 1);
    if (eol > MAX_LINE) throw closing("a chunk size line longer than " + MAX_LINE + " bytes");
    String line = r.readAsciiString(eol);
    r.skip(2);
    int n = line.length();
    int i = 0;
    while (i < n && hex(line.charAt(i)) >= 0) i++;
    if (i == 0) throw closing("the chunk size " + quote(line) + " is not hexadecimal");
    int z = 0;
    while (z < i - 1 && line.charAt(z) == '0') z++;
    if (i - z > 15) {
      throw ApiException.connectionLost(413, tooLarge() + "; a chunk announced " + quote(line));
    }
    long size = 0;
    for (int k = z; k < i; k++) size = size * 16 + hex(line.charAt(k));
    // chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ( token / quoted-string ) ] )
    while (true) {
      i = bws(line, i);
      if (i == n) return size;
      if (line.charAt(i) != ';') throw badExtension(line);
      i = bws(line, i + 1);
      int name = i;
      i = token(line, i);
      if (i == name) throw badExtension(line);
      i = bws(line, i);
      if (i < n && line.charAt(i) == '=') {
        i = bws(line, i + 1);
        if (i < n && line.charAt(i) == '"') {
          i++;
          while (i < n && line.charAt(i) != '"') {
            char c = line.charAt(i);
            if (c == '\\') i++;
            else if (c < 0x20 && c != '\t' || c == 0x7f) throw badExtension(line);
            i++;
          }
          if (i >= n) throw badExtension(line);
          i++;
        } else {
          int value = i;
          i = token(line, i);
          if (i == value) throw badExtension(line);
        }
      }
    }
  }

  /** Reads and drops the trailer section after the last chunk, through its empty line. */
  private static void trailers(DataReader r) {
    int left = MAX_TRAILERS;
    while (true) {
      int eol = r.findNewLine(left + 1);
      if (eol > left) throw closing("a trailer section longer than " + MAX_TRAILERS + " bytes");
      String line = r.readAsciiString(eol);
      r.skip(2);
      if (line.isEmpty()) return;
      left -= eol + 2;
      int colon = line.indexOf(':');
      if (colon <= 0 || token(line, 0) != colon) {
        throw closing("the trailer line " + quote(line) + " is not a field");
      }
    }
  }

  private static int bws(String s, int i) {
    while (i < s.length() && (s.charAt(i) == ' ' || s.charAt(i) == '\t')) i++;
    return i;
  }

  /** The end of the token (RFC 9110 tchar run) starting at {@code i}. */
  private static int token(String s, int i) {
    while (i < s.length()) {
      char c = s.charAt(i);
      boolean t =
          c >= 'a' && c <= 'z'
              || c >= 'A' && c <= 'Z'
              || c >= '0' && c <= '9'
              || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
      if (!t) break;
      i++;
    }
    return i;
  }

  private static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  private static ApiException badExtension(String line) {
    return closing("the chunk extension in " + quote(line) + " is malformed (RFC 9112 7.1.1)");
  }

  private static ApiException closing(String what) {
    return ApiException.connectionLost(400, "malformed chunked request body: " + what);
  }

  private static String quote(String s) {
    return "'" + HttpFraming.printable(s, 40) + "'";
  }

  /** A body's array and how much of it is filled; grows under the lease. */
  private final class Buffer {
    private final long max;
    private final BodyBudget.Lease lease;
    private final boolean chunked;
    byte[] a = new byte[0];
    int n;

    Buffer(long max, BodyBudget.Lease lease, boolean chunked) {
      this.max = Math.min(max, Integer.MAX_VALUE - 16);
      this.lease = lease;
      this.chunked = chunked;
    }

    /** Room for {@code more} bytes after {@link #n}; {@code n + more <= max} is the caller's. */
    void ensure(int more) {
      long need = (long) n + more;
      if (need <= a.length) return;
      long cap = Math.min(max, Math.max(need, Math.max(FIRST, 2L * a.length)));
      if (!lease.take(cap)) {
        String why =
            "the server already holds its limit of "
                + budget.capacity()
                + " bytes of request bodies in flight (--max-inflight-body-size); retry shortly";
        // the rest of a Content-Length body is drained by Helidon (under the read deadline); a
        // chunked one cannot be, as the decoder stopped inside a chunk: that connection closes
        throw chunked ? ApiException.connectionLost(503, why) : new ApiException(503, why);
      }
      byte[] grown = Arrays.copyOf(a, (int) cap);
      lease.give(a.length);
      a = grown;
    }

    byte[] bytes() {
      if (n == a.length) return a;
      byte[] out = Arrays.copyOf(a, n);
      lease.give(a.length - n);
      a = out;
      return out;
    }
  }
}
