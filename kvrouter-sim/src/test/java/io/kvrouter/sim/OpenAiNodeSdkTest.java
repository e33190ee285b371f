package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The official OpenAI JavaScript SDK ({@code openai} from npm, pinned in
 * clients/openai-node/package-lock.json) completes and streams completion and chat requests against
 * a running mock engine without an error and reads {@code usage}.
 *
 * <p>Needs {@code clients/openai-node/install.sh} (npm ci) to have run, as .ci/run does; without it
 * the test fails, unless {@code -Dkvrouter.sdk.skip=true} leaves it out on purpose.
 */
class OpenAiNodeSdkTest {
  static Path repoRoot() {
    Path p = Path.of("").toAbsolutePath();
    return Files.exists(p.resolve("clients")) ? p : p.getParent();
  }

  @Test
  void theOpenAiSdkCompletesAndStreamsAndReadsUsage() throws Exception {
    Assumptions.assumeFalse(
        Boolean.getBoolean("kvrouter.sdk.skip"),
        "OpenAI SDK test left out on purpose (-Dkvrouter.sdk.skip=true)");
    Path dir = repoRoot().resolve("clients/openai-node");
    if (!Files.exists(dir.resolve("node_modules/openai/package.json"))) {
      fail(
          "the OpenAI SDK test needs its npm package: run clients/openai-node/install.sh (.ci/run"
              + " does it), or pass -Dkvrouter.sdk.skip=true to leave the test out. Missing: "
              + dir.resolve("node_modules/openai"));
    }
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .modelDir(EngineHttp.tinyModel())
                .servedModelName("tiny-chat")
                .speedup(100)
                .enablePromptTokensDetails(true)
                .build())) {
      Process p;
      try {
        p =
            new ProcessBuilder(
                    "node",
                    dir.resolve("sdk-check.mjs").toString(),
                    e.url() + "/v1",
                    "tiny-chat",
                    "--concurrency",
                    "2",
                    "--max-tokens",
                    "6")
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
      } catch (IOException x) {
        fail("the OpenAI SDK test runs Node, which is not on PATH: " + x.getMessage());
        return;
      }
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(60, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        fail("sdk-check.mjs did not finish in 60 s: " + out);
      }
      JsonNode summary = EngineHttp.JSON.readTree(out);
      assertThat(summary.get("errors").size()).as(out).isZero();
      assertThat(p.exitValue()).as(out).isZero();
      assertThat(summary.get("models").toString()).isEqualTo("[\"tiny-chat\"]");
      JsonNode results = summary.get("results");
      assertThat(results.size()).isEqualTo(8); // 4 operations x concurrency 2
      for (JsonNode r : results) {
        String op = r.get("op").textValue();
        assertThat(r.get("finish_reason").textValue()).as(op).isEqualTo("length");
        assertThat(r.at("/usage/completion_tokens").intValue()).as(op).isEqualTo(6);
        assertThat(r.at("/usage/total_tokens").intValue())
            .as(op)
            .isEqualTo(r.at("/usage/prompt_tokens").intValue() + 6);
        assertThat(r.get("text").textValue()).as(op).isNotEmpty();
        assertThat(r.get("object").textValue())
            .as(op)
            .isEqualTo(
                op.startsWith("chat")
                    ? (op.endsWith("stream") ? "chat.completion.chunk" : "chat.completion")
                    : "text_completion");
        if (op.endsWith("stream")) {
          // a role chunk (chat), one chunk per token, the usage chunk
          assertThat(r.get("chunks").intValue()).as(op).isEqualTo(op.startsWith("chat") ? 8 : 7);
        }
        if (op.startsWith("chat")) assertThat(r.get("role").textValue()).isEqualTo("assistant");
      }
    }
  }
}
