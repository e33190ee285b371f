package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.route.WorkerLoad;
import io.kvrouter.transport.zmq.IngestStats;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.function.ToIntFunction;

/**
 * What {@code GET /dashboard} plots over the last minutes: every {@link #INTERVAL_MS} one sample of
 * each registered rank (load, KV blocks, cached tokens predicted and reported, event lag and gaps)
 * and each index (admission queue depth), kept in bounded rings; and each index's hot prefixes.
 *
 * <pre>
 * Implementation notes
 *
 * Data (maps keyed by ModelIndex, whose equality is identity): times, a ring of the last CAPACITY sample times (epoch ms); per rank (at most MAX_SERIES
 * ranks, the first registered) a Series with a float ring per Field, aligned with times (a rank
 * registered later has NaN before its first sample), and the cumulative counters of its last
 * sample (to turn them into per-interval amounts); per index a queue-depth ring and its
 * HotPrefixes. So memory is bounded by CAPACITY * (Field count * MAX_SERIES + indexes).
 *
 * Who writes: sample(), on the dashboard's one sampler thread (Dashboard schedules it), and
 * routed() on /route's request threads (LongAdders in a ConcurrentHashMap, the serve-side
 * predicted hit rate). Who reads: GET /dashboard/data, through read(), under this object's
 * monitor, which sample() holds while it writes; so a reader sees whole samples. sample() reads
 * the router's loads (its lock, briefly: as /workers and /metrics do), the index's block counts,
 * the gateway's prediction counters and the ZMQ listeners' statistics; nothing on a request's
 * path waits for it.
 *
 * Series and hot prefixes of ranks and indexes that are gone are dropped at the next sample.
 * </pre>
 */
final class DashboardSampler {
  static final long INTERVAL_MS = 2000;
  static final int CAPACITY = 150;
  static final int MAX_SERIES = 256;

  /** The per-rank values sampled; the ones marked per interval are amounts since the last one. */
  enum Field {
    REQUESTS("requests"),
    PREFILL_TOKENS("prefill_tokens"),
    KV_BLOCKS("kv_blocks"),
    /** Per interval: prompt tokens of requests whose engine reported cached tokens. */
    PROMPT_TOKENS("prompt_tokens"),
    /** Per interval: cached tokens the engines reported. */
    REPORTED_CACHED("reported_cached_tokens"),
    /** Per interval: cached tokens the router predicted for those requests. */
    PREDICTED_CACHED("predicted_cached_tokens"),
    /** Per interval: prompt tokens of requests routed by POST /route. */
    ROUTED_PROMPT_TOKENS("routed_prompt_tokens"),
    /** Per interval: predicted overlap tokens of requests routed by POST /route. */
    ROUTED_OVERLAP_TOKENS("routed_overlap_tokens"),
    /** Mean lag of the KV event batches received in the interval, ms (NaN: none). */
    EVENT_LAG_MS("event_lag_ms"),
    /** Per interval: sequence gaps and messages lost on the KV events stream. */
    EVENT_GAPS("event_gaps");

    final String json;

    Field(String json) {
      this.json = json;
    }
  }

  private static final int F = Field.values().length;

  /** The counters whose differences are sampled. */
  private enum Counter {
    PROMPT,
    REPORTED,
    EXPECTED,
    ROUTED_PROMPT,
    ROUTED_OVERLAP,
    LAG_MICROS,
    LAG_BATCHES,
    GAPS
  }

  /** One rank's rings. */
  static final class Series {
    final float[][] values = new float[F][CAPACITY];
    final long[] last = new long[Counter.values().length];
    boolean seen;

    float value(Field f, int slot) {
      return values[f.ordinal()][slot];
    }
  }

  /** One index's rings. */
  static final class ModelSeries {
    final float[] queueDepth = new float[CAPACITY];
    final HotPrefixes hot;

    ModelSeries(int blockSize) {
      this.hot = new HotPrefixes(blockSize);
    }
  }

