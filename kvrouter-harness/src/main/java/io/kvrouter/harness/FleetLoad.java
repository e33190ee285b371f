package io.kvrouter.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.sim.trace.TracePrompts;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * {@code bench fleet}'s paced load: the trace replayed through the gateways as streamed {@code
 * /v1/completions} with token-id prompts, at the trace's arrival times divided by {@code --speedup}
 * x {@code --time-scale}, at most {@code --clients} in flight; request i goes to gateway i mod N.
 *
 * <pre>
 * Implementation notes
 *
 * One platform thread (the caller of replay) paces the arrivals, sleeping until each request's
 * due time; each request then takes one of --clients permits (a Semaphore) and runs on its own
 * virtual thread with the shared java.net.http.HttpClient (HTTP/1.1). A request that waits for a
 * permit is late: its TTFT and end-to-end latency count from its due time, so client-side
 * queueing is measured, not hidden.
 *
 * Data layout: Slots, one plain array per figure indexed by request (nanoTime instants and
 * durations, token counts, the engine that answered, ok and why). Each request's virtual thread is
 * the only writer of its slot; the executor's close (shutdown, awaitTermination) orders those
 * writes before summarize() reads them on the pacing thread. summarize() converts wall
 * nanoseconds to model milliseconds (x --time-scale) and fills the PolicyRun: sorted TTFT,
 * inter-token and end-to-end latencies of the answered requests, tokens, the makespan (first due
 * to last [DONE]), the imbalance, and one line per failed request.
 *
 * With a LiveAdmission (bench fleet --admission), request i carries its tenant in the
 * x-kvrouter-tenant header and its priority in the body's priority field, and summarize() also
 * keeps the per-request figures the admission table needs (PolicyRun's request* arrays).
 *
 * A request is answered when its stream held at least one token, a usage chunk (choices: []) and
 * [DONE]; an HTTP status other than 200 keeps the gateway's OpenAI error code and message (the
 * first 300 characters); an {"error": ...} event in the stream fails the request.
 * </pre>
 */
final class FleetLoad {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * A token gap shorter than this (wall) was read in a burst: the engines stream a token per decode
   * step (a millisecond or more at any speedup the bench runs), so two tokens read closer together
   * were waiting in the client's buffer.
   */
  static final long BURST_NANOS = 50_000;

  private final HttpClient http;
  private final FleetBench.Settings s;

  FleetLoad(HttpClient http, FleetBench.Settings settings) {
    this.http = http;
    this.s = settings;
  }

  /** Every request's results, one slot per request, each written by its own request's thread. */
  private static final class Slots {
    final long[] sentAt;
    final long[] endedAt;
    final long[] worker;
    final long[] ttft;
    final long[] e2e;
    final long[] finish;
    final long[][] itl;
    final int[] prompt;
    final int[] cached;
    final int[] predicted;
    final int[] output;
    final boolean[] ok;
    final String[] why;
    final String[] detail;

    Slots(int n) {
      sentAt = new long[n];
      endedAt = new long[n];
      worker = new long[n];
      ttft = new long[n];
      e2e = new long[n];
      finish = new long[n];
      itl = new long[n][];
      prompt = new int[n];
      cached = new int[n];
      predicted = new int[n];
      output = new int[n];
      ok = new boolean[n];
      why = new String[n];
      detail = new String[n];
    }
  }

