package io.kvrouter.sim;

import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.mockengine.EventLoop;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.PairDecision;
import io.kvrouter.route.PairRouter;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceTokens;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Prefill/decode disaggregation in simulated time ({@code simulate --prefill-workers N
 * --decode-workers M}, docs/SIMULATION.md): the same trace through an aggregated fleet of N + M
 * engines, a disaggregated one (N prefill, M decode engines, every request handed over) and a
 * conditional one (the same engines, {@link PairRouter}'s rule), compared on TTFT, inter-token
 * latency and throughput.
 *
 * <pre>
 * Implementation notes
 *
 * One EventLoop on the calling thread; one KvRouter (simulated clock, no request expiry) whose
 * index the engines' PrefixCaches feed directly. An engine (Node) has a FIFO queue, at most
 * maxBatch admitted requests, a FIFO prefill lane, and the list of its lane's busy intervals.
 *
 * The interference model (what disaggregation is for): a prefill stops every decode of its
 * engine while it runs (one forward pass at a time, no chunked prefill), so a decode of D pure
 * nanoseconds that starts at t0 ends at the t where t − t0 − (lane busy time in [t0, t]) = D.
 * Prefills may be scheduled after the decode started, so its end is computed when it starts,
 * scheduled, and computed again when that time comes; intervals are only ever added, so the
 * second answer is never earlier, and the decode ends when both agree.
 *
 * Paths of a request:
 *   whole (aggregated mode, or the conditional rule's aggregated path): admit, prefill the
 *     uncached tokens on the lane, first token, decode, release.
 *   handed over: on the prefill engine admit, prefill, then its router entry is freed and its
 *     batch slot too, but its blocks stay locked until the decode engine has pulled them. On the
 *     decode engine admit (which stores the prompt's blocks: BlockStored, as vLLM caches
 *     received blocks), pull the full blocks it did not cache (transferBaseMs + blocks ×
 *     transferMsPerBlock, off the lane), then compute the rest of the prompt (at least one
 *     token) on its lane, first token, decode.
 * TTFT = first token − arrival; ITL of a request = (end − first token) / (output tokens − 1).
 * </pre>
 */
public final class PdSimulation {

  /** The three fleets compared. */
  public enum Mode {
    AGGREGATED("aggregated"),
    DISAGGREGATED("disaggregated"),
    CONDITIONAL("conditional");

    public final String label;

    Mode(String label) {
      this.label = label;
    }
  }

  /**
   * A disaggregated fleet's shape, its hand-over cost and the conditional rule's threshold.
   *
   * @param prefillWorkers prefill engines (the aggregated fleet has prefillWorkers + decodeWorkers)
   * @param decodeWorkers decode engines
   * @param transferBaseMs fixed cost of a hand-over that pulls at least one block
   * @param transferMsPerBlock cost of each block pulled
   * @param minUncachedTokens the conditional rule's threshold (PairRouter.Config)
   */
  public record Config(
      int prefillWorkers,
      int decodeWorkers,
      int gpuBlocks,
      int blockSize,
      double speedup,
      TimingModel timing,
      double transferBaseMs,
      double transferMsPerBlock,
      int minUncachedTokens,
      double overlapWeight,
      long seed,
      int verifyPrompts) {
    public Config {
      if (prefillWorkers < 1 || decodeWorkers < 1) {
        throw new IllegalArgumentException(
            "--prefill-workers and --decode-workers must be >= 1, got "
                + prefillWorkers
                + " and "
                + decodeWorkers);
      }
      if (!(transferBaseMs >= 0) || !(transferMsPerBlock >= 0)) {
        throw new IllegalArgumentException("transfer times must be >= 0");
      }
      if (minUncachedTokens < 0) {
        throw new IllegalArgumentException("--pd-min-uncached-tokens must be >= 0");
      }
      if (!(speedup > 0)) throw new IllegalArgumentException("speedup must be > 0");
    }
  }

  /** What one mode measured. */
  public record Result(
      Mode mode,
      int requests,
      int completed,
      int rejected,
      int handedOver,
      double[] ttftMs,
      double[] itlMs,
      long promptTokens,
      long cachedTokens,
      long outputTokens,
      long pulledBlocks,
      double makespanSec,
      Verification verification) {

    public static double percentile(double[] sorted, double p) {
      if (sorted.length == 0) return Double.NaN;
      int i = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
      return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }

    public double ttft(double p) {
      return percentile(ttftMs, p);
    }

    public double itl(double p) {
      return percentile(itlMs, p);
    }

    public double itlMean() {
      double s = 0;
      for (double v : itlMs) s += v;
      return itlMs.length == 0 ? Double.NaN : s / itlMs.length;
    }

    /** Output tokens per second of simulated time. */
    public double throughput() {
      return makespanSec > 0 ? outputTokens / makespanSec : 0;
    }

    /** Prompt tokens found in the cache of the engine that prefilled them (whole or prefill). */
    public double hitRate() {
      return promptTokens == 0 ? 0 : (double) cachedTokens / promptTokens;
    }
  }

  private static final int WHOLE = 0;
  private static final int PREFILL = 1;
  private static final int DECODE = 2;

  /** One request on one engine. */
  private final class Job {
    final int kind;
    final Req req;
    final long cacheId;
    final int remoteBlocks;
    Job handedFrom; // DECODE: the prefill job whose blocks are released after the pull
    Node node;

    Job(int kind, Req req, int remoteBlocks) {
      this.kind = kind;
      this.req = req;
      this.cacheId = cacheIds++;
      this.remoteBlocks = remoteBlocks;
    }
  }

  /** One trace request. */
  private static final class Req {
    final TraceRequest trace;
    final int[] tokens;
    final String id;
    final long arrival;
    long firstToken = -1;

    Req(TraceRequest trace, String id, long arrival) {
      this.trace = trace;
      this.tokens = TraceTokens.tokens(trace);
      this.id = id;
      this.arrival = arrival;
    }
  }

  /** One engine. */
  private final class Node {
    final PrefixCache cache;
    final ArrayDeque<Job> waiting = new ArrayDeque<>();
    int running;
    long prefillFreeAt;
    long[] busyStart = new long[64];
    long[] busyEnd = new long[64];
    int busy;

    Node(long id) {
      this.cache =
          PrefixCache.builder(new Worker(id, 0), cfg.blockSize(), cfg.gpuBlocks())
              .listener(router::applyEvent)
              .build();
    }

    public void submit(Job j) {
      j.node = this;
      if (j.req.trace.inputLength() / cfg.blockSize() > cfg.gpuBlocks()) {
        rejected++;
        dropped(j);
        return;
      }
      waiting.add(j);
      tryAdmit();
    }

    public void tryAdmit() {
      while (!waiting.isEmpty() && running < cfg.timing().maxBatch()) {
        Job j = waiting.peek();
        PrefixCache.Admission a = cache.admit(j.cacheId, j.req.tokens);
        if (!a.admitted()) return;
        waiting.poll();
        running++;
        long now = loop.now();
        int input = j.req.trace.inputLength();
        int bs = cfg.blockSize();
        if (j.kind == DECODE) {
          int pulled = Math.max(0, j.remoteBlocks - a.cachedBlocks());
          pulledBlocks += pulled;
          int covered = Math.max(a.cachedBlocks(), j.remoteBlocks) * bs;
          long ready =
              now
                  + (pulled == 0
                      ? 0
                      : Math.round(
                          (cfg.transferBaseMs() + pulled * cfg.transferMsPerBlock()) * 1e6));
          Job from = j.handedFrom;
          loop.at(ready, () -> from.node.releaseHandedOver(from));
          lane(j, ready, Math.max(1, input - covered));
        } else {
          int cached = a.cachedBlocks() * bs;
          cachedTokens += Math.min(cached, input);
          lane(j, now, input - cached);
        }
      }
    }

    /** Queues {@code tokens} of prefill for {@code j} on the lane, not before {@code ready}. */
    public void lane(Job j, long ready, int tokens) {
      long start = Math.max(ready, prefillFreeAt);
      long end = start + cfg.timing().prefillNanos(tokens);
      prefillFreeAt = end;
      if (end > start) {
        if (busy == busyStart.length) {
          busyStart = Arrays.copyOf(busyStart, busy * 2);
          busyEnd = Arrays.copyOf(busyEnd, busy * 2);
        }
        busyStart[busy] = start;
        busyEnd[busy] = end;
        busy++;
      }
      loop.at(end, () -> prefilled(j));
    }

    public void prefilled(Job j) {
      long now = loop.now();
      if (j.kind == PREFILL) {
        router.free(PairRouter.prefillId(j.req.id));
        running--;
        Job d = new Job(DECODE, j.req, j.req.tokens.length / cfg.blockSize());
        d.handedFrom = j;
        Node target = nodes[pendingDecode.remove(j.req.id).intValue()];
        target.submit(d);
        tryAdmit();
        return;
      }
      j.req.firstToken = now;
      ttft.add((now - j.req.arrival) / 1e6);
      router.markPrefillCompleted(j.req.id);
      long pure = cfg.timing().decodeNanos(j.req.trace.outputLength());
      decodeUntil(j, now, pure);
    }

    public void decodeUntil(Job j, long t0, long pure) {
      long end = decodeEnd(t0, pure);
      loop.at(
          end,
          () -> {
            long again = decodeEnd(t0, pure);
            if (again > loop.now()) decodeUntil(j, t0, pure);
            else finished(j);
          });
    }

    /** The t where t − t0 − (lane busy time in [t0, t]) = pure. */
    public long decodeEnd(long t0, long pure) {
      int lo = 0;
      int hi = busy;
      while (lo < hi) { // first interval ending after t0
        int mid = (lo + hi) >>> 1;
        if (busyEnd[mid] <= t0) lo = mid + 1;
        else hi = mid;
      }
      long t = t0;
      long left = pure;
      for (int i = lo; i < busy; i++) {
        if (busyStart[i] > t) {
          long gap = busyStart[i] - t;
          if (gap >= left) return t + left;
          left -= gap;
        }
        t = Math.max(t, busyEnd[i]);
      }
      return t + left;
    }

    public void finished(Job j) {
      long now = loop.now();
      int out = j.req.trace.outputLength();
      if (out > 1) itl.add((now - j.req.firstToken) / 1e6 / (out - 1));
      outputTokens += out;
      promptTokens += j.req.trace.inputLength();
      completed++;
      lastFinish = Math.max(lastFinish, now);
      router.free(j.req.id);
      cache.release(j.cacheId);
      running--;
      tryAdmit();
    }

    /** The decode engine pulled the blocks of prefill job {@code j}: they are evictable again. */
    public void releaseHandedOver(Job j) {
      cache.release(j.cacheId);
      tryAdmit();
    }

    public void dropped(Job j) {
      router.free(j.req.id);
      router.free(PairRouter.prefillId(j.req.id));
    }
  }

  private final List<TraceRequest> trace;
  private final Config cfg;
  private final Mode mode;
  private final EventLoop loop = new EventLoop();
  private final KvIndex index;
  private final KvRouter router;
  private final PairRouter pairs;
  private final Node[] nodes;
  private final Set<Long> prefillIds = new HashSet<>();
  private final Set<Long> decodeIds = new HashSet<>();
  private final HashMap<String, Long> pendingDecode = new HashMap<>();
  private final DoubleList ttft = new DoubleList();
  private final DoubleList itl = new DoubleList();
  private long cacheIds;
  private int completed;
  private int rejected;
  private int handedOver;
  private long promptTokens;
  private long cachedTokens;
  private long outputTokens;
  private long pulledBlocks;
  private long lastFinish;

  private PdSimulation(List<TraceRequest> trace, Config cfg, Mode mode) {
    this.trace = trace;
    this.cfg = cfg;
    this.mode = mode;
    this.index = KvIndexes.concurrentRadixTree();
    this.router =
        KvRouter.builder(cfg.blockSize())
            .index(index)
            .nanoClock(loop::now)
            .requestExpiry(Duration.ofDays(3650))
            .overlapWeight(cfg.overlapWeight())
            .seed(cfg.seed())
            .build();
    int n = cfg.prefillWorkers() + cfg.decodeWorkers();
    this.nodes = new Node[n];
    for (int i = 0; i < n; i++) {
      nodes[i] = new Node(i);
      router.registerWorker(i, 1, cfg.blockSize(), cfg.gpuBlocks());
      (i < cfg.prefillWorkers() ? prefillIds : decodeIds).add((long) i);
    }
    this.pairs =
        new PairRouter(
            router,
            new PairRouter.Config(
                mode == Mode.CONDITIONAL ? cfg.minUncachedTokens() : 0, Long.MAX_VALUE));
  }

  /** Runs {@code trace} through the fleet of {@code mode}. */
  public static Result run(List<TraceRequest> trace, Config cfg, Mode mode) {
    return new PdSimulation(trace, cfg, mode).run();
  }

  private Result run() {
    double t0 = trace.get(0).timestampMs();
    long id = 0;
    for (TraceRequest t : trace) {
      long at = Math.round((t.timestampMs() - t0) * 1e6 / cfg.speedup());
      String rid = Long.toString(id++);
      loop.at(at, () -> arrive(new Req(t, rid, at)));
    }
    loop.run();
    List<PrefixCache> caches = new ArrayList<>(nodes.length);
    for (Node nd : nodes) caches.add(nd.cache);
    Verification v = IndexCheck.verify(index, caches, trace, cfg.verifyPrompts(), 0);
    router.close();
    index.close();
    return new Result(
        mode,
        trace.size(),
        completed,
        rejected,
        handedOver,
        ttft.sorted(),
        itl.sorted(),
        promptTokens,
        cachedTokens,
        outputTokens,
        pulledBlocks,
        Math.max(lastFinish, 1) / 1e9,
        v);
  }

  private void arrive(Req r) {
    if (mode == Mode.AGGREGATED) {
      RouteDecision d = router.route(r.id, r.tokens);
      if (!(d instanceof RouteDecision.Routed routed)) {
        throw new IllegalStateException("request " + r.id + " was not routed: " + d);
      }
      nodes[(int) routed.worker().workerId()].submit(new Job(WHOLE, r, 0));
      return;
    }
    PairDecision d = pairs.route(r.id, r.tokens, RouteOptions.defaults(), prefillIds, decodeIds);
    switch (d) {
      case PairDecision.Aggregated a ->
          nodes[(int) a.routed().worker().workerId()].submit(new Job(WHOLE, r, 0));
      case PairDecision.Disaggregated x -> {
        handedOver++;
        pendingDecode.put(r.id, x.decode().worker().workerId());
        nodes[(int) x.prefill().worker().workerId()].submit(new Job(PREFILL, r, 0));
      }
      case PairDecision.Refused f ->
          throw new IllegalStateException("request " + r.id + " was refused: " + f.why());
    }
  }

  /** A growable array of doubles. */
  private static final class DoubleList {
    double[] a = new double[1024];
    int n;

    public void add(double v) {
      if (n == a.length) a = Arrays.copyOf(a, n * 2);
      a[n++] = v;
    }

    public double[] sorted() {
      double[] s = Arrays.copyOf(a, n);
      Arrays.sort(s);
      return s;
    }
  }
}
