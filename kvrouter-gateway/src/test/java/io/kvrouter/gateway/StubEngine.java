package io.kvrouter.gateway;

import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.WebServer;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A tiny engine for the gateway's tests: a Helidon server answering {@code /v1/completions} and
 * {@code /v1/chat/completions} with canned vLLM-shaped bodies and SSE streams, and {@code /health}.
 * It records what it received, and its behaviour is switched by the test.
 */
final class StubEngine implements AutoCloseable {
  final List<byte[]> bodies = new CopyOnWriteArrayList<>();
  final List<String> requestIds = new CopyOnWriteArrayList<>();
  final List<String> auth = new CopyOnWriteArrayList<>();
  // the traceparent and tracestate headers of each request, "-" when it had none
  final List<String> traceparents = new CopyOnWriteArrayList<>();
  final List<String> tracestates = new CopyOnWriteArrayList<>();
  // the X-data-parallel-rank header of each request, "-" when it had none
  final List<String> dpRanks = new CopyOnWriteArrayList<>();
  final AtomicInteger status = new AtomicInteger(200);
  final AtomicBoolean healthy = new AtomicBoolean(true);
  final AtomicLong cachedTokens = new AtomicLong(0);
  final AtomicLong promptTokens = new AtomicLong(12);
  final AtomicInteger chunks = new AtomicInteger(3);

  /** When set, a stream answers its 200 and event-stream headers and then ends, empty. */
  final AtomicBoolean emptyStream = new AtomicBoolean(false);

  /**
   * When set, a whole answer goes out chunked (no Content-Length), its first half flushed, and the
   * connection is then dropped without the last chunk: an engine that dies mid-answer.
   */
  final AtomicBoolean breakWhole = new AtomicBoolean(false);

  /** When set, a stream waits on this latch after its first chunk. */
  volatile CountDownLatch holdAfterFirst;

  /** When set, every answer waits on this latch before it starts (nothing is sent meanwhile). */
  volatile CountDownLatch holdBeforeAnswer;

  /** Counted down when a request arrived (before any hold). */
  volatile CountDownLatch arrived = new CountDownLatch(1);

  /** Counted down when a stream's write fails (the gateway closed the connection). */
  final CountDownLatch aborted = new CountDownLatch(1);

  final AtomicInteger health = new AtomicInteger();

  /** {@code POST /tokenize} calls (each answered {@code {"tokens": []}}). */
  final AtomicInteger tokenizeCalls = new AtomicInteger();

  /** The client-side port of each connection a health check / a generation request came on. */
  final List<Integer> healthPorts = new CopyOnWriteArrayList<>();

  final List<Integer> requestPorts = new CopyOnWriteArrayList<>();
  private final WebServer server;

  StubEngine() {
    server =
        WebServer.builder()
            .host("127.0.0.1")
            .port(0)
            .shutdownGracePeriod(Duration.ZERO)
            .routing(
                r ->
                    r.post("/v1/completions", (q, s) -> answer(q, s, false))
                        .post("/v1/chat/completions", (q, s) -> answer(q, s, true))
                        // as llama.cpp's server answers a body in vLLM's shape: no tokens
                        .post(
                            "/tokenize",
                            (q, s) -> {
                              tokenizeCalls.incrementAndGet();
                              s.header(HeaderNames.CONTENT_TYPE, "application/json")
                                  .send("{\"tokens\":[]}");
                            })
                        // one stub as many engines: base URLs url()/e1, url()/e2 ... (url(n))
                        .post("/{engine}/v1/completions", (q, s) -> answer(q, s, false))
                        .get("/{engine}/health", (q, s) -> s.send())
                        .get(
                            "/health",
                            (q, s) -> {
                              health.incrementAndGet();
                              healthPorts.add(q.remotePeer().port());
                              s.status(
                                      healthy.get()
                                          ? Status.OK_200
                                          : Status.SERVICE_UNAVAILABLE_503)
                                  .send();
                            }))
            .build()
            .start();
  }

  String url() {
    return "http://127.0.0.1:" + server.port();
  }

  /** Another base URL of this stub (a path prefix): to the gateway, engine {@code n}. */
  String url(int n) {
    return url() + "/e" + n;
  }

  int hits() {
    return bodies.size();
  }

