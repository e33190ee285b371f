package io.kvrouter.harness;

import com.sun.management.OperatingSystemMXBean;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.sim.IndexCheck;
import io.kvrouter.sim.Verification;
import io.kvrouter.sim.trace.TraceRequest;
import java.lang.management.ManagementFactory;
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
 * One virtual thread per worker (Dynamo gives each worker its own tokio task). All threads wait
 * on a latch, then share one start instant. Entry i of a timeline is due at
 * start + time[i] * duration / span; a thread runs every entry due within the next tick
 * (--tick-us, default 100 µs), then parks until the next one is due (LockSupport.parkNanos), so a
 * thread that falls behind runs back to back and never sleeps. It reads the clock only when the
 * next entry is not due within a tick of its last reading (which is never later than the
 * present, so no entry runs more than a tick early): a burst of due events costs no clock reads. The tick bounds the parks (each
 * costs a virtual-thread unmount and a timed unpark through the JDK's timer thread) to one per
 * tick per worker; an entry runs at most one tick early. Dynamo's replay sleeps on tokio timers,
 * which have 1 ms granularity. A request is timed with System.nanoTime around findMatches(hashes, false) on the
 * worker's own thread; an event is index.apply(event), which for a thread-pool index only
 * queues it to its lane (sticky per worker, so each worker's events stay in order).
 *
 * The run ends when every thread is done and index.flush() returned (every queued event
 * applied). achieved = operations / (end - start); offered = operations / duration. A duration
 * of 0 makes every entry due at once: the index's saturated throughput.
 *
 * Latencies go to one long[] per thread (no sharing), merged and sorted at the end; percentiles
 * are nearest-rank. The process CPU time over the same interval (every thread of the JVM:
 * replay threads, lanes, GC and JIT) gives operations per CPU-second, which other processes on
 * a shared machine disturb far less than wall-clock throughput. A run then checks, when asked, that the index equals the recorded final
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

    /** Whether achieved throughput reached 95% of offered (a duration of 0 never does). */
    public boolean keptUp() {
      return achievedOps() >= 0.95 * offeredOps();
    }
  }

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
    final int workers = tl.workers();
    final long durationNanos = durationMs * 1_000_000L;
    final double scale = (double) durationNanos / tl.spanNanos;
    final long[][] latencies = new long[workers][];
    final int[] latencyCount = new int[workers];
    final long[] sink = new long[workers];
    final CountDownLatch ready = new CountDownLatch(workers);
    final CountDownLatch go = new CountDownLatch(1);
    final long[] startAt = new long[1];
    final Throwable[] failure = new Throwable[1];

    try (KvIndex index = kind.create(eventThreads, jumpSize, maxBlocks)) {
      List<Thread> threads = new ArrayList<>(workers);
      for (int w = 0; w < workers; w++) {
        final int worker = w;
        final long[] times = tl.times[w];
        final Object[] entries = tl.entries[w];
        int reqs = 0;
        for (Object e : entries) if (e instanceof long[]) reqs++;
        latencies[w] = new long[reqs];
        threads.add(
            Thread.ofVirtual()
                .name("replay-w" + w)
                .unstarted(
                    () -> {
                      try {
                        ready.countDown();
                        go.await();
                        final long start = startAt[0];
                        final long[] lat = latencies[worker];
                        int nLat = 0;
                        long acc = 0;
                        final int n = entries.length;
                        int i = 0;
                        // a clock reading no later than the present: an entry due within a tick
                        // of it is due within a tick of the present too
                        long now = System.nanoTime();
                        while (i < n) {
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
                        latencyCount[worker] = nLat;
                        sink[worker] = acc;
                      } catch (Throwable t) {
                        synchronized (failure) {
                          if (failure[0] == null) failure[0] = t;
                        }
                      }
                    }));
      }
      for (Thread t : threads) t.start();
      ready.await();
      final long cpu0 = processCpuNanos();
      startAt[0] = System.nanoTime();
      go.countDown();
      for (Thread t : threads) t.join();
      index.flush();
      long wall = System.nanoTime() - startAt[0];
      long cpu = processCpuNanos() - cpu0;
      if (failure[0] != null) {
        throw new IllegalStateException("replay failed on " + kind.cliName(), failure[0]);
      }
      int total = 0;
      for (int c : latencyCount) total += c;
      long[] all = new long[total];
      int k = 0;
      for (int w = 0; w < workers; w++) {
        System.arraycopy(latencies[w], 0, all, k, latencyCount[w]);
        k += latencyCount[w];
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

  /** CPU time of the whole process in nanoseconds, or -1 when the JVM does not say. */
  public static long processCpuNanos() {
    if (ManagementFactory.getOperatingSystemMXBean() instanceof OperatingSystemMXBean os) {
      return os.getProcessCpuTime();
    }
    return -1;
  }

  private static double pct(long[] sorted, double p) {
    if (sorted.length == 0) return Double.NaN;
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] / 1e3;
  }
}