  /**
   * Replays {@code prompts} through the gateways at {@code gatewayUrls}; the figures into run. With
   * {@code admission} (or null), each request carries its tenant and priority.
   */
  void replay(
      List<String> gatewayUrls, TracePrompts prompts, PolicyRun run, LiveAdmission admission)
      throws InterruptedException {
    int n = prompts.size();
    Slots slots = new Slots(n);
    Semaphore permits = new Semaphore(s.clients());
    double scale = s.speedup() * s.timeScale();
    long t0 = System.nanoTime() + 50_000_000L;
    URI[] uris = new URI[gatewayUrls.size()];
    for (int g = 0; g < uris.length; g++) {
      uris[g] = URI.create(gatewayUrls.get(g) + "/v1/completions");
    }
    try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
      for (int i = 0; i < n; i++) {
        long due = due(prompts, i, t0, scale);
        long wait = due - System.nanoTime();
        if (wait > 0) TimeUnit.NANOSECONDS.sleep(wait);
        permits.acquire();
        int k = i;
        pool.execute(
            () -> {
              try {
                slots.sentAt[k] = System.nanoTime();
                one(uris[k % uris.length], prompts, k, due, slots, admission);
              } finally {
                slots.endedAt[k] = System.nanoTime();
                permits.release();
              }
            });
      }
      pool.shutdown();
      pool.awaitTermination(1, TimeUnit.DAYS);
    }
    summarize(prompts, slots, t0, scale, run);
    if (admission != null) perRequest(slots, t0, run);
  }

  /** The per-request figures of bench fleet --admission, in model time. */
  private void perRequest(Slots r, long t0, PolicyRun run) {
    int n = r.ok.length;
    double k = s.timeScale();
    run.requestTtftMs = new double[n];
    run.requestWhy = new String[n];
    run.requestServedTokens = new long[n];
    run.requestFinishSec = new double[n];
    run.requestPromptTokens = new long[n];
    run.requestCachedTokens = new long[n];
    for (int i = 0; i < n; i++) {
      if (r.ok[i]) {
        run.requestPromptTokens[i] = r.prompt[i];
        run.requestCachedTokens[i] = r.cached[i];
        run.requestTtftMs[i] = r.ttft[i] * k / 1e6;
        run.requestServedTokens[i] = Math.max(0, r.prompt[i] - r.cached[i]) + (long) r.output[i];
        run.requestFinishSec[i] = (r.finish[i] - t0) * k / 1e9;
      } else {
        run.requestTtftMs[i] = Double.NaN;
        run.requestFinishSec[i] = Double.NaN;
        run.requestWhy[i] = r.why[i] == null ? "unknown" : r.why[i];
      }
    }
  }

  private void summarize(TracePrompts prompts, Slots r, long t0, double scale, PolicyRun run) {
    int n = prompts.size();
    double k = s.timeScale();
    List<Double> t = new ArrayList<>();
    List<Double> e = new ArrayList<>();
    List<Double> tpot = new ArrayList<>();
    double[] late = new double[n];
    long itlCount = 0;
    for (long[] a : r.itl) if (a != null) itlCount += a.length;
    double[] itlMs = new double[(int) itlCount];
    int at = 0;
    long last = t0;
    for (int i = 0; i < n; i++) {
      run.sent++;
      late[i] = Math.max(0, r.sentAt[i] - due(prompts, i, t0, scale)) / 1e6;
      if (!r.ok[i]) {
        run.errors++;
        run.errorReasons.merge(r.why[i] == null ? "unknown" : r.why[i], 1, Integer::sum);
        run.failed.add(
            String.format(
                Locale.ROOT,
                "fleet-%d (due at %.1f s, sent %.0f ms late, ended %.0f ms after sending, wall): %s",
                i,
                (due(prompts, i, t0, scale) - t0) / 1e9,
                Math.max(0, r.sentAt[i] - due(prompts, i, t0, scale)) / 1e6,
                (r.endedAt[i] - r.sentAt[i]) / 1e6,
                r.detail[i] != null ? r.detail[i] : r.why[i] == null ? "unknown" : r.why[i]));
        continue;
      }
      run.completed++;
      t.add(r.ttft[i] * k / 1e6);
      e.add(r.e2e[i] * k / 1e6);
      long span = 0;
      for (long g : r.itl[i]) {
        itlMs[at++] = g * k / 1e6;
        span += g;
        if (g < BURST_NANOS) run.burstGaps++;
      }
      run.tokenGaps += r.itl[i].length;
      if (r.itl[i].length > 0) tpot.add(span * k / 1e6 / r.itl[i].length);
      run.promptTokens += r.prompt[i];
      run.cachedTokens += r.cached[i];
      run.predictedTokens += Math.min(r.predicted[i], r.prompt[i]);
      run.outputTokens += r.output[i];
      last = Math.max(last, r.finish[i]);
    }
    run.ttftMs = Percentiles.sorted(t);
    run.e2eMs = Percentiles.sorted(e);
    run.tpotMs = Percentiles.sorted(tpot);
    Arrays.sort(late);
    run.sendLateMs = late;
    Arrays.sort(itlMs, 0, at);
    run.itlMs = Arrays.copyOf(itlMs, at);
    run.makespanSec = (last - t0) * k / 1e9;
    run.imbalance = imbalance(s.engines(), r.ok, r.worker, r.sentAt, r.finish);
  }

  /**
   * The busiest engine's time-averaged requests in flight over the mean across {@code engines}, as
   * simulate's imbalance: each answered request counts on its engine (worker ids from 1) from when
   * it was sent to its [DONE]; every engine counts, also one that served nothing. NaN when nothing
   * was answered.
   */
  static double imbalance(int engines, boolean[] ok, long[] worker, long[] sentAt, long[] finish) {
    double[] busy = new double[engines];
    for (int i = 0; i < ok.length; i++) {
      int w = (int) worker[i] - 1;
      if (ok[i] && w >= 0 && w < engines) busy[w] += finish[i] - sentAt[i];
    }
    double max = 0;
    double sum = 0;
    for (double b : busy) {
      max = Math.max(max, b);
      sum += b;
    }
    return sum == 0 ? Double.NaN : max / (sum / engines);
  }

  /** When request i is due (System.nanoTime scale). */
  private static long due(TracePrompts prompts, int i, long t0, double scale) {
    return t0 + Math.round(prompts.offsetMs(i) * 1e6 / scale);
  }

  /** The JSON body of request i: its token ids, streamed with usage, at most max tokens. */
  static String body(int[] tokens, int max) {
    return body(tokens, max, false, 0);
  }

  /** {@link #body(int[], int)}, with vLLM's {@code priority} field when {@code withPriority}. */
  static String body(int[] tokens, int max, boolean withPriority, int priority) {
    StringBuilder b = new StringBuilder(tokens.length * 11 + 160);
    b.append("{\"model\":\"")
        .append(FleetBench.MODEL)
        .append("\",\"stream\":true,")
        .append("\"stream_options\":{\"include_usage\":true},\"ignore_eos\":true,\"max_tokens\":")
        .append(max);
    if (withPriority) b.append(",\"priority\":").append(priority);
    b.append(",\"prompt\":[");
    for (int k = 0; k < tokens.length; k++) {
      if (k > 0) b.append(',');
      b.append(tokens[k]);
    }
    return b.append("]}").toString();
  }

  /** Sends request i and reads its stream; its results into slot i of {@code r}. */
  private void one(
      URI uri, TracePrompts prompts, int i, long due, Slots r, LiveAdmission admission) {
    int max = prompts.outputLength(i);
    if (s.maxOutputTokens() > 0) max = Math.min(max, s.maxOutputTokens());
    max = Math.max(1, max);
    String body =
        admission == null
            ? body(prompts.liveTokens(i), max)
            : body(prompts.liveTokens(i), max, true, admission.priorities()[i]);
    try {
      HttpRequest.Builder req =
          HttpRequest.newBuilder(uri)
              .header("Content-Type", "application/json")
              .header("x-request-id", "fleet-" + i);
      if (admission != null) req.header(LiveAdmission.TENANT_HEADER, admission.tenants()[i]);
      HttpResponse<Stream<String>> resp =
          http.send(
              req.POST(HttpRequest.BodyPublishers.ofString(body)).build(),
              HttpResponse.BodyHandlers.ofLines());
      try (Stream<String> lines = resp.body()) {
        if (resp.statusCode() != 200) {
          refused(resp, lines, i, r);
          return;
        }
        r.predicted[i] =
            (int) resp.headers().firstValueAsLong("x-kvrouter-overlap-tokens").orElse(0);
        r.worker[i] = resp.headers().firstValueAsLong("x-kvrouter-worker").orElse(-1);
        long[] gaps = new long[Math.max(1, max)];
        int[] st = new int[2]; // [0] tokens seen, [1] 1 once usage and [DONE] are in, 2 on error
        long[] lastAt = new long[1];
        boolean[] done = new boolean[1];
        lines.forEach(
            line -> {
              if (!line.startsWith("data: ") || done[0]) return;
              String d = line.substring(6);
              long now = System.nanoTime();
              if (d.equals("[DONE]")) {
                done[0] = true;
                r.e2e[i] = now - due;
                r.finish[i] = now;
                return;
              }
              if (d.contains("\"choices\":[]")) {
                try {
                  JsonNode u = JSON.readTree(d).path("usage");
                  r.prompt[i] = u.path("prompt_tokens").asInt();
                  r.cached[i] = u.path("prompt_tokens_details").path("cached_tokens").asInt(0);
                  r.output[i] = u.path("completion_tokens").asInt();
                  st[1] = 1;
                } catch (Exception x) {
                  st[1] = 2;
                }
                return;
              }
              if (d.startsWith("{\"error\"")) {
                st[1] = 2;
                r.detail[i] = "error event in the stream: " + d;
                return;
              }
              if (st[0] == 0) r.ttft[i] = now - due;
              else if (st[0] - 1 < gaps.length) gaps[st[0] - 1] = now - lastAt[0];
              st[0]++;
              lastAt[0] = now;
            });
        if (done[0] && st[1] == 1 && st[0] > 0) {
          r.itl[i] = Arrays.copyOf(gaps, Math.min(gaps.length, st[0] - 1));
          r.ok[i] = true;
        } else {
          r.why[i] =
              st[1] == 2
                  ? "error event in the stream"
                  : !done[0] ? "stream ended without [DONE]" : st[1] == 0 ? "no usage" : "no token";
        }
      }
    } catch (Exception x) {
      if (x instanceof InterruptedException) Thread.currentThread().interrupt();
      r.why[i] =
          x.getClass().getSimpleName() + (x.getMessage() == null ? "" : ": " + x.getMessage());
    }
  }

  /**
   * A refusal: the gateway's answer is OpenAI-shaped, its code names the cause (engine_timeout
   * ...); why gets the status and code, detail also the attempts and the message.
   */
  private static void refused(HttpResponse<?> resp, Stream<String> lines, int i, Slots r) {
    StringBuilder body = new StringBuilder();
    lines.forEach(l -> body.append(l).append('\n'));
    String code = null;
    String message = body.toString().strip();
    try {
      JsonNode err = JSON.readTree(message).path("error");
      if (err.hasNonNull("code")) code = err.get("code").asText();
      if (err.hasNonNull("message")) message = err.get("message").asText();
    } catch (Exception x) {
      // not JSON: keep the body as it is
    }
    r.why[i] = "status " + resp.statusCode() + (code == null ? "" : " " + code);
    r.detail[i] =
        r.why[i]
            + resp.headers()
                .firstValue("x-kvrouter-attempts")
                .map(a -> ", attempts " + a)
                .orElse("")
            + ": "
            + (message.length() > 300 ? message.substring(0, 300) + "..." : message);
  }
}
