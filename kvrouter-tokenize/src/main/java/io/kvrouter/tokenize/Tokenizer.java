package io.kvrouter.tokenize;

import ai.djl.huggingface.tokenizers.jni.LibUtils;
import ai.djl.huggingface.tokenizers.jni.TokenizersLibrary;
import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;

/**
 * A Hugging Face tokenizer loaded from a model directory ({@code tokenizer.json}, {@code
 * tokenizer_config.json}, optionally {@code chat_template.jinja} and {@code
 * generation_config.json}): token ids from the Rust {@code tokenizers} core that vLLM and SGLang
 * run (through DJL's JNI binding), chat templates rendered as transformers renders them.
 *
 * <pre>{@code
 * try (Tokenizer tok = Tokenizer.load(Path.of("models/qwen3"))) {
 *   int[] ids = tok.encode("Hello", true);                       // vLLM completions default
 *   Tokenizer.Prompt p = tok.applyChatTemplate(ChatRequest.of(messages)); // vLLM chat defaults
 *   router.route(requestId, p.ids());
 * }
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * handle is the Rust tokenizer (created from tokenizer.json's text, truncation and padding
 * turned off so nothing is ever cut); encodeUncached is one native encode. encode splits the text
 * at added tokens (AddedTokens, exactly as the Rust core splits it first) and looks each piece
 * between them up in the SegmentCache, encoding only the misses; the ids of the pieces and of
 * the added tokens, concatenated, are the ids of the whole (the Rust core tokenizes those pieces
 * independently). A miss longer than LongTextCuts.MIN_CUT_CHARS is encoded in parts cut where
 * LongTextCuts proves the ids do not change (when the tokenizer's pipeline is one it knows), since
 * the Rust core's cost per token grows with the length of one call. With add_special_tokens the
 * post-processor's fixed prefix and suffix (found at
 * load by encoding probes) are put around them. segmentable is false when the tokenizer has a
 * setting under which a piece's ids depend on its neighbours (an added token with lstrip, rstrip
 * or single_word; a Metaspace pre-tokenizer with prepend_scheme "first"); encode is then the
 * uncached path. Everything is immutable after load except the cache, which is thread-safe; the
 * Rust tokenizer's encode takes &self. close() frees the native tokenizer once; using it after
 * close is an IllegalStateException. vocabulary (Vocabulary, one streaming pass over
 * tokenizer.json at load, since the native tokenizer exposes neither) gives the vocabulary's size
 * and the bound on the characters one token can stand for.
 *
 * Chat settings (ChatTemplateConfig, fixed at load): the template is the request's own
 * (chat_template, admitted by the caller only when trusted), else the configured one
 * (--chat-template), else chat_template_kwargs.chat_template, else the model's, the order in
 * which vLLM's kwargs merge lets each override the next. Request templates are compiled once per
 * distinct text into requestTemplates (a Caffeine cache of 32 entries, what vLLM's own lru_cache of
 * template analyses holds), so a client that sends the same template with every request parses it
 * once.
 * </pre>
 */
public final class Tokenizer implements AutoCloseable {

  /** Default bound of the segment cache: 64 MiB of keys and ids. */
  public static final long DEFAULT_CACHE_BYTES = 64L << 20;

  /** A rendered chat prompt and its token ids. */
  public record Prompt(String text, int[] ids) {}

  /** The segment cache's counters. */
  public record CacheStats(
      boolean enabled, long hits, long misses, long entries, long weightBytes, long maxBytes) {
    /** Hits over lookups, 0 before the first lookup. */
    public double hitRate() {
      long n = hits + misses;
      return n == 0 ? 0 : (double) hits / n;
    }
  }

  /**
   * The special tokens of {@code tokenizer_config.json} (an AddedToken object stands for its {@code
   * content}); null where the config sets none.
   */
  public record SpecialTokens(String bos, String eos, String pad, String unk) {}

  private static final TokenizersLibrary LIB = nativeLibrary();

