package io.kvrouter.sim;

import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.mockengine.EventLoop;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.LoraCost;
import io.kvrouter.route.LoraResidency;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.route.Scorers;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.sim.trace.TraceRequest;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.jspecify.annotations.Nullable;

/**
 * {@code simulate --lora-adapters N}: a trace whose conversations each use one of N LoRA adapters
 * (Zipf popularity, seeded), replayed on a fleet of {@link MockEngine}s that hold at most {@code
 * --max-loras} adapters each and pay {@code --lora-load-ms} to load one, routed by the kv cost once
 * with the LoRA placement term ({@link LoraResidency}, "lora-aware") and once without it
 * ("adapter-blind", today's routing: the adapter only salts the hashes). docs/SIMULATION.md, "LoRA
 * adapters".
 *
 * <pre>
 * Implementation notes
 *
 * Adapters: a conversation is the trace's hash_ids[1] (every request of the bundled trace shares
 * hash_ids[0], a common system prompt); its adapter is the Zipf quantile of a SplitMix64 hash of
 * (seed, that id), so every turn of a conversation names the same adapter in both runs. Adapter k
 * (0-based) has weight 1 / (k + 1)^s.
 *
 * One run (run()): one EventLoop on the calling thread, a KvRouter on the simulated clock with the
 * config's weights and an index fed in-process by the engines' events (no delay), engines with
 * MockEngine.loras. On arrival a request is routed with RouteOptions.defaults() (its prompt ids
 * are already remapped per adapter, SimRequest.tokens, which partitions the caches as the salt
 * does) and, lora-aware, the residency's term; the residency then records that the chosen engine
 * uses the adapter (loaded: what the gateway does when it routes there), so it follows each
 * engine's LRU without being told. Results are counted at first token (TTFT) and at the end
 * (hit rate: cached over prompt tokens of completed requests); loads are the engines' own counts.
 * The two runs are independent and deterministic; compare() may run them on two threads.
 * </pre>
 */
public final class LoraSimulation {

  /**
   * The LoRA side of a run.
   *
   * @param adapters number of adapters, at least 1
   * @param zipf Zipf exponent of their popularity ({@code >= 0}; 0 is uniform)
   * @param maxLoras adapters an engine holds at once ({@code --max-loras}), at least 1
   * @param loadMs simulated time to load an adapter, {@code >= 0}
   * @param cost the placement term's costs (lora-aware run)
   */
  public record Mix(int adapters, double zipf, int maxLoras, double loadMs, LoraCost cost) {
    public Mix {
      if (adapters < 1) {
        throw new IllegalArgumentException("--lora-adapters must be >= 1, got " + adapters);
      }
      if (!(zipf >= 0) || Double.isInfinite(zipf)) {
        throw new IllegalArgumentException("--lora-zipf must be finite and >= 0, got " + zipf);
      }
      if (maxLoras < 1) {
        throw new IllegalArgumentException("--max-loras must be >= 1, got " + maxLoras);
      }
      if (!(loadMs >= 0) || Double.isInfinite(loadMs)) {
        throw new IllegalArgumentException("--lora-load-ms must be finite and >= 0, got " + loadMs);
      }
      Objects.requireNonNull(cost, "cost");
    }
  }

  /**
   * One run's figures.
   *
   * @param label "lora-aware" or "adapter-blind"
   * @param requests requests sent
   * @param completed requests answered
   * @param promptTokens prompt tokens of completed requests
   * @param cachedTokens of those, served from an engine's prefix cache
   * @param adapterLoads adapter loads summed over the engines
   * @param ttftMs every completed request's TTFT in ms, sorted
   * @param wallNanos the run's wall time
   */
  public record Result(
      String label,
      int requests,
      int completed,
      long promptTokens,
      long cachedTokens,
      long adapterLoads,
      double[] ttftMs,
      long wallNanos) {
    /** Cached over prompt tokens. */
    public double hitRate() {
      return promptTokens == 0 ? 0 : cachedTokens / (double) promptTokens;
    }

    /** Adapter loads per 1,000 requests sent. */
    public double loadsPer1000() {
      return requests == 0 ? 0 : adapterLoads * 1000.0 / requests;
    }

    public double meanTtftMs() {
      double s = 0;
      for (double t : ttftMs) s += t;
      return ttftMs.length == 0 ? 0 : s / ttftMs.length;
    }

    /** The {@code q}-quantile (0..1) of TTFT, nearest rank. */
    public double ttftQuantileMs(double q) {
      if (ttftMs.length == 0) return 0;
      int i = (int) Math.ceil(q * ttftMs.length) - 1;
      return ttftMs[Math.max(0, Math.min(ttftMs.length - 1, i))];
    }
  }

