package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Hostile HTTP clients against a started server: bodies over the limit, deep nesting, huge arrays,
 * wrong content types, out-of-range token ids, unknown models, missing bearer tokens, slow clients
 * that stall mid-request, and 2,000 connections at once. Every refusal is the documented 4xx (or,
 * for a slow client, a closed connection after the read timeout), the server never answers 5xx
 * (checked in its own metrics), and a well-behaved {@link LatencyProbe} keeps getting {@code
 * /health} and {@code /query} answered correctly throughout.
 *
 * <p>The probe's latencies are printed, not asserted: a wall-clock bound has no place in CI. They
 * are a documented measurement (docs/RELIABILITY.md, "Hostile HTTP clients"): with {@code
 * -Dkvrouter.hostile.p99Millis=200} the test also fails when the probe's p99 is not under it.
 */
class HostileClientsTest {
  private static final String TOKEN = "s3cret";
  private static final int LIMIT = 1 << 20;
  private static final int ROUNDS = Integer.getInteger("kvrouter.hostile.rounds", 3);

  /** The p99 bound of the measurement run; null (the default, CI): the latencies are printed. */
  private static final Double P99_MILLIS =
      System.getProperty("kvrouter.hostile.p99Millis") == null
          ? null
          : Double.valueOf(System.getProperty("kvrouter.hostile.p99Millis"));

  private static final Duration PROBE_WAIT = Duration.ofSeconds(60);
  private static final int CONNECTIONS = Integer.getInteger("kvrouter.hostile.connections", 2000);
  private static final int[] PROMPT = range(0, 64);
  private static final String QUERY =
      "{\"model_name\":\"m\",\"token_ids\":" + HttpFixture.json(PROMPT) + "}";

  /** One hostile request and what it must get. */
  private record Case(
      String name,
      Supplier<HttpRequest.Builder> request,
      int status,
      String fragment,
      boolean mayReset) {
    Case(String name, Supplier<HttpRequest.Builder> request, int status, String fragment) {
      this(name, request, status, fragment, false);
    }
  }

  @Test
  @SuppressWarnings(
      "try") // the probe is stopped before its summary is read, and closed again by the try
  void everyHostileRequestGetsItsFourHundredWhileHealthAndQueryAreAnswered() throws Exception {
    try (HttpFixture http =
        new HttpFixture(KvRouterServer.Config.builder().authToken(TOKEN).maxBodyBytes(LIMIT))) {
      http.token = TOKEN;
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      assertThat(http.events("m", List.of(stored(new Worker(1, 0), 1, PROMPT, 4))).status())
          .isEqualTo(200);
      http.token = null;
      List<Case> cases = cases(http.url);
      Map<Integer, Integer> byStatus = new LinkedHashMap<>();
      String probeSummary;
      try (LatencyProbe probe = new LatencyProbe(http.url, QUERY)) {
        for (int round = 0; round < ROUNDS; round++) {
          String previous = "none";
          for (Case c : cases) {
            HttpFixture.Reply r;
            try {
              r = http.send(c.request().get());
            } catch (RuntimeException e) {
              if (c.mayReset()) {
                byStatus.merge(-1, 1, Integer::sum); // -1: reset before the 413 was read
                continue;
              }
              throw new AssertionError(c.name() + " (after " + previous + ") failed", e);
            }
            previous = c.name();
            String why = c.name() + " -> " + abbreviate(r.toString());
            assertThat(r.status()).as(why).isEqualTo(c.status());
            if (c.status() >= 400) {
              assertThat(r.body()).as(why).startsWith("{\"error\":\"").contains(c.fragment());
            } else {
              assertThat(r.body()).as(why).contains(c.fragment());
            }
            byStatus.merge(r.status(), 1, Integer::sum);
          }
        }
        // the measured phase is not empty: the probe ran at least 20 requests meanwhile (it sends
        // one every ~5 ms, the rounds take seconds: this waits only on a very slow machine)
        assertThat(probe.awaitAttempts(20, PROBE_WAIT)).as(probe.summary()).isTrue();
        probe.close();
        probeSummary = probe.summary();
        System.out.println(
            "HOSTILE requests: "
                + ROUNDS * cases.size()
                + " sent ("
                + cases.size()
                + " kinds x "
                + ROUNDS
                + "), by status "
                + byStatus
                + "; probe /health + /query meanwhile: "
                + probeSummary);
        assertThat(probe.failures()).as(probeSummary).isEmpty();
        assertThat(probe.count()).as(probeSummary).isGreaterThanOrEqualTo(20);
        assertP99IfMeasuring(probe, probeSummary);
      }
      assertNo5xx(http);
    }
  }

