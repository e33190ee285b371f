package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.SyntheticTrace;
import io.kvrouter.sim.Verification;
import io.kvrouter.sim.trace.TraceRequest;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code bench trace}'s harness: timelines, the concurrent replay against every index kind, and the
 * lines of its table (kept up, verdicts, the machine line, the sweep's durations). The command line
 * and its files: kvrouter-cli's BenchTraceTest.
 */
class TraceBenchTest {
  private final List<TraceRequest> trace = SyntheticTrace.conversations(40, 5, 1_000);

  private WorkerTimelines timelines() {
    return WorkerTimelines.record(
        trace, 6, 96, 64, new TimingModel(5, 50, 20, 8), RemovedEvents.PER_BLOCK, 42, () -> {});
  }

  @Test
  void timelinesHoldEveryRequestAndEventInTimeOrder() {
    WorkerTimelines tl = timelines();
    assertThat(tl.requests).isEqualTo(trace.size());
    assertThat(tl.events).isPositive();
    assertThat(tl.removedBlocks).as("the caches are under pressure").isPositive();
    assertThat(tl.ops()).isEqualTo(tl.requests + tl.events);
    assertThat(tl.blockOps()).isEqualTo(tl.requestBlocks + tl.storedBlocks);
    for (long[] times : tl.times) assertThat(times).isSorted();
  }

  @Test
  void evictionsArePublishedPerBlockOrPerEviction() {
    WorkerTimelines perBlock = timelines();
    WorkerTimelines perEviction =
        WorkerTimelines.record(
            trace,
            6,
            96,
            64,
            new TimingModel(5, 50, 20, 8),
            RemovedEvents.PER_EVICTION,
            42,
            () -> {});
    assertThat(removedSizes(perBlock)).isNotEmpty().allMatch(n -> n == 1);
    assertThat(removedSizes(perEviction)).anyMatch(n -> n > 1);
    // the same engines evicting the same blocks, only published differently
    assertThat(perBlock.removedBlocks).isEqualTo(perEviction.removedBlocks);
    assertThat(perBlock.storedBlocks).isEqualTo(perEviction.storedBlocks);
    assertThat(perBlock.events).isGreaterThan(perEviction.events);
    for (IndexKind kind : IndexKind.values()) {
      TraceReplay.Result r = TraceReplay.run(perEviction, kind, 2, 4, 0, 0, 100_000, trace, 50);
      assertThat(r.verification().problems()).as(kind.cliName()).isEmpty();
    }
  }

  private static List<Integer> removedSizes(WorkerTimelines tl) {
    List<Integer> sizes = new ArrayList<>();
    for (Object[] entries : tl.entries) {
      for (Object e : entries) {
        if (e instanceof RouterEvent r && r.data() instanceof CacheEvent.Removed x) {
          sizes.add(x.blockHashes().length);
        }
      }
    }
    return sizes;
  }

  @Test
  void everyKindEndsEqualToTheCachesAfterAConcurrentReplay() {
    WorkerTimelines tl = timelines();
    for (IndexKind kind : IndexKind.values()) {
      for (long durationMs : new long[] {0, 20}) {
        TraceReplay.Result r = TraceReplay.run(tl, kind, 2, 4, 0, durationMs, 100_000, trace, 50);
        assertThat(r.verification().problems()).as(kind + " " + durationMs).isEmpty();
        assertThat(r.requests()).isEqualTo(trace.size());
        assertThat(r.p50Us()).isPositive().isLessThanOrEqualTo(r.p99Us());
        assertThat(r.achievedOps()).isPositive();
      }
    }
    // one virtual thread per worker (the replay before), and fewer platform threads than workers
    // running several workers each: every request is timed once and the index ends the same
    for (int replayThreads : new int[] {0, 1, 4}) {
      TraceReplay.Result r =
          TraceReplay.run(
              tl, IndexKind.COMPRESSED_TREE, 2, 4, 0, 20, 100_000, replayThreads, trace, 50);
      assertThat(r.verification().problems()).as("replay threads " + replayThreads).isEmpty();
      assertThat(r.requests()).isEqualTo(trace.size());
      assertThat(r.laneCpuNanos()).as("the lanes applied the events").isPositive();
      assertThat(r.replayCpuNanos()).isPositive();
    }
    // no thread pool: events applied on the worker threads
    TraceReplay.Result direct =
        TraceReplay.run(tl, IndexKind.CONCURRENT_RADIX_TREE, 0, 4, 0, 10, 0, trace, 50);
    assertThat(direct.verification().ok()).isTrue();
  }

  @Test
  void aBoundedReplayNeverOverCountsInEveryKind() {
    WorkerTimelines tl = timelines();
    for (IndexKind kind : IndexKind.values()) {
      TraceReplay.Result r = TraceReplay.run(tl, kind, 2, 4, 100, 0, 100_000, trace, 50);
      assertThat(r.verification().problems()).as(kind.cliName()).isEmpty();
      // the caches hold more than the bound, so the index dropped blocks and still passed
      assertThat(r.verification().blocks()).as(kind.cliName()).isGreaterThan(100);
    }
  }

  @Test
  void sweepDurationsAreLogSpacedFromLongToShort() {
    assertThat(TraceBench.sweepDurations(1, 1000, 4)).containsExactly(1000L, 100L, 10L, 1L);
    assertThat(TraceBench.sweepDurations(5, 5, 3)).containsExactly(5L);
  }

  private static TraceReplay.Result replayed(IndexKind kind, long durationMs, double achievedPct) {
    long ops = 1_000_000;
    // offered = ops / duration; achieved = ops / wall, so wall = duration / achieved fraction
    long wallNanos = Math.round(durationMs * 1e6 * 100 / achievedPct);
    Verification ok = new Verification(true, 1, 1, 1, List.of());
    return new TraceReplay.Result(
        kind, durationMs, ops, ops, 1, wallNanos, 1, -1, -1, 1, 1, 1, 1, ok);
  }

  @Test
  void keptUpMeansAtLeast95PercentOfTheOfferedRate() {
    assertThat(TraceBench.keptUp(replayed(IndexKind.RADIX_TREE, 100, 96))).isEqualTo("yes (96%)");
    assertThat(TraceBench.keptUp(replayed(IndexKind.RADIX_TREE, 100, 94))).isEqualTo("no (94%)");
    assertThat(TraceBench.keptUp(replayed(IndexKind.RADIX_TREE, 0, 50))).isEqualTo("-");
  }

  @Test
  void theVerdictNamesTheFastestRateKeptUpWithAndTheSlowestFallenBehindAt() {
    List<TraceReplay.Result> rs =
        List.of(
            // 1,000,000 ops: 200 ms offers 5 M ops/s, 100 ms 10 M, 50 ms 20 M
            replayed(IndexKind.RADIX_TREE, 200, 100),
            replayed(IndexKind.RADIX_TREE, 100, 99),
            replayed(IndexKind.RADIX_TREE, 50, 60),
            replayed(IndexKind.POSITIONAL, 100, 80),
            replayed(IndexKind.CONCURRENT_RADIX_TREE, 100, 100),
            replayed(IndexKind.CONCURRENT_RADIX_TREE, 0, 100));
    assertThat(TraceBench.verdicts(rs))
        .containsExactly(
            "radix-tree: kept up at rates up to 10.00 M ops/s offered (100 ms); the slowest rate"
                + " it fell behind at: 20.00 M ops/s offered (50 ms), achieving 12.00 M ops/s.",
            "positional: fell behind at 10.00 M ops/s offered (100 ms), achieving 8.00 M ops/s.",
            "concurrent-radix-tree: kept up at 10.00 M ops/s offered (100 ms).");
    assertThat(TraceBench.verdicts(List.of(replayed(IndexKind.POSITIONAL, 0, 100))))
        .containsExactly("positional: full speed only (--duration 0), so kept up does not apply.");
  }

  @Test
  void theMachineLineWarnsWhenOtherProcessesCompeteForTheCores() {
    assertThat(TraceBench.machine(2, 0.5))
        .isEqualTo("machine: 2 cores, load average 0.5 before the replay");
    assertThat(TraceBench.machine(2, 2.0))
        .startsWith("machine: 2 cores, load average 2.0 before the replay: at or above the core")
        .contains("the rates below are lower bounds");
    assertThat(TraceBench.machine(1, -1)).isEqualTo("machine: 1 core (load average unknown)");
  }

  private static TraceBench.Settings settings(Long maxBlocks, boolean sweep, long sweepMaxMs) {
    return new TraceBench.Settings(
        null,
        10,
        null,
        4,
        256,
        512,
        "per-block",
        2,
        32,
        maxBlocks,
        100,
        100,
        2,
        sweep,
        2,
        sweepMaxMs,
        3,
        1,
        0,
        42,
        Path.of("unused.json"),
        Path.of("unused.svg"),
        true);
  }

  /** Runs the bench with {@code s}, expects exit code 2 and nothing on out; returns err. */
  private static String refused(TraceBench.Settings s) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code = new TraceBench(s).run(new PrintWriter(out, true), new PrintWriter(err, true));
    assertThat(code).as(err.toString()).isEqualTo(2);
    assertThat(out.toString()).isEmpty();
    return err.toString();
  }

  @Test
  void badSettingsAreRefusedBeforeAnythingRunsAndTheMessageNamesTheFlag() {
    assertThat(refused(settings(0L, false, 200)))
        .isEqualTo(
            "kvrouter bench trace: --max-blocks must be >= 1, got 0" + System.lineSeparator());
    assertThat(refused(settings(null, true, 1)))
        .contains("sweep needs 1 <= --sweep-min-ms <= --sweep-max-ms and --sweep-steps >= 1");
  }
}
