package io.kvrouter.cli;

import io.kvrouter.harness.ServeLoad;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvrouter bench serve-load} (hidden): the load measurement of a running {@code kvrouter
 * serve}, which kvrouter-harness/bench/serve-load.sh runs after starting the server
 * (docs/BENCHMARKS.md, "HTTP service (serve)"). The flags only; {@link ServeLoad}
 * (kvrouter-harness) does the work.
 */
@Command(
    name = "serve-load",
    hidden = true,
    mixinStandardHelpOptions = true,
    description = "Load a running kvrouter serve: events through /events, /query through wrk.")
final class ServeLoadCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(names = "--url", description = "The server (default: ${DEFAULT-VALUE}).")
  String url = "http://127.0.0.1:18090";

  @Option(names = "--workers", description = "Workers (default: ${DEFAULT-VALUE}).")
  int workers = 16;

  @Option(
      names = "--prompts-per-worker",
      description = "Pool prompts each worker caches (default: ${DEFAULT-VALUE}, ~1 M blocks).")
  int promptsPerWorker = 1292;

  @Option(names = "--prompt-tokens", description = "Tokens per prompt (default: ${DEFAULT-VALUE}).")
  int promptTokens = 1024;

  @Option(
      names = "--pool",
      description = "Distinct prompts in the pool (default: ${DEFAULT-VALUE}).")
  int pool = 4000;

  @Option(
      names = "--event-rate",
      description = "Target events per second while wrk runs; 0: none (default: ${DEFAULT-VALUE}).")
  int eventRate = 110_000;

  @Option(names = "--batch", description = "Events per /events batch (default: ${DEFAULT-VALUE}).")
  int batch = 1000;

  @Option(names = "--senders", description = "Event sender threads (default: ${DEFAULT-VALUE}).")
  int senders = 2;

  @Option(names = "--duration", description = "Seconds of measurement (default: ${DEFAULT-VALUE}).")
  int duration = 30;

  @Option(
      names = "--warmup",
      description = "Seconds of the same load before measuring (default: ${DEFAULT-VALUE}).")
  int warmup = 10;

  @Option(names = "--wrk-threads", description = "wrk threads (default: ${DEFAULT-VALUE}).")
  int wrkThreads = 1;

  @Option(
      names = "--wrk-connections",
      description = "wrk connections; 0: no queries, events only (default: ${DEFAULT-VALUE}).")
  int wrkConnections = 16;

  @Option(names = "--lua", description = "wrk script (default: ${DEFAULT-VALUE}).")
  Path lua = Path.of("kvrouter-harness/bench/query.lua");

  @Option(names = "--seed", description = "Seed (default: ${DEFAULT-VALUE}).")
  long seed = 42;

  @Option(
      names = "--server-pid",
      description = "The server's process id, to report its CPU time (default: none).")
  long serverPid = -1;

  @Override
  public Integer call() throws Exception {
    return new ServeLoad(
            new ServeLoad.Settings(
                url,
                workers,
                promptsPerWorker,
                promptTokens,
                pool,
                eventRate,
                batch,
                senders,
                duration,
                warmup,
                wrkThreads,
                wrkConnections,
                lua,
                seed,
                serverPid))
        .run(spec.commandLine().getOut(), spec.commandLine().getErr());
  }
}
