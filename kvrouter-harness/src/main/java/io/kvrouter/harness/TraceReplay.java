package io.kvrouter.harness;

import com.sun.management.OperatingSystemMXBean;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.sim.IndexCheck;
import io.kvrouter.sim.Verification;
import io.kvrouter.sim.trace.TraceRequest;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.LockSupport;

/**
 * Replays every worker's timeline at once against one index, compressed into a target duration, and
 * times every {@code findMatches}: the stress half of {@code bench trace}.
 *
 * <pre>
 * Implementation notes
 *
 * Replay threads: one virtual thread per worker (the default), or --replay-threads platform
 * threads, each running the
 * workers dealt to it (worker w on thread w mod N), their timelines merged in time order before
 * the start (a Plan: one times[] and one entries[], ties to the lower worker, so each worker's
 * own order is kept). Dynamo gives each worker its own tokio task, and tokio's runtime runs them
 * on one worker thread per core: a thread here is that runtime thread, doing for its workers
 * what is due, in due order. A virtual thread per worker parks and is unparked through the JDK's
 * timer thread once per tick with something due, N times as often as a thread running N
 * workers; but a platform thread that waits for room in a full lane waits for the OS to run it
 * again, where a virtual thread's carrier runs another worker meanwhile (on a loaded machine the
 * platform threads replayed slower: docs/BENCHMARKS.md). All threads
 * wait on a latch, then share one start instant. Entry i of a plan is due at
 * start + time[i] * duration / span; a thread runs every entry due within the next tick
 * (--tick-us, default 100 µs), then parks until the next one is due (LockSupport.parkNanos), so a
 * thread that falls behind runs back to back and never sleeps. It reads the clock only when the
 * next entry is not due within a tick of its last reading (which is never later than the
 * present, so no entry runs more than a tick early): a burst of due events costs no clock reads.
 * Dynamo's replay sleeps on tokio timers, which have 1 ms granularity. A request is timed with
 * System.nanoTime around findMatches(hashes, false) on the thread that runs its worker; an event
 * is index.apply(event) with the event object recorded in the timeline (nothing is built during
 * the replay), which for a thread-pool index only queues it to its lane (sticky per worker, so
 * each worker's events stay in order).
 *
 * The run ends when every thread is done and index.flush() returned (every queued event
 * applied). achieved = operations / (end - start); offered = operations / duration. A duration
 * of 0 makes every entry due at once: the index's saturated throughput.
 *
 * Latencies go to one long[] per thread (no sharing), merged and sorted at the end; percentiles
 * are nearest-rank. The process CPU time over the same interval (every thread of the JVM:
 * replay threads, lanes, GC and JIT) gives operations per CPU-second, which other processes on
 * a shared machine disturb far less than wall-clock throughput; the replay threads' own CPU clocks
 * (each read on its thread at its start and end; a virtual thread's carriers' through ThreadCpu)
 * and the event lanes' (ThreadCpu) split it. A run then checks, when asked, that the index equals the recorded final
 * caches (IndexCheck).
 * </pre>
 */
final class TraceReplay {
  private TraceReplay() {}

  /** What one replay measured. */
  public record Result(
      IndexKind kind,
      long durationMs,
      long ops,
      long blockOps,
      long requests,
      long wallNanos,
      long cpuNanos,
      long replayCpuNanos,
      long laneCpuNanos,
      double p50Us,
      double p99Us,
      double p999Us,
      double maxUs,
      Verification verification) {

    public double offeredOps() {
      return durationMs == 0 ? Double.POSITIVE_INFINITY : ops * 1000.0 / durationMs;
    }

    public double achievedOps() {
      return ops * 1e9 / wallNanos;
    }

    public double offeredBlockOps() {
      return durationMs == 0 ? Double.POSITIVE_INFINITY : blockOps * 1000.0 / durationMs;
    }

    public double achievedBlockOps() {
      return blockOps * 1e9 / wallNanos;
    }

    /** Operations per second of process CPU time (all threads: replay, lanes, GC, JIT). */
    public double opsPerCpuSecond() {
      return cpuNanos <= 0 ? Double.NaN : ops * 1e9 / cpuNanos;
    }

    /** CPU time per operation in ns: the whole process, or -1 where the JVM does not say. */
    public double cpuNanosPerOp() {
      return cpuNanos <= 0 ? -1 : (double) cpuNanos / ops;
    }

    /** Whether achieved throughput reached 95% of offered (a duration of 0 never does). */
    public boolean keptUp() {
      return achievedOps() >= 0.95 * offeredOps();
    }
  }

