package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.harness.FleetBench;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code bench fleet --engine-kind}: bad settings are refused before any engine starts. */
class FleetBenchEngineKindTest {
  @TempDir Path dir;

  static String[] run(int expected, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code = Main.run(new PrintWriter(out), new PrintWriter(err), args);
    assertThat(code).as("stdout %s, stderr %s", out, err).isEqualTo(expected);
    return new String[] {out.toString(), err.toString()};
  }

  @Test
  void aMissingLlamaServerSaysHowToGetIt() throws Exception {
    Path model = Files.writeString(dir.resolve("m.gguf"), "x");
    String[] r =
        run(
            2,
            "bench",
            "fleet",
            "--engine-kind",
            "llama-cpp",
            "--llama-server",
            dir.resolve("nope").toString(),
            "--llama-model",
            model.toString());
    assertThat(r[1]).contains("is not executable").contains("engines/llama-cpp/install.sh");
    assertThat(FleetBench.processesLeft()).isZero();
  }

  @Test
  void badWorkloadsPoliciesAndKindsAreRefusedByName() throws Exception {
    Path server = Files.writeString(dir.resolve("llama-server"), "#!/bin/sh\nexit 1\n");
    assertThat(server.toFile().setExecutable(true)).isTrue();
    Path model = Files.writeString(dir.resolve("m.gguf"), "x");
    String[] base = {
      "bench",
      "fleet",
      "--engine-kind",
      "llama-cpp",
      "--llama-server",
      server.toString(),
      "--llama-model",
      model.toString()
    };
    assertThat(run(2, concat(base, "--policies", "kv,approx"))[1]).contains("kv is already");
    assertThat(run(2, concat(base, "--policies", "kv,fastest"))[1]).contains("unknown policy");
    assertThat(run(2, concat(base, "--system-prompts", "20"))[1]).contains("--system-prompts");
    assertThat(run(2, concat(base, "--report", "x.html"))[1]).contains("--report");
    assertThat(run(2, "bench", "fleet", "--engine-kind", "vllm")[1])
        .contains("unknown --engine-kind 'vllm'");
  }

  static String[] concat(String[] a, String... b) {
    String[] r = new String[a.length + b.length];
    System.arraycopy(a, 0, r, 0, a.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }
}
