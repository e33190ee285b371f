package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenizerTest {

  @Test
  void encodesAndDecodesWithTheRustCore() {
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      assertThat(tok.encode("hi", false)).containsExactly(256);
      assertThat(tok.encode("hi", true)).containsExactly(303, 256);
      assertThat(tok.encode("hello", false)).containsExactly(261, 'o');
      assertThat(tok.encode(" the", false)).containsExactly(258);
      // added tokens split the text first; the longest one at a position wins
      assertThat(tok.encode("<|im_start|>hi<|im_end|>", false)).containsExactly(300, 256, 301);
      assertThat(tok.encode("<|im_x", false)).containsExactly(304, '_', 'x');
      assertThat(tok.encode("a<think>b", false)).containsExactly('a', 302, 'b');
      assertThat(tok.encode("", true)).containsExactly(303);
      assertThat(tok.encodeUncached("<|im_start|>hi", true)).containsExactly(303, 300, 256);
      assertThat(tok.decode(new int[] {256, 261, 'o'}, false)).isEqualTo("hihello");
      assertThat(tok.decode(new int[] {300, 256}, true)).isEqualTo("hi");
      assertThat(tok.name()).isEqualTo("tiny");
      assertThat(tok.modelMaxLength()).isEqualTo(16);
    }
  }

  @Test
  void specialTokensComeFromTheConfigAndAddedTokenObjectsStandForTheirContent() {
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      assertThat(tok.specialTokens())
          .isEqualTo(new Tokenizer.SpecialTokens("<bos>", "<|im_end|>", null, null));
    }
  }

  @Test
  void nothingIsTruncatedPastModelMaxLength() {
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      String text = "a" + " a".repeat(50_000);
      // ByteLevel splits " a" into the space byte and "a": 1 + 2 per repeat
      assertThat(tok.encodeUncached(text, false)).hasSize(1 + 100_000);
      assertThat(tok.encode(text, true)).hasSize(2 + 100_000);
    }
  }

  @Test
  void appliesTheChatTemplateWithVllmDefaults() {
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      Tokenizer.Prompt p =
          tok.applyChatTemplate(ChatRequest.of(List.of(Map.of("role", "user", "content", "hi"))));
      assertThat(p.text())
          .isEqualTo("<bos><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
      // add_special_tokens=false: the template wrote <bos>, no second one in front
      assertThat(p.ids()[0]).isEqualTo(303);
      assertThat(p.ids()[1]).isEqualTo(300);
      assertThat(p.ids()).isEqualTo(tok.encodeUncached(p.text(), false));
      Tokenizer.Prompt noGen =
          tok.applyChatTemplate(
              ChatRequest.of(List.of(Map.of("role", "user", "content", "hi")))
                  .withAddGenerationPrompt(false)
                  .withAddSpecialTokens(true));
      assertThat(noGen.text()).isEqualTo("<bos><|im_start|>user\nhi<|im_end|>\n");
      assertThat(noGen.ids()[0]).isEqualTo(303);
      assertThat(noGen.ids()[1]).isEqualTo(303);
    }
  }

  @Test
  void continueFinalMessageEndsTheTextAfterTheLastMessage() {
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      String text =
          tok.renderChat(
              new ChatRequest(
                  List.of(
                      Map.of("role", "user", "content", "hi"),
                      Map.of("role", "assistant", "content", "the")),
                  null,
                  false,
                  true,
                  false,
                  Map.of()));
      assertThat(text).isEqualTo("<bos><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nthe");
    }
  }

  @Test
  void aMissingDirectoryOrFileIsAClearError(@TempDir Path dir) throws IOException {
    assertThatThrownBy(() -> Tokenizer.load(dir.resolve("nope")))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("nope")
        .hasMessageContaining("does not exist");
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("tokenizer.json is missing");
    Files.copy(TestModels.tiny().resolve("tokenizer.json"), dir.resolve("tokenizer.json"));
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("tokenizer_config.json is missing");
  }

  @Test
  void aMalformedTokenizerJsonIsAClearError(@TempDir Path dir) throws IOException {
    Files.copy(
        TestModels.tiny().resolve("tokenizer_config.json"), dir.resolve("tokenizer_config.json"));
    Files.writeString(
        dir.resolve("tokenizer.json"), "{\"version\": \"1.0\",\n \"model\": {\"type\": ");
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("tokenizer.json is not valid JSON")
        .hasMessageContaining("line 2");
    Files.writeString(dir.resolve("tokenizer.json"), "{\"version\": \"1.0\"}");
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("no \"model\"");
    Files.writeString(
        dir.resolve("tokenizer.json"),
        "{\"version\": \"1.0\", \"added_tokens\": [], \"model\": {\"type\": \"NoSuchModel\"}}");
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("rejected by the tokenizers library");
  }

  @Test
  void aMalformedConfigIsAClearError(@TempDir Path dir) throws IOException {
    Files.copy(TestModels.tiny().resolve("tokenizer.json"), dir.resolve("tokenizer.json"));
    Files.writeString(dir.resolve("tokenizer_config.json"), "[1, 2");
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("tokenizer_config.json is not valid JSON");
    Files.writeString(dir.resolve("tokenizer_config.json"), "{\"chat_template\": 42}");
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("chat_template is neither");
    Files.writeString(dir.resolve("tokenizer_config.json"), "{\"chat_template\": \"{% if %}\"}");
    assertThatThrownBy(() -> Tokenizer.load(dir))
        .isInstanceOf(TokenizerException.class)
        .hasMessageContaining("chat template of " + dir.getFileName() + " does not parse, line 1");
  }

  @Test
  void chatTemplateJinjaWinsOverTheConfigAndAModelWithoutOneSaysSo(@TempDir Path dir)
      throws IOException {
    Files.copy(TestModels.tiny().resolve("tokenizer.json"), dir.resolve("tokenizer.json"));
    Files.writeString(dir.resolve("tokenizer_config.json"), "{}");
    try (Tokenizer tok = Tokenizer.load(dir)) {
      assertThat(tok.chatTemplate()).isEmpty();
      assertThatThrownBy(() -> tok.renderChat(ChatRequest.of(List.of())))
          .isInstanceOf(TokenizerException.class)
          .hasMessageContaining("has no chat template");
    }
    Files.writeString(dir.resolve("chat_template.jinja"), "{{ messages | length }}\n");
    try (Tokenizer tok = Tokenizer.load(dir)) {
      assertThat(tok.renderChat(ChatRequest.of(List.of(Map.of("role", "user", "content", "x")))))
          .isEqualTo("1");
    }
  }

  @Test
  void aClosedTokenizerRefusesWork() {
    Tokenizer tok = Tokenizer.load(TestModels.tiny());
    tok.close();
    tok.close();
    assertThatThrownBy(() -> tok.encode("hi", false)).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void metaspaceFirstTurnsTheSegmentCacheOff() {
    try (Tokenizer tok = Tokenizer.load(TestModels.metaspaceFirst())) {
      // only the piece at the start of the text gets the "▁" prefix: ids depend on neighbours
      assertThat(tok.encodeUncached("hello<s>hello", false)).containsExactly(1, 4, 2);
      assertThat(tok.segmentCacheEnabled()).isFalse();
      assertThat(tok.encode("hello<s>hello", false)).containsExactly(1, 4, 2);
      assertThat(tok.cacheStats().enabled()).isFalse();
    }
  }
}
