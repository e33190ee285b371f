package io.kvrouter.server;

import static io.kvrouter.server.HostileClientsTest.assertNo5xxBut;
import static io.kvrouter.server.HostileClientsTest.counter;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The reproductions of issue 16 (items 1 to 6) as raw bytes on sockets against a started server:
 * bodies announced and never sent, framing that RFC 9112 says to refuse, chunk extensions and
 * trailers, {@code Connection: close}, HTTP/1.0, bytes that are not UTF-8 and names that are not
 * identifiers. Every case checks its status, that it got exactly one answer, and that the
 * connection was closed when it must be (or stays usable when it may).
 *
 * <pre>
 * How "closed" is checked: after the answer the test reads on until the server closes, with a
 * socket timeout (CLOSE_WAIT) far below the server's read timeout (60 s here), so a server that
 * leaves the socket to its idle timer fails the check; bytes after the first answer are a second
 * answer and fail it too. "Usable" is checked by a GET /health sent on the same socket, whose 200
 * must be the next (and only) answer.
 * </pre>
 */
class HostileHttpTest {
  private static final int CLOSE_WAIT_MS = 10_000;
  private static final String QUERY = "{\"model_name\":\"m\",\"token_ids\":[1,2,3,4,5,6,7,8]}";
  private static final String SCORES = "\"scores\":{\"1\":{\"0\":8}}";

  /** A /health that asks for the connection to be closed after it (so the test need not wait). */
  private static final String LAST_HEALTH =
      "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

