package io.kvrouter.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The load of {@code bench fleet --engine-kind llama-cpp}: the chat workload's turns sent through
 * the gateway's {@code /v1/chat/completions}, streamed, at most {@code clients} in flight, each
 * turn after its conversation's previous one was answered; TTFT is measured here, at the client:
 * from sending to the first chunk that carries content.
 *
 * <pre>
 * Implementation notes
 *
 * The caller's thread dispatches the turns in the workload's order: it waits for the turn's
 * predecessor in its conversation (done[], one CompletableFuture per conversation, completed by
 * the predecessor's thread whatever its outcome), takes one of --clients permits and runs the
 * request on a virtual thread. Results go into ChatRun.Result objects, one per turn, each written
 * by its request's thread only; the executor's close orders those writes before the caller reads
 * them.
 *
 * A request is answered when its stream held a content chunk (or a finish_reason), a usage chunk
 * and [DONE]; usage gives prompt_tokens and prompt_tokens_details.cached_tokens (llama.cpp:
 * timings.cache_n). A status other than 200 keeps the gateway's error code and message; an
 * {"error": ...} event fails the request.
 * </pre>
 */
final class ChatLoad {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpClient http;
  private final String model;
  private final int maxTokens;
  private final int clients;

  ChatLoad(HttpClient http, String model, int maxTokens, int clients) {
    this.http = http;
    this.model = model;
    this.maxTokens = maxTokens;
    this.clients = clients;
  }

  /** Sends every turn of {@code w} to {@code gateway}; one result per turn, in the same order. */
  ChatRun.Result[] run(String gateway, ChatWorkload w) throws InterruptedException {
    List<ChatWorkload.Turn> turns = w.turns();
    ChatRun.Result[] out = new ChatRun.Result[turns.size()];
    int conversations = 0;
    for (ChatWorkload.Turn t : turns) conversations = Math.max(conversations, t.conversation() + 1);
    // a generic array cannot be created; this one only ever holds CompletableFuture<Void>
    @SuppressWarnings("unchecked")
    CompletableFuture<Void>[] done =
        (CompletableFuture<Void>[]) new CompletableFuture<?>[conversations];
    for (int c = 0; c < conversations; c++) done[c] = CompletableFuture.completedFuture(null);
    URI uri = URI.create(gateway + "/v1/chat/completions");
    Semaphore permits = new Semaphore(clients);
    try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
      for (int i = 0; i < turns.size(); i++) {
        ChatWorkload.Turn t = turns.get(i);
        done[t.conversation()].join();
        permits.acquire();
        CompletableFuture<Void> mine = new CompletableFuture<>();
        done[t.conversation()] = mine;
        ChatRun.Result r = new ChatRun.Result(t.conversation(), t.turn(), t.systemPrompt());
        out[i] = r;
        int k = i;
        pool.execute(
            () -> {
              try {
                one(uri, t, k, r);
              } finally {
                permits.release();
                mine.complete(null);
              }
            });
      }
      pool.shutdown();
      pool.awaitTermination(1, TimeUnit.DAYS);
    }
    return out;
  }

  private void one(URI uri, ChatWorkload.Turn t, int i, ChatRun.Result r) {
    String body = ChatWorkload.body(model, t, maxTokens);
    long t0 = System.nanoTime();
    try {
      HttpResponse<Stream<String>> resp =
          http.send(
              HttpRequest.newBuilder(uri)
                  .header("Content-Type", "application/json")
                  .header("x-request-id", "chat-" + i)
                  .POST(HttpRequest.BodyPublishers.ofString(body))
                  .build(),
              HttpResponse.BodyHandlers.ofLines());
      try (Stream<String> lines = resp.body()) {
        if (resp.statusCode() != 200) {
          StringBuilder b = new StringBuilder();
          lines.forEach(l -> b.append(l).append('\n'));
          r.why = "status " + resp.statusCode() + ": " + errorMessage(b.toString().strip());
          return;
        }
        r.worker = resp.headers().firstValueAsLong("x-kvrouter-worker").orElse(-1);
        r.predicted = (int) resp.headers().firstValueAsLong("x-kvrouter-overlap-tokens").orElse(0);
        boolean[] seen = new boolean[3]; // first content, usage, [DONE]
        lines.forEach(
            line -> {
              if (!line.startsWith("data: ") || seen[2] || r.why != null) return;
              String d = line.substring(6);
              long now = System.nanoTime();
              if (d.equals("[DONE]")) {
                seen[2] = true;
                r.e2eMs = (now - t0) / 1e6;
                return;
              }
              JsonNode n;
              try {
                n = JSON.readTree(d);
              } catch (Exception x) {
                r.why = "unreadable chunk: " + d;
                return;
              }
              if (n.has("error")) {
                r.why = "error event in the stream: " + d;
                return;
              }
              JsonNode u = n.path("usage");
              if (u.isObject()) {
                r.prompt = u.path("prompt_tokens").asInt();
                r.cached = u.path("prompt_tokens_details").path("cached_tokens").asInt(0);
                r.output = u.path("completion_tokens").asInt();
                seen[1] = true;
              }
              JsonNode c = n.path("choices").path(0);
              boolean content = c.path("delta").path("content").isTextual();
              content &= !c.path("delta").path("content").asText().isEmpty();
              if (!seen[0] && (content || c.path("finish_reason").isTextual())) {
                seen[0] = true;
                r.ttftMs = (now - t0) / 1e6;
              }
            });
        if (r.why == null) {
          if (!seen[2]) r.why = "stream ended without [DONE]";
          else if (!seen[1]) r.why = "no usage";
          else if (!seen[0]) r.why = "no content";
          else r.ok = true;
        }
      }
    } catch (Exception x) {
      if (x instanceof InterruptedException) Thread.currentThread().interrupt();
      r.why = x.getClass().getSimpleName() + (x.getMessage() == null ? "" : ": " + x.getMessage());
    }
  }

  /** The message of an OpenAI-shaped error body, else the body (at most 300 characters). */
  private static String errorMessage(String body) {
    String m = body;
    try {
      JsonNode e = JSON.readTree(body).path("error");
      if (e.hasNonNull("message")) m = e.path("code").asText("") + " " + e.get("message").asText();
    } catch (Exception x) {
      // not JSON: the body as it is
    }
    return m.length() > 300 ? m.substring(0, 300) + "..." : m;
  }
}
