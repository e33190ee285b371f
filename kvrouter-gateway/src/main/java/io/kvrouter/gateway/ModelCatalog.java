package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.ChatTemplateConfig;
import io.kvrouter.tokenize.Tokenizer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.ToLongFunction;

/**
 * The models the gateway serves: the tokenizer of each {@code --model NAME=DIR} (loaded at start),
 * the LoRA adapters ({@code --lora}), and the models engines registered for; what a request's
 * {@code model} names ({@link #target}) and {@code GET /v1/models}.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: tokenizers maps each configured model name with a directory to its Tokenizer
 * (immutable after the constructor, which loads them all or closes those it loaded and rethrows),
 * each with the model's chat-template settings (GatewayConfig.Chat);
 * a model without a directory has no entry (its engines' /tokenize tokenizes it). The models
 * engines registered for are read live from the server (ServerHost.models()) at each call.
 * Request threads read; close() (the gateway's close, after the server stopped) closes the
 * tokenizers. Thread-safe: Tokenizer is.
 * </pre>
 */
final class ModelCatalog implements AutoCloseable {
  private static final String JSON = "application/json";

  private final GatewayConfig config;
  private final Map<String, Tokenizer> tokenizers;

  /** A model a request names: its base model and LoRA adapter. */
  record Target(String baseModel, String lora, Tokenizer tokenizer) {}

  /**
   * Loads the tokenizer of every configured model with a directory.
   *
   * @throws RuntimeException what Tokenizer.load throws (a TokenizerException for a directory that
   *     cannot be loaded); the tokenizers loaded before it are closed
   */
  ModelCatalog(GatewayConfig config) {
    this.config = config;
    Map<String, Tokenizer> toks = new LinkedHashMap<>();
    try {
      for (Map.Entry<String, Path> e : config.models().entrySet()) {
        if (e.getValue() != null) {
          toks.put(
              e.getKey(),
              Tokenizer.load(
                  e.getValue(), Tokenizer.DEFAULT_CACHE_BYTES, config.chat().forModel(e.getKey())));
        }
      }
    } catch (RuntimeException e) {
      for (Tokenizer t : toks.values()) t.close();
      throw e;
    }
    this.tokenizers = Map.copyOf(toks);
  }

  /**
   * Refuses a chat that brings its own template unless the gateway trusts request templates (vLLM's
   * --trust-request-chat-template), with vLLM's 400 and message.
   */
  void checkTemplate(ChatRequest chat) {
    if (chat != null && !config.chat().trustRequestTemplate() && chat.carriesTemplate()) {
      throw OpenAiError.vllm(400, "BadRequestError", ChatTemplateConfig.UNTRUSTED_REQUEST_TEMPLATE);
    }
  }

  /**
   * What the body's {@code model} names.
   *
   * @throws OpenAiError 404 when the gateway neither serves it (--model, --lora) nor has engines
   *     registered for it
   */
  Target target(ServerHost host, String model, String group) {
    String base = config.loras().getOrDefault(model, model);
    String lora = base.equals(model) ? null : model;
    if (!config.models().containsKey(base) && host.model(base, group) == null) {
      throw new OpenAiError(
          404,
          "invalid_request_error",
          "model_not_found",
          "model",
          "The model `"
              + OpenAiError.echo(model)
              + "` does not exist: this gateway serves "
              + OpenAiError.echo(String.join(", ", servedNames(host)))
              + " (GET /v1/models).");
    }
    return new Target(base, lora, tokenizers.get(base));
  }

  private List<String> servedNames(ServerHost host) {
    Set<String> names = new TreeSet<>(config.models().keySet());
    for (RouterModel m : host.models()) names.add(m.modelName());
    names.addAll(config.loras().keySet());
    return names.isEmpty() ? List.of("(no model yet)") : new ArrayList<>(names);
  }

  /**
   * {@code GET /v1/models}: every model with a registered engine, each followed by its LoRA
   * adapters, with {@code max_model_len} as its engines report it ({@code engineMaxLen}: model name
   * to the smallest of theirs, -1 when none did), else where its tokenizer knows it.
   */
  void models(
      ServerHost host, ToLongFunction<String> engineMaxLen, ServerRequest req, ServerResponse res)
      throws IOException {
    long created = System.currentTimeMillis() / 1000;
    Set<String> served = new TreeSet<>();
    for (RouterModel m : host.models()) {
      for (RouterModel.Rank r : m.ranks()) {
        if (r.baseUrl() != null) {
          served.add(m.modelName());
          break;
        }
      }
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.writeStartObject();
      g.writeStringField("object", "list");
      g.writeArrayFieldStart("data");
      for (String name : served) {
        long maxLen = engineMaxLen.applyAsLong(name);
        card(g, name, null, created, maxLen);
        for (Map.Entry<String, String> l : config.loras().entrySet()) {
          if (l.getValue().equals(name)) card(g, l.getKey(), name, created, maxLen);
        }
      }
      g.writeEndArray();
      g.writeEndObject();
      g.writeRaw('\n');
    }
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(out.toByteArray());
  }

  private void card(JsonGenerator g, String id, String parent, long created, long engineMaxLen)
      throws IOException {
    g.writeStartObject();
    g.writeStringField("id", id);
    g.writeStringField("object", "model");
    g.writeNumberField("created", created);
    g.writeStringField("owned_by", "kvrouter");
    g.writeStringField("root", parent == null ? id : parent);
    if (parent == null) g.writeNullField("parent");
    else g.writeStringField("parent", parent);
    Tokenizer t = tokenizers.get(parent == null ? id : parent);
    if (engineMaxLen > 0) {
      g.writeNumberField("max_model_len", engineMaxLen);
    } else if (t != null && t.modelMaxLength() > 0 && t.modelMaxLength() < Integer.MAX_VALUE) {
      g.writeNumberField("max_model_len", t.modelMaxLength());
    }
    g.writeArrayFieldStart("permission");
    g.writeEndArray();
    g.writeEndObject();
  }

  /** Closes the tokenizers. */
  @Override
  public void close() {
    for (Tokenizer tok : tokenizers.values()) tok.close();
  }
}
