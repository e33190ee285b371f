package io.kvrouter.mockengine;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.ChatTemplateConfig;
import io.kvrouter.tokenize.Tokenizer;
import io.kvrouter.tokenize.TokenizerException;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * The mock engine's HTTP API with vLLM's request handling and vLLM's JSON and SSE shapes: {@code
 * POST /v1/completions}, {@code POST /v1/chat/completions}, {@code POST /tokenize}, {@code POST
 * /detokenize}, {@code GET /v1/models}, {@code GET /health}, {@code GET /metrics}, {@code POST
 * /reset_prefix_cache}, and for tests {@code GET /mock/cache} and {@code GET /mock/requests}.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless apart from the id counter and the fault draw; every handler runs on its request's
 * virtual thread. A generation request is parsed and checked whole (model, prompt, lengths) before
 * anything is queued; then one EngineScheduler.Job per prompt goes to the scheduler, whose
 * listener posts Signals to the request's own queue, and this thread turns them into chunks or,
 * for a non-streamed request, into one body at the end.
 *
 * Shapes, as vLLM serialises its pydantic models: a streamed chunk carries only the fields the
 * server set (exclude_unset), the final usage chunk drops nulls (exclude_none), a non-streamed
 * body carries every field with its null. usage lists prompt_tokens, total_tokens,
 * completion_tokens (vLLM's field order) and prompt_tokens_details.cached_tokens only with
 * --enable-prompt-tokens-details and a non-zero hit. Error bodies are
 * {"object":"error","message","type","param","code"}.
 *
 * Stop strings: the text of each choice is decoded from all its tokens so far; a stop string
 * found cuts the text before it, ends the job (blocks freed) and finishes with "stop" and
 * stop_reason = the string. While streaming, the last (longest stop − 1) characters are held
 * back, as vLLM does, so no part of a stop string is ever sent. A write that fails (the client
 * left) ends every unfinished job of the request: the scheduler frees its blocks.
 * </pre>
 */
final class OpenAiApi {
  /** Maps keep their order; records (the /mock dumps) get snake_case field names. */
  private static final ObjectMapper JSON =
      new ObjectMapper().setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE);

  private static final String EVENT_STREAM = "text/event-stream; charset=utf-8";
  private static final String APPLICATION_JSON = "application/json";
  private static final HeaderName X_REQUEST_ID = HeaderNames.create("X-Request-Id");

  /** A refusal with vLLM's status, error type and message. */
  static final class ApiError extends RuntimeException {
    final int status;
    final String type;
    final String param;

    ApiError(int status, String type, String message, String param) {
      super(message);
      this.status = status;
      this.type = type;
      this.param = param;
    }

    static ApiError badRequest(String message) {
      return new ApiError(400, "BadRequestError", message, null);
    }
  }

  private record Signal(int choice, int kind, int value) {
    static final int ADMITTED = 0;
    static final int TOKEN = 1;
    static final int FINISHED = 2;
    static final int KILLED = 3;
  }

  private final MockEngineServer.Config config;
  private final String model;
  private final Tokenizer tokenizer;
  private final TextGenerator generator;
  private final EngineScheduler scheduler;
  private final EngineMetrics metrics;
  private final Runnable onResponseSent;
  private final int maxModelLen;
  private final AtomicLong jobIds = new AtomicLong();
  private final SplittableRandom faults;
  private final long created = System.currentTimeMillis() / 1000;

  OpenAiApi(
      MockEngineServer.Config config,
      String model,
      Tokenizer tokenizer,
      TextGenerator generator,
      EngineScheduler scheduler,
      EngineMetrics metrics,
      Runnable onResponseSent) {
    this.config = config;
    this.model = model;
    this.tokenizer = tokenizer;
    this.generator = generator;
    this.scheduler = scheduler;
    this.metrics = metrics;
    this.onResponseSent = onResponseSent;
    this.maxModelLen = config.effectiveMaxModelLen();
    this.faults = new SplittableRandom(config.seed() ^ 0x5eed_fa17L);
  }

  String model() {
    return model;
  }

  void routing(HttpRouting.Builder r) {
    r.post("/v1/completions", wrap(this::completions));
    r.post("/v1/chat/completions", wrap(this::chat));
    r.post("/tokenize", wrap(this::tokenize));
    r.post("/detokenize", wrap(this::detokenize));
    r.get("/v1/models", wrap(this::models));
    r.post("/v1/load_lora_adapter", wrap(this::loadLora));
    r.post("/v1/unload_lora_adapter", wrap(this::unloadLora));
    r.get("/health", (req, res) -> res.status(Status.OK_200).send());
    r.get("/version", wrap((req, res) -> sendJson(res, 200, Map.of("version", "kvrouter-mock"))));
    r.get(
        "/metrics",
        (req, res) -> {
          res.header(HeaderNames.CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
          res.send(metrics.scrape().getBytes(StandardCharsets.UTF_8));
        });
    r.post(
        "/reset_prefix_cache",
        wrap(
            (req, res) -> {
              scheduler.resetPrefixCache();
              res.status(Status.OK_200).send();
            }));
    r.get("/mock/cache", wrap((req, res) -> sendJson(res, 200, scheduler.dump())));
    r.get(
        "/mock/requests",
        wrap((req, res) -> sendJson(res, 200, Map.of("requests", scheduler.recentTimings()))));
    // what FastAPI answers for any other path
    r.any((req, res) -> sendJson(res, 404, Map.of("detail", "Not Found")));
  }

  private Handler wrap(Handler h) {
    return (req, res) -> {
      try {
        h.handle(req, res);
      } catch (ApiError e) {
        if (!res.isSent()) sendError(res, e);
      } catch (TokenizerException | IllegalArgumentException e) {
        if (!res.isSent()) sendError(res, ApiError.badRequest(e.getMessage()));
      } catch (RuntimeException e) {
        if (res.isSent()) throw e; // mid-stream: the connection is cut, as a dying server's
        sendError(res, new ApiError(500, "InternalServerError", String.valueOf(e), null));
      }
    };
  }

  static Map<String, Object> errorBody(ApiError e) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("object", "error");
    m.put("message", e.getMessage());
    m.put("type", e.type);
    m.put("param", e.param);
    m.put("code", e.status);
    return m;
  }

  private static void sendError(ServerResponse res, ApiError e) {
    sendJson(res, e.status, errorBody(e));
  }

  private static void sendJson(ServerResponse res, int status, Object body) {
    res.status(Status.create(status));
    res.header(HeaderNames.CONTENT_TYPE, APPLICATION_JSON);
    res.send(bytes(body));
  }

  private static byte[] bytes(Object body) {
    try {
      return JSON.writeValueAsBytes(body);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
  }

  // ---------------------------------------------------------------- parsing

  private static Map<String, Object> body(String text) {
    Object v;
    try {
      v = JSON.readValue(text, Object.class);
    } catch (IOException e) {
      throw ApiError.badRequest(
          "Invalid JSON body: "
              + (e instanceof JsonProcessingException j ? j.getOriginalMessage() : e.getMessage()));
    }
    if (!(v instanceof Map<?, ?> m)) throw ApiError.badRequest("Expected a JSON object");
    @SuppressWarnings("unchecked")
    Map<String, Object> out = (Map<String, Object>) m;
    return out;
  }

  /**
   * The LoRA adapter a request names, or null for the served model; with LoRA off any other name is
   * vLLM's 404. With LoRA on (--max-loras) any other name is an adapter, loaded on demand.
   */
  private @Nullable String checkModel(Map<String, Object> b) {
    Object m = b.get("model");
    if (m == null || model.equals(m)) return null;
    if (scheduler.loras() != null && m instanceof String s && !s.isEmpty()) return s;
    throw new ApiError(404, "NotFoundError", "The model `" + m + "` does not exist.", "model");
  }

  private static Boolean bool(Map<String, Object> b, String k) {
    Object v = b.get(k);
    if (v == null) return null;
    if (!(v instanceof Boolean x)) throw ApiError.badRequest(k + ": expected true or false");
    return x;
  }

  private static Integer integer(Map<String, Object> b, String k) {
    Object v = b.get(k);
    if (v == null) return null;
    if (!(v instanceof Integer || v instanceof Long)) {
      throw ApiError.badRequest(k + ": expected an integer");
    }
    return ((Number) v).intValue();
  }

  private static int[] tokenIds(List<?> l, String field) {
    int[] ids = new int[l.size()];
    for (int i = 0; i < ids.length; i++) {
      if (!(l.get(i) instanceof Integer x) || x < 0) {
        throw ApiError.badRequest(field + ": expected a list of non-negative token ids");
      }
      ids[i] = x;
    }
    return ids;
  }

  private Tokenizer requireTokenizer(String what) {
    if (tokenizer == null) {
      throw ApiError.badRequest(
          what
              + " needs a tokenizer, and this mock engine has none (start it with --model-dir);"
              + " without one it accepts only prompts given as token ids (a list of integers).");
    }
    return tokenizer;
  }

  private List<int[]> completionPrompts(Object prompt) {
    if (prompt == null || (prompt instanceof String s && s.isEmpty())) {
      throw ApiError.badRequest("Either prompt or prompt_embeds must be provided and non-empty.");
    }
    List<int[]> out = new ArrayList<>();
    if (prompt instanceof String s) {
      out.add(requireTokenizer("A text prompt").encode(s, true));
    } else if (prompt instanceof List<?> l && !l.isEmpty() && l.get(0) instanceof Integer) {
      out.add(tokenIds(l, "prompt"));
    } else if (prompt instanceof List<?> l && !l.isEmpty()) {
      for (Object p : l) {
        if (p instanceof String s) out.add(requireTokenizer("A text prompt").encode(s, true));
        else if (p instanceof List<?> ids && !ids.isEmpty()) out.add(tokenIds(ids, "prompt"));
        else throw ApiError.badRequest("prompt: each prompt must be a string or token ids");
      }
    } else {
      throw ApiError.badRequest(
          "prompt: expected a string, a list of token ids, or a list of either");
    }
    return out;
  }

  /** What the sampling fields of a request say. */
  private record Params(
      boolean stream,
      boolean includeUsage,
      int maxTokens,
      boolean lengthLimited,
      List<String> stops,
      Long seed,
      Map<?, ?> kvTransfer) {}

  private Params params(Map<String, Object> b, List<int[]> prompts, boolean chat) {
    boolean stream = Boolean.TRUE.equals(bool(b, "stream"));
    Object so = b.get("stream_options");
    boolean includeUsage = false;
    if (so != null) {
      if (!stream) {
        throw ApiError.badRequest("Stream options can only be defined when `stream=True`.");
      }
      if (!(so instanceof Map<?, ?> m)) throw ApiError.badRequest("stream_options: an object");
      Object iu = m.get("include_usage");
      includeUsage = iu == null || Boolean.TRUE.equals(iu); // vLLM's default is true
    }
    Integer n = integer(b, "n");
    if (n != null && n != 1) {
      throw ApiError.badRequest("n: the mock engine generates one choice per prompt (n=1)");
    }
    bool(b, "ignore_eos"); // accepted: the mock stops at max_tokens or a stop string
    Object t = b.get("temperature");
    if (t != null && !(t instanceof Number)) throw ApiError.badRequest("temperature: a number");
    Integer max = chat ? integer(b, "max_completion_tokens") : null;
    if (max == null) max = integer(b, "max_tokens");
    if (max == null && !chat) max = 16; // vLLM's CompletionRequest default
    if (max != null && max < 1) {
      throw ApiError.badRequest("max_tokens must be at least 1, got " + max + ".");
    }
    int longest = 0;
    for (int[] p : prompts) {
      if (p.length > maxModelLen) {
        throw ApiError.badRequest(
            "This model's maximum context length is "
                + maxModelLen
                + " tokens. However, your request has "
                + p.length
                + " input tokens. Please reduce the length of the input messages.");
      }
      longest = Math.max(longest, p.length);
    }
    boolean lengthLimited = max != null;
    int maxTokens;
    if (max == null) {
      maxTokens = Math.max(1, Math.min(config.defaultMaxTokens(), maxModelLen - longest));
    } else {
      if (longest + (long) max > maxModelLen) {
        throw ApiError.badRequest(
            "'max_tokens' or 'max_completion_tokens' is too large: "
                + max
                + ". This model's maximum context length is "
                + maxModelLen
                + " tokens and your request has "
                + longest
                + " input tokens ("
                + max
                + " > "
                + maxModelLen
                + " - "
                + longest
                + ").");
      }
      maxTokens = max;
    }
    List<String> stops = new ArrayList<>();
    Object stop = b.get("stop");
    if (stop instanceof String s) {
      if (!s.isEmpty()) stops.add(s);
    } else if (stop instanceof List<?> l) {
      for (Object o : l) {
        if (!(o instanceof String s)) throw ApiError.badRequest("stop: strings");
        if (!s.isEmpty()) stops.add(s);
      }
    } else if (stop != null) {
      throw ApiError.badRequest("stop: a string or a list of strings");
    }
    Object seed = b.get("seed");
    Long seedValue = seed instanceof Number x ? x.longValue() : null;
    Object kv = b.get("kv_transfer_params");
    if (kv != null && !(kv instanceof Map<?, ?>)) {
      throw ApiError.badRequest("kv_transfer_params: an object");
    }
    return new Params(
        stream,
        includeUsage,
        maxTokens,
        lengthLimited,
        List.copyOf(stops),
        seedValue,
        (Map<?, ?>) kv);
  }

  /**
   * A chat body, refused with vLLM's 400 when it brings its own template and the engine does not
   * trust request templates (--trust-request-chat-template).
   */
  private ChatRequest chatRequest(String text) {
    ChatRequest r = ChatRequest.fromJson(text);
    if (r.carriesTemplate() && !config.trustRequestChatTemplate()) {
      throw ApiError.badRequest(ChatTemplateConfig.UNTRUSTED_REQUEST_TEMPLATE);
    }
    return r;
  }

  // ---------------------------------------------------------------- endpoints

  private void completions(ServerRequest req, ServerResponse res) {
    Map<String, Object> b = body(req.content().as(String.class));
    String adapter = checkModel(b);
    List<int[]> prompts = completionPrompts(b.get("prompt"));
    Params p = params(b, prompts, false);
    generate(req, res, prompts, p, false, adapter);
  }

  private void chat(ServerRequest req, ServerResponse res) {
    String text = req.content().as(String.class);
    Map<String, Object> b = body(text);
    String adapter = checkModel(b);
    Tokenizer tok = requireTokenizer("A chat request");
    int[] ids = tok.applyChatTemplate(chatRequest(text)).ids();
    List<int[]> prompts = List.of(ids);
    Params p = params(b, prompts, true);
    generate(req, res, prompts, p, true, adapter);
  }

  private void tokenize(ServerRequest req, ServerResponse res) {
    String text = req.content().as(String.class);
    Map<String, Object> b = body(text);
    checkModel(b);
    Tokenizer tok = requireTokenizer("/tokenize");
    int[] ids;
    if (b.get("messages") != null) {
      // vLLM's /tokenize has no tool_choice: the tools render whatever the body adds
      ids = tok.applyChatTemplate(chatRequest(text).withToolChoiceNone(false)).ids();
    } else if (b.get("prompt") instanceof String s) {
      Boolean add = bool(b, "add_special_tokens");
      ids = tok.encode(s, add == null || add);
    } else {
      throw ApiError.badRequest("/tokenize: expected prompt (a string) or messages");
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("count", ids.length);
    out.put("max_model_len", maxModelLen);
    out.put("tokens", ids);
    out.put("token_strs", null);
    sendJson(res, 200, out);
  }

  private void detokenize(ServerRequest req, ServerResponse res) {
    Map<String, Object> b = body(req.content().as(String.class));
    checkModel(b);
    Tokenizer tok = requireTokenizer("/detokenize");
    if (!(b.get("tokens") instanceof List<?> l)) {
      throw ApiError.badRequest("/detokenize: expected tokens (a list of token ids)");
    }
    int[] ids = tokenIds(l, "tokens");
    int max = -1;
    for (int id : ids) max = Math.max(max, id);
    if (tok.vocabSize() >= 0 && max >= tok.vocabSize()) {
      throw ApiError.badRequest("Token id " + max + " is out of vocabulary"); // vLLM's words
    }
    sendJson(res, 200, Map.of("prompt", tok.decode(ids, false)));
  }

  private void models(ServerRequest req, ServerResponse res) {
    Map<String, Object> perm = new LinkedHashMap<>();
    perm.put("id", "modelperm-" + hexId());
    perm.put("object", "model_permission");
    perm.put("created", created);
    perm.put("allow_create_engine", false);
    perm.put("allow_sampling", true);
    perm.put("allow_logprobs", true);
    perm.put("allow_search_indices", false);
    perm.put("allow_view", true);
    perm.put("allow_fine_tuning", false);
    perm.put("organization", "*");
    perm.put("group", null);
    perm.put("is_blocking", false);
    Map<String, Object> card = new LinkedHashMap<>();
    card.put("id", model);
    card.put("object", "model");
    card.put("created", created);
    card.put("owned_by", "vllm");
    card.put("root", config.modelDir() == null ? model : config.modelDir().toString());
    card.put("parent", null);
    card.put("max_model_len", maxModelLen);
    card.put("permission", List.of(perm));
    List<Map<String, Object>> data = new ArrayList<>();
    data.add(card);
    LoraSlots loras = scheduler.loras();
    if (loras != null) {
      // vLLM's show_available_models: one card per adapter, its parent the base model
      for (Map.Entry<String, String> a : loras.resident()) {
        Map<String, Object> lc = new LinkedHashMap<>();
        lc.put("id", a.getKey());
        lc.put("object", "model");
        lc.put("created", created);
        lc.put("owned_by", "vllm");
        lc.put("root", a.getValue());
        lc.put("parent", model);
        lc.put("max_model_len", null);
        lc.put("permission", List.of(perm));
        data.add(lc);
      }
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("object", "list");
    out.put("data", data);
    sendJson(res, 200, out);
  }

  /**
   * {@code POST /v1/load_lora_adapter} with vLLM's body {@code {"lora_name": ..., "lora_path":
   * ...}} and answers: 200 with a plain-text success line once the adapter is loaded (after
   * --lora-load-ms of model time; the least recently used is evicted when --max-loras are
   * resident), 400 when a field is missing or the adapter is already loaded.
   */
  private void loadLora(ServerRequest req, ServerResponse res) {
    Map<String, Object> b = body(req.content().as(String.class));
    LoraSlots loras = scheduler.loras();
    if (loras == null) throw new ApiError(404, "NotFoundError", "LoRA is not enabled", null);
    Object name = b.get("lora_name");
    Object path = b.get("lora_path");
    if (!(name instanceof String n) || n.isEmpty() || !(path instanceof String p) || p.isEmpty()) {
      throw new ApiError(
          400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.", null);
    }
    if (model.equals(n)) {
      throw new ApiError(400, "InvalidUserInput", "'" + n + "' is the base model", null);
    }
    if (loras.load(n, p) == LoraSlots.Load.ALREADY_LOADED) {
      throw new ApiError(
          400, "InvalidUserInput", "The lora adapter '" + n + "' has already been loaded.", null);
    }
    sleepModelTime(scheduler.loraLoadRealNanos());
    sendText(res, "Success: LoRA adapter '" + n + "' added successfully.");
  }

  /**
   * {@code POST /v1/unload_lora_adapter} with {@code {"lora_name": ...}}: 200 with a plain-text
   * success line, 404 when the adapter is not resident, 400 without a name.
   */
  private void unloadLora(ServerRequest req, ServerResponse res) {
    Map<String, Object> b = body(req.content().as(String.class));
    LoraSlots loras = scheduler.loras();
    if (loras == null) throw new ApiError(404, "NotFoundError", "LoRA is not enabled", null);
    if (!(b.get("lora_name") instanceof String n) || n.isEmpty()) {
      throw new ApiError(
          400,
          "InvalidUserInput",
          "either 'lora_name' and 'lora_int_id' needs to be provided.",
          null);
    }
    if (!loras.unload(n)) {
      throw new ApiError(
          404, "NotFoundError", "The lora adapter '" + n + "' cannot be found.", null);
    }
    sendText(res, "Success: LoRA adapter '" + n + "' removed successfully.");
  }

  /**
   * The load's model time on this handler's (virtual) thread: the engine loads, the caller waits.
   */
  private static void sleepModelTime(long nanos) {
    if (nanos <= 0) return;
    try {
      Thread.sleep(Duration.ofNanos(nanos));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ApiError(500, "InternalServerError", "interrupted while loading", null);
    }
  }

  private static void sendText(ServerResponse res, String text) {
    res.status(Status.OK_200);
    res.header(HeaderNames.CONTENT_TYPE, "text/plain; charset=utf-8");
    res.send(text.getBytes(StandardCharsets.UTF_8));
  }

  private static String hexId() {
    return UUID.randomUUID().toString().replace("-", "");
  }

  // ---------------------------------------------------------------- generation

  /** One choice of a request: its job, planned tokens and what was sent. */
  private static final class Choice {
    final EngineScheduler.Job job;
    final int[] tokens;
    int emitted;
    int cachedTokens;
    int sentChars;
    String text = "";
    String finishReason;
    String stopReason;
    boolean roleSent;

    Choice(EngineScheduler.Job job, int[] tokens) {
      this.job = job;
      this.tokens = tokens;
    }
  }

  private void generate(
      ServerRequest req,
      ServerResponse res,
      List<int[]> prompts,
      Params p,
      boolean chat,
      @Nullable String adapter) {
    if (config.failFraction() > 0 && drawFault()) {
      throw new ApiError(
          500,
          "InternalServerError",
          "mock engine: injected failure (--fail-fraction " + config.failFraction() + ")",
          null);
    }
    String header = req.headers().first(X_REQUEST_ID).orElse(null);
    String id = (chat ? "chatcmpl-" : "cmpl-") + (header != null ? header : hexId());
    long createdAt = System.currentTimeMillis() / 1000;
    LinkedBlockingQueue<Signal> signals = new LinkedBlockingQueue<>();
    List<Choice> choices = new ArrayList<>();
    Map<?, ?> kv = p.kvTransfer();
    boolean pull =
        config.kvRole().consumes()
            && kv != null
            && Boolean.TRUE.equals(kv.get("do_remote_prefill"));
    boolean handOut =
        config.kvRole().produces() && kv != null && Boolean.TRUE.equals(kv.get("do_remote_decode"));
    for (int i = 0; i < prompts.size(); i++) {
      int idx = i;
      int[] prompt = prompts.get(i);
      int remote = 0;
      if (pull && kv.get("remote_block_ids") instanceof List<?> ids) {
        remote = Math.min(ids.size(), prompt.length / config.blockSize());
      }
      EngineScheduler.Listener l =
          new EngineScheduler.Listener() {
            @Override
            public void admitted(int cachedTokens) {
              signals.add(new Signal(idx, Signal.ADMITTED, cachedTokens));
            }

            @Override
            public void token(int index) {
              signals.add(new Signal(idx, Signal.TOKEN, index));
            }

            @Override
            public void finished() {
              signals.add(new Signal(idx, Signal.FINISHED, 0));
            }

            @Override
            public void killed() {
              signals.add(new Signal(idx, Signal.KILLED, 0));
            }
          };
      EngineScheduler.Job job =
          new EngineScheduler.Job(
              jobIds.incrementAndGet(),
              prompts.size() == 1 ? id : id + "-" + i,
              prompt,
              p.maxTokens(),
              p.stream() ? config.stallAfterTokens() : 0,
              remote,
              l);
      job.adapter = adapter;
      choices.add(new Choice(job, generator.tokens(prompt, p.seed(), p.maxTokens())));
    }
    for (Choice c : choices) scheduler.submit(c.job);
    int holdBack = 0;
    for (String s : p.stops()) holdBack = Math.max(holdBack, s.length() - 1);

    OutputStream out = null;
    int open = choices.size();
    try {
      while (open > 0) {
        Signal s = signals.poll(1, TimeUnit.SECONDS);
        if (s == null) continue;
        Choice c = choices.get(s.choice());
        if (c.finishReason != null) continue; // a token or end that raced with our stop
        switch (s.kind()) {
          case Signal.ADMITTED -> c.cachedTokens = s.value();
          case Signal.KILLED -> throw new IllegalStateException("the mock engine stopped");
          case Signal.FINISHED -> {
            // every token was already handled; the last one set finishReason
          }
          default -> {
            c.emitted = s.value() + 1;
            String full = generator.text(c.tokens, c.emitted);
            int cut = -1;
            String hit = null;
            for (String stop : p.stops()) {
              int at = full.indexOf(stop);
              if (at >= 0 && (cut < 0 || at < cut)) {
                cut = at;
                hit = stop;
              }
            }
            if (hit != null) {
              full = full.substring(0, cut);
              c.finishReason = "stop";
              c.stopReason = hit;
              scheduler.end(c.job, "stop");
            } else if (c.emitted >= c.tokens.length) {
              c.finishReason = p.lengthLimited() ? "length" : "stop";
            }
            c.text = full;
            if (c.finishReason != null) open--;
            if (p.stream()) {
              if (out == null) {
                res.status(Status.OK_200);
                res.header(HeaderNames.CONTENT_TYPE, EVENT_STREAM);
                out = res.outputStream();
              }
              int upTo =
                  c.finishReason != null
                      ? full.length()
                      : Math.max(c.sentChars, full.length() - holdBack);
              String delta = full.substring(Math.min(c.sentChars, upTo), upTo);
              c.sentChars = Math.max(c.sentChars, upTo);
              if (chat && !c.roleSent) {
                c.roleSent = true;
                sse(out, chatChunk(id, createdAt, s.choice(), role(), null, null, false));
              }
              Object chunk =
                  chat
                      ? chatChunk(
                          id,
                          createdAt,
                          s.choice(),
                          content(delta),
                          c.finishReason,
                          c.stopReason,
                          c.finishReason != null)
                      : completionChunk(id, createdAt, s.choice(), delta, c);
              sse(out, chunk);
            }
          }
        }
      }
      if (p.stream()) {
        if (out == null) {
          res.status(Status.OK_200);
          res.header(HeaderNames.CONTENT_TYPE, EVENT_STREAM);
          out = res.outputStream();
        }
        if (p.includeUsage()) {
          Map<String, Object> u = new LinkedHashMap<>();
          u.put("id", id);
          u.put("object", chat ? "chat.completion.chunk" : "text_completion");
          u.put("created", createdAt);
          u.put("model", model);
          u.put("choices", List.of());
          u.put("usage", usage(choices, false));
          sse(out, u);
        }
        out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
        out.flush();
        out.close();
      } else {
        Map<String, Object> body =
            chat
                ? chatResponse(id, createdAt, choices)
                : completionResponse(id, createdAt, choices);
        if (handOut) body.put("kv_transfer_params", handOut(req, prompts.get(0)));
        sendJson(res, 200, body);
      }
      onResponseSent.run();
    } catch (IOException | UncheckedIOException e) {
      endAll(choices); // the client left: free its blocks
    } catch (InterruptedException e) {
      endAll(choices);
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      endAll(choices);
      throw e;
    }
  }

  /**
   * The kv_transfer_params a producer answers a do_remote_decode request with, in the
   * NixlConnector's fields: the blocks are named by the hashes this engine's KV events give them.
   */
  private Map<String, Object> handOut(ServerRequest req, int[] prompt) {
    long[] hashes = scheduler.engineBlockHashes(prompt);
    List<Object> ids = new ArrayList<>(hashes.length);
    for (long h : hashes) ids.add(new BigInteger(Long.toUnsignedString(h)));
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("do_remote_prefill", true);
    m.put("do_remote_decode", false);
    m.put("remote_block_ids", ids);
    m.put("remote_engine_id", scheduler.engineId());
    m.put("remote_host", config.host());
    m.put("remote_port", req.localPeer().port());
    m.put("tp_size", 1);
    return m;
  }

  private synchronized boolean drawFault() {
    return faults.nextDouble() < config.failFraction();
  }

  private void endAll(List<Choice> choices) {
    for (Choice c : choices) {
      try {
        scheduler.end(c.job, "abort"); // a no-op for a job already done
      } catch (IllegalStateException stopped) {
        return;
      }
    }
  }

  private static void sse(OutputStream out, Object chunk) throws IOException {
    out.write(
        ("data: " + JSON.writeValueAsString(chunk) + "\n\n").getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  private Map<String, Object> usage(List<Choice> choices, boolean withNulls) {
    int prompt = 0;
    int completion = 0;
    int cached = 0;
    for (Choice c : choices) {
      prompt += c.job.prompt.length;
      completion += c.emitted;
      cached = c.cachedTokens; // vLLM reports the last prompt's
    }
    Map<String, Object> u = new LinkedHashMap<>();
    u.put("prompt_tokens", prompt);
    u.put("total_tokens", prompt + completion);
    u.put("completion_tokens", completion);
    if (config.enablePromptTokensDetails() && cached > 0) {
      u.put("prompt_tokens_details", Map.of("cached_tokens", cached));
    } else if (withNulls) {
      u.put("prompt_tokens_details", null);
    }
    return u;
  }

  private static Map<String, Object> role() {
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("role", "assistant");
    d.put("content", "");
    return d;
  }

  private static Map<String, Object> content(String delta) {
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("content", delta);
    return d;
  }

  private Map<String, Object> chatChunk(
      String id,
      long createdAt,
      int index,
      Map<String, Object> delta,
      String finishReason,
      String stopReason,
      boolean last) {
    Map<String, Object> choice = new LinkedHashMap<>();
    choice.put("index", index);
    choice.put("delta", delta);
    choice.put("logprobs", null);
    choice.put("finish_reason", finishReason);
    if (last) choice.put("stop_reason", stopReason);
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", id);
    m.put("object", "chat.completion.chunk");
    m.put("created", createdAt);
    m.put("model", model);
    m.put("choices", List.of(choice));
    return m;
  }

  private Map<String, Object> completionChunk(
      String id, long createdAt, int index, String delta, Choice c) {
    Map<String, Object> choice = new LinkedHashMap<>();
    choice.put("index", index);
    choice.put("text", delta);
    choice.put("logprobs", null);
    choice.put("finish_reason", c.finishReason);
    choice.put("stop_reason", c.stopReason);
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", id);
    m.put("object", "text_completion");
    m.put("created", createdAt);
    m.put("model", model);
    m.put("choices", List.of(choice));
    return m;
  }

  private Map<String, Object> completionResponse(String id, long createdAt, List<Choice> cs) {
    List<Object> choices = new ArrayList<>();
    for (int i = 0; i < cs.size(); i++) {
      Choice c = cs.get(i);
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("index", i);
      m.put("text", c.text);
      m.put("logprobs", null);
      m.put("finish_reason", c.finishReason);
      m.put("stop_reason", c.stopReason);
      m.put("prompt_logprobs", null);
      choices.add(m);
    }
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", id);
    m.put("object", "text_completion");
    m.put("created", createdAt);
    m.put("model", model);
    m.put("choices", choices);
    m.put("service_tier", null);
    m.put("system_fingerprint", null);
    m.put("usage", usage(cs, true));
    m.put("kv_transfer_params", null);
    return m;
  }

  private Map<String, Object> chatResponse(String id, long createdAt, List<Choice> cs) {
    Choice c = cs.get(0);
    Map<String, Object> msg = new LinkedHashMap<>();
    msg.put("role", "assistant");
    msg.put("content", c.text);
    msg.put("refusal", null);
    msg.put("annotations", null);
    msg.put("audio", null);
    msg.put("function_call", null);
    msg.put("tool_calls", List.of());
    msg.put("reasoning_content", null);
    Map<String, Object> choice = new LinkedHashMap<>();
    choice.put("index", 0);
    choice.put("message", msg);
    choice.put("logprobs", null);
    choice.put("finish_reason", c.finishReason);
    choice.put("stop_reason", c.stopReason);
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", id);
    m.put("object", "chat.completion");
    m.put("created", createdAt);
    m.put("model", model);
    m.put("choices", List.of(choice));
    m.put("service_tier", null);
    m.put("system_fingerprint", null);
    m.put("usage", usage(cs, true));
    m.put("prompt_logprobs", null);
    m.put("kv_transfer_params", null);
    return m;
  }
}
