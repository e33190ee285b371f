package io.kvrouter.mockengine;

import io.helidon.webserver.WebServer;
import io.helidon.webserver.http1.Http1Config;
import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.tokenize.ChatTemplateConfig;
import io.kvrouter.tokenize.Tokenizer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A process that looks like vLLM on every wire a router touches, without a model: vLLM's
 * OpenAI-compatible HTTP API (completions and chat, streamed or not, {@code /tokenize}, {@code
 * /detokenize}, {@code /v1/models}, {@code /health}, {@code /metrics} under vLLM's metric names), a
 * real {@link io.kvrouter.prefixcache.PrefixCache}, simulated prefill and decode time from the
 * simulator's {@link TimingModel}, and KV events published as vLLM's {@code ZmqEventPublisher}
 * publishes them (PUB socket, ROUTER replay socket). {@code kvrouter mock-engine} runs one; tests
 * start them in-process on real ports:
 *
 * <pre>{@code
 * try (MockEngineServer e = MockEngineServer.start(MockEngineServer.Config.builder()
 *         .modelDir(dir).kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
 *         .build())) {
 *   http.post(e.url() + "/v1/chat/completions", ...);
 *   register(e.zmqEndpoint(), e.replayEndpoint());
 *   List<String> blocks = e.cacheDump().blockHashes();
 * }
 * }</pre>
 *
 * <pre>
 * Implementation notes
 *
 * Threads: Helidon's virtual threads run the HTTP handlers (OpenAiApi); one platform thread,
 * EngineScheduler's, owns the PrefixCache, the queues and every timer; one more, KvEventPublisher's,
 * owns the ZMQ sockets. Handlers talk to the scheduler through its command queue and hear back
 * through each request's own blocking queue; the scheduler hands each step's events to the
 * publisher as one batch. Start-up faults (listener and publisher delays) bind in the background
 * on ports chosen up front, so port(), zmqEndpoint() and replayEndpoint() are known at once.
 * Death (a fault, or kill()) stops the listener, the publisher and the scheduler without a
 * graceful drain, as a crashed process would.
 * </pre>
 */
public final class MockEngineServer implements AutoCloseable {
  /**
   * The engine's KV connector role, as vLLM's {@code kv_role} of a NixlConnector: {@code
   * kv_producer} (prefill engines), {@code kv_consumer} (decode engines), {@code kv_both}.
   */
  public enum KvRole {
    NONE,
    PRODUCER,
    CONSUMER,
    BOTH;

    boolean produces() {
      return this == PRODUCER || this == BOTH;
    }

    boolean consumes() {
      return this == CONSUMER || this == BOTH;
    }

    /** {@code producer}, {@code consumer} or {@code both}. */
    public static KvRole parse(String s) {
      return switch (s) {
        case "producer", "kv_producer" -> PRODUCER;
        case "consumer", "kv_consumer" -> CONSUMER;
        case "both", "kv_both" -> BOTH;
        default ->
            throw new IllegalArgumentException(
                "--kv-role must be producer, consumer or both, got '" + s + "'");
      };
    }
  }

  /** How KV events are shaped on the wire ({@code --kv-events-encoding}). */
  public enum EventEncoding {
    /** msgspec {@code array_like}: every event a positional array (older vLLM). */
    ARRAY,
    /** tagged-map events inside a positional batch (newer vLLM). */
    MAP
  }

  /**
   * Everything {@code kvrouter mock-engine} takes; one field per flag. Build with {@link
   * #builder()}.
   *
   * @param host address the HTTP listener binds
   * @param port HTTP port; 0 picks a free one
   * @param modelDir Hugging Face model directory for the tokenizer and chat template, or null: then
   *     only token-id prompts are accepted
   * @param servedModelName the model id in requests and responses (vLLM's {@code
   *     --served-model-name}); null: the model directory's name, or {@code "mock"}
   * @param blockSize tokens per KV block
   * @param numGpuBlocks KV blocks in the pool
   * @param maxNumSeqs requests running at once (continuous batching)
   * @param maxModelLen longest prompt plus output, in tokens; 0: {@code numGpuBlocks × blockSize}
   * @param prefillBaseMs fixed cost of every prefill, in model milliseconds
   * @param prefillMsPer1kTokens prefill cost per 1,000 uncached prompt tokens
   * @param decodeMsPerToken time per output token after the first
   * @param speedup model time runs this many times faster than real time
   * @param enablePromptTokensDetails report {@code usage.prompt_tokens_details.cached_tokens}
   * @param kvEvents vLLM's {@code --kv-events-config}, or null for no events
   * @param eventEncoding array-form or map-form events
   * @param seed seeds generated text, engine block hashes and fault draws
   * @param defaultMaxTokens output length of a request that sets no {@code max_tokens} (the mock's
   *     stand-in for the model stopping at its end-of-sequence token; finish reason {@code stop})
   * @param failFraction fraction of generation requests answered 500 before the first byte
   * @param dieAfterRequests die once this many generation responses have been sent whole; 0: never
   * @param dieAfter die this long after start; null: never
   * @param httpStartDelay bind the HTTP listener only after this delay (vLLM binds after loading
   *     its weights)
   * @param zmqStartDelay bind the ZMQ sockets only after this delay
   * @param stallAfterTokens a streamed response stops sending after this many tokens and holds the
   *     connection open until the client leaves; 0: never
   * @param kvRole the KV connector role ({@code --kv-role}, docs/mock-engine.md): a producer
   *     answers a request with {@code kv_transfer_params.do_remote_decode} with parameters naming
   *     its blocks, a consumer pulls the blocks a request's {@code do_remote_prefill} parameters
   *     name; {@link KvRole#NONE}: {@code kv_transfer_params} is ignored
   * @param kvTransferMsPerBlock model time a consumer spends pulling one block it does not cache
   * @param hostBlocks blocks of the host tier (CPU offloading, {@code --host-blocks},
   *     docs/mock-engine.md): device blocks the prefix cache evicts go there (LRU), published as
   *     {@code medium} CPU events; 0: no host tier
   * @param hostMsPerBlock model time to load one block from the host tier into the device
   * @param kvGroups the KV cache groups of a hybrid model, or null for one full-attention group
   * @param chatTemplate vLLM's --chat-template, --chat-template-content-format and
   *     --default-chat-template-kwargs (null: the model's own template, vLLM's defaults)
   * @param trustRequestChatTemplate vLLM's --trust-request-chat-template: a request's {@code
   *     chat_template} is used; without it such a request is refused with vLLM's 400
   * @param maxLoras LoRA adapters resident at once (vLLM's {@code --enable-lora --max-loras}); 0:
   *     LoRA off. Adapters are loaded on demand (any model name other than the served one) or by
   *     {@code POST /v1/load_lora_adapter}, the least recently used evicted (docs/mock-engine.md,
   *     "LoRA adapters")
   * @param loraLoadMs model time to load an adapter that is not resident
   */
  public record Config(
      String host,
      int port,
      Path modelDir,
      String servedModelName,
      int blockSize,
      int numGpuBlocks,
      int maxNumSeqs,
      int maxModelLen,
      double prefillBaseMs,
      double prefillMsPer1kTokens,
      double decodeMsPerToken,
      double speedup,
      boolean enablePromptTokensDetails,
      KvEventsConfig kvEvents,
      EventEncoding eventEncoding,
      long seed,
      int defaultMaxTokens,
      double failFraction,
      int dieAfterRequests,
      Duration dieAfter,
      Duration httpStartDelay,
      Duration zmqStartDelay,
      int stallAfterTokens,
      KvRole kvRole,
      double kvTransferMsPerBlock,
      int hostBlocks,
      double hostMsPerBlock,
      KvCacheGroups kvGroups,
      ChatTemplateConfig chatTemplate,
      boolean trustRequestChatTemplate,
      int maxLoras,
      double loraLoadMs) {

    public Config {
      check(maxLoras >= 0, "--max-loras must be >= 0 (0: LoRA off), got " + maxLoras);
      check(
          loraLoadMs >= 0 && Double.isFinite(loraLoadMs),
          "--lora-load-ms must be >= 0, got " + loraLoadMs);
      chatTemplate = chatTemplate == null ? ChatTemplateConfig.defaults() : chatTemplate;
      check(
          chatTemplate.isDefault() || modelDir != null,
          "--chat-template and its companion flags need --model-dir (a tokenizer to render with)");
      check(hostBlocks >= 0, "--host-blocks must be >= 0, got " + hostBlocks);
      if (kvGroups != null && !kvGroups.isHybrid()) kvGroups = null; // one group: not hybrid
      check(
          kvGroups == null || hostBlocks == 0,
          "--kv-groups with --host-blocks: a hybrid model's host tier is not modelled");
      check(
          hostMsPerBlock >= 0 && Double.isFinite(hostMsPerBlock),
          "--host-ms-per-block must be >= 0, got " + hostMsPerBlock);
      kvRole = kvRole == null ? KvRole.NONE : kvRole;
      check(
          kvTransferMsPerBlock >= 0 && Double.isFinite(kvTransferMsPerBlock),
          "--kv-transfer-ms-per-block must be >= 0, got " + kvTransferMsPerBlock);
      Objects.requireNonNull(host, "host");
      Objects.requireNonNull(eventEncoding, "eventEncoding");
      httpStartDelay = httpStartDelay == null ? Duration.ZERO : httpStartDelay;
      zmqStartDelay = zmqStartDelay == null ? Duration.ZERO : zmqStartDelay;
      check(port >= 0 && port <= 65535, "--port must be 0..65535, got " + port);
      check(blockSize >= 1, "--block-size must be >= 1, got " + blockSize);
      check(numGpuBlocks >= 1, "--num-gpu-blocks must be >= 1, got " + numGpuBlocks);
      check(maxNumSeqs >= 1, "--max-num-seqs must be >= 1, got " + maxNumSeqs);
      check(maxModelLen >= 0, "--max-model-len must be >= 0, got " + maxModelLen);
      check(
          (long) maxModelLen <= (long) numGpuBlocks * blockSize,
          "--max-model-len "
              + maxModelLen
              + " is larger than the KV cache holds (--num-gpu-blocks × --block-size = "
              + (long) numGpuBlocks * blockSize
              + " tokens)");
      check(speedup > 0, "--speedup must be > 0, got " + speedup);
      check(defaultMaxTokens >= 1, "--default-max-tokens must be >= 1");
      check(failFraction >= 0 && failFraction <= 1, "--fail-fraction must be in [0, 1]");
      check(dieAfterRequests >= 0, "--die-after-requests must be >= 0");
      check(stallAfterTokens >= 0, "--stall-after-tokens must be >= 0");
      check(
          !httpStartDelay.isNegative() && !zmqStartDelay.isNegative(),
          "start-up delays must be >= 0");
      new TimingModel(prefillBaseMs, prefillMsPer1kTokens, decodeMsPerToken, maxNumSeqs);
    }

    private static void check(boolean ok, String message) {
      if (!ok) throw new IllegalArgumentException(message);
    }

    /** The configuration's timing model. */
    TimingModel timing() {
      return new TimingModel(prefillBaseMs, prefillMsPer1kTokens, decodeMsPerToken, maxNumSeqs);
    }

    /** The context length requests are checked against. */
    public int effectiveMaxModelLen() {
      return maxModelLen > 0
          ? maxModelLen
          : (int) Math.min(Integer.MAX_VALUE, (long) numGpuBlocks * blockSize);
    }

    /** A builder with the defaults of {@code kvrouter mock-engine}, except port 0. */
    public static Builder builder() {
      return new Builder();
    }

    /** A builder starting from this configuration. */
    public Builder toBuilder() {
      Builder b = new Builder();
      b.host = host;
      b.port = port;
      b.modelDir = modelDir;
      b.servedModelName = servedModelName;
      b.blockSize = blockSize;
      b.numGpuBlocks = numGpuBlocks;
      b.maxNumSeqs = maxNumSeqs;
      b.maxModelLen = maxModelLen;
      b.prefillBaseMs = prefillBaseMs;
      b.prefillMsPer1kTokens = prefillMsPer1kTokens;
      b.decodeMsPerToken = decodeMsPerToken;
      b.speedup = speedup;
      b.enablePromptTokensDetails = enablePromptTokensDetails;
      b.kvEvents = kvEvents;
      b.eventEncoding = eventEncoding;
      b.seed = seed;
      b.defaultMaxTokens = defaultMaxTokens;
      b.failFraction = failFraction;
      b.dieAfterRequests = dieAfterRequests;
      b.dieAfter = dieAfter;
      b.httpStartDelay = httpStartDelay;
      b.zmqStartDelay = zmqStartDelay;
      b.stallAfterTokens = stallAfterTokens;
      b.kvRole = kvRole;
      b.kvTransferMsPerBlock = kvTransferMsPerBlock;
      b.hostBlocks = hostBlocks;
      b.hostMsPerBlock = hostMsPerBlock;
      b.kvGroups = kvGroups;
      b.chatTemplate = chatTemplate;
      b.trustRequestChatTemplate = trustRequestChatTemplate;
      b.maxLoras = maxLoras;
      b.loraLoadMs = loraLoadMs;
      return b;
    }
  }

  /** Builds a {@link Config}; every setter is one {@code kvrouter mock-engine} flag. */
  public static final class Builder {
    private String host = "127.0.0.1";
    private int port;
    private Path modelDir;
    private ChatTemplateConfig chatTemplate = ChatTemplateConfig.defaults();
    private boolean trustRequestChatTemplate;
    private String servedModelName;
    private int blockSize = 16;
    private int numGpuBlocks = 4096;
    private int maxNumSeqs = 256;
    private int maxModelLen;
    private double prefillBaseMs = 5;
    private double prefillMsPer1kTokens = 50;
    private double decodeMsPerToken = 20;
    private double speedup = 1;
    private boolean enablePromptTokensDetails;
    private KvEventsConfig kvEvents;
    private EventEncoding eventEncoding = EventEncoding.ARRAY;
    private long seed;
    private int defaultMaxTokens = 64;
    private double failFraction;
    private int dieAfterRequests;
    private Duration dieAfter;
    private Duration httpStartDelay = Duration.ZERO;
    private Duration zmqStartDelay = Duration.ZERO;
    private int stallAfterTokens;
    private KvRole kvRole = KvRole.NONE;
    private double kvTransferMsPerBlock = 0.5;
    private int hostBlocks;
    private double hostMsPerBlock = 0.6;
    private KvCacheGroups kvGroups;
    private int maxLoras;
    private double loraLoadMs = 50;

    private Builder() {}

    /** vLLM's {@code --enable-lora --max-loras v}; 0: LoRA off. */
    public Builder maxLoras(int v) {
      maxLoras = v;
      return this;
    }

    /** Model time to load a LoRA adapter that is not resident. */
    public Builder loraLoadMs(double v) {
      loraLoadMs = v;
      return this;
    }

    public Builder hostBlocks(int v) {
      hostBlocks = v;
      return this;
    }

    /**
     * The KV cache groups of a hybrid model ({@code --kv-groups}, docs/mock-engine.md "Hybrid
     * models"), or null for one full-attention group.
     */
    public Builder kvGroups(KvCacheGroups v) {
      kvGroups = v;
      return this;
    }

    public Builder hostMsPerBlock(double v) {
      hostMsPerBlock = v;
      return this;
    }

    public Builder kvRole(KvRole v) {
      kvRole = v;
      return this;
    }

    public Builder kvTransferMsPerBlock(double v) {
      kvTransferMsPerBlock = v;
      return this;
    }

    public Builder host(String v) {
      host = v;
      return this;
    }

    public Builder port(int v) {
      port = v;
      return this;
    }

    public Builder modelDir(Path v) {
      modelDir = v;
      return this;
    }

    public Builder servedModelName(String v) {
      servedModelName = v;
      return this;
    }

    public Builder blockSize(int v) {
      blockSize = v;
      return this;
    }

    public Builder numGpuBlocks(int v) {
      numGpuBlocks = v;
      return this;
    }

    public Builder maxNumSeqs(int v) {
      maxNumSeqs = v;
      return this;
    }

    public Builder maxModelLen(int v) {
      maxModelLen = v;
      return this;
    }

    public Builder prefillBaseMs(double v) {
      prefillBaseMs = v;
      return this;
    }

    public Builder prefillMsPer1kTokens(double v) {
      prefillMsPer1kTokens = v;
      return this;
    }

    public Builder decodeMsPerToken(double v) {
      decodeMsPerToken = v;
      return this;
    }

    public Builder speedup(double v) {
      speedup = v;
      return this;
    }

    public Builder enablePromptTokensDetails(boolean v) {
      enablePromptTokensDetails = v;
      return this;
    }

    public Builder kvEvents(KvEventsConfig v) {
      kvEvents = v;
      return this;
    }

    public Builder eventEncoding(EventEncoding v) {
      eventEncoding = v;
      return this;
    }

    public Builder seed(long v) {
      seed = v;
      return this;
    }

    public Builder defaultMaxTokens(int v) {
      defaultMaxTokens = v;
      return this;
    }

    public Builder failFraction(double v) {
      failFraction = v;
      return this;
    }

    public Builder dieAfterRequests(int v) {
      dieAfterRequests = v;
      return this;
    }

    public Builder dieAfter(Duration v) {
      dieAfter = v;
      return this;
    }

    public Builder httpStartDelay(Duration v) {
      httpStartDelay = v;
      return this;
    }

    public Builder zmqStartDelay(Duration v) {
      zmqStartDelay = v;
      return this;
    }

    public Builder stallAfterTokens(int v) {
      stallAfterTokens = v;
      return this;
    }

    public Builder chatTemplate(ChatTemplateConfig v) {
      chatTemplate = v;
      return this;
    }

    public Builder trustRequestChatTemplate(boolean v) {
      trustRequestChatTemplate = v;
      return this;
    }

    public Config build() {
      return new Config(
          host,
          port,
          modelDir,
          servedModelName,
          blockSize,
          numGpuBlocks,
          maxNumSeqs,
          maxModelLen,
          prefillBaseMs,
          prefillMsPer1kTokens,
          decodeMsPerToken,
          speedup,
          enablePromptTokensDetails,
          kvEvents,
          eventEncoding,
          seed,
          defaultMaxTokens,
          failFraction,
          dieAfterRequests,
          dieAfter,
          httpStartDelay,
          zmqStartDelay,
          stallAfterTokens,
          kvRole,
          kvTransferMsPerBlock,
          hostBlocks,
          hostMsPerBlock,
          kvGroups,
          chatTemplate,
          trustRequestChatTemplate,
          maxLoras,
          loraLoadMs);
    }
  }

  /**
   * The engine's prefix cache at one instant (the test dump, also {@code GET /mock/cache}).
   *
   * @param blockSize tokens per block
   * @param numGpuBlocks blocks in the pool
   * @param blockHashes every cached block's DESIGN.md §2 sequence hash of its tokens (unsigned
   *     decimal, sorted): the engine's internal name of the block
   * @param engineBlockHashes the same blocks under the engine's own (opaque) wire hashes, as its KV
   *     events name them, in the same order: what a kvrouter index fed with these events holds as
   *     the blocks' {@code block_hash} (it recomputes only the local hashes from the token ids)
   * @param runningRequests requests admitted and not finished
   * @param waitingRequests requests queued
   * @param lastEventSeq sequence number of the last batch handed to the publisher, -1 before any
   * @param evictedBlocks blocks evicted since start
   */
  public record CacheDump(
      int blockSize,
      int numGpuBlocks,
      List<String> blockHashes,
      List<String> engineBlockHashes,
      int runningRequests,
      int waitingRequests,
      long lastEventSeq,
      long evictedBlocks) {}

  /**
   * What the engine measured for one finished or aborted request ({@code GET /mock/requests}).
   * Times are real nanoseconds on the engine's clock; the {@code model*} values are what {@link
   * TimingModel} prescribes in real time (model time divided by the speedup).
   *
   * @param requestId the response id
   * @param promptTokens prompt length
   * @param cachedTokens prompt tokens not computed: those the prefix cache held at admission, plus
   *     those loaded from the host tier (as vLLM's {@code num_cached_tokens} counts a connector's
   *     loaded tokens)
   * @param hostTokens of {@code cachedTokens}, those loaded from the host tier
   * @param outputTokens tokens generated
   * @param queueNanos arrival to admission
   * @param ttftNanos arrival to the first token, as the engine released it
   * @param modelPrefillNanos the prefill time the timing model gives for the uncached tokens, plus
   *     the host tier's load time for {@code hostTokens}
   * @param prefillWaitNanos admission to the start of its prefill (other prefills ahead of it)
   * @param finishReason {@code stop}, {@code length} or {@code abort}
   */
  public record RequestTiming(
      String requestId,
      int promptTokens,
      int cachedTokens,
      int hostTokens,
      int outputTokens,
      long queueNanos,
      long ttftNanos,
      long modelPrefillNanos,
      long prefillWaitNanos,
      String finishReason) {}

  private final Config config;
  private final Tokenizer tokenizer;
  private final EngineMetrics metrics;
  private final KvEventPublisher publisher;
  private final EngineScheduler scheduler;
  private final OpenAiApi api;
  private final WebServer webServer;
  private final int port;
  private final CompletableFuture<Void> listening = new CompletableFuture<>();
  private final CompletableFuture<String> death = new CompletableFuture<>();
  private final Thread starter;
  private final Thread reaper;
  private final AtomicInteger responses = new AtomicInteger();
  private volatile boolean closed;
  private volatile int boundPort;

  private MockEngineServer(Config config) {
    this.config = config;
    this.tokenizer =
        config.modelDir() == null
            ? null
            : Tokenizer.load(
                config.modelDir(), Tokenizer.DEFAULT_CACHE_BYTES, config.chatTemplate());
    String model = modelName(config);
    this.metrics = new EngineMetrics(model, config.numGpuBlocks(), config.blockSize());
    this.publisher =
        config.kvEvents() != null && config.kvEvents().publishes()
            ? new KvEventPublisher(
                config.kvEvents(), config.eventEncoding(), config.zmqStartDelay())
            : null;
    this.scheduler = new EngineScheduler(config, publisher, metrics);
    TextGenerator gen = new TextGenerator(tokenizer, config.seed());
    this.api = new OpenAiApi(config, model, tokenizer, gen, scheduler, metrics, this::responseSent);
    this.port =
        config.port() == 0 && !config.httpStartDelay().isZero() ? freePort() : config.port();
    this.webServer =
        WebServer.builder()
            .host(config.host())
            .port(port)
            .protocolsDiscoverServices(false)
            .addProtocol(Http1Config.builder().build())
            .featuresDiscoverServices(false)
            .shutdownHook(false)
            .shutdownGracePeriod(Duration.ofMillis(200))
            .routing(api::routing)
            .build();
    this.starter = Thread.ofPlatform().daemon().name("mock-engine-start").unstarted(this::listen);
    this.reaper =
        config.dieAfter() == null
            ? null
            : Thread.ofPlatform().daemon().name("mock-engine-reaper").unstarted(this::reap);
  }

  /** The model id this configuration serves. */
  static String modelName(Config c) {
    if (c.servedModelName() != null) return c.servedModelName();
    if (c.modelDir() != null && c.modelDir().getFileName() != null) {
      return c.modelDir().getFileName().toString();
    }
    return "mock";
  }

  /**
   * Starts an engine. Returns once the HTTP listener and the ZMQ sockets are bound, or at once when
   * a start-up delay is configured (they bind in the background on ports already chosen).
   *
   * @throws IllegalArgumentException when the model directory cannot be loaded
   * @throws IllegalStateException when a socket cannot be bound
   */
  public static MockEngineServer start(Config config) {
    // a port taken is one clear exception, before Helidon logs its stack trace and before the
    // tokenizer is loaded
    if (config.port() != 0) checkBindable(config.host(), config.port());
    MockEngineServer s = new MockEngineServer(config);
    try {
      if (s.publisher != null) s.publisher.start();
      s.scheduler.start();
      s.starter.start();
      if (s.reaper != null) s.reaper.start();
      if (config.httpStartDelay().isZero()) s.awaitListening(Duration.ofSeconds(30));
      if (s.publisher != null && config.zmqStartDelay().isZero()) {
        s.publisher.awaitBound(Duration.ofSeconds(30));
      }
      return s;
    } catch (RuntimeException e) {
      s.close();
      throw e;
    }
  }

  /** Binds {@code host:port} once (SO_REUSEADDR, as Helidon's socket) and releases it. */
  private static void checkBindable(String host, int port) {
    InetSocketAddress address = new InetSocketAddress(host, port);
    if (address.isUnresolved()) {
      throw new IllegalStateException(
          "mock engine: cannot listen on " + host + ":" + port + ": unknown host");
    }
    try (ServerSocket probe = new ServerSocket()) {
      probe.setReuseAddress(true);
      probe.bind(address);
    } catch (IOException e) {
      String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      throw new IllegalStateException(
          "mock engine: cannot listen on "
              + host
              + ":"
              + port
              + ": "
              + why
              + " (another process has the port: stop it, or give another --port)",
          e);
    }
  }

  private void listen() {
    try {
      long ms = config.httpStartDelay().toMillis();
      if (ms > 0) Thread.sleep(ms);
      if (closed) return;
      webServer.start();
      if (!webServer.isRunning()) {
        throw new IllegalStateException(
            "mock engine: cannot listen on " + config.host() + ":" + port);
      }
      boundPort = webServer.port();
      listening.complete(null);
    } catch (InterruptedException e) {
      listening.completeExceptionally(e);
    } catch (RuntimeException e) {
      listening.completeExceptionally(e);
    }
  }

  /** A generation response went out whole; --die-after-requests counts these. */
  private void responseSent() {
    int n = config.dieAfterRequests();
    if (n > 0 && responses.incrementAndGet() == n) {
      die("--die-after-requests " + n + " reached");
    }
  }

  private void reap() {
    try {
      Thread.sleep(config.dieAfter().toMillis());
      die("--die-after-seconds elapsed");
    } catch (InterruptedException e) {
      // closed first
    }
  }

  /** Waits until the HTTP listener is bound. */
  public void awaitListening(Duration timeout) {
    try {
      listening.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      throw c instanceof RuntimeException r ? r : new IllegalStateException(c);
    } catch (TimeoutException e) {
      throw new IllegalStateException("mock engine: not listening after " + timeout);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  private static int freePort() {
    try (ServerSocket s = new ServerSocket(0)) {
      s.setReuseAddress(true);
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The configuration. */
  public Config config() {
    return config;
  }

  /** The model id served. */
  public String model() {
    return api.model();
  }

  /** The HTTP port (chosen at start when the configuration said 0). */
  public int port() {
    int b = boundPort;
    return b > 0 ? b : port;
  }

  /** {@code http://host:port}, with 127.0.0.1 for a wildcard host. */
  public String url() {
    String h = config.host();
    if (h.equals("0.0.0.0") || h.equals("::") || h.equals("*")) h = "127.0.0.1";
    if (h.indexOf(':') >= 0) h = "[" + h + "]";
    return "http://" + h + ":" + port();
  }

  /** The PUB socket's address to connect to ({@code tcp://127.0.0.1:port}), or null. */
  public String zmqEndpoint() {
    return publisher == null ? null : publisher.pubEndpoint();
  }

  /** The ROUTER replay socket's address to connect to, or null. */
  public String replayEndpoint() {
    return publisher == null ? null : publisher.replayEndpoint();
  }

  /** The engine's prefix cache now (taken on the engine thread, so consistent). */
  public CacheDump cacheDump() {
    return scheduler.dump();
  }

  /** The timings of the most recent finished or aborted requests, oldest first (at most 1000). */
  public List<RequestTiming> recentRequests() {
    return scheduler.recentTimings();
  }

  /** Whether the engine died (a fault flag, or {@link #kill}). */
  public boolean isDead() {
    return death.isDone();
  }

  /** Completes with the reason when the engine dies (a fault flag, or {@link #kill}). */
  public CompletableFuture<String> death() {
    return death;
  }

  /** Dies at once, as a crashed process: sockets close without draining, requests are cut. */
  public void kill() {
    die("killed");
  }

  private void die(String why) {
    if (!death.complete(why)) return;
    Thread.ofPlatform().daemon().name("mock-engine-death").start(this::close);
  }

  @Override
  public synchronized void close() {
    if (closed) return;
    closed = true;
    death.complete("closed");
    starter.interrupt();
    if (reaper != null) reaper.interrupt();
    try {
      if (webServer.isRunning()) webServer.stop();
    } catch (RuntimeException e) {
      // already stopping
    }
    scheduler.close();
    if (publisher != null) publisher.close();
    if (tokenizer != null) tokenizer.close();
  }

  @Override
  public String toString() {
    return "MockEngineServer[" + url() + ", model=" + model() + "]";
  }
}
