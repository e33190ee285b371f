package io.kvrouter.harness;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.trace.TraceSource;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The writer's CPU time on {@code bench trace}'s events (issue 21's setup: conversation trace, 32
 * workers, 2,048 blocks of 512 tokens, one {@code Removed} per block), applied on one thread to a
 * fresh {@code concurrentCompressedTree()} and {@code concurrentRadixTree()}: the minimum over the
 * second half of the rounds. Thread CPU time (ThreadMXBean), so other processes on a shared machine
 * count less than in the replay's wall time; no readers, no lanes. Order {@code time} applies the
 * events of all workers in their recorded time order; {@code worker} applies worker 0's, then
 * worker 1's ..., closer to what a saturated replay ({@code --duration 0}) feeds each lane.
 *
 * <pre>
 * java -cp kvrouter-cli/target/kvrouter.jar io.kvrouter.harness.TraceWriteCpu [rounds=40] [time|worker]
 *     [trace=data/conversation_trace.jsonl.gz]
 * </pre>
 */
public final class TraceWriteCpu {
  private TraceWriteCpu() {}

  public static void main(String[] args) {
    final int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 40;
    final boolean byWorker = args.length > 1 && args[1].equals("worker");
    final Path trace = Path.of(args.length > 2 ? args[2] : "data/conversation_trace.jsonl.gz");
    final TraceSource.Loaded loaded = TraceSource.load(trace, Integer.MAX_VALUE);
    final WorkerTimelines tl =
        WorkerTimelines.record(
            loaded.requests(),
            32,
            2048,
            512,
            new TimingModel(5, 50, 20, 64),
            RemovedEvents.PER_BLOCK,
            42,
            () -> {});
    final List<long[]> order = new ArrayList<>(); // {time, worker, entry}
    for (int w = 0; w < tl.workers(); w++) {
      for (int i = 0; i < tl.entries[w].length; i++) {
        if (tl.entries[w][i] instanceof RouterEvent) order.add(new long[] {tl.times[w][i], w, i});
      }
    }
    if (!byWorker) order.sort((x, y) -> Long.compare(x[0], y[0]));
    final RouterEvent[] events = new RouterEvent[order.size()];
    for (int k = 0; k < events.length; k++) {
      final long[] o = order.get(k);
      events[k] = (RouterEvent) tl.entries[(int) o[1]][(int) o[2]];
    }
    final ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    for (String kind : new String[] {"concurrentCompressed", "concurrent"}) {
      long best = Long.MAX_VALUE;
      for (int r = 0; r < rounds; r++) {
        try (KvIndex index =
            kind.equals("concurrent")
                ? KvIndexes.concurrentRadixTree()
                : KvIndexes.concurrentCompressedTree()) {
          final long t0 = mx.getCurrentThreadCpuTime();
          for (RouterEvent e : events) index.apply(e);
          final long t1 = mx.getCurrentThreadCpuTime();
          if (r >= rounds / 2) best = Math.min(best, t1 - t0);
        }
      }
      System.out.printf(
          "%-21s %,d events (%s order): writer CPU %.1f ms, %.0f ns/event, %.2f M events/s%n",
          kind,
          events.length,
          byWorker ? "worker" : "time",
          best / 1e6,
          (double) best / events.length,
          events.length / (best / 1e3));
    }
  }
}