  /** Serve's /route tally of one rank. */
  private static final class Routed {
    final LongAdder promptTokens = new LongAdder();
    final LongAdder overlapTokens = new LongAdder();
  }

  private final Supplier<Collection<ModelIndex>> indexes;
  private final ToIntFunction<RouterModel> queueDepth;
  private final long[] times = new long[CAPACITY];
  private long ticks;
  private final Map<ModelIndex, Map<Worker, Series>> series = new HashMap<>();
  private final Map<ModelIndex, ModelSeries> models = new HashMap<>();
  private int seriesCount;
  private final ConcurrentHashMap<ModelIndex, ConcurrentHashMap<Worker, Routed>> routed =
      new ConcurrentHashMap<>();

  /**
   * @param queueDepth requests waiting in an index's admission queue, or -1 without admission
   */
  DashboardSampler(
      Supplier<Collection<ModelIndex>> indexes, ToIntFunction<RouterModel> queueDepth) {
    this.indexes = indexes;
    this.queueDepth = queueDepth;
  }

  /** Counts one request routed by {@code POST /route} (serve's predicted hit rate). */
  void routed(ModelIndex m, Worker w, int promptTokens, int overlapTokens) {
    Routed r =
        routed
            .computeIfAbsent(m, k -> new ConcurrentHashMap<>())
            .computeIfAbsent(w, k -> new Routed());
    r.promptTokens.add(promptTokens);
    r.overlapTokens.add(overlapTokens);
  }

  /** Takes one sample at {@code nowMillis} (epoch ms). The sampler thread, or a test. */
  synchronized void sample(long nowMillis) {
    int slot = (int) (ticks % CAPACITY);
    times[slot] = nowMillis;
    Collection<ModelIndex> live = indexes.get();
    Map<ModelIndex, Boolean> alive = new HashMap<>();
    for (ModelIndex m : live) {
      alive.put(m, Boolean.TRUE);
      ModelSeries ms = models.computeIfAbsent(m, k -> new ModelSeries(k.blockSize));
      ms.queueDepth[slot] = queueDepth.applyAsInt(m);
      m.prompts.drain(ms.hot::add);
      sampleRanks(m, slot);
    }
    models.keySet().retainAll(alive.keySet());
    routed.keySet().retainAll(alive.keySet());
    for (Iterator<Map.Entry<ModelIndex, Map<Worker, Series>>> it = series.entrySet().iterator();
        it.hasNext(); ) {
      Map.Entry<ModelIndex, Map<Worker, Series>> e = it.next();
      if (!alive.containsKey(e.getKey())) {
        seriesCount -= e.getValue().size();
        it.remove();
      }
    }
    ticks++;
  }

