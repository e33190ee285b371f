package io.kvrouter.harness;

import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Starts {@code bench fleet}'s mock engines for one policy: {@code --engines} MockEngineServers in
 * this JVM ({@code --in-process}) or as many child JVMs running the command line's {@code
 * mock-engine}, each with the fleet's KV blocks, block size, timing model (divided by {@code
 * --time-scale}, the mock engine's --speedup) and seed + its index.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable: the settings and the main class a child JVM runs. start() starts every child before
 * it waits for any (their JVMs start in parallel), then waits up to 60 s for each to print its
 * addresses; if anything fails, every engine started so far is closed before the exception
 * leaves, so a failed start leaves no process. A child JVM is small (-Xmx384m, serial GC,
 * 512 KiB stacks) and runs with --exit-with-parent, so no engine outlives the bench, even a
 * SIGKILL of it; its classpath is this JVM's.
 * </pre>
 */
final class EngineLauncher {
  private final FleetBench.Settings s;
  private final String mainClass;

  EngineLauncher(FleetBench.Settings settings, String mainClass) {
    this.s = settings;
    this.mainClass = mainClass;
  }

  /** The fleet, every engine serving. */
  List<FleetEngine> start() throws Exception {
    List<FleetEngine> out = new ArrayList<>();
    try {
      if (s.inProcess()) {
        for (int i = 0; i < s.engines(); i++) {
          out.add(new FleetEngine.InProcess(MockEngineServer.start(engineConfig(i))));
        }
      } else {
        List<ChildEngine> started = new ArrayList<>();
        for (int i = 0; i < s.engines(); i++) {
          ChildEngine c = ChildEngine.start(childArgs(i));
          started.add(c);
          out.add(c);
        }
        for (ChildEngine c : started) c.awaitReady(Duration.ofSeconds(60));
      }
      return out;
    } catch (Exception e) {
      for (FleetEngine x : out) x.close();
      throw e;
    }
  }

  private MockEngineServer.Config engineConfig(int i) {
    return MockEngineServer.Config.builder()
        .servedModelName(FleetBench.MODEL)
        .blockSize(s.blockSize())
        .numGpuBlocks(s.gpuBlocks())
        .maxNumSeqs(s.maxBatch())
        .prefillBaseMs(s.prefillBaseMs())
        .prefillMsPer1kTokens(s.prefillMsPer1k())
        .decodeMsPerToken(s.decodeMsPerToken())
        .speedup(s.timeScale())
        .enablePromptTokensDetails(true)
        .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
        .seed(s.seed() + i)
        .build();
  }

  /** The command line of engine {@code i}'s child JVM. */
  List<String> childArgs(int i) {
    List<String> a = new ArrayList<>();
    a.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    a.add("-Xmx384m");
    a.add("-XX:+UseSerialGC");
    a.add("-Xss512k");
    // known from JDK 23 on (JEP 471), as in ./kvrouter, ./mvnw and the parent pom's jdk23 profile
    if (Runtime.version().feature() >= 23) a.add("--sun-misc-unsafe-memory-access=allow");
    a.add("-cp");
    a.add(System.getProperty("java.class.path"));
    a.add(mainClass);
    a.add("mock-engine");
    a.add("--exit-with-parent"); // no engine outlives this command, even a SIGKILL of it
    a.addAll(
        List.of(
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--served-model-name",
            FleetBench.MODEL,
            "--block-size",
            Integer.toString(s.blockSize()),
            "--num-gpu-blocks",
            Integer.toString(s.gpuBlocks()),
            "--max-num-seqs",
            Integer.toString(s.maxBatch()),
            "--prefill-base-ms",
            Double.toString(s.prefillBaseMs()),
            "--prefill-ms-per-1k-tokens",
            Double.toString(s.prefillMsPer1k()),
            "--decode-ms-per-token",
            Double.toString(s.decodeMsPerToken()),
            "--speedup",
            Double.toString(s.timeScale()),
            "--seed",
            Long.toString(s.seed() + i),
            "--enable-prompt-tokens-details",
            "--kv-events-config",
            "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\","
                + "\"endpoint\":\"tcp://127.0.0.1:*\",\"replay_endpoint\":\"tcp://127.0.0.1:*\"}"));
    return a;
  }
}
