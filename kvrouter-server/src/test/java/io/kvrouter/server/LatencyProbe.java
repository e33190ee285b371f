package io.kvrouter.server;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A well-behaved client on its own thread and connection (test support): alternately {@code GET
 * /health} and {@code POST /query} against a server, one request every few milliseconds, recording
 * each latency and any answer that is not 200, until {@link #close()}.
 */
final class LatencyProbe implements AutoCloseable {
  private final HttpClient client =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();
  private final String url;
  private final String queryBody;
  private final List<Long> nanos = Collections.synchronizedList(new ArrayList<>());
  private final List<String> failures = Collections.synchronizedList(new ArrayList<>());
  private final Thread thread;
  private volatile boolean running = true;

  LatencyProbe(String url, String queryBody) {
    this.url = url;
    this.queryBody = queryBody;
    warmUp();
    this.thread = new Thread(this::run, "latency-probe");
    thread.setDaemon(true);
    thread.start();
  }

  /** 200 requests first, not recorded: the client and the server's query path are JIT-compiled. */
  private void warmUp() {
    running = true;
    Thread t = new Thread(this::run);
    t.start();
    try {
      awaitAttempts(200, Duration.ofSeconds(60));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    running = false;
    try {
      t.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    nanos.clear();
    failures.clear();
    running = true;
  }

  private void run() {
    HttpRequest health = HttpRequest.newBuilder(URI.create(url + "/health")).GET().build();
    HttpRequest query =
        HttpRequest.newBuilder(URI.create(url + "/query"))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(queryBody))
            .build();
    for (long i = 0; running; i++) {
      HttpRequest r = i % 2 == 0 ? health : query;
      long t0 = System.nanoTime();
      try {
        HttpResponse<String> res = client.send(r, HttpResponse.BodyHandlers.ofString());
        nanos.add(System.nanoTime() - t0);
        if (res.statusCode() != 200) {
          failures.add(r.uri().getPath() + " -> " + res.statusCode() + " " + res.body());
        }
      } catch (Exception e) {
        failures.add(r.uri().getPath() + " -> " + e);
      }
      synchronized (this) {
        notifyAll(); // awaitAttempts
      }
      try {
        Thread.sleep(running ? 5 : 0);
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  /** Requests answered so far. */
  int count() {
    return nanos.size();
  }

  /**
   * Waits until {@code n} requests were sent and answered or failed since the probe started (or
   * since the warm-up ended).
   *
   * @return false when {@code timeout} passed first
   */
  synchronized boolean awaitAttempts(int n, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (nanos.size() + failures.size() < n) {
      long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
      if (left <= 0) return false;
      wait(left);
    }
    return true;
  }

  /** The {@code q}-quantile of the latencies in milliseconds (0.99: p99). */
  double quantileMillis(double q) {
    List<Long> sorted;
    synchronized (nanos) {
      sorted = new ArrayList<>(nanos);
    }
    if (sorted.isEmpty()) return Double.NaN;
    Collections.sort(sorted);
    int i = (int) Math.min(sorted.size() - 1, Math.ceil(q * sorted.size()) - 1);
    return sorted.get(Math.max(0, i)) / 1e6;
  }

  List<String> failures() {
    return failures;
  }

  String summary() {
    return String.format(
        "%d requests, p50 %.1f ms, p99 %.1f ms, max %.1f ms, failures %d",
        count(), quantileMillis(0.5), quantileMillis(0.99), quantileMillis(1.0), failures.size());
  }

  @Override
  public void close() {
    running = false;
    try {
      thread.join(30_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
