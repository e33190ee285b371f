package io.kvrouter.cli;

import io.kvrouter.harness.BenchTraceReport;
import io.kvrouter.harness.IndexKind;
import io.kvrouter.harness.TraceReplay;
import io.kvrouter.harness.WorkerTimelines;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.Progress;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.Verification;
import io.kvrouter.sim.trace.TraceFormatException;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceSource;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvrouter bench trace}: trace replay stress against an index, like Dynamo's mooncake_bench.
 */
@Command(
    name = "trace",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Replay stress, the shape of NVIDIA Dynamo's mooncake_bench: run the trace once through"
          + " mock engines (requests dealt to --workers at random) to record each worker's"
          + " timeline of findMatches requests and KV events, then replay all timelines at once"
          + " against one index (one virtual thread per worker, events through threadPool lanes"
          + " for the concurrent kinds), compressed into --duration ms, timing every findMatches.",
      "Reports offered and achieved operations/s (requests + events) and block operations/s,"
          + " findMatches p50/p99/p99.9, and whether the index kept up (achieved >= 95%% of"
          + " offered). --sweep runs several durations, log-spaced, and writes JSON and an SVG"
          + " plot of achieved vs offered.",
      ""
    })
public final class BenchTraceCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = "--trace",
      paramLabel = "FILE",
      description = "Mooncake-format JSONL trace (default: the bundled conversation trace).")
  Path trace;

  @Option(names = "--requests", paramLabel = "N", description = "Use only the first N requests.")
  Integer requests;

  @Option(
      names = "--index",
      split = ",",
      paramLabel = "LIST",
      description =
          "Index kinds, comma-separated (default: all): radix-tree, concurrent-radix-tree,"
              + " positional, compressed-tree.")
  List<String> indexes;

  @Option(
      names = "--workers",
      paramLabel = "N",
      defaultValue = "32",
      description = "Workers (default: ${DEFAULT-VALUE}).")
  int workers;

  @Option(
      names = "--gpu-blocks",
      paramLabel = "N",
      defaultValue = "2048",
      description = "KV blocks per worker (default: ${DEFAULT-VALUE}).")
  int gpuBlocks;

  @Option(
      names = "--block-size",
      paramLabel = "TOKENS",
      defaultValue = "512",
      description = "Tokens per block (default: ${DEFAULT-VALUE}: one block per trace hash id).")
  int blockSize;

  @Option(
      names = "--removed-events",
      paramLabel = "SHAPE",
      defaultValue = "per-block",
      description =
          "How the mock engines publish evictions: per-block (one Removed event per block, deepest"
              + " first, as vLLM and Dynamo's mocker do) or per-eviction (one Removed event naming"
              + " all the blocks of one eviction) (default: ${DEFAULT-VALUE}).")
  String removedEvents;

  private RemovedEvents removed = RemovedEvents.PER_BLOCK; // parsed from removedEvents

  private double loadAverageBefore = -1; // the machine's, before the replays

  @Option(
      names = "--event-threads",
      paramLabel = "N",
      defaultValue = "2",
      description =
          "threadPool lanes for the concurrent kinds; 0 applies events on the worker threads"
              + " (default: ${DEFAULT-VALUE}).")
  int eventThreads;

  @Option(
      names = "--jump-size",
      paramLabel = "N",
      defaultValue = "32",
      description = "Jump size of the positional index (default: ${DEFAULT-VALUE}).")
  int jumpSize;

  @Option(
      names = "--max-blocks",
      paramLabel = "N",
      description =
          "Bound every index to N (rank, block) pairs, dropping least recently used blocks past"
              + " it; the check then asks for no over-count instead of equality (default: no"
              + " bound).")
  Long maxBlocks;

  @Option(
      names = "--duration",
      paramLabel = "MS",
      defaultValue = "100",
      description =
          "Replay the whole trace in this many ms (default: ${DEFAULT-VALUE}, about 2.2 M ops/s"
              + " offered with the bundled trace, a pace the concurrent radix tree keeps up"
              + " with on 2 cores); 0: as fast as possible.")
  long durationMs;

  @Option(
      names = "--tick-us",
      paramLabel = "US",
      defaultValue = "100",
      description =
          "A worker thread runs every entry due within this many µs, then parks until the next"
              + " (default: ${DEFAULT-VALUE}; Dynamo's tokio timers tick in 1000).")
  long tickUs;

  @Option(names = "--sweep", description = "Run several durations, log-spaced (see below).")
  boolean sweep;

  @Option(
      names = "--sweep-min-ms",
      paramLabel = "MS",
      defaultValue = "2",
      description = "Shortest sweep duration (default: ${DEFAULT-VALUE}).")
  long sweepMinMs;

  @Option(
      names = "--sweep-max-ms",
      paramLabel = "MS",
      defaultValue = "200",
      description = "Longest sweep duration (default: ${DEFAULT-VALUE}).")
  long sweepMaxMs;

  @Option(
      names = "--sweep-steps",
      paramLabel = "N",
      defaultValue = "9",
      description = "Sweep durations (default: ${DEFAULT-VALUE}).")
  int sweepSteps;

  @Option(
      names = "--repeat",
      paramLabel = "N",
      defaultValue = "3",
      description =
          "Replays per duration; the reported one is the median by achieved ops/s (default:"
              + " ${DEFAULT-VALUE}).")
  int repeat;

  @Option(
      names = "--warmup",
      paramLabel = "N",
      defaultValue = "5",
      description =
          "Unmeasured replays at full speed per index kind first, for the JIT (default:"
              + " ${DEFAULT-VALUE}).")
  int warmup;

  @Option(
      names = "--seed",
      paramLabel = "N",
      defaultValue = "42",
      description = "Seeds how requests are dealt to workers (default: ${DEFAULT-VALUE}).")
  long seed;

  @Option(
      names = "--output",
      paramLabel = "FILE",
      defaultValue = "bench-trace.json",
      description = "Results as JSON (default: ${DEFAULT-VALUE}).")
  Path output;

  @Option(
      names = "--plot",
      paramLabel = "FILE",
      defaultValue = "bench-trace.svg",
      description = "SVG plot of achieved vs offered (default: ${DEFAULT-VALUE}; sweep only).")
  Path plot;

  @Option(
      names = {"-q", "--quiet"},
      description = "No progress bar.")
  boolean quiet;

  @Override
  public Integer call() {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    List<IndexKind> kinds;
    List<Long> durations;
    long bound;
    try {
      kinds = kinds();
      removed = RemovedEvents.parse(removedEvents);
      if (workers < 1 || gpuBlocks < 1 || blockSize < 1 || eventThreads < 0 || jumpSize < 1) {
        throw new IllegalArgumentException(
            "--workers, --gpu-blocks, --block-size and --jump-size must be >= 1,"
                + " --event-threads >= 0");
      }
      if (repeat < 1 || warmup < 0 || durationMs < 0 || tickUs < 0) {
        throw new IllegalArgumentException(
            "--repeat must be >= 1, --warmup, --duration and --tick-us >= 0");
      }
      bound = maxBlocks == null ? 0 : SimulateCommand.checkMaxBlocks(maxBlocks);
      durations = sweep ? sweepDurations(sweepMinMs, sweepMaxMs, sweepSteps) : List.of(durationMs);
    } catch (IllegalArgumentException e) {
      err.println("kvrouter bench trace: " + e.getMessage());
      return 2;
    }
    TraceSource.Loaded loaded;
    try {
      loaded = TraceSource.load(trace, requests == null ? Integer.MAX_VALUE : requests);
    } catch (TraceFormatException e) {
      err.println("kvrouter bench trace: " + e.getMessage());
      return 2;
    }
    List<TraceRequest> reqs = loaded.requests();
    WorkerTimelines tl;
    try (Progress progress = Progress.onStderr(System.err, quiet)) {
      progress.total(reqs.size());
      progress.phase("recording timelines");
      tl =
          WorkerTimelines.record(
              reqs,
              workers,
              gpuBlocks,
              blockSize,
              new TimingModel(5, 50, 20, 64),
              removed,
              seed,
              progress::advance);
    }
    out.printf(
        Locale.ROOT,
        "kvrouter bench trace: %s, %,d requests dealt to %d workers (%,d blocks of %d tokens"
            + " each)%n",
        loaded.name(),
        reqs.size(),
        workers,
        gpuBlocks,
        blockSize);
    out.printf(
        Locale.ROOT,
        "timelines: %,d findMatches (%,d blocks) + %,d events (%,d blocks stored, %,d removed, %s) ="
            + " %,d ops, %,d block ops; event threads %d%n",
        tl.requests,
        tl.requestBlocks,
        tl.events,
        tl.storedBlocks,
        tl.removedBlocks,
        removed.perBlock() ? "one per event" : "grouped by eviction",
        tl.ops(),
        tl.blockOps(),
        eventThreads);
    loadAverageBefore = systemLoadAverage();
    out.println(machine(Runtime.getRuntime().availableProcessors(), loadAverageBefore));
    out.println();
    out.printf(
        Locale.ROOT,
        "%-22s %9s %9s %11s %11s %11s %11s %8s %8s %9s %10s %6s%n",
        "index",
        "duration",
        "wall",
        "offered/s",
        "achieved/s",
        "blocks/s",
        "per CPU-s",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "kept up",
        "check");
    out.flush();

    List<TraceReplay.Result> results = new ArrayList<>();
    boolean consistent = true;
    for (IndexKind kind : kinds) {
      for (int i = 0; i < warmup; i++) {
        TraceReplay.run(tl, kind, eventThreads, jumpSize, bound, 0, tickUs * 1000, reqs, -1);
      }
      for (long d : durations) {
        List<TraceReplay.Result> runs = new ArrayList<>();
        for (int r = 0; r < repeat; r++) {
          runs.add(
              TraceReplay.run(
                  tl,
                  kind,
                  eventThreads,
                  jumpSize,
                  bound,
                  d,
                  tickUs * 1000,
                  reqs,
                  r == 0 ? 200 : -1));
        }
        Verification v = runs.get(0).verification();
        long cpuAll = 0;
        long wallAll = 0;
        for (TraceReplay.Result r : runs) {
          cpuAll += r.cpuNanos();
          wallAll += r.wallNanos();
        }
        runs.sort((a, b) -> Double.compare(a.achievedOps(), b.achievedOps()));
        TraceReplay.Result median = runs.get(runs.size() / 2);
        TraceReplay.Result shown =
            new TraceReplay.Result(
                median.kind(),
                median.durationMs(),
                median.ops(),
                median.blockOps(),
                median.requests(),
                median.wallNanos(),
                // the process CPU clock ticks coarsely (10 ms here): spread the total over the runs
                Math.round((double) cpuAll * median.wallNanos() / wallAll),
                median.p50Us(),
                median.p99Us(),
                median.p999Us(),
                median.maxUs(),
                v);
        results.add(shown);
        consistent &= v.ok();
        out.printf(
            Locale.ROOT,
            "%-22s %6d ms %6.1f ms %11s %11s %11s %11s %8.2f %8.2f %9.1f %10s %6s%n",
            kind.cliName(),
            d,
            shown.wallNanos() / 1e6,
            d == 0 ? "max" : rate(shown.offeredOps()),
            rate(shown.achievedOps()),
            rate(shown.achievedBlockOps()),
            rate(shown.opsPerCpuSecond()),
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
    for (String line : verdicts(results)) out.println(line);
    out.println();
    out.println(
        "kept up: yes when achieved >= 95% of offered (in brackets: achieved / offered): the index"
            + " answered every findMatches and applied every event at the trace's pace. no: it fell"
            + " behind, and its achieved rate is about the most it does on this machine as loaded"
            + " now (--sweep finds where each kind stops keeping up; --duration 0 measures the"
            + " most it does).");
    out.println(
        "ops = findMatches + events; block ops = blocks looked up + blocks stored (Dynamo's"
            + " counting); offered = ops / duration; achieved = ops / wall time; per CPU-s = ops per"
            + " second of the process's CPU time; latency = findMatches on the worker's thread;"
            + " check = the index equals the recorded caches after the replay.");
    try {
      Files.writeString(
          output,
          BenchTraceReport.json(
              loaded.name(),
              new BenchTraceReport.Setup(
                  workers(),
                  gpuBlocks(),
                  blockSize(),
                  removedEvents(),
                  eventThreads(),
                  jumpSize(),
                  seed(),
                  loadAverageBefore()),
              tl,
              results));
      out.println("results: " + output.toAbsolutePath());
      if (sweep) {
        Files.writeString(plot, BenchTraceReport.svg(results));
        out.println("plot: " + plot.toAbsolutePath());
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

  private List<IndexKind> kinds() {
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
    return java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
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
    java.util.Map<IndexKind, List<TraceReplay.Result>> byKind = new java.util.LinkedHashMap<>();
    for (TraceReplay.Result r : results) {
      List<TraceReplay.Result> rs = byKind.computeIfAbsent(r.kind(), k -> new ArrayList<>());
      if (r.durationMs() > 0) rs.add(r);
    }
    List<String> out = new ArrayList<>();
    for (java.util.Map.Entry<IndexKind, List<TraceReplay.Result>> e : byKind.entrySet()) {
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

  int workers() {
    return workers;
  }

  RemovedEvents removedEvents() {
    return removed;
  }

  int gpuBlocks() {
    return gpuBlocks;
  }

  int blockSize() {
    return blockSize;
  }

  int eventThreads() {
    return eventThreads;
  }

  int jumpSize() {
    return jumpSize;
  }

  long seed() {
    return seed;
  }

  /** The 1-minute load average before the replays; negative where unknown. */
  double loadAverageBefore() {
    return loadAverageBefore;
  }
}
