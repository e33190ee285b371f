package io.kvrouter.mockengine;

import static io.kvrouter.mockengine.WireShape.assertMatches;
import static io.kvrouter.mockengine.WireShape.fixture;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The mock engine's HTTP bodies against vLLM's recorded shapes (src/test/resources/vllm-wire). */
class MockEngineWireTest {
  /** Token-id prompts only; 4 blocks of 16: max_model_len 64. */
  static MockEngineServer ids;

  /** With the tiny tokenizer and its chat template. */
  static MockEngineServer chat;

  @BeforeAll
  static void start() {
    ids =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .numGpuBlocks(4)
                .speedup(1000)
                .enablePromptTokensDetails(true)
                .build());
    chat =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .modelDir(EngineHttp.tinyModel())
                .numGpuBlocks(64)
                .speedup(1000)
                .enablePromptTokensDetails(true)
                .build());
  }

  @AfterAll
  static void stop() {
    ids.close();
    chat.close();
  }

  static String prompt(int n, int from) {
    return IntStream.range(from, from + n)
        .mapToObj(Integer::toString)
        .collect(Collectors.joining(",", "[", "]"));
  }

  @Test
  void completionBody() {
    EngineHttp.Reply r =
        EngineHttp.post(
            ids.url() + "/v1/completions",
            "{\"model\":\"mock\",\"prompt\":" + prompt(40, 1000) + ",\"max_tokens\":4}");
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.contentType()).startsWith("application/json");
    assertMatches(fixture("completion.json"), r.json());
    assertThat(r.json().get("id").textValue()).startsWith("cmpl-");
  }

  @Test
  void completionStreamWithUsageAndCachedTokens() {
    String body =
        "{\"model\":\"mock\",\"prompt\":"
            + prompt(40, 2000)
            + ",\"max_tokens\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    EngineHttp.Reply first = EngineHttp.post(ids.url() + "/v1/completions", body);
    assertThat(first.status()).isEqualTo(200);
    List<JsonNode> c1 = first.chunks();
    // the first request found nothing cached: no prompt_tokens_details (vLLM omits a 0)
    assertThat(c1.get(c1.size() - 1).get("usage").has("prompt_tokens_details")).isFalse();

    EngineHttp.Reply second = EngineHttp.post(ids.url() + "/v1/completions", body);
    assertThat(second.contentType()).startsWith("text/event-stream");
    assertThat(second.events().get(second.events().size() - 1)).isEqualTo("[DONE]");
    List<JsonNode> chunks = second.chunks();
    JsonNode expected = fixture("completion-stream.json").get("chunks");
    assertThat(chunks).hasSize(expected.size());
    for (int i = 0; i < chunks.size(); i++) assertMatches(expected.get(i), chunks.get(i));
    String id = chunks.get(0).get("id").textValue();
    assertThat(chunks).allSatisfy(c -> assertThat(c.get("id").textValue()).isEqualTo(id));
  }

  @Test
  void chatBodyAndStreamAgree() {
    String messages = "\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]";
    EngineHttp.Reply plain =
        EngineHttp.post(chat.url() + "/v1/chat/completions", "{" + messages + ",\"max_tokens\":5}");
    assertThat(plain.status()).isEqualTo(200);
    assertMatches(fixture("chat.json"), plain.json());
    JsonNode usage = plain.json().get("usage");
    assertThat(usage.get("total_tokens").intValue())
        .isEqualTo(usage.get("prompt_tokens").intValue() + 5);

    EngineHttp.Reply streamed =
        EngineHttp.post(
            chat.url() + "/v1/chat/completions",
            "{"
                + messages
                + ",\"max_completion_tokens\":2,\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true}}");
    List<JsonNode> chunks = streamed.chunks();
    JsonNode expected = fixture("chat-stream.json").get("chunks");
    assertThat(chunks).hasSize(expected.size());
    for (int i = 0; i < chunks.size(); i++) assertMatches(expected.get(i), chunks.get(i));

    // generated text is deterministic: the streamed deltas are a prefix of the full answer
    String text =
        chunks.get(1).at("/choices/0/delta/content").textValue()
            + chunks.get(2).at("/choices/0/delta/content").textValue();
    assertThat(plain.json().at("/choices/0/message/content").textValue()).startsWith(text);
    assertThat(text).isNotEmpty();
  }

  @Test
  void streamWithoutUsageEndsWithTheLastTokenThenDone() {
    EngineHttp.Reply r =
        EngineHttp.post(
            ids.url() + "/v1/completions",
            "{\"prompt\":" + prompt(8, 1) + ",\"max_tokens\":2,\"stream\":true}");
    List<JsonNode> chunks = r.chunks();
    assertThat(chunks).hasSize(2);
    assertThat(chunks.get(1).at("/choices/0/finish_reason").textValue()).isEqualTo("length");
    assertThat(chunks).noneMatch(c -> c.has("usage"));
  }

  @Test
  void errors() {
    EngineHttp.Reply wrongModel =
        EngineHttp.post(ids.url() + "/v1/completions", "{\"model\":\"gpt-4\",\"prompt\":[1,2]}");
    assertThat(wrongModel.status()).isEqualTo(404);
    assertMatches(fixture("error-404.json"), wrongModel.json());

    EngineHttp.Reply tooLong =
        EngineHttp.post(
            ids.url() + "/v1/completions", "{\"prompt\":" + prompt(40, 1) + ",\"max_tokens\":100}");
    assertThat(tooLong.status()).isEqualTo(400);
    assertMatches(fixture("error-400-length.json"), tooLong.json());

    EngineHttp.Reply text =
        EngineHttp.post(ids.url() + "/v1/completions", "{\"prompt\":\"hello\"}");
    assertThat(text.status()).isEqualTo(400);
    assertThat(text.json().get("message").textValue())
        .contains("--model-dir")
        .contains("token ids");

    EngineHttp.Reply chatNoTok =
        EngineHttp.post(ids.url() + "/v1/chat/completions", "{\"messages\":[]}");
    assertThat(chatNoTok.status()).isEqualTo(400);
    assertThat(chatNoTok.json().get("type").textValue()).isEqualTo("BadRequestError");

    EngineHttp.Reply options =
        EngineHttp.post(
            ids.url() + "/v1/completions",
            "{\"prompt\":[1],\"stream_options\":{\"include_usage\":true}}");
    assertThat(options.status()).isEqualTo(400);
    assertThat(options.json().get("message").textValue())
        .isEqualTo("Stream options can only be defined when `stream=True`.");

    EngineHttp.Reply badJson = EngineHttp.post(ids.url() + "/v1/completions", "{");
    assertThat(badJson.status()).isEqualTo(400);
    assertThat(badJson.json().get("object").textValue()).isEqualTo("error");
  }

  @Test
  void modelsHealthTokenize() {
    EngineHttp.Reply models = EngineHttp.get(ids.url() + "/v1/models");
    assertMatches(fixture("models.json"), models.json());
    assertThat(EngineHttp.get(ids.url() + "/health").status()).isEqualTo(200);

    EngineHttp.Reply tok =
        EngineHttp.post(chat.url() + "/tokenize", "{\"model\":\"tiny\",\"prompt\":\"hello\"}");
    assertMatches(fixture("tokenize.json"), tok.json());
    EngineHttp.Reply detok = EngineHttp.post(chat.url() + "/detokenize", "{\"tokens\":[261,111]}");
    assertThat(detok.json().get("prompt").textValue()).isEqualTo("hello");
  }

  /**
   * An id past the vocabulary (the tiny tokenizer has ids 0..304: its vocabulary and added tokens)
   * is vLLM's 400 for an out-of-vocabulary id, naming the largest; the last id still decodes.
   */
  @Test
  void detokenizeRefusesIdsPastTheVocabulary() {
    EngineHttp.Reply last = EngineHttp.post(chat.url() + "/detokenize", "{\"tokens\":[304]}");
    assertThat(last.status()).isEqualTo(200);
    assertThat(last.json().get("prompt").textValue()).isEqualTo("<|im");
    EngineHttp.Reply past =
        EngineHttp.post(chat.url() + "/detokenize", "{\"tokens\":[261,305,111,1000000]}");
    assertThat(past.status()).isEqualTo(400);
    assertThat(past.json().get("type").textValue()).isEqualTo("BadRequestError");
    assertThat(past.json().get("message").textValue())
        .isEqualTo("Token id 1000000 is out of vocabulary");
    EngineHttp.Reply negative = EngineHttp.post(chat.url() + "/detokenize", "{\"tokens\":[-1]}");
    assertThat(negative.status()).isEqualTo(400);
  }

  @Test
  void stopStringCutsTheTextAndFinishesWithStop() {
    // the answer without a stop, then the same request stopped at a word from its middle
    String base = "{\"prompt\":\"the cat\",\"max_tokens\":30,\"seed\":7";
    String full =
        EngineHttp.post(chat.url() + "/v1/completions", base + "}")
            .json()
            .at("/choices/0/text")
            .textValue();
    assertThat(full.length()).isGreaterThan(10);
    String stop = full.substring(full.length() / 2, full.length() / 2 + 2);
    int at = full.indexOf(stop);
    for (boolean stream : new boolean[] {false, true}) {
      EngineHttp.Reply r =
          EngineHttp.post(
              chat.url() + "/v1/completions",
              base
                  + ",\"stop\":["
                  + EngineHttp.JSON.valueToTree(stop)
                  + "],\"stream\":"
                  + stream
                  + "}");
      String text;
      JsonNode last;
      if (stream) {
        List<JsonNode> chunks = r.chunks();
        StringBuilder sb = new StringBuilder();
        for (JsonNode c : chunks) sb.append(c.at("/choices/0/text").textValue());
        text = sb.toString();
        last = chunks.get(chunks.size() - 1).at("/choices/0");
      } else {
        text = r.json().at("/choices/0/text").textValue();
        last = r.json().at("/choices/0");
      }
      assertThat(text).as("stream=" + stream).isEqualTo(full.substring(0, at));
      assertThat(last.get("finish_reason").textValue()).isEqualTo("stop");
      assertThat(last.get("stop_reason").textValue()).isEqualTo(stop);
    }
  }

  @Test
  void aListOfPromptsGivesOneChoiceEach() {
    EngineHttp.Reply r =
        EngineHttp.post(
            chat.url() + "/v1/completions", "{\"prompt\":[[1,2,3],\"hello\"],\"max_tokens\":2}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    JsonNode choices = r.json().get("choices");
    assertThat(choices.size()).isEqualTo(2);
    assertThat(choices.get(0).get("index").intValue()).isZero();
    assertThat(choices.get(1).get("index").intValue()).isEqualTo(1);
    // 3 ids, and "hello" with <bos>: 3 tokens
    assertThat(r.json().at("/usage/prompt_tokens").intValue()).isEqualTo(6);
    assertThat(r.json().at("/usage/completion_tokens").intValue()).isEqualTo(4);

    List<JsonNode> chunks =
        EngineHttp.post(
                chat.url() + "/v1/completions",
                "{\"prompt\":[[1,2,3],[4,5,6]],\"max_tokens\":2,\"stream\":true}")
            .chunks();
    assertThat(chunks).hasSize(4);
    assertThat(chunks.stream().filter(c -> c.at("/choices/0/index").intValue() == 1).count())
        .isEqualTo(2);
  }

  @Test
  void anUnknownPathIsFastApisNotFound() {
    EngineHttp.Reply r = EngineHttp.get(ids.url() + "/v1/nothing");
    assertThat(r.status()).isEqualTo(404);
    assertThat(r.body()).isEqualTo("{\"detail\":\"Not Found\"}");
  }
}
