package io.kvrouter.tokenize;

import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What an engine says of itself over HTTP: the API dialect it speaks, the model it serves, its
 * context length and its KV cache's capacity and granule. {@link #probe} asks it (docs/gateway.md,
 * "Engine dialects").
 *
 * <pre>
 * Implementation notes
 *
 * probe() is a few GETs (and one POST for an engine no GET identified), in this order, each
 * answer read as JSON values; an answer that is not there (404, not JSON, another shape) only
 * means that probe says nothing:
 *
 *   1. GET /props: an object with default_generation_settings.n_ctx is llama.cpp's server. n_ctx
 *      is one slot's context (the longest prompt it takes: maxModelLen), total_slots the slots;
 *      the KV capacity is n_ctx x total_slots tokens, and the cache reuses prefixes token by token
 *      (granule 1).
 *   2. GET /v1/models: data[0].id is the served model (every data[].id: servedModels, the names
 *      it answers to: vLLM lists each --served-model-name and each LoRA adapter); owned_by "vllm", "sglang" or "llamacpp"
 *      names the dialect; data[0].max_model_len (vLLM, SGLang) or data[0].meta.n_ctx (llama.cpp,
 *      when /props is off) the context length.
 *   3. vLLM: GET /metrics, vllm:cache_config_info's labels num_gpu_blocks and block_size give the
 *      capacity (blocks x block size tokens) and the granule (kvrouter's mock engine publishes it
 *      too). SGLang: GET /get_server_info, max_total_num_tokens and page_size.
 *   4. No owned_by known: POST /tokenize {"prompt": "Hello"} (vLLM's shape); an answer with a
 *      count and as many tokens, at least one, is vLLM's shape (VLLM); anything else UNKNOWN.
 *
 * An engine that cannot be reached at all (refused, timed out), or answers /props or /v1/models
 * with 503 (llama.cpp while it loads its model), is an UnreachableException, so a caller tries
 * again later rather than take it for UNKNOWN. Immutable; probe is safe from any
 * thread.
 * </pre>
 *
 * @param dialect the API it speaks
 * @param servedModel the first model {@code /v1/models} lists, or null
 * @param maxModelLen the longest prompt plus answer it takes, in tokens (llama.cpp: one slot's
 *     context); -1 when it does not say
 * @param kvCapacityTokens the tokens its KV cache holds in all; -1 when it does not say
 * @param cacheGranule the tokens its prefix cache reuses in whole units of (vLLM's block size,
 *     SGLang's page size, 1 for llama.cpp); 0 when it does not say
 * @param servedModels every model name {@code /v1/models} lists (empty when it lists none)
 */
public record EngineApi(
    EngineDialect dialect,
    String servedModel,
    long maxModelLen,
    long kvCapacityTokens,
    int cacheGranule,
    List<String> servedModels) {

  public EngineApi {
    servedModels = servedModels == null ? List.of() : List.copyOf(servedModels);
  }

  /** An engine whose served names are only {@code servedModel} (or none). */
  public EngineApi(
      EngineDialect dialect,
      String servedModel,
      long maxModelLen,
      long kvCapacityTokens,
      int cacheGranule) {
    this(
        dialect,
        servedModel,
        maxModelLen,
        kvCapacityTokens,
        cacheGranule,
        servedModel == null ? List.of() : List.of(servedModel));
  }

  /**
   * Whether a request naming {@code model} is refused by this engine for the name: it speaks vLLM's
   * or SGLang's API (both answer 404 for a model they do not serve; llama.cpp serves any name) and
   * lists its names, none of them {@code model}.
   */
  public boolean refusesModelName(String model) {
    return (dialect == EngineDialect.VLLM || dialect == EngineDialect.SGLANG)
        && !servedModels.isEmpty()
        && !servedModels.contains(model);
  }

  private static final Pattern CACHE_CONFIG =
      Pattern.compile("(?m)^vllm:cache_config_info\\{([^}]*)}");

  /**
   * Asks the engine at {@code engine} (its base URL) what it is; see the implementation notes.
   *
   * @param apiKey sent as {@code Authorization: Bearer KEY}; null for none
   * @throws EngineTokenizer.UnreachableException when the engine cannot be reached
   */
  public static EngineApi probe(URI engine, Duration timeout, String apiKey) {
    return probe(new EngineHttp(engine, timeout, apiKey));
  }

  static EngineApi probe(EngineHttp http) {
    EngineDialect dialect = null;
    String served = null;
    List<String> names = new ArrayList<>();
    long maxLen = -1;
    long capacity = -1;
    int granule = 0;
    // 1. llama.cpp's /props
    EngineHttp.Answer pa = http.get("/props");
    if (pa.status() == 503) throw loading(http, "/props", pa);
    Map<?, ?> props = object(http, pa, "/props");
    if (props != null
        && props.get("default_generation_settings") instanceof Map<?, ?> dgs
        && dgs.get("n_ctx") instanceof Long nCtx) {
      dialect = EngineDialect.LLAMA_CPP;
      long slots = props.get("total_slots") instanceof Long n && n > 0 ? n : 1;
      maxLen = nCtx;
      capacity = nCtx * slots;
      granule = 1;
    }
    // 2. /v1/models
    EngineHttp.Answer v = http.get("/v1/models");
    if (v.status() == 503) throw loading(http, "/v1/models", v);
    Map<?, ?> models = object(http, v, "/v1/models");
    if (models != null
        && models.get("data") instanceof List<?> data
        && !data.isEmpty()
        && data.get(0) instanceof Map<?, ?> first) {
      if (first.get("id") instanceof String id) served = id;
      for (Object o : data) {
        if (o instanceof Map<?, ?> card && card.get("id") instanceof String id) names.add(id);
      }
      EngineDialect named =
          switch (first.get("owned_by") instanceof String o ? o : "") {
            case "vllm" -> EngineDialect.VLLM;
            case "sglang" -> EngineDialect.SGLANG;
            case "llamacpp" -> EngineDialect.LLAMA_CPP;
            default -> null;
          };
      if (dialect == null) dialect = named;
      if (maxLen < 0 && first.get("max_model_len") instanceof Long l) maxLen = l;
      if (maxLen < 0 && first.get("meta") instanceof Map<?, ?> meta) {
        if (meta.get("n_ctx") instanceof Long l) maxLen = l;
      }
    }
    // 3. the capacity, where the engine says it
    if (dialect == EngineDialect.VLLM) {
      EngineHttp.Answer m = http.get("/metrics");
      if (m.status() == 200) {
        long[] cc = cacheConfig(m.body());
        if (cc != null) {
          capacity = cc[0] * cc[1];
          granule = (int) cc[1];
        }
      }
    } else if (dialect == EngineDialect.SGLANG) {
      Map<?, ?> info = object(http, http.get("/get_server_info"), "/get_server_info");
      if (info != null) {
        if (info.get("max_total_num_tokens") instanceof Long t) capacity = t;
        granule = info.get("page_size") instanceof Long p && p > 0 ? (int) (long) p : 1;
      }
    }
    // 4. /tokenize's shape, for an engine nothing named
    if (dialect == null) {
      dialect = EngineDialect.UNKNOWN;
      EngineHttp.Answer t = http.post("/tokenize", Map.of("prompt", "Hello"));
      Map<?, ?> tok = object(http, t, "/tokenize");
      if (tok != null
          && tok.get("tokens") instanceof List<?> ids
          && !ids.isEmpty()
          && tok.get("count") instanceof Long count
          && count == ids.size()) {
        dialect = EngineDialect.VLLM;
      }
    }
    return new EngineApi(dialect, served, maxLen, capacity, granule, names);
  }

  /** The KV capacity in blocks of {@code blockSize} tokens (rounded down); 0 when not known. */
  public long kvBlocks(int blockSize) {
    return kvCapacityTokens <= 0 ? 0 : kvCapacityTokens / blockSize;
  }

  /** One line for logs: dialect, model, context, capacity. */
  public String describe() {
    return dialect.wireName()
        + (servedModel == null ? "" : ", serving '" + servedModel + "'")
        + (maxModelLen > 0 ? ", max_model_len " + maxModelLen : "")
        + (kvCapacityTokens > 0 ? ", KV capacity " + kvCapacityTokens + " tokens" : "")
        + (cacheGranule > 0 ? ", cache granule " + cacheGranule : "");
  }

  /** num_gpu_blocks and block_size of vllm:cache_config_info, or null. */
  static long[] cacheConfig(String metrics) {
    Matcher m = CACHE_CONFIG.matcher(metrics);
    if (!m.find()) return null;
    long blocks = label(m.group(1), "num_gpu_blocks");
    long size = label(m.group(1), "block_size");
    return blocks > 0 && size > 0 ? new long[] {blocks, size} : null;
  }

  private static long label(String labels, String name) {
    Matcher m = Pattern.compile("(?:^|,)\\s*" + name + "=\"([0-9]+)\"").matcher(labels);
    return m.find() ? Long.parseLong(m.group(1)) : -1;
  }

  /**
   * An engine that answers 503 (llama.cpp while it loads its model) is not known yet: asked again
   * later, not taken for one of no known dialect.
   */
  private static EngineTokenizer.UnreachableException loading(
      EngineHttp http, String path, EngineHttp.Answer a) {
    return new EngineTokenizer.UnreachableException(
        "engine at "
            + http.uri(path)
            + " is not ready (HTTP 503: "
            + EngineHttp.abbrev(a.body())
            + ")",
        null);
  }

  /** A 200 answer's JSON object, or null (another status, not JSON, not an object). */
  private static Map<?, ?> object(EngineHttp http, EngineHttp.Answer a, String path) {
    if (a.status() != 200) return null;
    try {
      return http.json(path, a) instanceof Map<?, ?> m ? m : null;
    } catch (TokenizerException e) {
      return null;
    }
  }
}
