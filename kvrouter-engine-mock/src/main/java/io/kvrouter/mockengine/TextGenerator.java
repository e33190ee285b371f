package io.kvrouter.mockengine;

import io.kvrouter.tokenize.Tokenizer;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * The mock engine's "model": deterministic output token ids, decodable by the tokenizer.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable after construction; any thread. The pool is the distinct token ids of a fixed
 * English text encoded by the model's tokenizer (no special tokens), so every generated
 * sequence decodes to plain words and decodes the same incrementally as whole. Without a
 * tokenizer the pool is ids 0..999 and the text is empty (as vLLM without a tokenizer).
 * Output of a request is a function of (seed, prompt ids, request seed): the same prompt gives
 * the same text.
 * </pre>
 */
final class TextGenerator {
  private static final String CORPUS =
      "The quick brown fox jumps over the lazy dog while a small cat watches from the warm"
          + " window. Engines keep a cache of blocks, and routers send each request where its"
          + " prefix already lives, so the first token comes sooner and the whole fleet does less"
          + " work. Every answer here is made up, one word after another, at a steady pace.";

  private final Tokenizer tokenizer;
  private final long seed;
  private final int[] pool;

  TextGenerator(Tokenizer tokenizer, long seed) {
    this.tokenizer = tokenizer;
    this.seed = seed;
    if (tokenizer == null) {
      pool = new int[1000];
      for (int i = 0; i < pool.length; i++) pool[i] = i;
    } else {
      pool = Arrays.stream(tokenizer.encode(CORPUS, false)).distinct().toArray();
    }
  }

  /** The {@code n} output token ids of a request. */
  int[] tokens(int[] prompt, Long requestSeed, int n) {
    long s = seed * 0x9e3779b97f4a7c15L + Arrays.hashCode(prompt);
    if (requestSeed != null) s ^= EngineScheduler.mix(requestSeed);
    SplittableRandom r = new SplittableRandom(s);
    int[] out = new int[n];
    for (int i = 0; i < n; i++) out[i] = pool[r.nextInt(pool.length)];
    return out;
  }

  /** The text of the first {@code n} of {@code ids}. */
  String text(int[] ids, int n) {
    if (tokenizer == null || n == 0) return "";
    return tokenizer.decode(Arrays.copyOf(ids, n), true);
  }
}