  private final String name;
  private final Path directory;
  private final long handle;
  private final AddedTokens added;
  private final boolean segmentable;
  private final int[] specialPrefix;
  private final int[] specialSuffix;
  private final SegmentCache cache;
  private final LongTextCuts cuts;
  private final LongAdder longSegmentParts = new LongAdder();
  private final SpecialTokens special;
  private final Map<String, Object> specialTokenVariables;
  private final ChatTemplate chatTemplate;
  private final ChatTemplateConfig chatConfig;
  private final Cache<String, ChatTemplate> requestTemplates =
      Caffeine.newBuilder().maximumSize(32).build();
  private final long modelMaxLength;
  private final Vocabulary vocabulary;
  private volatile boolean closed;

  private static TokenizersLibrary nativeLibrary() {
    // DJL extracts the native library bundled in its jar to ~/.djl.ai (DJL_CACHE_DIR); offline
    // mode makes sure it never tries to download one instead.
    if (System.getProperty("ai.djl.offline") == null && System.getenv("DJL_OFFLINE") == null) {
      System.setProperty("ai.djl.offline", "true");
    }
    LibUtils.checkStatus(); // loads the native library
    return TokenizersLibrary.LIB;
  }

  /** Loads the model directory with the default segment cache. */
  public static Tokenizer load(Path modelDir) {
    return load(modelDir, DEFAULT_CACHE_BYTES);
  }

  /** Loads the model directory; {@code cacheBytes} bounds the segment cache (0 turns it off). */
  public static Tokenizer load(Path modelDir, long cacheBytes) {
    return load(modelDir, cacheBytes, ChatTemplateConfig.defaults());
  }

  /**
   * Loads the model directory, rendering chats as an engine started with {@code chat} renders them
   * (vLLM's --chat-template, --chat-template-content-format, --default-chat-template-kwargs).
   */
  public static Tokenizer load(Path modelDir, long cacheBytes, ChatTemplateConfig chat) {
    String name =
        modelDir.getFileName() == null ? modelDir.toString() : modelDir.getFileName().toString();
    if (!Files.isDirectory(modelDir)) {
      throw new TokenizerException(
          "model directory " + modelDir + " does not exist or is not a directory");
    }
    String tokenizerJson =
        read(
            modelDir.resolve("tokenizer.json"),
            true,
            "a Hugging Face model directory needs tokenizer.json (the fast tokenizer)");
    Object tj;
    try {
      tj = Json.parse(tokenizerJson, Set.of("vocab", "merges"));
    } catch (IOException e) {
      throw new TokenizerException(
          modelDir.resolve("tokenizer.json") + " is not valid JSON: " + e.getMessage(), e);
    }
    if (!(tj instanceof Map<?, ?> tjm) || !tjm.containsKey("model")) {
      throw new TokenizerException(
          modelDir.resolve("tokenizer.json") + " is not a tokenizers file: no \"model\" object");
    }
    Vocabulary vocabulary;
    try {
      vocabulary = Vocabulary.of(tokenizerJson, tjm);
    } catch (IOException e) {
      throw new TokenizerException(
          modelDir.resolve("tokenizer.json") + " is not valid JSON: " + e.getMessage(), e);
    }
    String configText =
        read(
            modelDir.resolve("tokenizer_config.json"),
            true,
            "it holds the special tokens and usually the chat template");
    Map<?, ?> config;
    try {
      Object c = Json.parse(configText);
      if (!(c instanceof Map<?, ?> cm)) {
        throw new IOException("expected a JSON object");
      }
      config = cm;
    } catch (IOException e) {
      throw new TokenizerException(
          modelDir.resolve("tokenizer_config.json") + " is not valid JSON: " + e.getMessage(), e);
    }
    String template = read(modelDir.resolve("chat_template.jinja"), false, null);
    if (template == null) {
      template = templateFromConfig(config, modelDir);
    }
    long handle;
    try {
      handle = LIB.createTokenizerFromString(tokenizerJson);
    } catch (RuntimeException e) {
      throw new TokenizerException(
          modelDir.resolve("tokenizer.json")
              + " is rejected by the tokenizers library: "
              + e.getMessage(),
          e);
    }
    try {
      LIB.disableTruncation(handle);
      LIB.disablePadding(handle);
      return new Tokenizer(
          name,
          modelDir,
          handle,
          tjm,
          vocabulary,
          config,
          template,
          cacheBytes,
          chat == null ? ChatTemplateConfig.defaults() : chat);
    } catch (RuntimeException e) {
      LIB.deleteTokenizer(handle);
      throw e;
    }
  }

