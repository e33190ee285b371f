package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.harness.FleetBench;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * {@code kvrouter bench fleet --engine-kind llama-cpp} on a tiny workload with two real llama.cpp
 * servers (engines/llama-cpp): 3 conversations x 2 turns on 2 short system prompts, each policy on
 * fresh engines. Every request must be answered and counted, the JSON report must have its
 * structure, and no llama-server may outlive the run. Run by failsafe ({@code *LlamaCppIT}); the
 * paths come from {@code -Dkvrouter.llama.server}/{@code -Dkvrouter.llama.model} or
 * KVROUTER_LLAMA_SERVER/KVROUTER_LLAMA_MODEL (install.sh prints them); {@code
 * -Dkvrouter.llamacpp.skip=true} leaves it out.
 */
class FleetBenchLlamaCppIT {
  static String setting(String property, String env) {
    String v = System.getProperty(property);
    if (v == null || v.isBlank()) v = System.getenv(env);
    return v == null || v.isBlank() ? null : v;
  }

  @Test
  void everyRequestIsAnsweredAndCountedPerPolicy() throws Exception {
    Assumptions.assumeFalse(
        Boolean.getBoolean("kvrouter.llamacpp.skip"),
        "llama.cpp tests left out on purpose (-Dkvrouter.llamacpp.skip=true)");
    String server = setting("kvrouter.llama.server", "KVROUTER_LLAMA_SERVER");
    String model = setting("kvrouter.llama.model", "KVROUTER_LLAMA_MODEL");
    if (server == null || model == null || !Files.isExecutable(Path.of(server))) {
      fail(
          "llama.cpp engine not given: run engines/llama-cpp/install.sh and pass its paths as"
              + " KVROUTER_LLAMA_SERVER and KVROUTER_LLAMA_MODEL, or pass"
              + " -Dkvrouter.llamacpp.skip=true");
    }
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        Main.run(
            new PrintWriter(out),
            new PrintWriter(err),
            "bench",
            "fleet",
            "--engine-kind",
            "llama-cpp",
            "--llama-server",
            server,
            "--llama-model",
            model,
            "--llama-ctx",
            "2048",
            "--engines",
            "2",
            "--conversations",
            "3",
            "--turns",
            "2",
            "--system-prompts",
            "2",
            "--system-prompt-words",
            "150",
            "--max-output-tokens",
            "4",
            "--json");
    assertThat(code).as("stderr: %s%nstdout: %s", err, out).isZero();
    assertThat(FleetBench.processesLeft()).as("engines left running").isZero();
    JsonNode j = new ObjectMapper().readTree(out.toString());
    assertThat(j.path("engine_kind").asText()).isEqualTo("llama-cpp");
    assertThat(j.path("kv_source").asText()).isEqualTo("predicted");
    assertThat(j.path("engines").asInt()).isEqualTo(2);
    assertThat(j.path("workload").path("requests").asInt()).isEqualTo(6);
    List<String> policies =
        j.path("policies").valueStream().map(p -> p.path("policy").asText()).toList();
    assertThat(policies).containsExactly("kv", "round-robin", "least-loaded");
    for (JsonNode p : j.path("policies")) {
      String name = p.path("policy").asText();
      assertThat(p.path("requests").asInt()).as(name).isEqualTo(6);
      assertThat(p.path("answered").asInt()).as(name).isEqualTo(6);
      assertThat(p.path("errors").asInt()).as(name).isZero();
      assertThat(p.path("ttft_ms").path("count").asInt()).as(name).isEqualTo(6);
      assertThat(p.path("ttft_ms").path("p50").asDouble()).as(name).isPositive();
      assertThat(p.path("ttft_ms").path("p90").asDouble())
          .as(name)
          .isGreaterThanOrEqualTo(p.path("ttft_ms").path("p50").asDouble());
      // 150-word system prompts: every prompt is well over 150 tokens
      assertThat(p.path("prompt_tokens").asLong()).as(name).isGreaterThan(6 * 150);
      assertThat(p.path("cached_tokens").asLong())
          .as(name)
          .isLessThan(p.path("prompt_tokens").asLong());
      int counted = 0;
      for (JsonNode n : p.path("requests_per_engine")) counted += n.asInt();
      assertThat(counted).as(name + ": answers counted per engine").isEqualTo(6);
      assertThat(p.path("requests_per_engine").has("1") || p.path("requests_per_engine").has("2"))
          .as(name)
          .isTrue();
      assertThat(p.path("pids")).as(name).hasSize(2);
    }
    // each turn 2 follows its turn 1 on the engine the router predicts holds it: cached tokens
    assertThat(j.path("policies").path(0).path("cached_tokens").asLong()).isPositive();
    assertThat(j.path("ttft_p50_over_kv").path("round-robin").asDouble()).isPositive();
    assertThat(j.path("ttft_p50_over_kv").path("least-loaded").asDouble()).isPositive();
  }
}