  private void sampleRanks(ModelIndex m, int slot) {
    Map<Worker, Series> ranks = series.computeIfAbsent(m, k -> new HashMap<>());
    int before = ranks.size();
    ranks.keySet().retainAll(m.registrations.keySet());
    seriesCount -= before - ranks.size();
    Map<Worker, Routed> tally = routed.get(m);
    if (tally != null) tally.keySet().retainAll(m.registrations.keySet());
    Map<Worker, WorkerLoad> loads = new HashMap<>();
    for (WorkerLoad l : m.router.loads()) loads.put(l.worker(), l);
    for (Registration r : m.registrations.values()) {
      Worker w = r.worker();
      Series s = ranks.get(w);
      if (s == null) {
        if (seriesCount >= MAX_SERIES) continue;
        s = new Series();
        for (float[] v : s.values) Arrays.fill(v, Float.NaN);
        ranks.put(w, s);
        seriesCount++;
      }
      WorkerLoad l = loads.get(w);
      set(s, Field.REQUESTS, slot, l == null ? 0 : l.requests());
      set(s, Field.PREFILL_TOKENS, slot, l == null ? 0 : l.activePrefillTokens());
      set(s, Field.KV_BLOCKS, slot, m.router.index().blockCount(w));
      PredictionAccuracy a = m.accuracyOrNull(w);
      Routed t = tally == null ? null : tally.get(w);
      long[] now = new long[Counter.values().length];
      if (a != null) {
        now[Counter.PROMPT.ordinal()] = a.promptTokens();
        now[Counter.REPORTED.ordinal()] = a.reportedTokens();
        now[Counter.EXPECTED.ordinal()] = a.expectedTokens();
      }
      if (t != null) {
        now[Counter.ROUTED_PROMPT.ordinal()] = t.promptTokens.sum();
        now[Counter.ROUTED_OVERLAP.ordinal()] = t.overlapTokens.sum();
      }
      ZmqListener z = r.listener();
      if (z != null) {
        IngestStats st = z.stats();
        now[Counter.LAG_MICROS.ordinal()] = st.lagMicros();
        now[Counter.LAG_BATCHES.ordinal()] = st.lagBatches();
        now[Counter.GAPS.ordinal()] = st.gaps() + st.lostMessages();
      }
      long[] d = new long[now.length];
      for (int i = 0; i < now.length; i++) {
        // the first sample of a rank has no interval; a counter that went back (a new listener
        // of a re-registered rank) starts a new interval from 0
        d[i] = !s.seen ? 0 : now[i] >= s.last[i] ? now[i] - s.last[i] : now[i];
      }
      System.arraycopy(now, 0, s.last, 0, now.length);
      s.seen = true;
      set(s, Field.PROMPT_TOKENS, slot, d[Counter.PROMPT.ordinal()]);
      set(s, Field.REPORTED_CACHED, slot, d[Counter.REPORTED.ordinal()]);
      set(s, Field.PREDICTED_CACHED, slot, d[Counter.EXPECTED.ordinal()]);
      set(s, Field.ROUTED_PROMPT_TOKENS, slot, d[Counter.ROUTED_PROMPT.ordinal()]);
      set(s, Field.ROUTED_OVERLAP_TOKENS, slot, d[Counter.ROUTED_OVERLAP.ordinal()]);
      long batches = d[Counter.LAG_BATCHES.ordinal()];
      s.values[Field.EVENT_LAG_MS.ordinal()][slot] =
          batches == 0 ? Float.NaN : (float) (d[Counter.LAG_MICROS.ordinal()] / 1000.0 / batches);
      set(s, Field.EVENT_GAPS, slot, d[Counter.GAPS.ordinal()]);
    }
  }

  private static void set(Series s, Field f, int slot, double v) {
    s.values[f.ordinal()][slot] = (float) v;
  }

  /** What {@link #read} hands out: the samples, oldest first. */
  interface Reader {
    /** The sample times (epoch ms), oldest first; slot(i) is where sample i lives in the rings. */
    void times(long[] times, int[] slots);

    /**
     * One index sampled at least once, in key order, with its rings and its ranks' (a rank beyond
     * MAX_SERIES, or registered since the last sample, has none).
     */
    void model(ModelIndex m, ModelSeries ms, Map<Worker, Series> ranks);
  }

  /** Hands the samples to {@code reader}, under this object's monitor. */
  synchronized void read(Reader reader) {
    int n = (int) Math.min(ticks, CAPACITY);
    long[] t = new long[n];
    int[] slots = new int[n];
    for (int i = 0; i < n; i++) {
      int slot = (int) ((ticks - n + i) % CAPACITY);
      slots[i] = slot;
      t[i] = times[slot];
    }
    reader.times(t, slots);
    for (ModelIndex m : indexes.get()) {
      ModelSeries ms = models.get(m);
      if (ms == null) continue; // registered since the last sample
      Map<Worker, Series> ranks = series.get(m);
      reader.model(m, ms, ranks == null ? Map.of() : ranks);
    }
  }

  /** The hot prefixes of {@code m}, or an empty list before its first sample. */
  List<HotPrefixes.Prefix> hot(ModelIndex m, int k) {
    ModelSeries ms;
    synchronized (this) {
      ms = models.get(m);
    }
    return ms == null ? List.of() : ms.hot.top(k, m.router.index());
  }

  /** Ranks with rings (tests). */
  synchronized int seriesCount() {
    return seriesCount;
  }
}
