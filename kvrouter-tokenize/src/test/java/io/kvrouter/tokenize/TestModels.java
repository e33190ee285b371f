package io.kvrouter.tokenize;

import java.net.URISyntaxException;
import java.nio.file.Path;

/** The hand-made model directories under src/test/resources/models. */
final class TestModels {
  private TestModels() {}

  /**
   * A byte-level BPE: ids 0..255 are the bytes, merges hi=256, Ġt=257, Ġthe=258, he=259, ll=260,
   * hell=261; added tokens {@code <|im_start|>}=300, {@code <|im_end|>}=301, {@code <think>}=302
   * (not special), {@code <bos>}=303 (added in front by add_special_tokens), {@code <|im}=304 (a
   * prefix of 300, for leftmost-longest matching); bos written as an AddedToken object;
   * model_max_length 16.
   */
  static Path tiny() {
    return dir("tiny");
  }

  /** A WordLevel model behind a Metaspace pre-tokenizer with prepend_scheme "first". */
  static Path metaspaceFirst() {
    return dir("metaspace-first");
  }

  static Path dir(String name) {
    try {
      return Path.of(TestModels.class.getResource("/models/" + name + "/tokenizer.json").toURI())
          .getParent();
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }
}
