package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.tokenize.jinja.Py;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SegmentCacheTest {
  static final List<String> PIECES =
      List.of(
          "<|im_start|>",
          "<|im_end|>",
          "<think>",
          "<bos>",
          "<|im",
          "<|im_",
          "<|",
          "|>",
          "<",
          ">",
          "hi",
          "hello",
          " the",
          "the",
          "ll",
          " ",
          "  ",
          "\n",
          "\n\n",
          "\t",
          "\r\n",
          "é",
          "日本",
          "🎉",
          "👨‍👩‍👧",
          "123",
          "4567",
          "x",
          "a b",
          "<thin",
          "im_start|>",
          "\u0301",
          "'s",
          "?!");

  static String randomText(Random r, int maxPieces) {
    StringBuilder sb = new StringBuilder();
    int n = r.nextInt(maxPieces + 1);
    for (int i = 0; i < n; i++) {
      sb.append(PIECES.get(r.nextInt(PIECES.size())));
    }
    return sb.toString();
  }

  /**
   * Cached and uncached encodings of random texts made of added tokens, their fragments and text.
   */
  @Test
  void cachedIdsEqualUncachedIds() {
    long seed = Long.getLong("kvrouter.seed", System.nanoTime());
    Random r = new Random(seed);
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      assertThat(tok.segmentCacheEnabled()).isTrue();
      for (int i = 0; i < 5_000; i++) {
        String text = randomText(r, 30);
        boolean special = r.nextBoolean();
        int[] want = tok.encodeUncached(text, special);
        int[] got = tok.encode(text, special);
        assertThat(got)
            .as(
                "seed %d (-Dkvrouter.seed=%d), case %d, text %s, add_special_tokens %s",
                seed, seed, i, Py.repr(text), special)
            .isEqualTo(want);
      }
      Tokenizer.CacheStats s = tok.cacheStats();
      assertThat(s.hits()).as("seed %d", seed).isPositive();
      assertThat(s.misses()).as("seed %d", seed).isPositive();
    }
  }

  @Test
  void hitsAndMissesAreCounted() {
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny())) {
      String turn1 = "<|im_start|>user\nhello<|im_end|>\n";
      tok.encode(turn1, false); // segments "user\nhello", "\n": 2 misses
      assertThat(tok.cacheStats().misses()).isEqualTo(2);
      assertThat(tok.cacheStats().hits()).isZero();
      tok.encode(
          turn1 + "<|im_start|>assistant\nhi<|im_end|>\n",
          false); // 2 hits, 1 miss ("assistant\nhi"), "\n" hit
      assertThat(tok.cacheStats().hits()).isEqualTo(3);
      assertThat(tok.cacheStats().misses()).isEqualTo(3);
      assertThat(tok.cacheStats().hitRate()).isEqualTo(0.5);
    }
  }

  @Test
  void theCacheIsBoundedByWeight() {
    long max = 4_000;
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny(), max)) {
      Set<String> distinct = new HashSet<>();
      for (int i = 0; i < 2_000; i++) {
        String seg = "hello " + i;
        distinct.add(seg);
        tok.encode("<bos>" + seg, false);
      }
      Tokenizer.CacheStats s = tok.cacheStats();
      assertThat(s.maxBytes()).isEqualTo(max);
      assertThat(s.weightBytes()).isLessThanOrEqualTo(max);
      assertThat(s.entries()).isLessThan(distinct.size()).isPositive();
    }
  }

  @Test
  void aZeroBoundTurnsTheCacheOff() {
    try (Tokenizer tok = Tokenizer.load(TestModels.tiny(), 0)) {
      assertThat(tok.segmentCacheEnabled()).isFalse();
      assertThat(tok.encode("<|im_start|>hi", true)).containsExactly(303, 300, 256);
    }
  }
}
