package io.kvrouter.gateway;

import io.helidon.common.buffers.DataReader;
import io.helidon.http.HeaderNames;
import io.helidon.webclient.api.HttpClientResponse;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * An engine's answer as the proxy relays it: the final status, its content type and length, and the
 * body, whatever HTTP/1 framing the engine used. Helidon's client (4.3) needs help with two valid
 * forms: an answer framed by the close of the connection (HTTP/1.0, or no Content-Length and no
 * chunking, RFC 9112 section 6.3) ends in an exception instead of the end of its body; and an
 * interim {@code 1xx} answer (103 Early Hints) is taken for the answer, the real one left in its
 * "body".
 *
 * <pre>
 * Implementation notes
 *
 * Immutable after of(); one per attempt, read by the attempt's thread only. For a final answer
 * Helidon parsed, the body is Helidon's stream, wrapped in UntilClose when no Content-Length or
 * Transfer-Encoding frames it (its end of data is then the end of the body). After a 1xx the
 * rest of the connection is Helidon's body stream (it frames a 1xx without Content-Length by the
 * close): of() reads the next heads from it (lines at most 8 KiB, 100 fields, 10 interim
 * answers) until a final status, and frames that answer's body itself: Content-Length (Bounded),
 * chunked (Chunked: sizes, extensions and trailers skipped, lines bounded as above), else until
 * the close. The response is closed by the caller; the connection of an answer Helidon saw
 * unframed (close-framed, or after a 1xx) is then closed, not pooled: CloseUnframedAnswers marks
 * its head Connection: close.
 * </pre>
 */
final class EngineAnswer {
  private static final int MAX_LINE = 8 * 1024;
  private static final int MAX_FIELDS = 100;
  private static final int MAX_INTERIM = 10;

  final int status;
  final String contentType;
  final long contentLength;
  final InputStream body;

  private EngineAnswer(int status, String contentType, long contentLength, InputStream body) {
    this.status = status;
    this.contentType = contentType;
    this.contentLength = contentLength;
    this.body = body;
  }

  /**
   * The final answer in {@code up}: Helidon's when it is final, else read past the interim ones.
   *
   * @throws IOException when the answer after an interim one is not HTTP/1
   */
  static EngineAnswer of(HttpClientResponse up) throws IOException {
    int status = up.status().code();
    if (status < 100 || status >= 200 || status == 101) {
      boolean framed =
          up.headers().contains(HeaderNames.CONTENT_LENGTH)
              || up.headers().contains(HeaderNames.TRANSFER_ENCODING);
      InputStream in = up.inputStream();
      return new EngineAnswer(
          status,
          up.headers().first(HeaderNames.CONTENT_TYPE).orElse(null),
          up.headers().contentLength().orElse(-1),
          framed ? in : new UntilClose(in));
    }
    InputStream in = new UntilClose(up.inputStream());
    for (int interim = 1; ; interim++) {
      String statusLine = line(in);
      status = statusOf(statusLine);
      String ctype = null;
      long length = -1;
      boolean chunked = false;
      boolean encoded = false;
      int fields = 0;
      for (String f = line(in); !f.isEmpty(); f = line(in)) {
        if (++fields > MAX_FIELDS) throw new IOException("more than " + MAX_FIELDS + " fields");
        int colon = f.indexOf(':');
        if (colon <= 0) throw new IOException("not a header field: " + cut(f));
        String name = f.substring(0, colon).trim().toLowerCase(Locale.ROOT);
        String value = f.substring(colon + 1).trim();
        switch (name) {
          case "content-type" -> ctype = value;
          case "content-length" -> {
            try {
              length = Long.parseLong(value);
            } catch (NumberFormatException e) {
              length = -2;
            }
            if (length < 0) throw new IOException("bad Content-Length: " + cut(value));
          }
          case "transfer-encoding" -> {
            encoded = true;
            chunked = value.toLowerCase(Locale.ROOT).endsWith("chunked");
          }
          default -> {}
        }
      }
      if (status >= 200 || status == 101) {
        if (encoded && !chunked) throw new IOException("unknown Transfer-Encoding");
        InputStream body =
            chunked ? new Chunked(in) : length >= 0 && !encoded ? new Bounded(in, length) : in;
        return new EngineAnswer(status, ctype, encoded ? -1 : length, body);
      }
      if (interim >= MAX_INTERIM) {
        throw new IOException("more than " + MAX_INTERIM + " interim answers");
      }
    }
  }

