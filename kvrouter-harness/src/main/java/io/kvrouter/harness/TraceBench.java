package io.kvrouter.harness;

import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.Progress;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.Verification;
import io.kvrouter.sim.trace.TraceFormatException;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceSource;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code kvrouter bench trace}: trace replay stress against an index, the shape of Dynamo's
 * mooncake_bench. Records every worker's timeline once ({@link WorkerTimelines}), then replays them
 * all at once against each index kind ({@link TraceReplay}), once per duration and {@code repeat}
 * times, and prints a table, one verdict per kind, the JSON results and, for a sweep, the SVG plot
 * ({@link BenchTraceReport}).
 *
 * <pre>
 * Implementation notes
 *
 * Input: a Settings value (the command's flags, as given, so that every refusal names the flag);
 * run() checks it first and answers 2 with one line on err for a bad value or an unreadable trace,
 * before anything runs. Output: the table on out, flushed after every row, so a long sweep shows
 * its progress; an index's check problems on err; the progress bar on System.err (Progress shows
 * it only on a terminal). One thread: run() is not reentrant and keeps no state between calls
 * beyond the load average it read before the replays.
 *
 * Of the repeats of one duration the median by achieved ops/s is reported, with the process CPU
 * time spread over the repeats by wall time (the process CPU clock ticks coarsely); the check
 * reported is the first repeat's, the only one that verifies. Exit: 0, or 1 when an index did not
 * end equal to the engines' caches or a file could not be written.
 * </pre>
 */
public final class TraceBench {
  /**
   * The flags of {@code kvrouter bench trace}; null where a flag without a default was not given.
   */
  public record Settings(
      Path trace,
      Integer requests,
      List<String> indexes,
      int workers,
      int gpuBlocks,
      int blockSize,
      String removedEvents,
      int eventThreads,
      int jumpSize,
      Long maxBlocks,
      long durationMs,
      long tickUs,
      int replayThreads,
      boolean sweep,
      long sweepMinMs,
      long sweepMaxMs,
      int sweepSteps,
      int repeat,
      int warmup,
      long seed,
      Path output,
      Path plot,
      boolean quiet) {
    public Settings {
      indexes = indexes == null ? null : List.copyOf(indexes);
    }
  }

  @SuppressWarnings("OrphanedFormatString") // printed as is: "95%" is text, not a format
  private static final String KEPT_UP_NOTE =
      "kept up: yes when achieved >= 95% of offered (in brackets: achieved / offered): the index"
          + " answered every findMatches and applied every event at the trace's pace. no: it fell"
          + " behind, and its achieved rate is about the most it does on this machine as loaded"
          + " now (--sweep finds where each kind stops keeping up; --duration 0 measures the"
          + " most it does).";

  private final Settings s;

  public TraceBench(Settings settings) {
    this.s = settings;
  }

