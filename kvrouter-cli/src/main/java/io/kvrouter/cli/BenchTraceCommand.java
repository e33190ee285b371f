package io.kvrouter.cli;

import io.kvrouter.harness.TraceBench;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvrouter bench trace}: trace replay stress against an index, like Dynamo's mooncake_bench.
 * The flags only; {@link TraceBench} (kvrouter-harness) runs the benchmark.
 */
@Command(
    name = "trace",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Replay stress, the shape of NVIDIA Dynamo's mooncake_bench: run the trace once through"
          + " mock engines (requests dealt to --workers at random) to record each worker's"
          + " timeline of findMatches requests and KV events, then replay all timelines at once"
          + " against one index (one virtual thread per worker, or --replay-threads platform threads, events through threadPool lanes"
          + " for the concurrent kinds), compressed into --duration ms, timing every findMatches.",
      "Reports offered and achieved operations/s (requests + events) and block operations/s,"
          + " findMatches p50/p99/p99.9, and whether the index kept up (achieved >= 95%% of"
          + " offered). --sweep runs several durations, log-spaced, and writes JSON and an SVG"
          + " plot of achieved vs offered.",
      ""
    })
final class BenchTraceCommand implements Callable<Integer> {
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

  @Option(
      names = "--replay-threads",
      paramLabel = "N",
      defaultValue = "0",
      description =
          "0: one virtual thread per worker (default); N: N platform threads replay the"
              + " workers' timelines, each running the workers dealt to it in time order, as"
              + " tokio's worker threads run Dynamo's worker tasks.")
  int replayThreads;

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
    return new TraceBench(
            new TraceBench.Settings(
                trace,
                requests,
                indexes,
                workers,
                gpuBlocks,
                blockSize,
                removedEvents,
                eventThreads,
                jumpSize,
                maxBlocks,
                durationMs,
                tickUs,
                replayThreads,
                sweep,
                sweepMinMs,
                sweepMaxMs,
                sweepSteps,
                repeat,
                warmup,
                seed,
                output,
                plot,
                quiet))
        .run(spec.commandLine().getOut(), spec.commandLine().getErr());
  }
}
