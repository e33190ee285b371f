package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.cli.Main;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code bench trace}: timelines, the concurrent replay, and the command's outputs. */
class BenchTraceTest {
  @TempDir Path tmp;

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
    assertThat(BenchTraceCommand.sweepDurations(1, 1000, 4)).containsExactly(1000L, 100L, 10L, 1L);
    assertThat(BenchTraceCommand.sweepDurations(5, 5, 3)).containsExactly(5L);
  }

  @Test
  void theCommandWritesJsonAndAPlot() throws IOException {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    Path json = tmp.resolve("b.json");
    Path svg = tmp.resolve("b.svg");
    int code =
        Main.run(
            new PrintWriter(out, true),
            new PrintWriter(err, true),
            "bench",
            "trace",
            "--requests",
            "400",
            "--workers",
            "4",
            "--gpu-blocks",
            "256",
            "--index",
            "radix-tree,positional",
            "--sweep",
            "--sweep-min-ms",
            "2",
            "--sweep-max-ms",
            "20",
            "--sweep-steps",
            "2",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--quiet",
            "--output",
            json.toString(),
            "--plot",
            svg.toString());
    assertThat(code).as(err.toString()).isZero();
    assertThat(out.toString())
        .containsPattern("(?m)^radix-tree +20 ms +[0-9.]+ ms")
        .contains("positional");
    String j = Files.readString(json);
    assertThat(j).contains("\"radix-tree\"").contains("\"find_matches_p99_us\"");
    assertThat(j).contains("\"removed_events\" : \"per-block\"");
    assertThat(j).doesNotContain("\"index_equals_caches\" : false");
    assertThat(Files.readString(svg)).startsWith("<svg").contains("<polyline");
  }

  /** Runs {@code bench trace} with {@code args}, expects exit code 2 and returns stderr. */
  private static String refused(String... args) {
    StringWriter err = new StringWriter();
    String[] all = new String[args.length + 2];
    all[0] = "bench";
    all[1] = "trace";
    System.arraycopy(args, 0, all, 2, args.length);
    int code = Main.run(new PrintWriter(new StringWriter()), new PrintWriter(err, true), all);
    assertThat(code).as(err.toString()).isEqualTo(2);
    return err.toString();
  }

  @Test
  void anUnknownRemovedEventsShapeIsRefused() {
    assertThat(refused("--removed-events", "sideways"))
        .contains("--removed-events must be per-block or per-eviction, got 'sideways'");
  }

  @Test
  void anUnknownIndexListsTheKnownOnes() {
    assertThat(refused("--index", "btree"))
        .contains(
            "unknown index 'btree'; known indexes: radix-tree, concurrent-radix-tree, positional");
  }
}