  /** With {@code -Dkvrouter.hostile.p99Millis}, the probe's p99 must be under it. */
  private static void assertP99IfMeasuring(LatencyProbe probe, String summary) {
    if (P99_MILLIS != null) {
      assertThat(probe.quantileMillis(0.99)).as(summary).isLessThan(P99_MILLIS);
    }
  }

  private static List<Case> cases(String url) {
    List<Case> c = new ArrayList<>();
    String okQueryFragment = "\"scores\":{\"1\":{\"0\":64}}";
    // bodies over the limit
    String atLimit = padded(QUERY, LIMIT);
    c.add(new Case("body at the limit", () -> post(url, "/query", atLimit), 200, okQueryFragment));
    String over = padded(QUERY, LIMIT + 1);
    c.add(new Case("body 1 byte over the limit", () -> post(url, "/query", over), 413, "limit"));
    byte[] overBytes = over.getBytes(StandardCharsets.UTF_8);
    c.add(
        new Case(
            "chunked body over the limit",
            () ->
                HttpRequest.newBuilder(URI.create(url + "/query"))
                    .header("Content-Type", "application/json")
                    .POST(
                        HttpRequest.BodyPublishers.ofInputStream(
                            () -> new ByteArrayInputStream(overBytes))),
            413,
            "limit"));
    String threeMiB = padded(QUERY, LIMIT + (2 << 20));
    c.add(new Case("body 2 MiB over the limit", () -> post(url, "/query", threeMiB), 413, "limit"));
    // beyond 2 MiB over, the server answers 413 and closes at once: a client still sending may
    // see the connection reset before it reads the answer
    String eightMiB = padded(QUERY, 8 << 20);
    c.add(new Case("8 MiB body", () -> post(url, "/query", eightMiB), 413, "limit", true));
    // huge arrays, within and over the limit
    String manyTokens = tokens(120_000); // 960 KB
    c.add(new Case("120,000 token ids", () -> post(url, "/query", manyTokens), 200, "\"scores\""));
    String tooManyTokens = tokens(300_000);
    c.add(new Case("300,000 token ids", () -> post(url, "/query", tooManyTokens), 413, "limit"));
    StringJoiner hashes = new StringJoiner(",", "{\"model_name\":\"m\",\"block_hashes\":[", "]}");
    for (int i = 0; i < 40_000; i++) hashes.add(Long.toUnsignedString(-1L - i));
    String manyHashes = hashes.toString();
    c.add(
        new Case(
            "40,000 block hashes", () -> post(url, "/query_by_hash", manyHashes), 200, "scores"));
    List<RouterEvent> batch = new ArrayList<>();
    for (int i = 0; i < 4000; i++) {
      batch.add(stored(new Worker(1, 0), i, range(1000 + i * 4, 4), 4));
    }
    String bigBatch = RouterEventJson.writeEvents(batch);
    c.add(
        new Case(
            "4,000 events in one batch",
            () -> authed(post(url, "/events?model_name=m", bigBatch)),
            200,
            "\"applied\":4000"));
    // deep nesting
    String deepArrays = "{\"model_name\":\"m\",\"token_ids\":" + "[".repeat(100_000);
    c.add(
        new Case(
            "100k '[' in token_ids", () -> post(url, "/query", deepArrays), 400, "token_ids[0]"));
    String deepObjects = "{\"x\":".repeat(100_000);
    c.add(new Case("100k '{\"x\":'", () -> post(url, "/query", deepObjects), 400, "nesting"));
    String onlyBrackets = "[".repeat(100_000);
    c.add(
        new Case(
            "100k '[' as a registration",
            () -> authed(post(url, "/register", onlyBrackets)),
            400,
            "expected a JSON object"));
    c.add(
        new Case(
            "100k '[' as an event batch",
            () -> authed(post(url, "/events?model_name=m", onlyBrackets)),
            400,
            "expected an event object"));
    // content types
    for (String type :
        List.of(
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/xml",
            "application/jsonp")) {
      c.add(
          new Case(
              "Content-Type " + type,
              () -> post(url, "/query", QUERY).setHeader("Content-Type", type),
              415,
              "must be JSON"));
    }
    c.add(
        new Case(
            "Content-Type text/csv on /events",
            () ->
                authed(
                    post(url, "/events?model_name=m", "[]").setHeader("Content-Type", "text/csv")),
            415,
            "must be JSON"));
    for (String type : List.of("application/json; charset=utf-8", "Application/JSON", "a/b+json")) {
      boolean ok = !type.startsWith("a/");
      c.add(
          new Case(
              "Content-Type " + type,
              () -> post(url, "/query", QUERY).setHeader("Content-Type", type),
              ok ? 200 : 415,
              ok ? okQueryFragment : "must be JSON"));
    }
    c.add(
        new Case(
            "no Content-Type",
            () ->
                HttpRequest.newBuilder(URI.create(url + "/query"))
                    .POST(HttpRequest.BodyPublishers.ofString(QUERY)),
            200,
            okQueryFragment));
    // token ids and hashes out of range, bad bytes
    for (String bad : List.of("4294967296", "-1", "1.5", "\"7\"", "99999999999999999999999")) {
      c.add(
          new Case(
              "token id " + bad,
              () -> post(url, "/query", "{\"model_name\":\"m\",\"token_ids\":[1," + bad + "]}"),
              400,
              "token_ids[1]"));
    }
    c.add(
        new Case(
            "block hash 2^64",
            () ->
                post(
                    url,
                    "/query_by_hash",
                    "{\"model_name\":\"m\",\"block_hashes\":[18446744073709551616]}"),
            400,
            "block_hashes[0]"));
    c.add(
        new Case(
            "bytes that are not UTF-8",
            () ->
                HttpRequest.newBuilder(URI.create(url + "/query"))
                    .header("Content-Type", "application/json")
                    .POST(
                        HttpRequest.BodyPublishers.ofByteArray(
                            new byte[] {'{', '"', (byte) 0xff, (byte) 0xc0, '"', ':', '1', '}'})),
            400,
            "not valid UTF-8: byte 0xFF at offset 2"));
    c.add(new Case("empty body", () -> post(url, "/query", ""), 400, "empty"));
    // unknown models
    String unknown = "{\"model_name\":\"nope\",\"token_ids\":[1,2,3,4]}";
    c.add(new Case("unknown model on /query", () -> post(url, "/query", unknown), 404, "nope"));
    c.add(
        new Case(
            "unknown model on /route",
            () ->
                authed(
                    post(
                        url,
                        "/route",
                        "{\"request_id\":\"r\",\"model_name\":\"nope\",\"token_ids\":[1]}")),
            404,
            "nope"));
    c.add(
        new Case(
            "unknown model on /events",
            () -> authed(post(url, "/events?model_name=nope", "[]")),
            404,
            "nope"));
    // missing or wrong bearer token on every mutating endpoint
    for (String path :
        List.of(
            "/register",
            "/unregister",
            "/route",
            "/events?model_name=m",
            "/requests/r/prefill_complete",
            "/requests/r/free")) {
      c.add(new Case("no token on " + path, () -> post(url, path, "{}"), 401, "Bearer"));
      c.add(
          new Case(
              "wrong token on " + path,
              () -> post(url, path, "{}").header("Authorization", "Bearer s3cre"),
              401,
              "Bearer"));
    }
    c.add(new Case("unknown path", () -> post(url, "/admin", "{}"), 404, "no endpoint"));
    c.add(
        new Case(
            "wrong method",
            () -> HttpRequest.newBuilder(URI.create(url + "/query")).GET(),
            405,
            "not allowed"));
    return c;
  }

