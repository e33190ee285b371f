package io.kvrouter.server;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.event.Worker;
import io.kvrouter.route.WorkerLoad;
import io.kvrouter.server.http.HttpPlumbing;
import io.kvrouter.transport.zmq.IngestStats;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * {@code GET /dashboard} (one self-contained HTML page: inline CSS and script, nothing fetched from
 * elsewhere) and {@code GET /dashboard/data} (the JSON the page polls): per index and rank the
 * health and breaker, the load, the KV blocks, hit rate and cached tokens predicted and reported
 * over the last minutes, event lag and gaps, the hottest shared prefixes and who holds them, and
 * the admission queue (docs/observability.md, "Dashboard").
 *
 * <pre>
 * Implementation notes
 *
 * The page is a resource (dashboard.html) read once at construction; it holds no data, so the
 * server gives it to anyone, and the data endpoint is guarded as the mutating endpoints are (the
 * bearer token when one is set; the page sends the token it is given in its URL's fragment,
 * which browsers do not send to servers).
 *
 * The sampler (DashboardSampler) runs on one daemon thread of its own, every INTERVAL_MS, from
 * start() to close(); a failed sample is logged and the next one runs. /dashboard/data writes
 * the current state (loads, blocks, listeners, the extension's engine status) and the sampler's
 * rings into an in-memory buffer, then sends it: nothing is held while the client reads.
 * </pre>
 */
final class Dashboard implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(Dashboard.class.getName());

  /** Hot prefixes shown per index. */
  static final int HOT_PREFIXES = 8;

  private final ServerExtension extension;
  private final DashboardSampler sampler;
  private final byte[] page;
  private ScheduledExecutorService timer;
  private ScheduledFuture<?> task;

  Dashboard(Registry registry, ServerExtension extension) {
    this.extension = extension;
    this.sampler =
        new DashboardSampler(
            registry::indexes, m -> extension == null ? -1 : extension.queueDepth(m));
    try (InputStream in = Dashboard.class.getResourceAsStream("dashboard.html")) {
      if (in == null) throw new IllegalStateException("dashboard.html is missing from the jar");
      this.page = in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Starts sampling every {@link DashboardSampler#INTERVAL_MS}. */
  synchronized void start() {
    timer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "kvrouter-dashboard");
              t.setDaemon(true);
              return t;
            });
    task =
        timer.scheduleAtFixedRate(
            this::sampleNow,
            DashboardSampler.INTERVAL_MS,
            DashboardSampler.INTERVAL_MS,
            TimeUnit.MILLISECONDS);
  }

  private void sampleNow() {
    try {
      sampler.sample(System.currentTimeMillis());
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "dashboard sample failed (the next one runs as planned)", e);
    }
  }

  /** The sampler (POST /route counts into it; tests take samples). */
  DashboardSampler sampler() {
    return sampler;
  }

  @Override
  public synchronized void close() {
    if (task != null) task.cancel(false);
    if (timer != null) timer.shutdownNow();
  }

  /** {@code GET /dashboard}. */
  int page(ServerRequest req, ServerResponse res) {
    res.status(Status.OK_200);
    res.header(HeaderNames.CONTENT_TYPE, "text/html; charset=utf-8");
    res.header(HeaderNames.CACHE_CONTROL, "no-store");
    res.send(page);
    return 200;
  }

  /** {@code GET /dashboard/data}. */
  int data(ServerRequest req, ServerResponse res) {
    res.header(HeaderNames.CACHE_CONTROL, "no-store");
    return HttpPlumbing.send(res, 200, json(System.currentTimeMillis()));
  }

  /** The data endpoint's answer at {@code nowMillis}. */
  byte[] json(long nowMillis) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(4096);
    try (JsonGenerator g = JsonBody.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      write(g, nowMillis);
    } catch (IOException e) {
      throw new UncheckedIOException(e); // in memory: does not happen
    }
    return out.toByteArray();
  }

  private void write(JsonGenerator g, long nowMillis) throws IOException {
    g.writeStartObject();
    g.writeNumberField("now_ms", nowMillis);
    g.writeNumberField("interval_ms", DashboardSampler.INTERVAL_MS);
    g.writeBooleanField("checks_engines", extension != null);
    g.writeNumberField("max_series", DashboardSampler.MAX_SERIES);
    IOException[] failed = new IOException[1];
    sampler.read(
        new DashboardSampler.Reader() {
          int[] slots = new int[0];

          @Override
          public void times(long[] times, int[] slots) {
            this.slots = slots;
            try {
              g.writeArrayFieldStart("times_ms");
              for (long t : times) g.writeNumber(t);
              g.writeEndArray();
              g.writeArrayFieldStart("models");
            } catch (IOException e) {
              failed[0] = e;
            }
          }

          @Override
          public void model(
              ModelIndex m,
              DashboardSampler.ModelSeries ms,
              Map<Worker, DashboardSampler.Series> ranks) {
            if (failed[0] != null) return;
            try {
              writeModel(g, m, ms, ranks, slots);
            } catch (IOException e) {
              failed[0] = e;
            }
          }
        });
    if (failed[0] != null) throw failed[0];
    g.writeEndArray();
    g.writeEndObject();
  }

  private void writeModel(
      JsonGenerator g,
      ModelIndex m,
      DashboardSampler.ModelSeries ms,
      Map<Worker, DashboardSampler.Series> ranks,
      int[] slots)
      throws IOException {
    g.writeStartObject();
    g.writeStringField("model", m.key.modelName());
    g.writeStringField("routing_group", m.key.routingGroup());
    g.writeNumberField("block_size", m.blockSize);
    int depth = extension == null ? -1 : extension.queueDepth(m);
    if (depth >= 0) {
      g.writeNumberField("queue_depth", depth);
      g.writeArrayFieldStart("queue_depth_series");
      for (int s : slots) number(g, ms.queueDepth[s]);
      g.writeEndArray();
    } else {
      g.writeNullField("queue_depth");
    }
    Map<Worker, WorkerLoad> loads = new HashMap<>();
    for (WorkerLoad l : m.router.loads()) loads.put(l.worker(), l);
    g.writeArrayFieldStart("engines");
    for (Registration r : m.registrations.values()) {
      engine(g, m, r, loads.get(r.worker()), ranks.get(r.worker()), slots);
    }
    g.writeEndArray();
    g.writeArrayFieldStart("hot_prefixes");
    for (HotPrefixes.Prefix p : sampler.hot(m, HOT_PREFIXES)) {
      g.writeStartObject();
      g.writeStringField("hash", Long.toHexString(p.sequenceHash()));
      g.writeNumberField("tokens", (long) p.blocks() * m.blockSize);
      g.writeNumberField("prompts", p.prompts());
      g.writeNumberField("window", p.window());
      g.writeArrayFieldStart("holders");
      for (HotPrefixes.Holder h : p.holders()) {
        g.writeStartObject();
        g.writeStringField("instance_id", Long.toUnsignedString(h.worker().workerId()));
        g.writeNumberField("dp_rank", h.worker().dpRank());
        g.writeNumberField("tokens", (long) h.blocks() * m.blockSize);
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  private void engine(
      JsonGenerator g,
      ModelIndex m,
      Registration r,
      WorkerLoad load,
      DashboardSampler.Series s,
      int[] slots)
      throws IOException {
    Worker w = r.worker();
    g.writeStartObject();
    g.writeStringField("instance_id", Long.toUnsignedString(w.workerId()));
    g.writeNumberField("dp_rank", w.dpRank());
    if (r.baseUrl() != null) g.writeStringField("base_url", r.baseUrl());
    g.writeStringField("role", r.role().wireName());
    g.writeStringField("kv_source", r.kvSource().wireName());
    g.writeStringField("ingestion", m.nats != null ? "nats" : r.ingestion());
    ServerExtension.EngineStatus st =
        extension == null || r.baseUrl() == null ? null : extension.engineStatus(r.baseUrl());
    if (st != null) {
      g.writeStringField("health", st.health());
      g.writeStringField("breaker", st.breaker());
    }
    g.writeNumberField("requests", load == null ? 0 : load.requests());
    g.writeNumberField("prefill_tokens", load == null ? 0 : load.activePrefillTokens());
    g.writeNumberField("kv_blocks", m.router.index().blockCount(w));
    g.writeNumberField("kv_capacity_blocks", Math.max(0, m.router.kvBlocks(w)));
    PredictionAccuracy a = m.accuracyOrNull(w);
    if (a != null) {
      g.writeObjectFieldStart("prediction");
      g.writeNumberField("compared", a.compared());
      g.writeNumberField("exact", a.exact());
      g.writeNumberField("prompt_tokens", a.promptTokens());
      g.writeNumberField("predicted_cached_tokens", a.expectedTokens());
      g.writeNumberField("reported_cached_tokens", a.reportedTokens());
      g.writeEndObject();
    }
    ZmqListener z = r.listener();
    if (z != null) {
      IngestStats is = z.stats();
      g.writeObjectFieldStart("events");
      g.writeNumberField("gaps", is.gaps());
      g.writeNumberField("lost_messages", is.lostMessages());
      if (is.lagBatches() == 0) g.writeNullField("mean_lag_ms");
      else g.writeNumberField("mean_lag_ms", is.lagMicros() / 1000.0 / is.lagBatches());
      double silent = z.secondsSinceLastMessage();
      if (silent < 0) g.writeNullField("seconds_since_last_message");
      else g.writeNumberField("seconds_since_last_message", silent);
      g.writeEndObject();
    }
    if (s != null) {
      g.writeObjectFieldStart("series");
      for (DashboardSampler.Field f : DashboardSampler.Field.values()) {
        g.writeArrayFieldStart(f.json);
        for (int slot : slots) number(g, s.value(f, slot));
        g.writeEndArray();
      }
      g.writeEndObject();
    }
    g.writeEndObject();
  }

  /** A float as a JSON number, or null for NaN (no sample). */
  private static void number(JsonGenerator g, float v) throws IOException {
    if (Float.isNaN(v)) g.writeNull();
    else if (v == Math.rint(v)) g.writeNumber((long) v);
    else g.writeNumber(Math.round(v * 1000) / 1000.0);
  }

  /** For tests: the sampled indexes' hot prefixes. */
  List<HotPrefixes.Prefix> hot(ModelIndex m) {
    return sampler.hot(m, HOT_PREFIXES);
  }
}
