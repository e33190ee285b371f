package io.kvrouter.harness;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The machine's CPU time counters (the first line of Linux's {@code /proc/stat}) at one instant,
 * and what two of them say about the time between: how busy the machine was and how much time a
 * hypervisor gave to other guests (steal). {@code bench fleet} takes one before and one after each
 * policy's run, to tell a run the machine could not carry from one it could.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable; the counters are USER_HZ ticks since boot in /proc/stat's column order: user, nice,
 * system, idle, iowait, irq, softirq, steal (later columns, guest time, are already counted in
 * user). read() returns null where the file does not exist or has another shape (not Linux): the
 * reports then say "unknown" rather than guess.
 * </pre>
 */
record CpuSample(long busy, long idle, long steal) {
  private static final Path STAT = Path.of("/proc/stat");

  /** The counters now, or null when /proc/stat cannot be read. */
  static CpuSample read() {
    try {
      for (String line : Files.readAllLines(STAT)) {
        if (line.startsWith("cpu ")) return parse(line);
      }
      return null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** /proc/stat's aggregate {@code cpu} line; null when it has fewer than 8 counters. */
  static CpuSample parse(String line) {
    String[] f = line.trim().split("\\s+");
    if (f.length < 9 || !f[0].equals("cpu")) return null;
    long[] v = new long[8];
    for (int i = 0; i < 8; i++) v[i] = Long.parseLong(f[i + 1]);
    long idle = v[3] + v[4];
    long steal = v[7];
    long busy = v[0] + v[1] + v[2] + v[5] + v[6];
    return new CpuSample(busy, idle, steal);
  }

  /** Fractions of the machine's CPU time between {@code before} and {@code after}. */
  record Usage(double busy, double steal) {}

  /** What happened between two samples; null when either is null or no time passed. */
  static Usage between(CpuSample before, CpuSample after) {
    if (before == null || after == null) return null;
    long busy = after.busy - before.busy;
    long idle = after.idle - before.idle;
    long steal = after.steal - before.steal;
    long all = busy + idle + steal;
    if (all <= 0) return null;
    return new Usage((double) busy / all, (double) steal / all);
  }
}