  /** Runs the benchmark; returns the exit code (0 ok, 1 a check or a write failed, 2 bad input). */
  @SuppressWarnings("ClosingStandardOutputStreams") // Progress.close() leaves System.err open
  public int run(PrintWriter out, PrintWriter err) {
    List<IndexKind> kinds;
    List<Long> durations;
    RemovedEvents removed;
    long bound;
    try {
      kinds = kinds(s.indexes());
      removed = RemovedEvents.parse(s.removedEvents());
      if (s.workers() < 1
          || s.gpuBlocks() < 1
          || s.blockSize() < 1
          || s.eventThreads() < 0
          || s.jumpSize() < 1) {
        throw new IllegalArgumentException(
            "--workers, --gpu-blocks, --block-size and --jump-size must be >= 1,"
                + " --event-threads >= 0");
      }
      if (s.repeat() < 1
          || s.warmup() < 0
          || s.durationMs() < 0
          || s.tickUs() < 0
          || s.replayThreads() < 0) {
        throw new IllegalArgumentException(
            "--repeat must be >= 1, --warmup, --duration, --tick-us and --replay-threads >= 0");
      }
      if (s.maxBlocks() != null && s.maxBlocks() < 1) {
        throw new IllegalArgumentException("--max-blocks must be >= 1, got " + s.maxBlocks());
      }
      bound = s.maxBlocks() == null ? 0 : s.maxBlocks();
      durations =
          s.sweep()
              ? sweepDurations(s.sweepMinMs(), s.sweepMaxMs(), s.sweepSteps())
              : List.of(s.durationMs());
    } catch (IllegalArgumentException e) {
      err.println("kvrouter bench trace: " + e.getMessage());
      return 2;
    }
    TraceSource.Loaded loaded;
    try {
      loaded = TraceSource.load(s.trace(), s.requests() == null ? Integer.MAX_VALUE : s.requests());
    } catch (TraceFormatException e) {
      err.println("kvrouter bench trace: " + e.getMessage());
      return 2;
    }
    List<TraceRequest> reqs = loaded.requests();
    WorkerTimelines tl;
    try (Progress progress = Progress.onStderr(System.err, s.quiet())) {
      progress.total(reqs.size());
      progress.phase("recording timelines");
      tl =
          WorkerTimelines.record(
              reqs,
              s.workers(),
              s.gpuBlocks(),
              s.blockSize(),
              new TimingModel(5, 50, 20, 64),
              removed,
              s.seed(),
              progress::advance);
    }
    out.printf(
        Locale.ROOT,
        "kvrouter bench trace: %s, %,d requests dealt to %d workers (%,d blocks of %d tokens"
            + " each)%n",
        loaded.name(),
        reqs.size(),
        s.workers(),
        s.gpuBlocks(),
        s.blockSize());
    out.printf(
        Locale.ROOT,
        "timelines: %,d findMatches (%,d blocks) + %,d events (%,d blocks stored, %,d removed, %s) ="
            + " %,d ops, %,d block ops; event threads %d, %s%n",
        tl.requests,
        tl.requestBlocks,
        tl.events,
        tl.storedBlocks,
        tl.removedBlocks,
        removed.perBlock() ? "one per event" : "grouped by eviction",
        tl.ops(),
        tl.blockOps(),
        s.eventThreads(),
        s.replayThreads() == 0
            ? "one virtual thread per worker"
            : s.replayThreads() + " replay threads");
    double loadAverageBefore = systemLoadAverage();
    out.println(machine(Runtime.getRuntime().availableProcessors(), loadAverageBefore));
    out.println();
    out.printf(
        Locale.ROOT,
        "%-22s %9s %9s %11s %11s %11s %11s %8s %8s %8s %9s %10s %6s%n",
        "index",
        "duration",
        "wall",
        "offered/s",
        "achieved/s",
        "blocks/s",
        "per CPU-s",
        "CPU ns/op",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "kept up",
        "check");
    out.flush();

    List<TraceReplay.Result> results = new ArrayList<>();
    boolean consistent = true;
    long tickNanos = s.tickUs() * 1000;
    for (IndexKind kind : kinds) {
      for (int i = 0; i < s.warmup(); i++) {
        TraceReplay.run(
            tl,
            kind,
            s.eventThreads(),
            s.jumpSize(),
            bound,
            0,
            tickNanos,
            s.replayThreads(),
            reqs,
            -1);
      }
      for (long d : durations) {
        List<TraceReplay.Result> runs = new ArrayList<>();
        for (int r = 0; r < s.repeat(); r++) {
          runs.add(
              TraceReplay.run(
                  tl,
                  kind,
                  s.eventThreads(),
                  s.jumpSize(),
                  bound,
                  d,
                  tickNanos,
                  s.replayThreads(),
                  reqs,
                  r == 0 ? 200 : -1));
        }
        TraceReplay.Result shown = median(runs);
        Verification v = shown.verification();
        results.add(shown);
        consistent &= v.ok();
        out.printf(
            Locale.ROOT,
            "%-22s %6d ms %6.1f ms %11s %11s %11s %11s %8.0f %8.2f %8.2f %9.1f %10s %6s%n",
            kind.cliName(),
            d,
            shown.wallNanos() / 1e6,
            d == 0 ? "max" : rate(shown.offeredOps()),
            rate(shown.achievedOps()),
            rate(shown.achievedBlockOps()),
            rate(shown.opsPerCpuSecond()),
            shown.cpuNanosPerOp(),
            shown.p50Us(),
            shown.p99Us(),
            shown.p999Us(),
            keptUp(shown),
            v.ok() ? "ok" : "FAIL");
        out.flush();
        if (!v.ok()) {
          for (String p : v.problems()) err.println("  " + p);
        }
      }
    }
    out.println();
    for (TraceReplay.Result r : results) {
      if (r.replayCpuNanos() >= 0 && r.cpuNanos() > 0) out.println(cpuSplit(r));
    }
    for (String line : verdicts(results)) out.println(line);
    out.println();
    out.println(KEPT_UP_NOTE);
    out.println(
        "ops = findMatches + events; block ops = blocks looked up + blocks stored (Dynamo's"
            + " counting); offered = ops / duration; achieved = ops / wall time; per CPU-s = ops per"
            + " second of the process's CPU time; CPU ns/op = the process's CPU time per op (split"
            + " above by thread); latency = findMatches on the worker's thread;"
            + " check = the index equals the recorded caches after the replay.");
    try {
      Files.writeString(
          s.output(),
          BenchTraceReport.json(
              loaded.name(),
              new BenchTraceReport.Setup(
                  s.workers(),
                  s.gpuBlocks(),
                  s.blockSize(),
                  removed,
                  s.eventThreads(),
                  s.replayThreads(),
                  s.jumpSize(),
                  s.seed(),
                  loadAverageBefore),
              tl,
              results));
      out.println("results: " + s.output().toAbsolutePath());
      if (s.sweep()) {
        Files.writeString(s.plot(), BenchTraceReport.svg(results));
        out.println("plot: " + s.plot().toAbsolutePath());
      }
    } catch (IOException e) {
      err.println("kvrouter bench trace: cannot write " + e.getMessage());
      return 1;
    }
    out.flush();
    if (!consistent) {
      err.println("kvrouter bench trace: an index did not end equal to the engines' caches.");
      return 1;
    }
    return 0;
  }

