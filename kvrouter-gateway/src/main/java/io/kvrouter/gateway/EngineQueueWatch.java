package io.kvrouter.gateway;

import io.helidon.http.HeaderNames;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webclient.api.WebClient;
import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * Reads each engine's own queue (docs/gateway.md, "Admission", saturation from the engine's
 * metrics): every {@code --engine-metrics-interval-ms} it GETs {@code /metrics} of every registered
 * base URL and keeps how many requests the engine says wait ({@link EngineQueueGauge}) in its
 * {@link EngineState}. An engine with at least {@code --busy-engine-waiting} waiting is busy:
 * routing passes it by and, when every engine of a model is so, requests wait in the admission
 * queue. When an engine's queue drops below the limit, every admission queue is checked again
 * ({@link Admission#recheckAll}), so its waiters are granted without waiting for a freed route.
 *
 * <pre>
 * Implementation notes
 *
 * Made and started by Gateway only when busyEngineWaiting > 0. One virtual thread (start() to
 * stop()) runs the rounds; each read of a round runs on its own virtual thread, and the round
 * joins them. Each read is a connection of its own (Connection: close), with the health timeout as
 * its read timeout, so no pooled connection can expire under it. EngineState.engineWaiting is
 * volatile: written here, read by the proxy's threads (Proxy.excluded) and by grants
 * (Admission). An engine whose read fails, or whose text has no queue gauge, counts -1 (not
 * busy: never guessed busy), and the failure is counted (kvrouter_gateway_engine_metrics_failures_total).
 * </pre>
 */
final class EngineQueueWatch {
  private static final Logger LOG = Gateway.LOG;

  /** The most bytes of one engine's metrics read (vLLM's are about 100 KB). */
  static final long MAX_BYTES = 8L << 20;

  private final Gateway gateway;
  private final long limit;
  private final long intervalMillis;
  private final WebClient client;
  private @Nullable Thread thread;
  private volatile boolean closed;

  EngineQueueWatch(Gateway gateway, GatewayConfig config) {
    this.gateway = gateway;
    this.limit = config.busyEngineWaiting();
    this.intervalMillis = config.engineMetricsInterval().toMillis();
    this.client =
        WebClient.builder()
            .shareConnectionCache(false)
            .socketOptions(s -> s.connectTimeout(config.healthTimeout()))
            .readTimeout(config.healthTimeout())
            .followRedirects(false)
            .build();
  }

  /** Whether an engine that said it has {@code waiting} requests queued is busy. */
  static boolean busy(long waiting, long limit) {
    return limit > 0 && waiting >= limit;
  }

  void start() {
    thread = Thread.ofVirtual().name("kvrouter-gateway-engine-queues").start(this::loop);
  }

  private void loop() {
    while (!closed) {
      try {
        Thread.sleep(intervalMillis); // the interval before each round, not a synchronisation
      } catch (InterruptedException e) {
        return;
      }
      try {
        readAll();
      } catch (RuntimeException e) {
        LOG.log(Level.WARNING, "reading the engines' queues failed", e);
      }
    }
  }

  /** One round: reads every registered engine, then wakes the queues if one has room again. */
  void readAll() {
    AtomicBoolean freed = new AtomicBoolean();
    boolean done =
        EngineRounds.eachEngine(
            gateway.engineUrls(),
            u -> {
              EngineState s = gateway.engine(u);
              long before = s.engineWaiting();
              long now = read(u);
              s.engineWaiting(now);
              if (busy(before, limit) && !busy(now, limit)) freed.set(true);
            });
    if (done && freed.get()) gateway.admission.recheckAll(Admission.ENGINE_QUEUE);
  }

  /** The engine's queue, or -1 when it cannot be read. */
  private long read(String baseUrl) {
    try (HttpClientResponse r =
        client.get().uri(baseUrl + "/metrics").header(HeaderNames.CONNECTION, "close").request()) {
      if (r.status().code() != 200) {
        return failed(baseUrl, "GET /metrics answered " + r.status().code());
      }
      try (InputStream in = r.inputStream()) {
        long w = EngineQueueGauge.waiting(in, MAX_BYTES);
        if (w < 0) return failed(baseUrl, "GET /metrics has no queue gauge");
        return w;
      }
    } catch (IOException | RuntimeException e) {
      return failed(baseUrl, "GET /metrics failed: " + e);
    }
  }

  private long failed(String baseUrl, String why) {
    gateway.metrics.engineMetricsFailures.inc();
    LOG.log(Level.FINE, () -> "engine " + baseUrl + ": " + why);
    return -1;
  }

  /** Stops the rounds and closes the connection pool. */
  void stop() {
    closed = true;
    EngineRounds.stop(thread);
    client.closeResource();
  }
}