  private static String read(Path p, boolean required, String why) {
    try {
      return Files.readString(p, StandardCharsets.UTF_8);
    } catch (NoSuchFileException e) {
      if (required) {
        throw new TokenizerException(p + " is missing: " + why);
      }
      return null;
    } catch (IOException e) {
      throw new TokenizerException("cannot read " + p + ": " + e, e);
    }
  }

  private static String templateFromConfig(Map<?, ?> config, Path dir) {
    Object t = config.get("chat_template");
    if (t == null || t instanceof String) {
      return (String) t;
    }
    if (t instanceof List<?> named) {
      for (Object o : named) {
        if (o instanceof Map<?, ?> m
            && "default".equals(m.get("name"))
            && m.get("template") instanceof String s) {
          return s;
        }
      }
    }
    throw new TokenizerException(
        dir.resolve("tokenizer_config.json")
            + ": chat_template is neither a string nor a list with a \"default\" template");
  }

  private Tokenizer(
      String name,
      Path directory,
      long handle,
      Map<?, ?> tokenizerJson,
      Vocabulary vocabulary,
      Map<?, ?> config,
      String template,
      long cacheBytes,
      ChatTemplateConfig chat) {
    this.name = name;
    this.directory = directory;
    this.handle = handle;
    this.vocabulary = vocabulary;
    List<AddedTokens.Token> tokens = new ArrayList<>();
    boolean neighbourDependent = false;
    if (tokenizerJson.get("added_tokens") instanceof List<?> list) {
      for (Object o : list) {
        if (o instanceof Map<?, ?> t
            && t.get("id") instanceof Long id
            && t.get("content") instanceof String c) {
          tokens.add(
              new AddedTokens.Token((int) (long) id, c, Boolean.TRUE.equals(t.get("normalized"))));
          neighbourDependent |=
              Boolean.TRUE.equals(t.get("lstrip"))
                  || Boolean.TRUE.equals(t.get("rstrip"))
                  || Boolean.TRUE.equals(t.get("single_word"));
        }
      }
    }
    boolean metaspaceFirst = mentions(tokenizerJson.get("pre_tokenizer"), "Metaspace", "first");
    this.added = new AddedTokens(tokens, isIdentity(tokenizerJson.get("normalizer")));
    this.segmentable = cacheBytes > 0 && !neighbourDependent && !metaspaceFirst;
    this.cache = segmentable ? new SegmentCache(cacheBytes) : null;
    this.cuts = LongTextCuts.forConfig(tokenizerJson);
    int[][] around = specialAround(tokens);
    this.specialPrefix = around[0];
    this.specialSuffix = around[1];
    this.special =
        new SpecialTokens(
            tokenString(config.get("bos_token")),
            tokenString(config.get("eos_token")),
            tokenString(config.get("pad_token")),
            tokenString(config.get("unk_token")));
    this.specialTokenVariables = specialTokenVariables(config);
    this.chatConfig = chat;
    // the configured template replaces the model's, which is then not even parsed (as in vLLM)
    this.chatTemplate =
        chat.template() != null
            ? ChatTemplate.compile(name + " (" + chat.origin() + ")", chat.template())
            : template == null ? null : ChatTemplate.compile(name, template);
    this.modelMaxLength = config.get("model_max_length") instanceof Number n ? n.longValue() : -1;
  }

  /**
   * The ids the post-processor puts before and after a single sequence (add_special_tokens=true),
   * found by encoding "" and an added token with them; nulls when they are not a fixed prefix and
   * suffix (such encodes then stay uncached). Called by the constructor, after handle is set.
   */
  private int[][] specialAround(List<AddedTokens.Token> tokens) {
    int[] empty = encodeUncached("", true);
    int[] prefix = null, suffix = null;
    if (empty.length == 0) {
      prefix = new int[0];
      suffix = new int[0];
    } else if (!tokens.isEmpty()) {
      AddedTokens.Token probe = tokens.get(0);
      int[] with = encodeUncached(probe.content(), true);
      int at = -1, seen = 0;
      for (int i = 0; i < with.length; i++) {
        if (with[i] == probe.id()) {
          at = i;
          seen++;
        }
      }
      if (seen == 1) {
        prefix = Arrays.copyOfRange(with, 0, at);
        suffix = Arrays.copyOfRange(with, at + 1, with.length);
        if (!Arrays.equals(concat(prefix, suffix), empty)) {
          prefix = null; // not a fixed prefix and suffix: add_special_tokens=true stays uncached
          suffix = null;
        }
      }
    }
    return new int[][] {prefix, suffix};
  }