  private static int statusOf(String line) throws IOException {
    // HTTP/1.x SP 3DIGIT [SP reason]
    if (line.length() < 12
        || !line.startsWith("HTTP/1.")
        || line.charAt(8) != ' '
        || (line.length() > 12 && line.charAt(12) != ' ')) {
      throw new IOException("not an HTTP/1 status line: " + cut(line));
    }
    int code = 0;
    for (int i = 9; i < 12; i++) {
      char c = line.charAt(i);
      if (c < '0' || c > '9') throw new IOException("not a status code: " + cut(line));
      code = code * 10 + (c - '0');
    }
    if (code < 100) throw new IOException("not a status code: " + cut(line));
    return code;
  }

  private static String cut(String s) {
    return s.length() <= 80 ? s : s.substring(0, 80) + "...";
  }

  /** One line without its CRLF (or LF). */
  static String line(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream(64);
    int c;
    while ((c = in.read()) >= 0) {
      if (c == '\n') {
        byte[] a = b.toByteArray();
        int n = a.length > 0 && a[a.length - 1] == '\r' ? a.length - 1 : a.length;
        return new String(a, 0, n, StandardCharsets.ISO_8859_1);
      }
      if (b.size() >= MAX_LINE) throw new IOException("a line over " + MAX_LINE + " bytes");
      b.write(c);
    }
    throw new IOException("the engine closed the connection inside an answer's head");
  }

  /** Helidon's stream of a body framed by the close: its end of data is the end of the body. */
  static final class UntilClose extends InputStream {
    private final InputStream in;
    private boolean ended;

    UntilClose(InputStream in) {
      this.in = in;
    }

    @Override
    public int read() throws IOException {
      if (ended) return -1;
      try {
        int c = in.read();
        if (c < 0) ended = true;
        return c;
      } catch (DataReader.InsufficientDataAvailableException e) {
        ended = true;
        return -1;
      }
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (ended) return -1;
      try {
        int n = in.read(b, off, len);
        if (n < 0) ended = true;
        return n;
      } catch (DataReader.InsufficientDataAvailableException e) {
        ended = true;
        return -1;
      }
    }

    @Override
    public void close() throws IOException {
      in.close();
    }
  }

  /** The first {@code length} bytes of a stream. */
  private static final class Bounded extends InputStream {
    private final InputStream in;
    private long left;

    Bounded(InputStream in, long length) {
      this.in = in;
      this.left = length;
    }

    @Override
    public int read() throws IOException {
      if (left == 0) return -1;
      int c = in.read();
      if (c < 0) throw new IOException("the engine closed the connection inside a body");
      left--;
      return c;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (left == 0) return -1;
      int n = in.read(b, off, (int) Math.min(len, left));
      if (n < 0) throw new IOException("the engine closed the connection inside a body");
      left -= n;
      return n;
    }
  }

  /** A chunked body (RFC 9112 section 7.1), decoded. */
  private static final class Chunked extends InputStream {
    private final InputStream in;
    private long left; // of the current chunk
    private boolean done;

    Chunked(InputStream in) {
      this.in = in;
    }

    private boolean next() throws IOException {
      if (done) return false;
      if (left == 0) {
        String size = line(in);
        int semi = size.indexOf(';');
        String hex = (semi < 0 ? size : size.substring(0, semi)).trim();
        try {
          left = hex.isEmpty() || hex.length() > 15 ? -1 : Long.parseLong(hex, 16);
        } catch (NumberFormatException e) {
          left = -1;
        }
        if (left < 0) throw new IOException("bad chunk size: " + cut(size));
        if (left == 0) {
          int fields = 0;
          while (!line(in).isEmpty()) {
            if (++fields > MAX_FIELDS) throw new IOException("too many trailer fields");
          }
          done = true;
          return false;
        }
      }
      return true;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      int n = read(one, 0, 1);
      return n < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (len == 0) return 0;
      if (!next()) return -1;
      int n = in.read(b, off, (int) Math.min(len, left));
      if (n < 0) throw new IOException("the engine closed the connection inside a chunk");
      left -= n;
      if (left == 0 && !line(in).isEmpty()) throw new IOException("a chunk not followed by CRLF");
      return n;
    }
  }
}
