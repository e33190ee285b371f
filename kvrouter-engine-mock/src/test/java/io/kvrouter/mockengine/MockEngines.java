package io.kvrouter.mockengine;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Test support for modules that run mock engines (public through this module's test jar): a small
 * model directory with a tokenizer and a chat template, so chat requests and text prompts work.
 */
public final class MockEngines {
  private static Path extracted;

  private MockEngines() {}

  /**
   * A hand-made byte-level BPE (ids 0..255 the bytes, a few merges, {@code <|im_start|>}=300,
   * {@code <|im_end|>}=301 the end of sequence, {@code <bos>}=303 added in front of text prompts)
   * with a ChatML-like template; copied from kvrouter-tokenize's tests. From a jar it is extracted
   * to a temporary directory once.
   */
  public static synchronized Path tinyModel() {
    URL url = MockEngines.class.getResource("/models/tiny/tokenizer.json");
    if (url == null) throw new IllegalStateException("no /models/tiny on the class path");
    try {
      if (url.getProtocol().equals("file")) return Path.of(url.toURI()).getParent();
      if (extracted == null) {
        Path dir = Files.createTempDirectory("kvrouter-tiny-model");
        for (String f : new String[] {"tokenizer.json", "tokenizer_config.json"}) {
          try (InputStream in = MockEngines.class.getResourceAsStream("/models/tiny/" + f)) {
            Files.copy(in, dir.resolve(f));
          }
        }
        extracted = dir;
      }
      return extracted;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }
}