  /** The i-th streamed event of an answer (chat or completion). */
  static String chunk(boolean chat, int i) {
    return chat
        ? "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"tiny\","
            + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t"
            + i
            + "\"},\"logprobs\":null,\"finish_reason\":null}]}"
        : "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\","
            + "\"choices\":[{\"index\":0,\"text\":\"t"
            + i
            + "\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}";
  }

  String usage() {
    long c = cachedTokens.get();
    long p = promptTokens.get();
    return "{\"prompt_tokens\":"
        + p
        + ",\"total_tokens\":"
        + (p + chunks.get())
        + ",\"completion_tokens\":"
        + chunks.get()
        + (c > 0 ? ",\"prompt_tokens_details\":{\"cached_tokens\":" + c + "}" : "")
        + "}";
  }

  String usageChunk(boolean chat) {
    return "{\"id\":\"x\",\"object\":\""
        + (chat ? "chat.completion.chunk" : "text_completion")
        + "\",\"created\":1,\"model\":\"tiny\",\"choices\":[],\"usage\":"
        + usage()
        + "}";
  }

  String whole(boolean chat) {
    return chat
        ? "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"tiny\","
            + "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},"
            + "\"finish_reason\":\"stop\"}],\"usage\":"
            + usage()
            + "}"
        : "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\","
            + "\"choices\":[{\"index\":0,\"text\":\"hi\",\"finish_reason\":\"stop\"}],\"usage\":"
            + usage()
            + "}";
  }

  private void answer(ServerRequest q, ServerResponse s, boolean chat) throws Exception {
    byte[] body = q.content().inputStream().readAllBytes();
    bodies.add(body);
    requestPorts.add(q.remotePeer().port());
    requestIds.add(q.headers().first(HeaderNames.create("x-request-id")).orElse(null));
    auth.add(q.headers().first(HeaderNames.AUTHORIZATION).orElse(null));
    traceparents.add(q.headers().first(HeaderNames.create("traceparent")).orElse("-"));
    tracestates.add(q.headers().first(HeaderNames.create("tracestate")).orElse("-"));
    dpRanks.add(q.headers().first(HeaderNames.create("X-data-parallel-rank")).orElse("-"));
    arrived.countDown();
    CountDownLatch before = holdBeforeAnswer;
    if (before != null) before.await(30, TimeUnit.SECONDS);
    int st = status.get();
    if (st != 200) {
      s.status(Status.create(st)).header(HeaderNames.CONTENT_TYPE, "application/json");
      s.send(
          "{\"object\":\"error\",\"message\":\"stub fails\",\"type\":\"InternalServerError\",\"param\":null,\"code\":"
              + st
              + "}");
      return;
    }
    String text = new String(body, StandardCharsets.UTF_8);
    if (!text.contains("\"stream\":true")) {
      s.header(HeaderNames.CONTENT_TYPE, "application/json");
      byte[] w = whole(chat).getBytes(StandardCharsets.UTF_8);
      if (breakWhole.get()) {
        OutputStream out = s.outputStream();
        out.write(w, 0, w.length / 2);
        out.flush();
        throw new IllegalStateException("the stub engine dies mid-answer");
      }
      s.send(w);
      return;
    }
    s.header(HeaderNames.CONTENT_TYPE, "text/event-stream; charset=utf-8");
    if (emptyStream.get()) {
      s.outputStream().close();
      return;
    }
    boolean usage = text.contains("\"include_usage\":true");
    try (OutputStream out = s.outputStream()) {
      for (int i = 0; i < chunks.get(); i++) {
        out.write(("data: " + chunk(chat, i) + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        CountDownLatch hold = holdAfterFirst;
        if (i == 0 && hold != null) {
          // keep writing small keep-alive comments until the gateway goes away or released
          while (!hold.await(20, TimeUnit.MILLISECONDS)) {
            out.write(": ping\n\n".getBytes(StandardCharsets.UTF_8));
            out.flush();
          }
        }
      }
      if (usage) {
        out.write(("data: " + usageChunk(chat) + "\n\n").getBytes(StandardCharsets.UTF_8));
      }
      out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
    } catch (RuntimeException | IOException e) {
      aborted.countDown();
    }
  }

  /** What a client reading this engine directly gets for a stream. */
  String expectedStream(boolean chat, boolean withUsage) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < chunks.get(); i++) b.append("data: ").append(chunk(chat, i)).append("\n\n");
    if (withUsage) b.append("data: ").append(usageChunk(chat)).append("\n\n");
    return b.append("data: [DONE]\n\n").toString();
  }

  @Override
  public void close() {
    server.stop();
  }
}