  /**
   * The repeat shown for one duration: the median by achieved ops/s, with the CPU time of all
   * repeats spread by wall time and the first repeat's check (the only one that verifies).
   */
  private static TraceReplay.Result median(List<TraceReplay.Result> runs) {
    Verification v = runs.get(0).verification();
    long cpuAll = 0;
    long wallAll = 0;
    long replayAll = 0;
    long laneAll = 0;
    for (TraceReplay.Result r : runs) {
      cpuAll += r.cpuNanos();
      wallAll += r.wallNanos();
      replayAll += r.replayCpuNanos();
      laneAll += r.laneCpuNanos();
    }
    List<TraceReplay.Result> sorted = new ArrayList<>(runs);
    sorted.sort((a, b) -> Double.compare(a.achievedOps(), b.achievedOps()));
    TraceReplay.Result median = sorted.get(sorted.size() / 2);
    return new TraceReplay.Result(
        median.kind(),
        median.durationMs(),
        median.ops(),
        median.blockOps(),
        median.requests(),
        median.wallNanos(),
        // the process CPU clock ticks coarsely (10 ms here): spread the total over the runs
        Math.round((double) cpuAll * median.wallNanos() / wallAll),
        // per-thread CPU clocks are exact: the mean over the repeats
        median.replayCpuNanos() < 0 ? -1 : replayAll / runs.size(),
        median.laneCpuNanos() < 0 ? -1 : laneAll / runs.size(),
        median.p50Us(),
        median.p99Us(),
        median.p999Us(),
        median.maxUs(),
        v);
  }

  /**
   * One kind's CPU time per op by thread: replay threads (findMatches, timing, queueing events),
   * event lanes (applying them) and the rest of the process (GC, JIT).
   */
  static String cpuSplit(TraceReplay.Result r) {
    double ops = r.ops();
    double replay = r.replayCpuNanos() / ops;
    double lanes = r.laneCpuNanos() / ops;
    double mean = (r.cpuNanos() + 0.0) / ops;
    return String.format(
        Locale.ROOT,
        "%s, %d ms: CPU per op %.0f ns = replay threads %.0f + event lanes %.0f + rest of the"
            + " process %.0f (thread CPU clocks; the repeats' mean for the threads)",
        r.kind().cliName(),
        r.durationMs(),
        mean,
        replay,
        lanes,
        Math.max(0, mean - replay - lanes));
  }

  /** The --index kinds, in the order given, each once; every kind when none is given. */
  static List<IndexKind> kinds(List<String> indexes) {
    if (indexes == null || indexes.isEmpty()) {
      return new ArrayList<>(List.of(IndexKind.values())); // every kind has a bounded form
    }
    EnumSet<IndexKind> seen = EnumSet.noneOf(IndexKind.class);
    List<IndexKind> out = new ArrayList<>();
    for (String name : indexes) {
      IndexKind k = IndexKind.parse(name);
      if (seen.add(k)) out.add(k);
    }
    return out;
  }

