package io.kvrouter.harness;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.mockengine.EventLoop;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.sim.MockEngine;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.SimRequest;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceTokens;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Each worker's timeline of {@code findMatches} requests and KV events, recorded once by running
 * the trace through mock engines, for {@code bench trace} to replay against an index (the shape of
 * NVIDIA Dynamo's {@code mooncake_bench}).
 *
 * <pre>
 * Implementation notes
 *
 * Recording: requests are dealt to workers uniformly at random (seeded), as Dynamo's benchmark
 * does, so the recording does not depend on any router. One MockEngine per worker runs its share
 * in simulated time (EventLoop) with the given timing model. A request enters its worker's
 * timeline at its arrival, as the local hashes of its full blocks (what a router would look up);
 * every KV event the worker's cache publishes enters at the simulated time it was published.
 * The EventLoop runs actions in time order, so each timeline is recorded already sorted.
 *
 * Layout per worker: times[] in simulated nanoseconds and entries[] holding either a long[]
 * (a request's local hashes) or a RouterEvent, in one array so that a replay walks them with no
 * allocation. The final caches are kept, so a replay can check that the index it fed ends equal
 * to them.
 * </pre>
 */
final class WorkerTimelines {
  public final long[][] times;
  public final Object[][] entries;
  public final List<PrefixCache> caches;
  public final long spanNanos;
  public final long requests;
  public final long events;
  public final long requestBlocks;
  public final long storedBlocks;
  public final long removedBlocks;

  private WorkerTimelines(
      long[][] times, Object[][] entries, List<PrefixCache> caches, long spanNanos) {
    this.times = times;
    this.entries = entries;
    this.caches = caches;
    this.spanNanos = Math.max(1, spanNanos);
    long req = 0;
    long ev = 0;
    long rb = 0;
    long sb = 0;
    long xb = 0;
    for (Object[] es : entries) {
      for (Object e : es) {
        if (e instanceof long[] hashes) {
          req++;
          rb += hashes.length;
        } else {
          ev++;
          CacheEvent d = ((RouterEvent) e).data();
          if (d instanceof CacheEvent.Stored s) sb += s.length();
          if (d instanceof CacheEvent.Removed r) xb += r.blockHashes().length;
        }
      }
    }
    this.requests = req;
    this.events = ev;
    this.requestBlocks = rb;
    this.storedBlocks = sb;
    this.removedBlocks = xb;
  }

  /** Operations in all timelines: requests plus events. */
  public long ops() {
    return requests + events;
  }

  /**
   * Block operations, counted as Dynamo's benchmark does: blocks looked up by requests plus blocks
   * stored by events (removals count as operations, not block operations).
   */
  public long blockOps() {
    return requestBlocks + storedBlocks;
  }

  public int workers() {
    return times.length;
  }

  /**
   * Records the timelines of {@code trace} dealt over {@code workers} mock engines, whose evictions
   * are published as {@code removed} says (per block is vLLM's and Dynamo's mocker's shape).
   */
  public static WorkerTimelines record(
      List<TraceRequest> trace,
      int workers,
      int gpuBlocks,
      int blockSize,
      TimingModel timing,
      RemovedEvents removed,
      long seed,
      Runnable progress) {
    EventLoop loop = new EventLoop();
    BlockHasher hasher = BlockHasher.of(blockSize);
    List<List<Long>> tl = new ArrayList<>();
    List<List<Object>> el = new ArrayList<>();
    MockEngine[] engines = new MockEngine[workers];
    List<PrefixCache> caches = new ArrayList<>();
    MockEngine.Listener listener =
        new MockEngine.Listener() {
          @Override
          public void firstToken(SimRequest r) {}

          @Override
          public void finished(SimRequest r) {
            progress.run();
          }

          @Override
          public void rejected(SimRequest r) {
            progress.run();
          }
        };
    for (int w = 0; w < workers; w++) {
      List<Long> ts = new ArrayList<>();
      List<Object> es = new ArrayList<>();
      tl.add(ts);
      el.add(es);
      engines[w] =
          new MockEngine(
              w,
              1,
              blockSize,
              gpuBlocks,
              timing,
              loop,
              removed,
              e -> {
                ts.add(loop.now());
                es.add(e);
              },
              listener);
      caches.add(engines[w].rank(0).cache);
    }
    SplittableRandom rnd = new SplittableRandom(seed);
    double t0 = trace.get(0).timestampMs();
    long id = 0;
    for (TraceRequest t : trace) {
      int w = rnd.nextInt(workers);
      long at = Math.round((t.timestampMs() - t0) * 1e6);
      SimRequest r = new SimRequest(id++, t, at);
      loop.at(
          at,
          () -> {
            tl.get(w).add(loop.now());
            el.get(w).add(hasher.localHashes(TraceTokens.tokens(r.trace)));
            engines[w].submit(r, 0);
          });
    }
    loop.run();
    long[][] times = new long[workers][];
    Object[][] entries = new Object[workers][];
    long end = 0;
    for (int w = 0; w < workers; w++) {
      List<Long> ts = tl.get(w);
      times[w] = new long[ts.size()];
      for (int i = 0; i < times[w].length; i++) times[w][i] = ts.get(i);
      entries[w] = el.get(w).toArray();
      if (times[w].length > 0) end = Math.max(end, times[w][times[w].length - 1]);
      if (!isSorted(times[w])) throw new IllegalStateException("timeline " + w + " not sorted");
    }
    return new WorkerTimelines(times, entries, caches, end);
  }

  private static boolean isSorted(long[] a) {
    for (int i = 1; i < a.length; i++) if (a[i] < a[i - 1]) return false;
    return true;
  }

  @Override
  public String toString() {
    return "WorkerTimelines[workers="
        + workers()
        + ", requests="
        + requests
        + ", events="
        + events
        + ", span="
        + spanNanos / 1e9
        + " s, sizes="
        + Arrays.toString(Arrays.stream(times).mapToInt(t -> t.length).limit(4).toArray())
        + "...]";
  }
}
