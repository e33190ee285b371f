package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
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
  @Test
  void theOpenAiSdkCompletesAndStreamsAndReadsUsage() throws Exception {
    NodeSdkCheck.requireSdk();
    try (MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .modelDir(EngineHttp.tinyModel())
                .servedModelName("tiny-chat")
                .speedup(100)
                .enablePromptTokensDetails(true)
                .build())) {
      NodeSdkCheck.Result run =
          NodeSdkCheck.run(e.url() + "/v1", "tiny-chat", "--concurrency", "2", "--max-tokens", "6");
      String out = run.out();
      JsonNode summary = EngineHttp.JSON.readTree(out);
      assertThat(summary.get("errors").size()).as(out).isZero();
      assertThat(run.exitValue()).as(out).isZero();
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