  /** The 1-minute load average of the machine, or a negative number where it is unknown. */
  static double systemLoadAverage() {
    return ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
  }

  /** The machine line: cores and load, with a warning when other processes compete for them. */
  static String machine(int cores, double loadAverage) {
    String line = "machine: " + cores + (cores == 1 ? " core" : " cores");
    if (loadAverage < 0) return line + " (load average unknown)";
    line += String.format(Locale.ROOT, ", load average %.1f before the replay", loadAverage);
    if (loadAverage >= cores) {
      line +=
          ": at or above the core count, so other processes take CPU time from the replay; the"
              + " rates below are lower bounds (docs/BENCHMARKS.md's figures are from a quiet"
              + " machine)";
    }
    return line;
  }

  /** The kept-up cell: {@code yes (100%)}, {@code no (74%)}, or {@code -} at full speed. */
  static String keptUp(TraceReplay.Result r) {
    if (r.durationMs() == 0) return "-";
    long pct = Math.round(100 * r.achievedOps() / r.offeredOps());
    return (r.keptUp() ? "yes" : "no") + " (" + pct + "%)";
  }

  /**
   * One line per kind: whether it kept up; over several durations, the fastest offered rate it kept
   * up with and the slowest it fell behind at (durations of 0, which offer everything at once, are
   * left out).
   */
  static List<String> verdicts(List<TraceReplay.Result> results) {
    Map<IndexKind, List<TraceReplay.Result>> byKind = new LinkedHashMap<>();
    for (TraceReplay.Result r : results) {
      List<TraceReplay.Result> rs = byKind.computeIfAbsent(r.kind(), k -> new ArrayList<>());
      if (r.durationMs() > 0) rs.add(r);
    }
    List<String> out = new ArrayList<>();
    for (Map.Entry<IndexKind, List<TraceReplay.Result>> e : byKind.entrySet()) {
      TraceReplay.Result up = null; // the highest offered rate kept up with
      TraceReplay.Result behind = null; // the lowest offered rate fallen behind at
      for (TraceReplay.Result r : e.getValue()) {
        if (r.keptUp() && (up == null || r.offeredOps() > up.offeredOps())) up = r;
        if (!r.keptUp() && (behind == null || r.offeredOps() < behind.offeredOps())) behind = r;
      }
      String name = e.getKey().cliName() + ": ";
      boolean several = e.getValue().size() > 1;
      StringBuilder line = new StringBuilder(name);
      if (up == null && behind == null) {
        line.append("full speed only (--duration 0), so kept up does not apply");
      }
      if (up != null) {
        line.append(several ? "kept up at rates up to " : "kept up at ").append(offered(up));
      }
      if (behind != null) {
        if (up != null) line.append("; ");
        line.append(
                !several
                    ? "fell behind at "
                    : up != null
                        ? "the slowest rate it fell behind at: "
                        : "fell behind at every rate, the slowest ")
            .append(offered(behind))
            .append(", achieving ")
            .append(rate(behind.achievedOps()))
            .append(" ops/s");
      }
      out.add(line.append('.').toString());
    }
    return out;
  }

  private static String offered(TraceReplay.Result r) {
    return rate(r.offeredOps()) + " ops/s offered (" + r.durationMs() + " ms)";
  }

  /** {@code steps} durations from max down to min, log-spaced, rounded to whole ms, distinct. */
  static List<Long> sweepDurations(long minMs, long maxMs, int steps) {
    if (minMs < 1 || maxMs < minMs || steps < 1) {
      throw new IllegalArgumentException(
          "sweep needs 1 <= --sweep-min-ms <= --sweep-max-ms and --sweep-steps >= 1");
    }
    List<Long> out = new ArrayList<>();
    for (int i = 0; i < steps; i++) {
      double f = steps == 1 ? 0 : (double) i / (steps - 1);
      long d = Math.round(maxMs * Math.pow((double) minMs / maxMs, f));
      if (out.isEmpty() || out.get(out.size() - 1) != d) out.add(d);
    }
    return out;
  }

  static String rate(double perSec) {
    if (perSec >= 1e6) return String.format(Locale.ROOT, "%.2f M", perSec / 1e6);
    if (perSec >= 1e3) return String.format(Locale.ROOT, "%.1f k", perSec / 1e3);
    return String.format(Locale.ROOT, "%.0f", perSec);
  }
}
