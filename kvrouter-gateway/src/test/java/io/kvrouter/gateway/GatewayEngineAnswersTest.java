package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayStubTest.completion;
import static io.kvrouter.gateway.GatewayStubTest.range;
import static io.kvrouter.gateway.GatewayStubTest.register;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Engines that answer in ways a well-behaved HTTP server seldom does, on raw sockets ({@link
 * RawEngine}): a huge first SSE event, an SSE line that never ends, bodies framed by the close of
 * the connection (HTTP/1.0), interim {@code 103 Early Hints} answers (issue 31, #11 and #12).
 */
class GatewayEngineAnswersTest {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).maxBodyBytes(1 << 20).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).maxAttempts(1).build());
    open.add(g);
    return g;
  }

  private RawEngine engine(RawEngine.Answer a) throws IOException {
    RawEngine e = new RawEngine(a);
    open.add(e);
    return e;
  }

  private static HttpResponse<String> post(Gateway g, String body) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
            .header("Content-Type", "application/json")
            .timeout(Duration.ofSeconds(90)) // a deadline for a loaded machine, not a measure
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  static final String SSE_HEAD =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
          + "Connection: close\r\n\r\n";

  /** Writes {@code b} as HTTP/1.1 chunks of at most 16 KiB. */
  static void chunked(OutputStream out, byte[] b) throws IOException {
    for (int off = 0; off < b.length; off += 16 * 1024) {
      int n = Math.min(16 * 1024, b.length - off);
      out.write((Integer.toHexString(n) + "\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(b, off, n);
      out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
    }
  }

  static byte[] bigEvent(int contentBytes) {
    byte[] a = new byte[contentBytes];
    Arrays.fill(a, (byte) 'a');
    return ("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\","
            + "\"choices\":[{\"index\":0,\"text\":\""
            + new String(a, StandardCharsets.US_ASCII)
            + "\",\"finish_reason\":null}]}\n\n")
        .getBytes(StandardCharsets.US_ASCII);
  }

  /**
   * #11: the first event of a stream was searched for its end from its start at every read, so a 10
   * MB event cost 100 times a 1 MB one. Both go through the gateway here; the best of three of each
   * is compared in the same run (the machine is shared: a generous bound, linear is about 10x).
   */
  @Test
  void aHugeFirstEventCostsTimeLinearInItsSize() throws Exception {
    Gateway g = gateway();
    byte[] small = bigEvent(1_000_000);
    byte[] large = bigEvent(10_000_000);
    byte[] done = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);
    RawEngine e =
        engine(
            (head, body, out) -> {
              out.write(SSE_HEAD.getBytes(StandardCharsets.US_ASCII));
              chunked(out, body.contains("\"max_tokens\":4") ? large : small);
              chunked(out, done);
              out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            });
    register(g, 1, e.url());
    String smallReq = completion(range(8), true, "");
    String largeReq = smallReq.replace("\"max_tokens\":3", "\"max_tokens\":4");
    for (int i = 0; i < 3; i++) assertThat(post(g, smallReq).statusCode()).isEqualTo(200); // JIT
    long bestSmall = Long.MAX_VALUE;
    long bestLarge = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      long t0 = System.nanoTime();
      HttpResponse<String> s = post(g, smallReq);
      long t1 = System.nanoTime();
      HttpResponse<String> l = post(g, largeReq);
      long t2 = System.nanoTime();
      assertThat(s.statusCode()).isEqualTo(200);
      assertThat(l.statusCode()).isEqualTo(200);
      assertThat(s.body().length()).isBetween(small.length, small.length + 100);
      assertThat(l.body().length()).isBetween(large.length, large.length + 100);
      assertThat(l.body()).endsWith("data: [DONE]\n\n");
      bestSmall = Math.min(bestSmall, t1 - t0);
      bestLarge = Math.min(bestLarge, t2 - t1);
    }
    double ratio = (double) bestLarge / bestSmall;
    System.out.printf(
        "SSE first event: 1 MB best %.1f ms, 10 MB best %.1f ms, ratio %.1f%n",
        bestSmall / 1e6, bestLarge / 1e6, ratio);
    assertThat(ratio).as("10 MB vs 1 MB first event").isLessThan(30);
  }

  /**
   * #11: a line that never ends grew the gateway's buffer without bound. It is refused at the event
   * bound (SseBuffer.MAX_EVENT_BYTES) with an error naming it, the engine's connection is closed
   * (the engine cannot write much past the bound), and the engine counts as failed.
   */
  @Test
  void aStreamedLineThatNeverEndsIsRefusedAtTheBound() throws Exception {
    Gateway g = gateway();
    byte[] block = new byte[1 << 20];
    Arrays.fill(block, (byte) 'x');
    RawEngine e =
        engine(
            (head, body, out) -> {
              out.write(SSE_HEAD.getBytes(StandardCharsets.US_ASCII));
              chunked(out, "data: ".getBytes(StandardCharsets.US_ASCII));
              for (int i = 0; i < 256; i++) chunked(out, block); // 256 MiB, then it gives up
            });
    register(g, 1, e.url());
    HttpResponse<String> r = post(g, completion(range(8), true, ""));
    assertThat(r.statusCode()).as(r.body()).isEqualTo(502);
    assertThat(r.body())
        .startsWith("{\"error\":{")
        .contains("engine_event_too_large")
        .contains(Integer.toString(SseBuffer.MAX_EVENT_BYTES));
    assertThat(r.body().length()).isLessThan(2_000);
    GatewayStubTest.await("the engine's connection closed", () -> e.writing.get() == 0);
    assertThat(e.written.get()).isLessThan(SseBuffer.MAX_EVENT_BYTES + (16L << 20));
  }

  /** #11, after the client got its first event: the stream ends with an error event. */
  @Test
  void aLineThatNeverEndsMidStreamEndsTheStreamWithAnError() throws Exception {
    Gateway g = gateway();
    byte[] block = new byte[1 << 20];
    Arrays.fill(block, (byte) 'x');
    RawEngine e =
        engine(
            (head, body, out) -> {
              out.write(SSE_HEAD.getBytes(StandardCharsets.US_ASCII));
              chunked(out, bigEvent(10));
              chunked(out, "data: ".getBytes(StandardCharsets.US_ASCII));
              for (int i = 0; i < 256; i++) chunked(out, block);
            });
    register(g, 1, e.url());
    HttpResponse<String> r = post(g, completion(range(8), true, ""));
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).startsWith(new String(bigEvent(10), StandardCharsets.US_ASCII));
    assertThat(r.body()).contains("engine_event_too_large").doesNotContain("xxxxxxxx");
    assertThat(r.body().length()).isLessThan(2_000);
    GatewayStubTest.await("the engine's connection closed", () -> e.writing.get() == 0);
    assertThat(e.written.get()).isLessThan(SseBuffer.MAX_EVENT_BYTES + (16L << 20));
  }

  static final String WHOLE =
      "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\","
          + "\"choices\":[{\"index\":0,\"text\":\"t0 t1 t2\",\"finish_reason\":\"length\"}],"
          + "\"usage\":{\"prompt_tokens\":8,\"total_tokens\":11,\"completion_tokens\":3}}";

  static String events() {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < 3; i++) {
      b.append("data: ").append(StubEngine.chunk(false, i)).append("\n\n");
    }
    return b.append("data: [DONE]\n\n").toString();
  }

  /**
   * #12: answers framed by the close of the connection (HTTP/1.0, or HTTP/1.1 without
   * Content-Length or chunking, RFC 9112 6.3) reach the client whole, streamed or not.
   */
  @Test
  void answersFramedByTheCloseOfTheConnectionPassThroughWhole() throws Exception {
    for (String version : List.of("HTTP/1.0", "HTTP/1.1")) {
      Gateway g = gateway();
      RawEngine e =
          engine(
              (head, body, out) -> {
                boolean stream = body.contains("\"stream\":true");
                String close = version.equals("HTTP/1.1") ? "Connection: close\r\n" : "";
                out.write(
                    (version
                            + " 200 OK\r\nContent-Type: "
                            + (stream ? "text/event-stream" : "application/json")
                            + "\r\n"
                            + close
                            + "\r\n"
                            + (stream ? events() : WHOLE))
                        .getBytes(StandardCharsets.UTF_8));
              });
      register(g, 1, e.url());
      HttpResponse<String> whole = post(g, completion(range(8), false, ""));
      assertThat(whole.statusCode()).as(version + " whole: " + whole.body()).isEqualTo(200);
      assertThat(whole.body()).as(version).isEqualTo(WHOLE);
      HttpResponse<String> stream = post(g, completion(range(8), true, ""));
      assertThat(stream.statusCode()).as(version + " stream: " + stream.body()).isEqualTo(200);
      assertThat(stream.body()).as(version).isEqualTo(events());
    }
  }

  /**
   * #12: a {@code 103 Early Hints} (or any 1xx) before the answer is skipped, not the answer. Each
   * answer has a gateway and an engine of its own; the connection after a 1xx is the next test's.
   */
  @Test
  void anInterimAnswerBeforeTheAnswerIsSkipped() throws Exception {
    for (boolean streamed : new boolean[] {false, true}) {
      interimAnswerSkipped(streamed);
    }
  }

  private void interimAnswerSkipped(boolean streamed) throws Exception {
    Gateway g = gateway();
    RawEngine e =
        engine(
            (head, body, out) -> {
              boolean stream = body.contains("\"stream\":true");
              out.write(
                  ("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                          + "HTTP/1.1 100 Continue\r\n\r\n"
                          + "HTTP/1.1 200 OK\r\nContent-Type: "
                          + (stream ? "text/event-stream" : "application/json")
                          + (stream
                              ? "\r\nTransfer-Encoding: chunked"
                              : "\r\nContent-Length: " + WHOLE.length())
                          + "\r\nConnection: close\r\n\r\n")
                      .getBytes(StandardCharsets.UTF_8));
              if (stream) {
                // chunks of 16 KiB, with an extension on the last one and a trailer field
                chunked(out, events().getBytes(StandardCharsets.UTF_8));
                out.write("0;end=1\r\nX-Trailer: 1\r\n\r\n".getBytes(StandardCharsets.UTF_8));
              } else {
                out.write(WHOLE.getBytes(StandardCharsets.UTF_8));
              }
            });
    register(g, 1, e.url());
    HttpResponse<String> answer = post(g, completion(range(8), streamed, ""));
    assertThat(answer.statusCode()).as(answer.body()).isEqualTo(200);
    assertThat(answer.body()).isEqualTo(streamed ? events() : WHOLE);
  }

  /**
   * After an interim answer the connection is closed, not pooled: Helidon's client judged it by the
   * 1xx head (no framing, no {@code Connection: close}) and pooled a connection the engine had
   * closed, so a next request on it failed as a 502 {@code connect} (CloseUnframedAnswers). The
   * engine here keeps its connections open: two requests must arrive on two connections.
   */
  @Test
  void aConnectionThatCarriedAnInterimAnswerIsNotReused() throws Exception {
    Gateway g = gateway();
    RawEngine e =
        engine(
            (head, body, out) ->
                out.write(
                    ("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                            + "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            + "Content-Length: "
                            + WHOLE.length()
                            + "\r\n\r\n"
                            + WHOLE)
                        .getBytes(StandardCharsets.UTF_8)));
    e.keepAlive = true;
    register(g, 1, e.url());
    for (int i = 0; i < 2; i++) {
      HttpResponse<String> answer = post(g, completion(range(8), false, ""));
      assertThat(answer.statusCode()).as("request %d: %s", i, answer.body()).isEqualTo(200);
      assertThat(answer.body()).isEqualTo(WHOLE);
    }
    assertThat(e.answeredConnections.get()).as("connections that carried a request").isEqualTo(2);
  }
}
