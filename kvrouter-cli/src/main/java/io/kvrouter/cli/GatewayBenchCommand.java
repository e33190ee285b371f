package io.kvrouter.cli;

import io.kvrouter.harness.GatewayBench;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvrouter bench gateway}: client -> engine vs client -> gateway -> engine, instant mock
 * engines. The flags only; {@link GatewayBench} (kvrouter-harness) runs the benchmark.
 */
@Command(
    name = "gateway",
    mixinStandardHelpOptions = true,
    description = "Client -> engine vs client -> gateway -> engine, instant mock engines.")
final class GatewayBenchCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = "--model-dir",
      description = "Tokenizer directory for engines and gateway (default: ${DEFAULT-VALUE}).")
  Path modelDir = Path.of("kvrouter-gateway/src/test/resources/models/tiny");

  @Option(names = "--engines", description = "Mock engines (default: ${DEFAULT-VALUE}).")
  int engines = 2;

  @Option(
      names = "--clients",
      description = "Concurrent clients of the saturation phase (default: ${DEFAULT-VALUE}).")
  int clients = 32;

  @Option(
      names = "--rate",
      description = "Requests/s of the latency phase (default: ${DEFAULT-VALUE}).")
  int rate = 200;

  @Option(
      names = "--seconds",
      description = "Length of each measured phase (default: ${DEFAULT-VALUE}).")
  double seconds = 5;

  @Override
  public Integer call() throws Exception {
    return new GatewayBench(new GatewayBench.Settings(modelDir, engines, clients, rate, seconds))
        .run(spec.commandLine().getOut(), spec.commandLine().getErr());
  }
}
