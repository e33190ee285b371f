package io.kvrouter.harness;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.HashMap;
import java.util.Map;

/**
 * The CPU time threads that are alive at {@link #end()} spent since {@link #begin()}, in two
 * groups: the index's event lanes ({@code kvrouter-indexer-*}) and the carriers of virtual threads
 * (a replay with one virtual thread per worker; TraceReplay's platform threads read their own CPU
 * clocks, as they have ended by then).
 *
 * <pre>
 * Implementation notes
 *
 * begin() keeps every live thread's CPU time by thread id; end() reads them again and adds each
 * thread's difference (a thread started in between counts from 0) to its group, chosen by the
 * thread's name. Thread CPU time is the kernel's per-thread clock, so other processes on a busy
 * machine change it far less than wall time. Reads cost one getThreadInfo over all threads, at
 * both ends only. One thread uses an instance; -1 when the JVM does not measure thread CPU time.
 * </pre>
 */
final class ThreadCpu {
  private static final String LANE = "kvrouter-indexer-";
  private static final String CARRIER = "ForkJoinPool"; // the default virtual-thread scheduler

  private final ThreadMXBean mx = ManagementFactory.getThreadMXBean();
  private final Map<Long, Long> before = new HashMap<>();
  private long carrierNanos = -1;
  private long laneNanos = -1;

  void begin() {
    before.clear();
    if (!mx.isThreadCpuTimeSupported()) return;
    for (long id : mx.getAllThreadIds()) {
      long t = mx.getThreadCpuTime(id);
      if (t >= 0) before.put(id, t);
    }
  }

  void end() {
    if (!mx.isThreadCpuTimeSupported()) return;
    long carriers = 0;
    long lanes = 0;
    long[] ids = mx.getAllThreadIds();
    ThreadInfo[] infos = mx.getThreadInfo(ids);
    for (int i = 0; i < ids.length; i++) {
      if (infos[i] == null) continue;
      long t = mx.getThreadCpuTime(ids[i]);
      if (t < 0) continue;
      long spent = t - before.getOrDefault(ids[i], 0L);
      String name = infos[i].getThreadName();
      if (name.startsWith(LANE)) {
        lanes += spent;
      } else if (name.startsWith(CARRIER)) {
        carriers += spent;
      }
    }
    carrierNanos = carriers;
    laneNanos = lanes;
  }

  /** CPU time of the virtual threads' carriers, ns; -1 when not measured. */
  long carrierNanos() {
    return carrierNanos;
  }

  /** CPU time of the index's event lanes, ns; -1 when not measured. */
  long laneNanos() {
    return laneNanos;
  }
}