  /** The special tokens a chat template sees as variables (bos_token, ...), from the config. */
  private static Map<String, Object> specialTokenVariables(Map<?, ?> config) {
    Map<String, Object> vars = new LinkedHashMap<>();
    for (String k :
        List.of(
            "bos_token",
            "eos_token",
            "unk_token",
            "sep_token",
            "pad_token",
            "cls_token",
            "mask_token")) {
      String v = tokenString(config.get(k));
      if (v != null) {
        vars.put(k, v);
      }
    }
    if (config.get("additional_special_tokens") instanceof List<?> extra) {
      List<Object> l = new ArrayList<>();
      for (Object o : extra) {
        String v = tokenString(o);
        if (v != null) {
          l.add(v);
        }
      }
      vars.put("additional_special_tokens", l);
    }
    if (config.get("extra_special_tokens") instanceof Map<?, ?> extra) {
      extra.forEach(
          (k, v) -> {
            String s = tokenString(v);
            if (s != null) {
              vars.put(String.valueOf(k), s);
            }
          });
    }
    return Map.copyOf(vars);
  }

  private static boolean isIdentity(Object normalizer) {
    if (normalizer == null) {
      return true;
    }
    return normalizer instanceof Map<?, ?> m
        && "Sequence".equals(m.get("type"))
        && m.get("normalizers") instanceof List<?> l
        && l.stream().allMatch(Tokenizer::isIdentity);
  }

  /**
   * Whether a component tree has a {@code type} component whose prepend_scheme is {@code scheme}.
   */
  private static boolean mentions(Object node, String type, String scheme) {
    if (node instanceof Map<?, ?> m) {
      if (type.equals(m.get("type")) && scheme.equals(m.get("prepend_scheme"))) {
        return true;
      }
      for (Object v : m.values()) {
        if (mentions(v, type, scheme)) {
          return true;
        }
      }
    } else if (node instanceof List<?> l) {
      for (Object v : l) {
        if (mentions(v, type, scheme)) {
          return true;
        }
      }
    }
    return false;
  }

  private static String tokenString(Object v) {
    if (v instanceof String s) {
      return s;
    }
    if (v instanceof Map<?, ?> m && m.get("content") instanceof String s) {
      return s;
    }
    return null;
  }

  /** The model's name: its directory's name. */
  public String name() {
    return name;
  }

  /** The model directory it was loaded from. */
  public Path directory() {
    return directory;
  }

  /** bos/eos/pad/unk from tokenizer_config.json. */
  public SpecialTokens specialTokens() {
    return special;
  }

  /**
   * The ids this tokenizer knows: the largest id of tokenizer.json's vocabulary and added tokens,
   * plus one (an id at or past it is out of vocabulary); -1 when the file has none.
   */
  public int vocabSize() {
    return vocabulary.size;
  }

  /**
   * The most characters (UTF-16 chars, as {@link String#length}) one token can stand for, when that
   * is certain for this tokenizer (its longest vocabulary string; see {@link
   * #certainlyMoreTokensThan}); -1 when no bound is certain ({@link #noLengthBoundReason}).
   */
  public int maxCharsPerToken() {
    return vocabulary.maxCharsPerToken;
  }

  /** Why {@link #maxCharsPerToken} is -1 (the model, pre-tokenizer or normalizer), or null. */
  public String noLengthBoundReason() {
    return vocabulary.noBoundReason;
  }