  /**
   * {@link #run(WorkerTimelines, IndexKind, int, int, long, long, long, int, List, int)} with one
   * replay thread per core.
   */
  public static Result run(
      WorkerTimelines tl,
      IndexKind kind,
      int eventThreads,
      int jumpSize,
      long maxBlocks,
      long durationMs,
      long tickNanos,
      List<TraceRequest> trace,
      int verifyPrompts) {
    return run(
        tl,
        kind,
        eventThreads,
        jumpSize,
        maxBlocks,
        durationMs,
        tickNanos,
        0,
        trace,
        verifyPrompts);
  }

  /**
   * Replays {@code tl} against a fresh index of {@code kind} on {@code replayThreads} platform
   * threads (each running the workers dealt to it, in time order), or on one virtual thread per
   * worker when {@code replayThreads} is 0; checks the index against the caches of {@code
   * verifyPrompts} prompts when that is not negative.
   */
  public static Result run(
      WorkerTimelines tl,
      IndexKind kind,
      int eventThreads,
      int jumpSize,
      long maxBlocks,
      long durationMs,
      long tickNanos,
      int replayThreads,
      List<TraceRequest> trace,
      int verifyPrompts) {
    final Plan[] plans = plans(tl, replayThreads);
    final int n = plans.length;
    final long durationNanos = durationMs * 1_000_000L;
    final double scale = (double) durationNanos / tl.spanNanos;
    final long[][] latencies = new long[n][];
    final int[] latencyCount = new int[n];
    final long[] sink = new long[n];
    final long[] threadCpu = new long[n]; // each platform replay thread's own CPU time, ns
    final ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    final CountDownLatch ready = new CountDownLatch(n);
    final CountDownLatch go = new CountDownLatch(1);
    final long[] startAt = new long[1];
    final Throwable[] failure = new Throwable[1];
    final ThreadCpu cpuByThread = new ThreadCpu();

    try (KvIndex index = kind.create(eventThreads, jumpSize, maxBlocks)) {
      List<Thread> threads = new ArrayList<>(n);
      for (int p = 0; p < n; p++) {
        final int plan = p;
        final long[] times = plans[p].times;
        final Object[] entries = plans[p].entries;
        latencies[p] = new long[plans[p].requests];
        Runnable body =
            () -> {
              try {
                ready.countDown();
                go.await();
                final long cpuAtStart = replayThreads == 0 ? 0 : mx.getCurrentThreadCpuTime();
                final long start = startAt[0];
                final long[] lat = latencies[plan];
                int nLat = 0;
                long acc = 0;
                final int len = entries.length;
                int i = 0;
                // a clock reading no later than the present: an entry due within a tick
                // of it is due within a tick of the present too
                long now = System.nanoTime();
                while (i < len) {
                  long due = start + (long) (times[i] * scale);
                  if (due > now + tickNanos) {
                    now = System.nanoTime();
                    if (due > now + tickNanos) {
                      LockSupport.parkNanos(due - now);
                      now = System.nanoTime();
                      continue;
                    }
                  }
                  Object e = entries[i++];
                  if (e instanceof long[] hashes) {
                    long t0 = System.nanoTime();
                    acc += index.findMatches(hashes, false).size();
                    now = System.nanoTime();
                    lat[nLat++] = now - t0;
                  } else {
                    index.apply((RouterEvent) e);
                  }
                }
                latencyCount[plan] = nLat;
                sink[plan] = acc;
                if (replayThreads > 0) threadCpu[plan] = mx.getCurrentThreadCpuTime() - cpuAtStart;
              } catch (Throwable t) {
                synchronized (failure) {
                  if (failure[0] == null) failure[0] = t;
                }
              }
            };
        threads.add(
            replayThreads == 0
                ? Thread.ofVirtual().name("replay-w" + p).unstarted(body)
                : Thread.ofPlatform().daemon().name("replay-" + p).unstarted(body));
      }
      for (Thread t : threads) t.start();
      ready.await();
      final long cpu0 = processCpuNanos();
      cpuByThread.begin();
      startAt[0] = System.nanoTime();
      go.countDown();
      for (Thread t : threads) t.join();
      index.flush();
      long wall = System.nanoTime() - startAt[0];
      long cpu = processCpuNanos() - cpu0;
      cpuByThread.end();
      if (failure[0] != null) {
        throw new IllegalStateException("replay failed on " + kind.cliName(), failure[0]);
      }
      int total = 0;
      for (int c : latencyCount) total += c;
      long[] all = new long[total];
      int k = 0;
      for (int p = 0; p < n; p++) {
        System.arraycopy(latencies[p], 0, all, k, latencyCount[p]);
        k += latencyCount[p];
      }
      Arrays.sort(all);
      Verification v =
          verifyPrompts < 0
              ? null
              : IndexCheck.verify(index, tl.caches, trace, verifyPrompts, maxBlocks);
      return new Result(
          kind,
          durationMs,
          tl.ops(),
          tl.blockOps(),
          total,
          wall,
          cpu,
          replayThreads == 0 ? cpuByThread.carrierNanos() : sum(threadCpu),
          cpuByThread.laneNanos(),
          pct(all, 50),
          pct(all, 99),
          pct(all, 99.9),
          all.length == 0 ? Double.NaN : all[all.length - 1] / 1e3,
          v);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  /** What one replay thread runs: its workers' entries merged in time order. */
  private record Plan(long[] times, Object[] entries, int requests) {}

  /**
   * One plan per worker (its own timeline) for virtual threads ({@code threads} 0); else {@code
   * threads} plans (at most one per worker), worker w in plan w mod threads, merged in time order
   * (ties: lower worker first), so each worker's own order is kept.
   */
  private static Plan[] plans(WorkerTimelines tl, int threads) {
    final int workers = tl.workers();
    final int n = threads == 0 ? workers : Math.min(threads, workers);
    final Plan[] plans = new Plan[n];
    for (int p = 0; p < n; p++) {
      final int[] ws = new int[(workers - p + n - 1) / n];
      int total = 0;
      for (int j = 0; j < ws.length; j++) {
        ws[j] = p + j * n;
        total += tl.times[ws[j]].length;
      }
      final long[] times = new long[total];
      final Object[] entries = new Object[total];
      final int[] pos = new int[ws.length];
      int requests = 0;
      for (int k = 0; k < total; k++) {
        int best = -1;
        for (int j = 0; j < ws.length; j++) {
          if (pos[j] < tl.times[ws[j]].length
              && (best < 0 || tl.times[ws[j]][pos[j]] < tl.times[ws[best]][pos[best]])) {
            best = j;
          }
        }
        times[k] = tl.times[ws[best]][pos[best]];
        entries[k] = tl.entries[ws[best]][pos[best]];
        if (entries[k] instanceof long[]) requests++;
        pos[best]++;
      }
      plans[p] = new Plan(times, entries, requests);
    }
    return plans;
  }

  /** CPU time of the whole process in nanoseconds, or -1 when the JVM does not say. */
  public static long processCpuNanos() {
    if (ManagementFactory.getOperatingSystemMXBean() instanceof OperatingSystemMXBean os) {
      return os.getProcessCpuTime();
    }
    return -1;
  }

  private static long sum(long[] a) {
    long s = 0;
    for (long x : a) s += x;
    return s;
  }

  private static double pct(long[] sorted, double p) {
    if (sorted.length == 0) return Double.NaN;
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] / 1e3;
  }
}