  private static HttpFixture http;
  private static final List<LogRecord> logged = new CopyOnWriteArrayList<>();
  private static final Handler capture =
      new Handler() {
        @Override
        public void publish(LogRecord r) {
          if (r.getLevel().intValue() >= Level.INFO.intValue()) logged.add(r);
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };

  @BeforeAll
  static void start() {
    Logger.getLogger("").addHandler(capture);
    http = new HttpFixture(KvRouterServer.Config.builder().readTimeout(Duration.ofSeconds(60)));
    assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
    assertThat(
            http.events(
                    "m",
                    List.of(HttpFixture.stored(new Worker(1, 0), 1, HttpFixture.range(1, 8), 4)))
                .status())
        .isEqualTo(200);
  }

  @AfterAll
  static void stop() {
    Logger.getLogger("").removeHandler(capture);
    if (http != null) http.close();
  }

  // ------------------------------------------------------------------ item 3 and 4: framing

  @Test
  void badFramingIsOne400AndAClosedConnection() throws Exception {
    String metrics0 = http.get("/metrics").body();
    double before = counter(metrics0, "unrouted", "4xx");
    double query4xx0 = counter(metrics0, "/query", "4xx");
    double unrouted5xx0 = counter(metrics0, "unrouted", "5xx");
    logged.clear();
    String q = QUERY;
    List<String> cases =
        List.of(
            post("Content-Length: abc\r\n", q),
            post("Content-Length: 18446744073709551616\r\n", q),
            post("Content-Length: -1\r\n", q),
            post("Content-Length: +8\r\n", q),
            post("Content-Length: " + q.length() + ", " + q.length() + "\r\n", q),
            post(
                "Content-Length: "
                    + q.length()
                    + "\r\nContent-Length: "
                    + (q.length() + 1)
                    + "\r\n",
                q),
            // CL with TE: RFC 9112 6.3 (a smuggling shape: chunked would end early, CL later)
            post("Content-Length: " + q.length() + "\r\nTransfer-Encoding: chunked\r\n", q),
            post(
                "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                "0\r\n\r\nGET /x HTTP/1.1\r\n\r\n"),
            // chunked is not the final coding: the length cannot be known
            post("Transfer-Encoding: gzip\r\n", q),
            post("Transfer-Encoding: chunked, gzip\r\n", q),
            "G\0ET /health HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET\t/health HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /health HTTP/1.1\r\nHost: x\r\nX-A\0: 1\r\n\r\n");
    for (String c : cases) {
      Exchange e = Exchange.send(http.server.port(), c);
      String why = printable(c) + " -> " + e;
      assertThat(e.statuses).as(why).containsExactly(400);
      assertThat(e.bodies.getFirst()).as(why).startsWith("{\"error\":\"");
      assertThat(e.closed).as(why + ": the connection must be closed").isTrue();
    }
    String metrics = http.get("/metrics").body();
    // counted as 4xx (each is one refusal, under "unrouted" or the endpoint it was sent to)
    double after = counter(metrics, "unrouted", "4xx");
    double onQuery = counter(metrics, "/query", "4xx") - query4xx0;
    assertThat(after - before + onQuery).isEqualTo(cases.size());
    // no 5xx: none on the endpoints, and none of the unrouted answers (505s of HTTP/1.0 aside)
    assertNo5xxBut(metrics, "unrouted");
    assertThat(counter(metrics, "unrouted", "5xx")).isEqualTo(unrouted5xx0);
    // logged in one line at most per interval, never a stack trace
    List<LogRecord> mine = new ArrayList<>();
    for (LogRecord r : logged) {
      assertThat(r.getThrown()).as(r.getLoggerName() + ": " + r.getMessage()).isNull();
      if (r.getLoggerName().startsWith("io.kvrouter")) mine.add(r);
    }
    assertThat(mine.size()).as("log lines: " + messages(mine)).isLessThanOrEqualTo(1);
  }

  @Test
  void badFramingOnTheOpenAiPathsIsAnsweredInOpenAisErrorShape() throws Exception {
    for (String c :
        List.of(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n{}")) {
      Exchange e = Exchange.send(http.server.port(), c);
      String why = printable(c) + " -> " + e;
      assertThat(e.statuses).as(why).containsExactly(400);
      assertThat(e.bodies.getFirst())
          .as(why)
          .startsWith("{\"error\":{\"message\":\"")
          .endsWith(",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}\n");
      assertThat(e.closed).as(why).isTrue();
    }
  }

  @Test
  void http10GetsOne505NamingHttp11AndTheConnectionIsClosed() throws Exception {
    Exchange e = Exchange.send(http.server.port(), "GET /workers HTTP/1.0\r\n\r\n");
    assertThat(e.statuses).as(e.toString()).containsExactly(505);
    assertThat(e.bodies.getFirst()).contains("HTTP/1.1");
    assertThat(e.closed).isTrue();
  }

  @Test
  void http10HealthChecksAreAnsweredAsHttp11DoesAndTheConnectionIsClosed() throws Exception {
    String http11 = http.get("/health").body();
    for (String req :
        List.of(
            "GET /health HTTP/1.0\r\n\r\n",
            "GET /health?probe=lb HTTP/1.0\r\nHost: x\r\nUser-Agent: check\r\n\r\n")) {
      Exchange e = Exchange.send(http.server.port(), req);
      assertThat(e.statuses).as(printable(req) + " -> " + e).containsExactly(200);
      assertThat(e.bodies.getFirst()).isEqualTo(http11).isEqualTo("{\"status\":\"ok\"}\n");
      assertThat(e.closed).isTrue();
    }
  }

  @Test
  void aChunkExtensionIsIgnoredAndTheConnectionStaysUsable() throws Exception {
    String body = QUERY;
    String chunks =
        Integer.toHexString(10)
            + ";ext=1\r\n"
            + body.substring(0, 10)
            + "\r\n"
            + Integer.toHexString(body.length() - 10)
            + " ; name=\"quoted;value\"\r\n"
            + body.substring(10)
            + "\r\n0\r\n\r\n";
    Exchange e =
        Exchange.send(
            http.server.port(), post("Transfer-Encoding: chunked\r\n", chunks) + LAST_HEALTH);
    assertThat(e.statuses).as(e.toString()).containsExactly(200, 200);
    assertThat(e.bodies.getFirst()).contains(SCORES);
    assertThat(e.closed).as(e.toString()).isTrue();
    // coding names are case-insensitive: Helidon 4.3 alone would take "Chunked" for no body
    e =
        Exchange.send(
            http.server.port(), post("Transfer-Encoding: Chunked\r\n", chunks) + LAST_HEALTH);
    assertThat(e.statuses).as(e.toString()).containsExactly(200, 200);
    assertThat(e.bodies.getFirst()).contains(SCORES);
    // the exact reproduction of the issue: 0x33 bytes in one chunk with an extension
    String b51 = padded(QUERY, 0x33);
    e =
        Exchange.send(
            http.server.port(),
            post("Transfer-Encoding: chunked\r\n", "33;ext=1\r\n" + b51 + "\r\n0\r\n\r\n")
                + LAST_HEALTH);
    assertThat(e.statuses).as(e.toString()).containsExactly(200, 200);
  }

  @Test
  void aLastChunkWithExtensionOrTrailersIsDecodedAndAnsweredOnce() throws Exception {
    String body = QUERY;
    for (String last :
        List.of("0;end=1\r\n\r\n", "0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n", "000\r\n\r\n")) {
      String chunks = Integer.toHexString(body.length()) + "\r\n" + body + "\r\n" + last;
      Exchange e =
          Exchange.send(
              http.server.port(), post("Transfer-Encoding: chunked\r\n", chunks) + LAST_HEALTH);
      String why = printable(last) + " -> " + e;
      assertThat(e.bodies.getFirst()).as(why).contains(SCORES);
      // the /health after it is answered, or the server closed after the first answer (it says
      // Connection: close then): never a second answer to the same request
      assertThat(e.statuses).as(why).isIn(List.of(200, 200), List.of(200));
      assertThat(e.closed).as(why).isTrue();
    }
  }

  @Test
  void aBadChunkIsAPrompt400AndAClosedConnection() throws Exception {
    for (String chunks :
        List.of(
            "zz\r\n" + QUERY + "\r\n0\r\n\r\n",
            "-5\r\nabc\r\n0\r\n\r\n",
            "\r\n",
            "ffffffffffffffffffff\r\nabc",
            "5\r\nabcdeXY0\r\n\r\n",
            "3;\r\nabc\r\n0\r\n\r\n",
            "3;a=\"x\r\nabc\r\n0\r\n\r\n",
            "3;" + "a".repeat(5000) + "\r\nabc\r\n0\r\n\r\n",
            "3\r\nabc\r\n0\r\nX: " + "a".repeat(20_000) + "\r\n\r\n",
            "3\r\nabc\r\n0\r\nnot a field\r\n\r\n")) {
      Exchange e =
          Exchange.send(http.server.port(), post("Transfer-Encoding: chunked\r\n", chunks));
      String why = printable(chunks) + " -> " + e;
      assertThat(e.statuses).as(why).hasSize(1);
      assertThat(e.statuses.getFirst()).as(why).isIn(400, 413);
      assertThat(e.closed).as(why).isTrue();
    }
    assertNo5xxBut(http.get("/metrics").body(), null);
  }

  // ------------------------------------------------------------------ item 5: Connection: close

  @Test
  void connectionCloseIsHonouredAfterTheAnswer() throws Exception {
    for (String req :
        List.of(
            "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "GET /health HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n",
            "GET /health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n",
            "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            post("Connection: close\r\nContent-Length: " + QUERY.length() + "\r\n", QUERY),
            post(
                "Connection: close\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n", "abc"))) {
      Exchange e =
          Exchange.send(http.server.port(), req + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
      String why = printable(req) + " -> " + e;
      assertThat(e.statuses).as(why).hasSize(1);
      assertThat(e.closed).as(why).isTrue();
    }
  }

  // ------------------------------------------------------------------ item 6: UTF-8 and names

  @Test
  void malformedUtf8IsA400NamingTheByteOffset() throws Exception {
    record Bad(byte[] bytes, String what) {}
    List<Bad> bad =
        List.of(
            new Bad(new byte[] {(byte) 0xc0, (byte) 0xaf}, "overlong '/'"),
            new Bad(new byte[] {(byte) 0xe0, (byte) 0x80, (byte) 0xaf}, "overlong, 3 bytes"),
            new Bad(new byte[] {(byte) 0xed, (byte) 0xa0, (byte) 0x80}, "CESU-8 surrogate"),
            new Bad(new byte[] {(byte) 0xf4, (byte) 0x90, (byte) 0x80, (byte) 0x80}, "> U+10FFFF"),
            new Bad(new byte[] {(byte) 0x80}, "lone continuation byte"),
            new Bad(new byte[] {(byte) 0xe2, (byte) 0x82}, "truncated sequence"),
            new Bad(new byte[] {(byte) 0xff}, "0xff"));
    for (Bad b : bad) {
      byte[] head = "{\"model_name\":\"".getBytes(StandardCharsets.US_ASCII);
      byte[] tail = "\",\"token_ids\":[1]}".getBytes(StandardCharsets.US_ASCII);
      ByteArrayOutputStream body = new ByteArrayOutputStream();
      body.write(head);
      body.write(b.bytes);
      body.write(tail);
      for (String path : List.of("/query", "/register")) {
        Exchange e =
            Exchange.send(
                http.server.port(),
                ("POST "
                        + path
                        + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + "Connection: close\r\nContent-Length: "
                        + body.size()
                        + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII),
                body.toByteArray());
        String why = b.what + " on " + path + " -> " + e;
        assertThat(e.statuses).as(why).containsExactly(400);
        assertThat(e.bodies.getFirst()).as(why).contains("UTF-8").contains("offset " + head.length);
      }
    }
    // valid multi-byte UTF-8 passes the decoder (and then meets the name rule)
    assertThat(
            http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[1],\"x\":\"é€😀\"}").status())
        .isEqualTo(200);
    // the models of the issue were not registered
    assertThat(http.get("/workers").body()).doesNotContain("\"/\"");
  }

  @Test
  void modelAndRoutingGroupNamesFollowTheDocumentedRule() throws Exception {
    for (String name :
        List.of(
            "meta-llama/Llama-3.1-8B-Instruct",
            "Qwen/Qwen2.5-7B-Instruct",
            "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
            "llama3.1:8b-instruct-q4_K_M",
            "/models/llama-3",
            "@cf/meta/llama-3-8b",
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
            "sql-lora+base",
            "x".repeat(256))) {
      HttpFixture.Reply r = http.register(7, 0, name, 4);
      assertThat(r.status()).as(name + " -> " + r).isEqualTo(201);
      assertThat(
              http.post(
                      "/register",
                      "{\"instance_id\":8,\"model_name\":\"m\",\"routing_group\":\""
                          + name
                          + "\",\"block_size\":4}")
                  .status())
          .as("routing group " + name)
          .isEqualTo(201);
    }
    for (String bad :
        List.of(
            "\\ud800",
            "a\\udc00b",
            "has space",
            "tab\\t",
            "quote\\\"",
            "back\\\\slash",
            "caf\\u00e9",
            "nul\\u0000",
            "x".repeat(257))) {
      HttpFixture.Reply r = http.register(9, 0, bad, 4);
      assertThat(r.status()).as(bad + " -> " + r).isEqualTo(400);
      assertThat(r.body()).as(bad).contains("model_name").contains("A-Z a-z 0-9").contains("256");
      r =
          http.post(
              "/register",
              "{\"instance_id\":9,\"model_name\":\"m\",\"routing_group\":\""
                  + bad
                  + "\",\"block_size\":4}");
      assertThat(r.status()).as("routing group " + bad + " -> " + r).isEqualTo(400);
      assertThat(r.body()).as(bad).contains("routing_group");
      r = http.post("/query", "{\"model_name\":\"" + bad + "\",\"token_ids\":[1]}");
      assertThat(r.status()).as("query " + bad + " -> " + r).isEqualTo(400);
    }
    assertThat(http.get("/workers?model_name=has%20space").status()).isEqualTo(400);
    assertThat(http.post("/events?model_name=has%20space", "[]").status()).isEqualTo(400);
  }

  // ------------------------------------------------------------------ items 1 and 2

  /**
   * Item 1: a thousand connections announce an 8 MiB body and send none of it. The server holds
   * them without memory for the announced bytes (heap after GC, in this JVM, grows by less than
   * BOUND_PER_CONNECTION each: the figure of docs/RELIABILITY.md), and /health still answers.
   */
  @Test
  void aThousandAnnouncedButUnsentBodiesTakeNoMemory() throws Exception {
    int n = Integer.getInteger("kvrouter.hostile.unsentBodies", 1000);
    long boundPerConnection = 64 << 10;
    MemoryMXBean mem = ManagementFactory.getMemoryMXBean();
    try (HttpFixture h =
        new HttpFixture(KvRouterServer.Config.builder().readTimeout(Duration.ofSeconds(60)))) {
      assertThat(h.get("/health").status()).isEqualTo(200);
      long reading0 = h.server.bodiesBeingRead();
      long before = heapAfterGc(mem);
      List<Socket> sockets = new ArrayList<>();
      try {
        byte[] head =
            ("POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 8388608\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < n; i++) {
          Socket s = new Socket();
          sockets.add(s);
          s.connect(new InetSocketAddress("127.0.0.1", h.server.port()), 10_000);
          s.getOutputStream().write(head);
          s.getOutputStream().flush();
        }
        // the measured phase is not empty: every one of them is inside its body read
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (h.server.bodiesBeingRead() - reading0 < n && System.nanoTime() < deadline) {
          Thread.sleep(20);
        }
        assertThat(h.server.bodiesBeingRead() - reading0).isEqualTo(n);
        long after = heapAfterGc(mem);
        long grown = after - before;
        System.out.printf(
            Locale.ROOT,
            "HOSTILE unsent bodies: %d connections announcing 8 MiB each: heap after GC %+.1f MiB"
                + " (%.1f KiB per connection)%n",
            n,
            grown / 1048576.0,
            grown / 1024.0 / n);
        assertThat(grown).isLessThan(n * boundPerConnection);
        assertThat(h.get("/health").status()).isEqualTo(200);
        assertThat(h.server.bodyBytesHeld()).isZero();
      } finally {
        for (Socket s : sockets) s.close();
      }
      assertThat(h.get("/health").status()).isEqualTo(200);
    }
  }

  /** Item 1: bodies in flight past the budget are refused with 503, not held. */
  @Test
  void bodiesPastTheInFlightBudgetGet503() throws Exception {
    try (HttpFixture h =
        new HttpFixture(
            KvRouterServer.Config.builder()
                .maxBodyBytes(1 << 20)
                .maxInflightBodyBytes(3 << 19)
                .readTimeout(Duration.ofSeconds(60)))) {
      assertThat(h.register(1, 0, "m", 4).status()).isEqualTo(201);
      byte[] body = padded(QUERY, 900_000).getBytes(StandardCharsets.US_ASCII);
      String head =
          "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + body.length
              + "\r\n";
      // the first connection sends all but the last byte: its body holds 900,000 bytes
      try (Socket first = new Socket("127.0.0.1", h.server.port())) {
        first.setSoTimeout(CLOSE_WAIT_MS);
        first.getOutputStream().write((head + "\r\n").getBytes(StandardCharsets.US_ASCII));
        first.getOutputStream().write(body, 0, body.length - 1);
        first.getOutputStream().flush();
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (h.server.bodyBytesHeld() < body.length - 1 && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        assertThat(h.server.bodyBytesHeld()).isGreaterThanOrEqualTo(body.length - 1);
        // a second one does not fit in what is left of the 1.5 MiB budget
        Exchange e =
            Exchange.send(
                h.server.port(),
                (head + "Connection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII),
                body);
        assertThat(e.statuses).as(e.toString()).containsExactly(503);
        assertThat(e.bodies.getFirst()).contains("in flight");
        // the first completes
        first.getOutputStream().write(body, body.length - 1, 1);
        first.getOutputStream().flush();
        assertThat(Exchange.read(first.getInputStream()).status).isEqualTo(200);
      }
      // given back once each handler returns (just after its answer went out)
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (h.server.bodyBytesHeld() != 0 && System.nanoTime() < deadline) Thread.sleep(10);
      assertThat(h.server.bodyBytesHeld()).isZero();
    }
  }

  /** Item 2: every request has a deadline, also one announcing a negative or no length. */
  @Test
  void everyRequestHasADeadline() throws Exception {
    try (HttpFixture h =
        new HttpFixture(KvRouterServer.Config.builder().readTimeout(Duration.ofMillis(500)))) {
      for (String stall :
          List.of(
              post("Content-Length: -1\r\n", "{\"model"),
              post("Content-Length: 100\r\n", "{\"model"),
              post("Transfer-Encoding: chunked\r\n", "10;ext=1\r\n{\"mo"),
              post("Transfer-Encoding: chunked\r\n", "10\r\n0123456789abcdef\r\n0\r\nX-T: 1"),
              "POST /query HTTP/1.1\r\nHost: x\r\nContent-Le")) {
        Exchange e = Exchange.send(h.server.port(), stall);
        String why = printable(stall) + " -> " + e;
        assertThat(e.closed).as(why).isTrue();
        assertThat(e.statuses.size()).as(why).isLessThanOrEqualTo(1);
        for (int s : e.statuses) assertThat(s).as(why).isIn(400, 408);
      }
      assertNo5xxBut(h.get("/metrics").body(), null);
    }
  }

  // ------------------------------------------------------------------ helpers

  private static long heapAfterGc(MemoryMXBean mem) {
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      System.gc();
      used = Math.min(used, mem.getHeapMemoryUsage().getUsed());
    }
    return used;
  }

  private static String post(String headers, String body) {
    return "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + headers
        + "\r\n"
        + body;
  }

  private static String padded(String json, int size) {
    return json.substring(0, json.length() - 1) + " ".repeat(size - json.length()) + "}";
  }

  private static String printable(String s) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\r') sb.append("\\r");
      else if (c == '\n') sb.append("\\n");
      else if (c < 0x20 || c > 0x7e) sb.append(String.format("\\x%02x", (int) c));
      else sb.append(c);
      if (sb.length() > 160) return sb.append("...").toString();
    }
    return sb.toString();
  }

  private static String messages(List<LogRecord> records) {
    StringBuilder sb = new StringBuilder();
    for (LogRecord r : records)
      sb.append("\n  ").append(r.getLoggerName()).append(": ").append(r.getMessage());
    return sb.toString();
  }

  /** What one connection got: every answer, in order, and whether the server then closed. */
  static final class Exchange {
    final List<Integer> statuses = new ArrayList<>();
    final List<String> bodies = new ArrayList<>();
    boolean closed;
    String trailing = "";

    record Answer(int status, String body, boolean close) {}

    static Exchange send(int port, String request) throws IOException {
      return send(port, request.getBytes(StandardCharsets.ISO_8859_1));
    }

    /**
     * Sends the parts, then reads answers until the server closes or CLOSE_WAIT_MS pass without a
     * byte (then {@link #closed} is false).
     */
    static Exchange send(int port, byte[]... parts) throws IOException {
      Exchange x = new Exchange();
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress("127.0.0.1", port), 5000);
        s.setSoTimeout(CLOSE_WAIT_MS);
        OutputStream out = s.getOutputStream();
        try {
          for (byte[] p : parts) out.write(p);
          out.flush();
        } catch (IOException e) {
          // the server may answer and close before it read everything
        }
        InputStream in = s.getInputStream();
        try {
          while (true) {
            Answer a = read(in);
            if (a == null) {
              x.closed = true;
              break;
            }
            x.statuses.add(a.status);
            x.bodies.add(a.body);
          }
        } catch (SocketTimeoutException e) {
          x.closed = false;
        } catch (IOException e) {
          x.closed = true; // reset by the server
        } catch (RuntimeException e) {
          x.trailing = "unparsable bytes: " + e.getMessage();
          x.statuses.add(-1); // bytes that are not an answer: fail the status checks
        }
      }
      return x;
    }

    /** One answer, or null at the end of the stream before its first byte. */
    static Answer read(InputStream in) throws IOException {
      String status = line(in);
      if (status == null) return null;
      if (!status.startsWith("HTTP/1.1 ")) throw new IllegalStateException(status);
      int code = Integer.parseInt(status.substring(9, 12));
      long length = -1;
      boolean chunked = false;
      boolean close = false;
      for (String h; !(h = line(in)).isEmpty(); ) {
        int colon = h.indexOf(':');
        String name = h.substring(0, colon).trim();
        String value = h.substring(colon + 1).trim();
        if (name.equalsIgnoreCase("Content-Length")) length = Long.parseLong(value);
        if (name.equalsIgnoreCase("Transfer-Encoding")) chunked = value.contains("chunked");
        if (name.equalsIgnoreCase("Connection")) close = value.equalsIgnoreCase("close");
      }
      ByteArrayOutputStream body = new ByteArrayOutputStream();
      if (chunked) {
        for (long c; (c = Long.parseLong(line(in).trim(), 16)) > 0; ) {
          body.write(in.readNBytes((int) c));
          line(in);
        }
        line(in);
      } else if (length >= 0) {
        body.write(in.readNBytes((int) length));
      }
      return new Answer(code, body.toString(StandardCharsets.UTF_8), close);
    }

    private static String line(InputStream in) throws IOException {
      StringBuilder sb = new StringBuilder();
      int b;
      while ((b = in.read()) >= 0 && b != '\n') {
        if (b != '\r') sb.append((char) b);
      }
      if (b < 0 && sb.isEmpty()) return null;
      return sb.toString();
    }

    @Override
    public String toString() {
      return "answers "
          + statuses
          + (bodies.isEmpty() ? "" : " first " + abbreviate(bodies.getFirst()))
          + (closed ? ", closed" : ", left open")
          + (trailing.isEmpty() ? "" : ", " + trailing);
    }

    private static String abbreviate(String s) {
      return s.length() <= 200 ? s : s.substring(0, 197) + "...";
    }
  }
}
