package io.kvrouter.gateway;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;

/**
 * An engine written on raw sockets, for answers a real HTTP server would not send: HTTP/1.0 bodies
 * framed by the connection's close, interim {@code 1xx} answers, SSE events without end. {@code GET
 * /health} is answered 200 and any other request but a {@code POST /v1/...} (or those a predicate
 * on the request head accepts) 404, on a kept-alive connection; those are handed to the test's
 * {@link Answer} with the connection's output, and the connection is closed after it.
 *
 * <pre>
 * Implementation notes
 *
 * One platform thread accepts; each connection runs on a virtual thread of its own, reading
 * request heads (up to the blank line) and bodies (Content-Length only, which is what the gateway
 * sends). written counts the bytes the answers wrote before they returned or their write failed,
 * largestAnswer the most one connection wrote.
 * </pre>
 */
final class RawEngine implements AutoCloseable {
  /**
   * Writes one answer; the connection is closed when it returns or throws (unless {@link
   * #keepAlive}).
   */
  interface Answer {
    void write(String head, String body, OutputStream out) throws IOException;
  }

  /** An answer that may also read its connection (to see the gateway close it). */
  interface AnswerIn {
    void write(String head, String body, InputStream in, OutputStream out) throws IOException;
  }

  final AtomicLong written = new AtomicLong();

  /** The most bytes one answer wrote (its connection's, when several answers ran). */
  final AtomicLong largestAnswer = new AtomicLong();

  /** Answers being written now. */
  final AtomicInteger writing = new AtomicInteger();

  /** Connections on which a handled request arrived. */
  final AtomicInteger answeredConnections = new AtomicInteger();

  /** The text of GET /metrics (Prometheus' text format); null: 404. */
  volatile String metrics;

  /** Whether a connection stays open for the next request after an answer (else it is closed). */
  volatile boolean keepAlive;

  private final ServerSocket server;
  private final AnswerIn answer;
  private final Predicate<String> handles;
  private final Thread acceptor;

  RawEngine(Answer answer) throws IOException {
    this(answer, head -> head.startsWith("POST /v1/"));
  }

  /** An engine whose {@code answer} gets the requests whose head {@code handles} accepts. */
  RawEngine(Answer answer, Predicate<String> handles) throws IOException {
    this((head, body, in, out) -> answer.write(head, body, out), handles);
  }

  /** An engine whose {@code answer} also gets the connection's input after the request. */
  RawEngine(AnswerIn answer) throws IOException {
    this(answer, head -> head.startsWith("POST /v1/"));
  }

  private RawEngine(AnswerIn answer, Predicate<String> handles) throws IOException {
    this.answer = answer;
    this.handles = handles;
    server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    acceptor = new Thread(this::accept, "raw-engine-accept");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  String url() {
    return "http://127.0.0.1:" + server.getLocalPort();
  }

  private void accept() {
    while (!server.isClosed()) {
      try {
        Socket s = server.accept();
        Thread.ofVirtual().start(() -> serve(s));
      } catch (IOException e) {
        return; // closed
      }
    }
  }

  private void serve(Socket s) {
    try (s) {
      InputStream in = s.getInputStream();
      Counting out = new Counting(s.getOutputStream());
      boolean answered = false;
      while (true) {
        String head = readHead(in);
        if (head == null) return;
        int length = contentLength(head);
        String body = new String(in.readNBytes(length), StandardCharsets.UTF_8);
        String m = metrics;
        if (m != null && head.startsWith("GET /metrics ")) {
          byte[] text = m.getBytes(StandardCharsets.UTF_8);
          out.write(
              ("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
                      + text.length
                      + "\r\n\r\n")
                  .getBytes(StandardCharsets.UTF_8));
          out.write(text);
          out.flush();
          continue;
        }
        if (!handles.test(head)) {
          String status = head.startsWith("GET /health ") ? "200 OK" : "404 Not Found";
          out.write(
              ("HTTP/1.1 " + status + "\r\nContent-Length: 0\r\n\r\n")
                  .getBytes(StandardCharsets.UTF_8));
          out.flush();
          continue;
        }
        if (!answered) answeredConnections.incrementAndGet();
        answered = true;
        writing.incrementAndGet();
        try {
          answer.write(head, body, in, out);
          out.flush();
        } finally {
          largestAnswer.accumulateAndGet(out.count, Math::max);
          writing.decrementAndGet();
        }
        if (!keepAlive) return;
      }
    } catch (IOException e) {
      // the gateway closed the connection
    }
  }

  private static String readHead(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    int state = 0;
    int c;
    while ((c = in.read()) >= 0) {
      b.write(c);
      state = (c == '\r' && state % 2 == 0) || (c == '\n' && state % 2 == 1) ? state + 1 : 0;
      if (state == 4) return b.toString(StandardCharsets.ISO_8859_1);
    }
    return null;
  }

  private static int contentLength(String head) {
    for (String line : head.split("\r\n")) {
      if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
        return Integer.parseInt(line.substring(15).trim());
      }
    }
    return 0;
  }

  @Override
  public void close() throws IOException {
    server.close();
  }

  private final class Counting extends OutputStream {
    private final OutputStream out;
    private long count; // this connection's bytes

    Counting(OutputStream out) {
      this.out = out;
    }

    @Override
    public void write(int b) throws IOException {
      out.write(b);
      count++;
      written.incrementAndGet();
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      out.write(b, off, len);
      count += len;
      written.addAndGet(len);
    }

    @Override
    public void flush() throws IOException {
      out.flush();
    }
  }
}