  /**
   * Whether {@code text} certainly encodes to more than {@code tokens} tokens, known without
   * tokenizing it: its length is over {@code tokens} times {@link #maxCharsPerToken} (and, for a
   * tokenizer whose normalizer is NFC or NFKC, the text is already in that form). False when that
   * is not certain, including for every text when there is no bound.
   */
  public boolean certainlyMoreTokensThan(String text, long tokens) {
    return vocabulary.certainlyMoreTokensThan(text, tokens);
  }

  /** {@code model_max_length} from tokenizer_config.json, or -1. */
  public long modelMaxLength() {
    return modelMaxLength;
  }

  /** The chat template requests are rendered with (the configured one, else the model's). */
  public Optional<ChatTemplate> chatTemplate() {
    return Optional.ofNullable(chatTemplate);
  }

  /** The chat settings it was loaded with. */
  public ChatTemplateConfig chatConfig() {
    return chatConfig;
  }

  /** Whether encode uses the segment cache (see the class notes for when it cannot). */
  public boolean segmentCacheEnabled() {
    return segmentable;
  }

  /** The segment cache's counters (all zero, enabled false, when it is off). */
  public CacheStats cacheStats() {
    return cache == null ? new CacheStats(false, 0, 0, 0, 0, 0) : cache.stats();
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("tokenizer " + name + " is closed");
    }
  }

  /** Token ids of {@code text}, as the Rust core gives them, through the segment cache. */
  public int[] encode(String text, boolean addSpecialTokens) {
    checkOpen();
    if (!segmentable || (addSpecialTokens && specialPrefix == null)) {
      return encodeUncached(text, addSpecialTokens);
    }
    IntBuffer out = new IntBuffer(Math.max(16, text.length() / 3));
    if (addSpecialTokens) {
      out.add(specialPrefix);
    }
    added.split(
        text,
        new AddedTokens.Sink() {
          @Override
          public void text(String t, int start, int end) {
            out.add(cache.get(t.substring(start, end), Tokenizer.this::encodeSegment));
          }

          @Override
          public void token(int id) {
            out.add(id);
          }
        });
    if (addSpecialTokens) {
      out.add(specialSuffix);
    }
    return out.toArray();
  }

  /**
   * Token ids of one segment (text between added tokens, without special tokens): one call to the
   * Rust core, or for a long segment one call per part between {@link LongTextCuts} cuts.
   */
  int[] encodeSegment(String s) {
    if (cuts == null || s.length() <= LongTextCuts.MIN_CUT_CHARS) {
      return encodeUncached(s, false);
    }
    IntBuffer out = new IntBuffer(s.length() / 3);
    int start = 0;
    while (start < s.length()) {
      int end =
          s.length() - start <= LongTextCuts.MIN_CUT_CHARS
              ? s.length()
              : cuts.nextCut(s, start + LongTextCuts.PART_CHARS);
      out.add(encodeUncached(s.substring(start, end), false));
      longSegmentParts.increment();
      start = end;
    }
    return out.toArray();
  }

  /** Whether long segments are encoded in parts (see {@link LongTextCuts}). */
  LongTextCuts longTextCuts() {
    return cuts;
  }

  /** Parts encoded by {@link #encodeSegment} for long segments so far (for tests). */
  long longSegmentParts() {
    return longSegmentParts.sum();
  }

  /** Token ids of {@code text} from one call to the Rust core, no cache. */
  public int[] encodeUncached(String text, boolean addSpecialTokens) {
    checkOpen();
    long enc = LIB.encode(handle, text, addSpecialTokens);
    try {
      long[] ids = LIB.getTokenIds(enc);
      int[] r = new int[ids.length];
      for (int i = 0; i < ids.length; i++) {
        r[i] = (int) ids[i];
      }
      return r;
    } finally {
      LIB.deleteEncoding(enc);
    }
  }

  /** The text of {@code ids}. */
  public String decode(int[] ids, boolean skipSpecialTokens) {
    checkOpen();
    long[] l = new long[ids.length];
    for (int i = 0; i < ids.length; i++) {
      l[i] = ids[i];
    }
    return LIB.decode(handle, l, skipSpecialTokens);
  }

  /** The variables transformers passes a chat template for this request. */
  Map<String, Object> templateContext(ChatRequest req) {
    return templateContext(req, template(req));
  }

  private Map<String, Object> templateContext(ChatRequest req, ChatTemplate t) {
    Map<String, Object> ctx = new LinkedHashMap<>(specialTokenVariables);
    ctx.putAll(chatConfig.mergeKwargs(req.templateKwargs()));
    ctx.remove("chat_template"); // a parameter of apply_chat_template, not a variable
    boolean parts =
        switch (chatConfig.contentFormat()) {
          case AUTO -> t.wantsContentParts();
          case STRING -> false;
          case OPENAI -> true;
        };
    ctx.put("messages", ChatMessages.normalize(req.messages(), parts));
    ctx.put("tools", chatConfig.toolsOf(req));
    ctx.put("documents", null);
    ctx.put("add_generation_prompt", req.addGenerationPrompt());
    return ctx;
  }

  /** The template this request renders with (see the class notes). */
  private ChatTemplate template(ChatRequest req) {
    String own = req.chatTemplate();
    if (own == null && chatConfig.template() == null) {
      Object kw = chatConfig.mergeKwargs(req.templateKwargs()).get("chat_template");
      if (kw instanceof String s) own = s;
    }
    if (own != null) {
      return requestTemplates.get(own, src -> ChatTemplate.compile(name + " (request)", src));
    }
    return requireTemplate();
  }

  private ChatTemplate requireTemplate() {
    if (chatTemplate == null) {
      throw new TokenizerException(
          "model "
              + name
              + " has no chat template (neither chat_template.jinja nor chat_template in tokenizer_config.json)");
    }
    return chatTemplate;
  }

  /** The chat rendered by the model's template, as text. */
  public String renderChat(ChatRequest req) {
    ChatTemplate t = template(req);
    String text = t.render(templateContext(req, t));
    if (req.continueFinalMessage()) {
      text = continueFinal(text, req);
    }
    return text;
  }

  private String continueFinal(String text, ChatRequest req) {
    List<?> msgs = req.messages();
    if (msgs.isEmpty() || !(msgs.get(msgs.size() - 1) instanceof Map<?, ?> last)) {
      throw new TokenizerException("continue_final_message needs a final message");
    }
    Object c = last.get("content");
    String fin;
    if (c instanceof String s) {
      fin = s;
    } else if (c instanceof List<?> parts
        && !parts.isEmpty()
        && parts.get(parts.size() - 1) instanceof Map<?, ?> p
        && p.get("text") instanceof String s) {
      fin = s;
    } else {
      throw new TokenizerException("continue_final_message: the final message has no text content");
    }
    fin = fin.strip();
    int at = text.lastIndexOf(fin);
    if (at < 0) {
      throw new TokenizerException(
          "continue_final_message is set but the final message does not appear in the chat rendered by the template of "
              + name);
    }
    return text.substring(0, at + fin.length());
  }

  /**
   * Renders the chat and tokenizes it with the request's {@code add_special_tokens} (false by
   * default, as vLLM: the template writes bos itself).
   */
  public Prompt applyChatTemplate(ChatRequest req) {
    String text = renderChat(req);
    return new Prompt(text, encode(text, req.addSpecialTokens()));
  }

  /** As {@link #applyChatTemplate}, tokenizing without the segment cache. */
  public Prompt applyChatTemplateUncached(ChatRequest req) {
    String text = renderChat(req);
    return new Prompt(text, encodeUncached(text, req.addSpecialTokens()));
  }

  @Override
  public synchronized void close() {
    if (!closed) {
      closed = true;
      LIB.deleteTokenizer(handle);
    }
  }

  private static int[] concat(int[] a, int[] b) {
    int[] r = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  /** A growable int array. */
  private static final class IntBuffer {
    private int[] a;
    private int n;

    IntBuffer(int cap) {
      a = new int[cap];
    }

    void add(int v) {
      if (n == a.length) {
        a = Arrays.copyOf(a, a.length * 2);
      }
      a[n++] = v;
    }

    void add(int[] v) {
      if (n + v.length > a.length) {
        a = Arrays.copyOf(a, Math.max(a.length * 2, n + v.length));
      }
      System.arraycopy(v, 0, a, n, v.length);
      n += v.length;
    }

    int[] toArray() {
      return Arrays.copyOf(a, n);
    }
  }
}