  /** Both runs on one trace. */
  public record Comparison(
      String trace, SimConfig cfg, Mix mix, int[] requestsPerAdapter, Result aware, Result blind) {
    /** How many times fewer loads lora-aware routing made (infinite when it made none). */
    public double loadReduction() {
      return aware.adapterLoads() == 0
          ? Double.POSITIVE_INFINITY
          : blind.adapterLoads() / (double) aware.adapterLoads();
    }
  }

  private LoraSimulation() {}

  /** Each request's adapter (0-based), as the class comment says. */
  public static int[] assign(List<TraceRequest> trace, Mix mix, long seed) {
    final int n = mix.adapters();
    double[] cdf = new double[n];
    double sum = 0;
    for (int k = 0; k < n; k++) {
      sum += 1.0 / Math.pow(k + 1, mix.zipf());
      cdf[k] = sum;
    }
    int[] out = new int[trace.size()];
    for (int i = 0; i < out.length; i++) {
      long[] ids = trace.get(i).hashIds();
      long conversation = ids.length > 1 ? ids[1] : ids.length == 1 ? ids[0] : i;
      double u = (mix64(seed * 0x9E3779B97F4A7C15L + conversation) >>> 11) * 0x1.0p-53 * sum;
      int k = Arrays.binarySearch(cdf, u);
      out[i] = Math.min(n - 1, k >= 0 ? k + 1 : -k - 1);
    }
    return out;
  }

