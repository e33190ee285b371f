package io.kvrouter.cli;

import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvrouter mock-engine}: an engine that looks like vLLM on every wire, without a model. */
@Command(
    name = "mock-engine",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Run a mock inference engine that looks like vLLM on every wire a router touches: the"
          + " OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, streamed or not,"
          + " /tokenize, /detokenize, /v1/models, /health, /metrics with vLLM's metric names,"
          + " /reset_prefix_cache) and KV events over ZMQ with replay, as vLLM publishes them.",
      "",
      "It keeps a real prefix cache of --num-gpu-blocks blocks of --block-size tokens, admits up"
          + " to --max-num-seqs requests at once (FIFO queue), prefills one request at a time"
          + " (--prefill-base-ms + --prefill-ms-per-1k-tokens per 1,000 uncached tokens) and"
          + " streams tokens at --decode-ms-per-token, all divided by --speedup. Generated text is"
          + " deterministic (--seed) and decodes with the model's tokenizer.",
      "",
      "For tests: GET /mock/cache dumps the cache (DESIGN.md §2 hashes, and the engine's own),"
          + " GET /mock/requests the engine's timings of recent requests. Exit 1 when a fault"
          + " flag kills it, 2 on bad flags.",
      ""
    })
public final class MockEngineCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = "--host",
      paramLabel = "ADDR",
      defaultValue = "127.0.0.1",
      description = "Address the HTTP listener binds (default: ${DEFAULT-VALUE}; 0.0.0.0: all).")
  String host;

  @Option(
      names = "--port",
      paramLabel = "PORT",
      defaultValue = "8000",
      description = "HTTP port (default: ${DEFAULT-VALUE}, vLLM's).")
  int port;

  @Option(
      names = "--model-dir",
      paramLabel = "DIR",
      description =
          "Hugging Face model directory (tokenizer.json, tokenizer_config.json) for text prompts,"
              + " chat templates and decoded output. Without it only prompts given as token ids"
              + " are accepted.")
  Path modelDir;

  @Option(
      names = "--exit-with-parent",
      description =
          "Stop (as on SIGTERM) when the process that started this one ends, even by SIGKILL:"
              + " for engines started by another program, such as kvrouter bench fleet.")
  boolean exitWithParent;

  @Option(
      names = "--served-model-name",
      paramLabel = "NAME",
      description =
          "Model id of requests and responses (vLLM's flag; default: the model directory's name,"
              + " or \"mock\").")
  String servedModelName;

  @Option(
      names = "--block-size",
      paramLabel = "N",
      defaultValue = "16",
      description = "Tokens per KV block (default: ${DEFAULT-VALUE}).")
  int blockSize;

  @Option(
      names = "--num-gpu-blocks",
      paramLabel = "N",
      defaultValue = "4096",
      description = "KV blocks in the pool (default: ${DEFAULT-VALUE}).")
  int numGpuBlocks;

  @Option(
      names = "--max-num-seqs",
      paramLabel = "N",
      defaultValue = "256",
      description = "Requests running at once, continuous batching (default: ${DEFAULT-VALUE}).")
  int maxNumSeqs;

  @Option(
      names = "--max-model-len",
      paramLabel = "TOKENS",
      defaultValue = "0",
      description =
          "Longest prompt + output; longer requests are a 400 as in vLLM (default: the KV"
              + " pool, --num-gpu-blocks x --block-size).")
  int maxModelLen;

  @Option(
      names = "--prefill-base-ms",
      paramLabel = "MS",
      defaultValue = "5",
      description = "Fixed cost of every prefill, model time (default: ${DEFAULT-VALUE}).")
  double prefillBaseMs;

  @Option(
      names = "--prefill-ms-per-1k-tokens",
      paramLabel = "MS",
      defaultValue = "50",
      description =
          "Prefill cost per 1,000 prompt tokens the prefix cache did not hold (default:"
              + " ${DEFAULT-VALUE}).")
  double prefillMsPer1kTokens;

  @Option(
      names = "--decode-ms-per-token",
      paramLabel = "MS",
      defaultValue = "20",
      description = "Time per output token after the first (default: ${DEFAULT-VALUE}).")
  double decodeMsPerToken;

  @Option(
      names = "--speedup",
      paramLabel = "X",
      defaultValue = "1",
      description = "Run model time X times faster than real time (default: ${DEFAULT-VALUE}).")
  double speedup;

  @Option(
      names = "--default-max-tokens",
      paramLabel = "N",
      defaultValue = "64",
      description =
          "Output length of a chat request without max_tokens / max_completion_tokens, the"
              + " mock's stand-in for the model ending its answer (finish_reason \"stop\";"
              + " completions default to 16 tokens as in vLLM) (default: ${DEFAULT-VALUE}).")
  int defaultMaxTokens;

  @Option(
      names = "--seed",
      paramLabel = "N",
      defaultValue = "0",
      description = "Seeds the generated text and the fault draws (default: ${DEFAULT-VALUE}).")
  long seed;

  @Option(
      names = "--enable-prompt-tokens-details",
      description =
          "Report usage.prompt_tokens_details.cached_tokens, the prompt tokens the prefix cache"
              + " served (omitted when 0), as vLLM's flag does.")
  boolean enablePromptTokensDetails;

  @Option(
      names = "--kv-events-config",
      paramLabel = "JSON",
      description =
          "vLLM's KV events configuration, e.g. '{\"enable_kv_cache_events\":true,"
              + "\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\","
              + "\"replay_endpoint\":\"tcp://*:5558\"}'; also topic, buffer_steps, hwm. Default:"
              + " no events.")
  String kvEventsConfig;

  @Option(
      names = "--kv-events-encoding",
      paramLabel = "FORM",
      defaultValue = "array",
      description =
          "array: every event a positional array (msgspec array_like, older vLLM); map: tagged"
              + " maps (newer vLLM) (default: ${DEFAULT-VALUE}).")
  String kvEventsEncoding;

  @Option(
      names = "--fail-fraction",
      paramLabel = "F",
      defaultValue = "0",
      description =
          "Fault: answer this fraction of generation requests with a 500 before the first byte"
              + " (default: ${DEFAULT-VALUE}).")
  double failFraction;

  @Option(
      names = "--die-after-requests",
      paramLabel = "N",
      defaultValue = "0",
      description =
          "Fault: die (exit 1, sockets closed, streams cut) once N generation responses have"
              + " been sent whole; 0: never (default: ${DEFAULT-VALUE}).")
  int dieAfterRequests;

  @Option(
      names = "--die-after-seconds",
      paramLabel = "S",
      defaultValue = "0",
      description = "Fault: die S seconds after start; 0: never (default: ${DEFAULT-VALUE}).")
  double dieAfterSeconds;

  @Option(
      names = "--http-start-delay-ms",
      paramLabel = "MS",
      defaultValue = "0",
      description =
          "Fault: bind the HTTP listener only after MS milliseconds, as vLLM binds after loading"
              + " its weights (default: ${DEFAULT-VALUE}).")
  long httpStartDelayMs;

  @Option(
      names = "--zmq-start-delay-ms",
      paramLabel = "MS",
      defaultValue = "0",
      description =
          "Fault: bind the ZMQ PUB and replay sockets only after MS milliseconds (default:"
              + " ${DEFAULT-VALUE}).")
  long zmqStartDelayMs;

  @Option(
      names = "--stall-after-tokens",
      paramLabel = "N",
      defaultValue = "0",
      description =
          "Fault: a streamed response stops after N tokens and keeps the connection (and its"
              + " blocks) until the engine stops; 0: never (default: ${DEFAULT-VALUE}).")
  int stallAfterTokens;

  @Option(
      names = "--kv-role",
      paramLabel = "ROLE",
      description =
          "The KV connector role of prefill/decode disaggregation (vLLM's NixlConnector"
              + " protocol): producer (answers kv_transfer_params.do_remote_decode with"
              + " parameters naming its blocks), consumer (pulls the blocks do_remote_prefill"
              + " names), or both; default: none (kv_transfer_params is ignored).")
  String kvRole;

  @Option(
      names = "--kv-transfer-ms-per-block",
      paramLabel = "MS",
      defaultValue = "0.5",
      description =
          "Model time a consumer spends pulling one block it does not cache"
              + " (default: ${DEFAULT-VALUE}).")
  double kvTransferMsPerBlock;

  @Option(
      names = "--host-blocks",
      paramLabel = "N",
      defaultValue = "0",
      description =
          "A host tier (CPU offloading, as vLLM's OffloadingConnector) of N KV blocks: it receives"
              + " the blocks the device evicts (LRU), publishes them as BlockStored/BlockRemoved"
              + " events with medium CPU, and serves the blocks that follow a prompt's device"
              + " prefix at --host-ms-per-block each (default: ${DEFAULT-VALUE}, none).")
  int hostBlocks;

  @Option(
      names = "--enable-lora",
      description =
          "Serve LoRA adapters as vLLM's --enable-lora does: a request naming another model than"
              + " the served one names an adapter, loaded on demand when it is not resident;"
              + " POST /v1/load_lora_adapter and /v1/unload_lora_adapter load and unload;"
              + " /v1/models lists the resident ones (docs/mock-engine.md, \"LoRA adapters\").")
  boolean enableLora;

  @Option(
      names = "--max-loras",
      paramLabel = "K",
      defaultValue = "1",
      description =
          "With --enable-lora, adapters resident at once; loading another evicts the least"
              + " recently used (default: ${DEFAULT-VALUE}, as vLLM's).")
  int maxLoras;

  @Option(
      names = "--lora-load-ms",
      paramLabel = "MS",
      defaultValue = "50",
      description =
          "Model time to load an adapter that is not resident, before the prefill of the request"
              + " that needs it (default: ${DEFAULT-VALUE}).")
  double loraLoadMs;

  @Option(
      names = "--host-ms-per-block",
      paramLabel = "MS",
      defaultValue = "0.6",
      description =
          "Model time to load one block from the host tier (default: ${DEFAULT-VALUE}, as"
              + " simulate's).")
  double hostMsPerBlock;

  @Option(
      names = "--kv-groups",
      paramLabel = "GROUPS",
      description =
          "Serve a hybrid model: its KV cache groups in vLLM's group order, comma-separated:"
              + " full, sliding:<window tokens>, state (or mamba), chunked:<chunk tokens>; e.g."
              + " full,sliding:4096. The --num-gpu-blocks pages are shared by the groups, each"
              + " caching and evicting as vLLM's allocator does, and the KV events carry"
              + " group_idx, kv_cache_spec_kind and kv_cache_spec_sliding_window as vLLM's do"
              + " (docs/mock-engine.md, \"Hybrid models\"). Default: one full-attention group.")
  String kvGroups;

  @Mixin ChatTemplateOptions chatTemplate = new ChatTemplateOptions();

  @Option(
      names = "--trust-request-chat-template",
      description =
          "Use a request's own chat_template (vLLM's flag); without it such a request is refused"
              + " with vLLM's 400.")
  boolean trustRequestChatTemplate;

  /** The configuration these flags give (bad values throw IllegalArgumentException). */
  MockEngineServer.Config config() {
    MockEngineServer.EventEncoding enc =
        switch (kvEventsEncoding) {
          case "array" -> MockEngineServer.EventEncoding.ARRAY;
          case "map" -> MockEngineServer.EventEncoding.MAP;
          default ->
              throw new IllegalArgumentException(
                  "--kv-events-encoding must be array or map, got '" + kvEventsEncoding + "'");
        };
    if (dieAfterSeconds < 0) throw new IllegalArgumentException("--die-after-seconds >= 0");
    return MockEngineServer.Config.builder()
        .host(host)
        .port(port)
        .modelDir(modelDir)
        .servedModelName(servedModelName)
        .blockSize(blockSize)
        .numGpuBlocks(numGpuBlocks)
        .maxNumSeqs(maxNumSeqs)
        .maxModelLen(maxModelLen)
        .prefillBaseMs(prefillBaseMs)
        .prefillMsPer1kTokens(prefillMsPer1kTokens)
        .decodeMsPerToken(decodeMsPerToken)
        .speedup(speedup)
        .enablePromptTokensDetails(enablePromptTokensDetails)
        .kvEvents(kvEventsConfig == null ? null : KvEventsConfig.parse(kvEventsConfig))
        .eventEncoding(enc)
        .seed(seed)
        .defaultMaxTokens(defaultMaxTokens)
        .failFraction(failFraction)
        .dieAfterRequests(dieAfterRequests)
        .dieAfter(
            dieAfterSeconds > 0 ? Duration.ofMillis(Math.round(dieAfterSeconds * 1000)) : null)
        .httpStartDelay(Duration.ofMillis(httpStartDelayMs))
        .zmqStartDelay(Duration.ofMillis(zmqStartDelayMs))
        .stallAfterTokens(stallAfterTokens)
        .kvRole(
            kvRole == null ? MockEngineServer.KvRole.NONE : MockEngineServer.KvRole.parse(kvRole))
        .kvTransferMsPerBlock(kvTransferMsPerBlock)
        .hostBlocks(hostBlocks)
        .hostMsPerBlock(hostMsPerBlock)
        .maxLoras(enableLora ? requirePositive(maxLoras) : 0)
        .loraLoadMs(loraLoadMs)
        .kvGroups(kvGroups == null ? null : KvCacheGroups.parse(kvGroups))
        .chatTemplate(chatTemplate.common(Set.of()))
        .trustRequestChatTemplate(trustRequestChatTemplate)
        .build();
  }

  private static int requirePositive(int maxLoras) {
    if (maxLoras < 1)
      throw new IllegalArgumentException("--max-loras must be >= 1, got " + maxLoras);
    return maxLoras;
  }

  @Override
  public Integer call() {
    PrintWriter err = spec.commandLine().getErr();
    PrintWriter out = spec.commandLine().getOut();
    MockEngineServer.Config c;
    try {
      c = config();
    } catch (IllegalArgumentException e) {
      err.println("kvrouter mock-engine: " + e.getMessage());
      err.flush();
      return 2;
    }
    MockEngineServer s;
    try {
      s = MockEngineServer.start(c);
    } catch (RuntimeException e) {
      err.println("kvrouter mock-engine: " + e.getMessage());
      err.flush();
      return 1;
    }
    CountDownLatch stop = new CountDownLatch(1);
    Thread hook =
        new Thread(
            () -> {
              s.close();
              stop.countDown();
            },
            "mock-engine-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    if (exitWithParent) {
      // the parent's end, however it ends (a SIGKILL runs no hook of its), ends this process
      CompletableFuture<Void> unused =
          ProcessHandle.current()
              .parent()
              .map(ProcessHandle::onExit)
              .orElse(CompletableFuture.completedFuture(null))
              .thenRun(
                  () -> {
                    err.println("kvrouter mock-engine: the parent process ended; stopping");
                    err.flush();
                    System.exit(0);
                  });
    }
    out.println(
        "kvrouter mock-engine: model "
            + s.model()
            + " on "
            + s.url()
            + (s.zmqEndpoint() == null
                ? ""
                : ", KV events on "
                    + s.zmqEndpoint()
                    + (s.replayEndpoint() == null ? "" : " (replay " + s.replayEndpoint() + ")")));
    out.flush();
    String why = s.death().join();
    if (!"closed".equals(why)) {
      err.println("kvrouter mock-engine: died: " + why);
      err.flush();
      return 1;
    }
    try {
      stop.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return 0;
  }
}
