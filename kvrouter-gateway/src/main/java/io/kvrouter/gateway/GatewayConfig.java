package io.kvrouter.gateway;

import io.kvrouter.route.PairRouter;
import io.kvrouter.tokenize.ChatTemplateConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The gateway's settings (the router's own are {@code KvRouterServer.Config}); {@link #builder()}
 * starts from the defaults.
 *
 * @param models model name to Hugging Face tokenizer directory; a null directory: tokenized by the
 *     model's engines ({@code POST /tokenize}). A registered model not listed here is tokenized by
 *     its engines too
 * @param loras LoRA adapter name to its base model: a request for the adapter routes among the base
 *     model's engines with hashes salted by the adapter's name (DESIGN.md §2)
 * @param apiKey the key clients must send ({@code Authorization: Bearer KEY}) on {@code /v1/*},
 *     {@code /tokenize} and {@code /detokenize}; null: none. Distinct from the router's admin token
 * @param engineApiKey the key the gateway sends to engines; null: none
 * @param maxAttempts engines tried per request before the first byte reaches the client (default 2)
 * @param connectTimeout TCP connect timeout to an engine (default 2 s)
 * @param engineTimeout longest silence of an engine before its first byte and between bytes
 *     (default 120 s); before the first byte the request is retried elsewhere
 * @param healthInterval how often {@code GET /health} is asked of every engine (default 5 s)
 * @param healthTimeout timeout of one health check (default 2 s)
 * @param unhealthyAfter failed checks in a row that take an engine out of routing (default 2)
 * @param breakerFailures failed attempts in a row that open an engine's breaker (default 3)
 * @param breakerOpen how long an open breaker keeps the engine out before a probe (default 10 s)
 * @param warnInterval at most one prediction warning per engine and direction this often (default
 *     60 s)
 * @param disaggregation the conditional rule of fleets with prefill and decode engines
 *     (docs/routing.md, Disaggregated serving; default {@link PairRouter.Config#defaults()})
 * @param admission the queue in front of a model whose engines are all busy (default {@link
 *     AdmissionConfig#DEFAULTS})
 * @param chat how the engines were told to render chats (vLLM's --chat-template flags), applied to
 *     the models the gateway tokenizes itself; and whether requests may bring their own template
 * @param maxRequestValues the JSON values one request's messages, tools and chat_template_kwargs
 *     may hold (default {@value #DEFAULT_MAX_REQUEST_VALUES}); more is a 413
 * @param maxInflightValues those values held by all requests in flight at once (default {@value
 *     #DEFAULT_MAX_INFLIGHT_VALUES}); a request that would pass it is a 429 with Retry-After
 * @param sessions session affinity (docs/gateway.md, "Sessions"; default {@link SessionConfig#OFF})
 * @param loraPlacement how requests for LoRA adapters are placed (default {@link
 *     LoraPlacementConfig#OFF})
 * @param holderWait whether a request the router sends to a rank other than the busy one holding
 *     its prefix may wait for that holder when it costs fewer prefill tokens (docs/routing.md,
 *     "Waiting for the prefix holder"; default on; it needs the admission queue)
 * @param busyEngineWaiting an engine that says at least this many requests wait in its own queue
 *     (its {@code /metrics}: EngineQueueGauge) is busy: routing passes it by, and a request whose
 *     every engine is so waits in the admission queue; 0: the engines' metrics are not read
 *     (default)
 * @param engineMetricsInterval how often each engine's {@code /metrics} is read when {@code
 *     busyEngineWaiting} is set (default 1 s)
 */
public record GatewayConfig(
    Map<String, Path> models,
    Map<String, String> loras,
    String apiKey,
    String engineApiKey,
    int maxAttempts,
    Duration connectTimeout,
    Duration engineTimeout,
    Duration healthInterval,
    Duration healthTimeout,
    int unhealthyAfter,
    int breakerFailures,
    Duration breakerOpen,
    Duration warnInterval,
    PairRouter.Config disaggregation,
    AdmissionConfig admission,
    Chat chat,
    long maxRequestValues,
    long maxInflightValues,
    SessionConfig sessions,
    LoraPlacementConfig loraPlacement,
    boolean holderWait,
    long busyEngineWaiting,
    Duration engineMetricsInterval) {

  /** See {@link #maxRequestValues()}: an empty object costs about 70 bytes of heap. */
  public static final long DEFAULT_MAX_REQUEST_VALUES = 250_000;

  /** See {@link #maxInflightValues()}. */
  public static final long DEFAULT_MAX_INFLIGHT_VALUES = 4_000_000;

  /**
   * The chat-template settings: {@code common} for every model, {@code perModel} for a model that
   * sets its own ({@code --chat-template NAME=...}), {@code trustRequestTemplate} to accept a
   * request's {@code chat_template} (vLLM's --trust-request-chat-template; refused with vLLM's 400
   * otherwise).
   */
  public record Chat(
      ChatTemplateConfig common,
      Map<String, ChatTemplateConfig> perModel,
      boolean trustRequestTemplate) {
    public Chat {
      common = common == null ? ChatTemplateConfig.defaults() : common;
      perModel = perModel == null ? Map.of() : Map.copyOf(perModel);
    }

    /** vLLM's defaults: the models' own templates, request templates refused. */
    public static Chat defaults() {
      return new Chat(ChatTemplateConfig.defaults(), Map.of(), false);
    }

    /** The settings of model {@code name}. */
    public ChatTemplateConfig forModel(String name) {
      return perModel.getOrDefault(name, common);
    }
  }

  public GatewayConfig {
    Objects.requireNonNull(disaggregation, "disaggregation");
    Objects.requireNonNull(admission, "admission");
    chat = chat == null ? Chat.defaults() : chat;
    sessions = sessions == null ? SessionConfig.OFF : sessions;
    for (String m : chat.perModel().keySet()) {
      if (!models.containsKey(m)) {
        throw new IllegalArgumentException(
            "--chat-template " + m + "=...: no --model " + m + " (the per-model form names one)");
      }
      if (models.get(m) == null) {
        throw new IllegalArgumentException(
            "--chat-template "
                + m
                + "=...: model "
                + m
                + " has no tokenizer directory, so its engines render its chats (set the template"
                + " on them)");
      }
    }
    models =
        Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(models, "models")));
    loras =
        Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(loras, "loras")));
    loraPlacement = loraPlacement == null ? LoraPlacementConfig.OFF : loraPlacement;
    apiKey = apiKey == null || apiKey.isEmpty() ? null : apiKey;
    engineApiKey = engineApiKey == null || engineApiKey.isEmpty() ? null : engineApiKey;
    if (maxAttempts < 1) throw new IllegalArgumentException("maxAttempts must be >= 1");
    positive("connectTimeout", connectTimeout);
    positive("engineTimeout", engineTimeout);
    positive("healthInterval", healthInterval);
    positive("healthTimeout", healthTimeout);
    positive("breakerOpen", breakerOpen);
    positive("warnInterval", warnInterval);
    positive("engineMetricsInterval", engineMetricsInterval);
    if (busyEngineWaiting < 0) {
      throw new IllegalArgumentException(
          "busyEngineWaiting must be >= 1 (or 0 for never), got " + busyEngineWaiting);
    }
    if (unhealthyAfter < 1) throw new IllegalArgumentException("unhealthyAfter must be >= 1");
    if (breakerFailures < 1) throw new IllegalArgumentException("breakerFailures must be >= 1");
    if (maxRequestValues < 1) throw new IllegalArgumentException("maxRequestValues must be >= 1");
    if (maxInflightValues < maxRequestValues) {
      throw new IllegalArgumentException("maxInflightValues must be >= maxRequestValues");
    }
    for (Map.Entry<String, String> e : loras.entrySet()) {
      if (e.getKey().equals(e.getValue())) {
        throw new IllegalArgumentException("LoRA adapter '" + e.getKey() + "' is its own base");
      }
    }
  }

  private static void positive(String name, Duration d) {
    Objects.requireNonNull(d, name);
    if (d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(name + " must be > 0, got " + d);
    }
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Sets fields one by one; {@link #build()} checks them. */
  public static final class Builder {
    private final Map<String, Path> models = new LinkedHashMap<>();
    private final Map<String, String> loras = new LinkedHashMap<>();
    private String apiKey;
    private String engineApiKey;
    private int maxAttempts = 2;
    private Duration connectTimeout = Duration.ofSeconds(2);
    private Duration engineTimeout = Duration.ofSeconds(120);
    private Duration healthInterval = Duration.ofSeconds(5);
    private Duration healthTimeout = Duration.ofSeconds(2);
    private int unhealthyAfter = 2;
    private int breakerFailures = 3;
    private Duration breakerOpen = Duration.ofSeconds(10);
    private Duration warnInterval = Duration.ofSeconds(60);
    private PairRouter.Config disaggregation = PairRouter.Config.defaults();
    private AdmissionConfig admission = AdmissionConfig.DEFAULTS;
    private Chat chat = Chat.defaults();
    private long maxRequestValues = DEFAULT_MAX_REQUEST_VALUES;
    private long maxInflightValues = DEFAULT_MAX_INFLIGHT_VALUES;
    private SessionConfig sessions = SessionConfig.OFF;
    private LoraPlacementConfig loraPlacement = LoraPlacementConfig.OFF;
    private boolean holderWait = true;
    private long busyEngineWaiting;
    private Duration engineMetricsInterval = Duration.ofSeconds(1);

    private Builder() {}

    /** An engine with this many requests in its own queue is busy (default 0: not read). */
    public Builder busyEngineWaiting(long v) {
      busyEngineWaiting = v;
      return this;
    }

    /** How often the engines' queues are read (default 1 s). */
    public Builder engineMetricsInterval(Duration v) {
      engineMetricsInterval = v;
      return this;
    }

    /** Whether a request may wait for the busy rank holding its prefix (default true). */
    public Builder holderWait(boolean v) {
      holderWait = v;
      return this;
    }

    public Builder loraPlacement(LoraPlacementConfig v) {
      loraPlacement = v;
      return this;
    }

    public Builder maxRequestValues(long v) {
      maxRequestValues = v;
      return this;
    }

    public Builder maxInflightValues(long v) {
      maxInflightValues = v;
      return this;
    }

    public Builder chat(Chat v) {
      chat = v;
      return this;
    }

    /** Serves {@code name}, tokenized with the tokenizer in {@code dir} (null: by its engines). */
    public Builder model(String name, Path dir) {
      models.put(name, dir);
      return this;
    }

    public Builder lora(String adapter, String baseModel) {
      loras.put(adapter, baseModel);
      return this;
    }

    public Builder apiKey(String v) {
      apiKey = v;
      return this;
    }

    public Builder engineApiKey(String v) {
      engineApiKey = v;
      return this;
    }

    public Builder maxAttempts(int v) {
      maxAttempts = v;
      return this;
    }

    public Builder connectTimeout(Duration v) {
      connectTimeout = v;
      return this;
    }

    public Builder engineTimeout(Duration v) {
      engineTimeout = v;
      return this;
    }

    public Builder healthInterval(Duration v) {
      healthInterval = v;
      return this;
    }

    public Builder healthTimeout(Duration v) {
      healthTimeout = v;
      return this;
    }

    public Builder unhealthyAfter(int v) {
      unhealthyAfter = v;
      return this;
    }

    public Builder breakerFailures(int v) {
      breakerFailures = v;
      return this;
    }

    public Builder breakerOpen(Duration v) {
      breakerOpen = v;
      return this;
    }

    public Builder warnInterval(Duration v) {
      warnInterval = v;
      return this;
    }

    public Builder disaggregation(PairRouter.Config v) {
      disaggregation = v;
      return this;
    }

    public Builder admission(AdmissionConfig v) {
      admission = v;
      return this;
    }

    /** Session affinity; {@link SessionConfig#OFF} by default. */
    public Builder sessions(SessionConfig v) {
      sessions = v;
      return this;
    }

    public GatewayConfig build() {
      return new GatewayConfig(
          models,
          loras,
          apiKey,
          engineApiKey,
          maxAttempts,
          connectTimeout,
          engineTimeout,
          healthInterval,
          healthTimeout,
          unhealthyAfter,
          breakerFailures,
          breakerOpen,
          warnInterval,
          disaggregation,
          admission,
          chat,
          maxRequestValues,
          maxInflightValues,
          sessions,
          loraPlacement,
          holderWait,
          busyEngineWaiting,
          engineMetricsInterval);
    }
  }
}