  private static long mix64(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** Runs lora-aware and adapter-blind routing on {@code trace}, on up to {@code threads}. */
  public static Comparison compare(
      String traceName, List<TraceRequest> trace, SimConfig cfg, Mix mix, int threads) {
    int[] adapters = assign(trace, mix, cfg.seed());
    int[] per = new int[mix.adapters()];
    for (int a : adapters) per[a]++;
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, Math.min(2, threads)));
    try {
      Future<Result> aware = pool.submit(() -> run(trace, cfg, mix, adapters, true));
      Future<Result> blind = pool.submit(() -> run(trace, cfg, mix, adapters, false));
      return new Comparison(traceName, cfg, mix, per, aware.get(), blind.get());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException r) throw r;
      throw new IllegalStateException(e.getCause());
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * One run: lora-aware ({@code aware}) or adapter-blind; {@code adapters} from {@link #assign}.
   */
  public static Result run(
      List<TraceRequest> trace, SimConfig cfg, Mix mix, int[] adapters, boolean aware) {
    if (adapters.length != trace.size()) {
      throw new IllegalArgumentException(adapters.length + " adapters for " + trace.size());
    }
    return new Run(trace, cfg, mix, adapters, aware).go();
  }

  /** The state of one run. */
  private static final class Run implements MockEngine.Listener {
    private final List<TraceRequest> trace;
    private final SimConfig cfg;
    private final int[] adapters;
    private final boolean aware;
    private final String[] names;
    private final EventLoop loop = new EventLoop();
    private final KvRouter router;
    private final LoraResidency residency;
    private @Nullable String current; // the adapter of the request being routed
    private final MockEngine[] engines;
    private final double[] ttft;
    private int ttftCount;
    private int completed;
    private long promptTokens;
    private long cachedTokens;

    Run(List<TraceRequest> trace, SimConfig cfg, Mix mix, int[] adapters, boolean aware) {
      this.residency = new LoraResidency(mix.cost());
      this.trace = trace;
      this.cfg = cfg;
      this.adapters = adapters;
      this.aware = aware;
      this.ttft = new double[trace.size()];
      this.names = new String[mix.adapters()];
      for (int k = 0; k < names.length; k++) names[k] = "lora-" + k;
      this.router =
          KvRouter.builder(cfg.blockSize())
              .nanoClock(loop::now)
              .requestExpiry(Duration.ofDays(3650))
              .seed(cfg.seed())
              .index(
                  cfg.maxBlocks() > 0
                      ? KvIndexes.concurrentCompressedTree(cfg.maxBlocks())
                      : KvIndexes.concurrentCompressedTree())
              .selector(selector(cfg, aware))
              .build();
      this.engines = new MockEngine[cfg.workers()];
      long loadNanos = Math.round(mix.loadMs() * 1e6);
      for (int w = 0; w < engines.length; w++) {
        engines[w] =
            new MockEngine(
                w,
                cfg.dpSize(),
                cfg.blockSize(),
                cfg.gpuBlocks(),
                cfg.timing(),
                loop,
                cfg.removedEvents(),
                router::applyEvent,
                this);
        engines[w].loras(mix.maxLoras(), loadNanos);
        router.registerWorker(w, cfg.dpSize(), cfg.blockSize(), cfg.gpuBlocks());
        if (aware) residency.track(w, mix.maxLoras());
      }
    }

    /**
     * The default cost of {@code cfg}'s weights; lora-aware, with the {@code lora} term at weight
     * 1. Its scorer reads the adapter from {@link #current}, not from the request's RouteOptions:
     * naming it there would salt the router's block hashes, and the simulated engines hash blocks
     * without the adapter.
     */
    private WorkerSelector selector(SimConfig cfg, boolean aware) {
      WorkerSelector base =
          WorkerSelector.costBased(cfg.overlapWeight(), cfg.pressureWeight(), 0, cfg.seed());
      if (!aware) return base;
      return WorkerSelector.withTerm(
          base, Scorers.LORA, 1, (c, i) -> residency.cost(c.worker(i).workerId(), current));
    }

    Result go() {
      final long start = System.nanoTime();
      final double t0 = trace.get(0).timestampMs();
      for (int i = 0; i < trace.size(); i++) {
        TraceRequest t = trace.get(i);
        long at = Math.round((t.timestampMs() - t0) * 1e6 / cfg.speedup());
        SimRequest r = new SimRequest(i, t, at);
        r.adapter = adapters[i];
        loop.at(at, () -> arrive(r));
      }
      loop.run();
      router.close();
      long loads = 0;
      for (MockEngine e : engines) loads += e.adapterLoads();
      double[] sorted = Arrays.copyOf(ttft, ttftCount);
      Arrays.sort(sorted);
      return new Result(
          aware ? "lora-aware" : "adapter-blind",
          trace.size(),
          completed,
          promptTokens,
          cachedTokens,
          loads,
          sorted,
          System.nanoTime() - start);
    }

    private void arrive(SimRequest r) {
      String adapter = names[r.adapter];
      current = adapter;
      RouteDecision d = router.route(r.routerId, r.tokens(), RouteOptions.defaults());
      if (!(d instanceof RouteDecision.Routed routed)) {
        throw new IllegalStateException("the router did not route request " + r.id + ": " + d);
      }
      Worker w = routed.worker();
      r.routedTo = w;
      r.routedOverlapTokens = routed.overlapTokens();
      if (aware) residency.loaded(w.workerId(), adapter);
      engines[(int) w.workerId()].submit(r, w.dpRank());
    }

    @Override
    public void firstToken(SimRequest r) {
      router.markPrefillCompleted(r.routerId);
      ttft[ttftCount++] = r.ttftNanos() / 1e6;
    }

    @Override
    public void finished(SimRequest r) {
      router.free(r.routerId);
      completed++;
      promptTokens += r.trace.inputLength();
      cachedTokens += r.cachedTokens;
      r.dropTokens();
    }

    @Override
    public void rejected(SimRequest r) {
      router.free(r.routerId);
      r.dropTokens();
    }
  }
}