  // ------------------------------------------------------------------ slow clients

  @Test
  void slowClientsAreClosedAfterTheReadTimeoutAndStalledRequestsNeverGet5xx() throws Exception {
    long timeoutMs = 1000;
    HttpFixture http = withReadTimeout(timeoutMs, KvRouterServer.Config.builder());
    try (http) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      long closedBefore = http.server.readDeadlineClosed();
      Map<String, String> stalls = new LinkedHashMap<>();
      String q = QUERY;
      stalls.put("nothing sent", "");
      stalls.put("half a request line", "POST /que");
      stalls.put("half the headers", "POST /query HTTP/1.1\r\nHost: x\r\nContent-Ty");
      stalls.put(
          "half the body",
          "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + "Content-Length: "
              + q.length()
              + "\r\n\r\n"
              + q.substring(0, q.length() / 2));
      stalls.put(
          "half a chunked body",
          "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + "Transfer-Encoding: chunked\r\n\r\n"
              + Integer.toHexString(q.length())
              + "\r\n"
              + q.substring(0, 10));
      stalls.put(
          "half the body of a request refused unread (415)",
          "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
              + "Content-Length: 1000\r\n\r\nabc");
      stalls.put(
          "half the body of an event batch",
          "POST /events?model_name=m HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + "Content-Length: 5000\r\n\r\n[{\"worker_id\":1,");
      stalls.put("idle after one answered request", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
      ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor();
      Map<String, Future<Long>> closedAfter = new LinkedHashMap<>();
      for (var e : stalls.entrySet()) {
        closedAfter.put(e.getKey(), pool.submit(() -> millisUntilClosed(http, e.getValue())));
      }
      // a slow but steady client that finishes within the timeout is served
      Future<String> steady = pool.submit(() -> slowButInTime(http, q, timeoutMs));
      Map<String, Long> ms = new LinkedHashMap<>();
      for (var e : closedAfter.entrySet()) ms.put(e.getKey(), e.getValue().get());
      String report = ms.toString();
      System.out.println(
          "HOSTILE slow clients (read timeout " + timeoutMs + " ms), closed after: " + report);
      for (var e : ms.entrySet()) {
        // Helidon's idle timer closes connections without a request line: it checks every 250 ms
        // against timestamps it refreshes once a second, so it may act up to ~1 s early or late
        boolean idleTimer =
            e.getKey().startsWith("nothing")
                || e.getKey().startsWith("idle")
                || e.getKey().contains("request line");
        long min = idleTimer ? 0 : 900;
        assertThat(e.getValue())
            .as(e.getKey() + " in " + report)
            .isBetween(min, 4 * timeoutMs + 1000);
      }
      assertThat(steady.get()).startsWith("HTTP/1.1 200");
      pool.shutdown();
      assertThat(http.get("/health").status()).isEqualTo(200);
      assertThat(http.query("m", PROMPT).status()).isEqualTo(200);
      String metrics = http.get("/metrics").body();
      // five stalls after a request line were cut off by the read deadline (the other three by
      // Helidon's idle timer); those inside a /query body count as 4xx (408) on /query; none 5xx
      assertThat(http.server.readDeadlineClosed() - closedBefore).isGreaterThanOrEqualTo(5);
      assertThat(counter(metrics, "/query", "4xx")).isGreaterThanOrEqualTo(2);
      assertNo5xx(http);
    }
  }

  /**
   * Regression (found by everyHostileRequest...: one run in three saw a reset connection instead of
   * the 413): Helidon refused a body over the limit and closed the connection while the client was
   * still sending it, so the client's TCP stack dropped the answer. Up to 2 MiB over the limit, the
   * server now reads and drops the rest and keeps the connection: the client reads its 413 and the
   * next request goes over the same connection.
   */
  @Test
  void aBodyOverTheLimitGetsIts413AndTheConnectionStaysUsable() throws Exception {
    try (HttpFixture http = new HttpFixture(KvRouterServer.Config.builder().maxBodyBytes(LIMIT));
        RawHttp client = new RawHttp("127.0.0.1", http.server.port())) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      byte[] over = padded(QUERY, LIMIT + 1).getBytes(StandardCharsets.UTF_8);
      byte[] farOver = padded(QUERY, LIMIT + (2 << 20)).getBytes(StandardCharsets.UTF_8);
      for (int i = 0; i < 10; i++) {
        RawHttp.Answer a = client.post("/query", i % 2 == 0 ? over : farOver);
        assertThat(a.status()).as(a.body()).isEqualTo(413);
        assertThat(a.body()).contains("larger than the limit of " + LIMIT + " bytes");
        assertThat(client.get("/health").status()).isEqualTo(200);
      }
      assertThat(client.connections()).isEqualTo(1);
      // the same without a declared length (chunked): refused once past the limit, then drained
      try (Socket s = new Socket("127.0.0.1", http.server.port())) {
        s.setSoTimeout(20_000);
        OutputStream out = s.getOutputStream();
        out.write(
            ("POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        for (int off = 0; off < over.length; off += 64 << 10) {
          int n = Math.min(64 << 10, over.length - off);
          out.write((Integer.toHexString(n) + "\r\n").getBytes(StandardCharsets.US_ASCII));
          out.write(over, off, n);
          out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        }
        out.write(
            "0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
        InputStream in = s.getInputStream();
        assertThat(statusLine(s)).startsWith("HTTP/1.1 413");
        StringBuilder rest = new StringBuilder();
        byte[] buf = new byte[4096];
        for (int n; !rest.toString().contains("HTTP/1.1 200") && (n = in.read(buf)) > 0; ) {
          rest.append(new String(buf, 0, n, StandardCharsets.ISO_8859_1));
        }
        assertThat(rest.toString()).contains("HTTP/1.1 200");
      }
      assertNo5xx(http);
    }
  }

  /**
   * Regression (found by thousandsOfConnectionsAndTheServerStillAnswers): a client that hung up in
   * the middle of its body made the body read fail, which was answered (to nobody) as a 500 and
   * logged as an internal error. It is the client's doing: counted as a 400 on the endpoint.
   */
  @Test
  void aClientThatHangsUpMidBodyIsNotAServerError() throws Exception {
    try (HttpFixture http = new HttpFixture()) {
      for (int i = 0; i < 3; i++) {
        try (Socket s = new Socket("127.0.0.1", http.server.port())) {
          s.setSoTimeout(20_000);
          s.getOutputStream()
              .write(
                  ("POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          + "Expect: 100-continue\r\nContent-Length: 500\r\n\r\n")
                      .getBytes(StandardCharsets.US_ASCII));
          s.getOutputStream().flush();
          // 100 Continue: the handler is reading the body when the client goes
          assertThat(statusLine(s)).startsWith("HTTP/1.1 100");
          s.getOutputStream().write("{\"model_name\":".getBytes(StandardCharsets.US_ASCII));
          s.getOutputStream().flush();
        }
      }
      String metrics = "";
      for (int tries = 0; tries < 50 && counter(metrics, "/query", "4xx") < 3; tries++) {
        Thread.sleep(100);
        metrics = http.get("/metrics").body();
      }
      assertThat(counter(metrics, "/query", "4xx")).isEqualTo(3);
      assertNo5xx(http);
    }
  }

  /** Sends {@code prefix} and then nothing; returns how long until the server closed. */
  private static long millisUntilClosed(HttpFixture http, String prefix) throws IOException {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", http.server.port()), 5000);
      s.setSoTimeout(20_000);
      long t0 = System.nanoTime();
      s.getOutputStream().write(prefix.getBytes(StandardCharsets.UTF_8));
      s.getOutputStream().flush();
      InputStream in = s.getInputStream();
      byte[] buf = new byte[4096];
      try {
        while (in.read(buf) >= 0) {
          // an answer (the idle case's 200, a 415) may come first; wait for the close
        }
      } catch (IOException e) {
        // reset by the server: closed as well
      }
      return (System.nanoTime() - t0) / 1_000_000;
    }
  }

  /** Sends a /query body in three parts, within the timeout; returns the status line. */
  private static String slowButInTime(HttpFixture http, String body, long timeoutMs)
      throws Exception {
    try (Socket s = new Socket("127.0.0.1", http.server.port())) {
      s.setSoTimeout(20_000);
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + "Connection: close\r\nContent-Length: "
                  + body.length()
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      int third = body.length() / 3;
      for (int i = 0; i < 3; i++) {
        Thread.sleep(timeoutMs / 5);
        out.write(
            body.substring(i * third, i == 2 ? body.length() : (i + 1) * third)
                .getBytes(StandardCharsets.UTF_8));
        out.flush();
      }
      return new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  // ------------------------------------------------------------------ many connections

  @Test
  @SuppressWarnings(
      "try") // the probe is stopped before its summary is read, and closed again by the try
  void thousandsOfConnectionsAndTheServerStillAnswers() throws Exception {
    try (HttpFixture http = new HttpFixture()) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      assertThat(http.events("m", List.of(stored(new Worker(1, 0), 1, PROMPT, 4))).status())
          .isEqualTo(200);
      List<Socket> sockets = new ArrayList<>();
      String probeSummary;
      int answered = 0;
      try (LatencyProbe probe = new LatencyProbe(http.url, QUERY)) {
        long t0 = System.nanoTime();
        try {
          for (int i = 0; i < CONNECTIONS; i++) {
            Socket s = new Socket();
            sockets.add(s);
            s.connect(new InetSocketAddress("127.0.0.1", http.server.port()), 10_000);
            s.setSoTimeout(20_000);
            String send =
                switch (i % 4) {
                  case 0 -> ""; // idle
                  case 1 -> "GET /hea"; // half a request line
                  case 2 ->
                      "POST /query HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"model\"";
                  default -> "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"; // a whole request
                };
            s.getOutputStream().write(send.getBytes(StandardCharsets.US_ASCII));
          }
          long openMs = (System.nanoTime() - t0) / 1_000_000;
          // every whole request on the crowded server is answered
          for (int i = 3; i < CONNECTIONS; i += 4) {
            assertThat(statusLine(sockets.get(i))).as("connection " + i).startsWith("HTTP/1.1 200");
            answered++;
          }
          // with all of them still open: /health and /query answer, to a new client and to the
          // probe, which gets 200 more requests answered before any socket is closed
          assertThat(http.get("/health").status()).isEqualTo(200);
          assertThat(http.query("m", PROMPT).body()).contains("\"scores\":{\"1\":{\"0\":64}}");
          int before = probe.count() + probe.failures().size();
          assertThat(probe.awaitAttempts(before + 200, PROBE_WAIT)).as(probe.summary()).isTrue();
          probe.close();
          probeSummary = probe.summary();
          System.out.println(
              "HOSTILE connections: "
                  + CONNECTIONS
                  + " opened in "
                  + openMs
                  + " ms, "
                  + answered
                  + " whole requests among them answered 200; probe meanwhile: "
                  + probeSummary);
        } finally {
          for (Socket s : sockets) s.close();
        }
        assertThat(probe.failures()).as(probeSummary).isEmpty();
        assertThat(probe.count()).as(probeSummary).isGreaterThanOrEqualTo(200);
        assertP99IfMeasuring(probe, probeSummary);
      }
      assertThat(http.get("/health").status()).isEqualTo(200);
      assertThat(http.query("m", PROMPT).body()).contains("\"scores\":{\"1\":{\"0\":64}}");
      assertNo5xx(http);
    }
  }

  private static String statusLine(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    StringBuilder sb = new StringBuilder();
    for (int b; (b = in.read()) >= 0 && b != '\n'; ) sb.append((char) b);
    return sb.toString();
  }

  // ------------------------------------------------------------------ helpers

  /** A server whose read timeout is {@code ms}. */
  static HttpFixture withReadTimeout(long ms, KvRouterServer.Config.Builder config) {
    return new HttpFixture(config.readTimeout(Duration.ofMillis(ms)));
  }

  private static HttpRequest.Builder post(String url, String path, String body) {
    return HttpRequest.newBuilder(URI.create(url + path))
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body));
  }

  private static HttpRequest.Builder authed(HttpRequest.Builder b) {
    return b.header("Authorization", "Bearer " + TOKEN);
  }

  /** {@code json} (an object) padded with spaces before its last brace to {@code size} bytes. */
  private static String padded(String json, int size) {
    int pad = size - json.getBytes(StandardCharsets.UTF_8).length;
    if (pad < 0) throw new IllegalArgumentException("already " + -pad + " bytes over");
    return json.substring(0, json.length() - 1) + " ".repeat(pad) + "}";
  }

  private static String tokens(int n) {
    StringBuilder sb = new StringBuilder(n * 7).append("{\"model_name\":\"m\",\"token_ids\":[");
    for (int i = 0; i < n; i++) sb.append(i == 0 ? "" : ",").append(1_000_000 + i % 64);
    return sb.append("]}").toString();
  }

  private static String abbreviate(String s) {
    return s.length() <= 300 ? s : s.substring(0, 297) + "...";
  }

  /** The value of {@code kvrouter_http_requests_total} for an endpoint and status class. */
  static double counter(String metrics, String endpoint, String statusClass) {
    double sum = 0;
    for (String line : metrics.split("\n")) {
      if (line.startsWith("kvrouter_http_requests_total{")
          && line.contains("endpoint=\"" + endpoint + "\"")
          && line.contains("status_class=\"" + statusClass + "\"")) {
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return sum;
  }

  static void assertNo5xx(HttpFixture http) {
    assertNo5xxBut(http.get("/metrics").body(), null);
  }

  /** No endpoint but {@code allowed} (may be null) answered 5xx, by the server's own counters. */
  static void assertNo5xxBut(String metrics, String allowed) {
    for (String line : metrics.split("\n")) {
      if (line.startsWith("kvrouter_http_requests_total{")
          && line.contains("5xx")
          && (allowed == null || !line.contains("endpoint=\"" + allowed + "\""))) {
        assertThat(Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1))).as(line).isZero();
      }
    }
  }
}
