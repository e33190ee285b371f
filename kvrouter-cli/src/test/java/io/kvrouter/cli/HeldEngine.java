package io.kvrouter.cli;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An engine whose streams the test holds: {@code GET /health} 200, {@code /v1/models}, and a
 * streamed {@code POST /v1/chat/completions} that sends its first chunk, then waits until {@link
 * #release()} before the rest and {@code data: [DONE]}. On the JDK's own HTTP server, so that a
 * test can run it beside a gateway in another process.
 */
final class HeldEngine implements AutoCloseable {
  private final HttpServer server;
  private final ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor();
  private final String host;
  private final CountDownLatch released = new CountDownLatch(1);

  /** Counted down when a chat request arrived (before its first chunk). */
  final CountDownLatch arrived = new CountDownLatch(1);

  /** Chat requests received. */
  final AtomicInteger chats = new AtomicInteger();

  HeldEngine(String host) throws IOException {
    this.host = host;
    server = HttpServer.create(new InetSocketAddress(host, 0), 0);
    server.setExecutor(threads);
    server.createContext("/health", x -> answer(x, 200, "application/json", "{}"));
    server.createContext(
        "/v1/models",
        x ->
            answer(
                x,
                200,
                "application/json",
                "{\"object\":\"list\",\"data\":[{\"id\":\"tiny\",\"object\":\"model\","
                    + "\"max_model_len\":4096}]}"));
    server.createContext("/v1/chat/completions", this::chat);
    server.start();
  }

  String url() {
    return "http://" + host + ":" + server.getAddress().getPort();
  }

  int port() {
    return server.getAddress().getPort();
  }

  /** Lets every held stream (and every later one) finish. */
  void release() {
    released.countDown();
  }

  private static void answer(HttpExchange x, int status, String type, String body)
      throws IOException {
    x.getRequestBody().readAllBytes();
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("Content-Type", type);
    x.sendResponseHeaders(status, b.length);
    try (OutputStream out = x.getResponseBody()) {
      out.write(b);
    }
  }

  private static String chunk(String content) {
    return "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
        + "\"model\":\"tiny\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
        + content
        + "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
  }

  private void chat(HttpExchange x) throws IOException {
    String body = new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    chats.incrementAndGet();
    arrived.countDown();
    x.getResponseHeaders().set("Content-Type", "text/event-stream; charset=utf-8");
    x.sendResponseHeaders(200, 0);
    try (OutputStream out = x.getResponseBody()) {
      out.write(chunk("held").getBytes(StandardCharsets.UTF_8));
      out.flush();
      if (!released.await(120, TimeUnit.SECONDS)) return;
      out.write(chunk(" then released").getBytes(StandardCharsets.UTF_8));
      if (body.contains("\"include_usage\":true")) {
        out.write(
            ("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
                    + "\"model\":\"tiny\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,"
                    + "\"total_tokens\":10,\"completion_tokens\":2}}\n\n")
                .getBytes(StandardCharsets.UTF_8));
      }
      out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    release();
    server.stop(0);
    threads.shutdownNow();
  }
}
