package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.helidon.http.HeaderNames;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webclient.api.WebClient;
import io.kvrouter.route.LoraResidency;
import io.kvrouter.route.Scorer;
import io.kvrouter.route.Scorers;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import java.util.logging.Level;

/**
 * The gateway's LoRA placement (docs/gateway.md, "LoRA adapters"): keeps a {@link LoraResidency} of
 * what each engine has resident, from the engines' {@code GET /v1/models} (vLLM lists each adapter
 * as a model whose {@code parent} is the base model) at every health round, from the requests it
 * routes and from the loads it makes; adds its scorer to each router's cost as the {@code lora}
 * term (it reads the request's adapter from the route's options); and, with {@code loadFirst},
 * loads a request's adapter on the chosen engine ({@code POST /v1/load_lora_adapter}) before the
 * request is sent there.
 *
 * <pre>
 * Implementation notes
 *
 * residency is keyed by worker id; every worker id registered at a base URL gets that URL's
 * adapter list. A worker is tracked from the first health round that read its engine's list (an
 * untracked worker costs nothing, as without placement). Threads: the health checker's virtual
 * threads call poll (one per URL); request threads call beforeSend, and the routers the scorer. LoraResidency is
 * thread-safe; nothing else here is mutable.
 *
 * A route records the adapter as used on the chosen worker (LoraResidency.loaded) whether or not
 * the gateway loads it: an engine that serves the request has the adapter resident afterwards
 * (loaded on demand), so the next requests for it stick there even before the next poll. A poll
 * replaces the list with the engine's own; a load the engine refuses as "already loaded" (400)
 * counts as resident; any other failure is logged and the request is sent all the same (the
 * engine may still load it on demand, or answer the error the client should see).
 * </pre>
 */
final class LoraPlacement {
  private final LoraPlacementConfig config;
  private final WebClient client;
  private final String engineApiKey; // null: none
  private final LoraResidency residency;

  LoraPlacement(LoraPlacementConfig config, WebClient client, String engineApiKey) {
    this.config = config;
    this.client = client;
    this.engineApiKey = engineApiKey;
    this.residency = new LoraResidency(config.cost());
  }

  boolean enabled() {
    return config.enabled();
  }

  /** The residency table (tests, /workers-like views). */
  LoraResidency residency() {
    return residency;
  }

  /**
   * {@code base} with the {@code lora} term of the residency (at the weight a {@code --scorer
   * lora=W} gave, else 1); {@code base} itself when placement is off.
   */
  Supplier<WorkerSelector> selector(Supplier<WorkerSelector> base) {
    if (!config.enabled()) return base;
    final Scorer scorer = residency.scorer();
    return () -> WorkerSelector.withTerm(base.get(), Scorers.LORA, 1.0, scorer);
  }

  /**
   * Reads the adapters the engine at {@code baseUrl} has resident and sets them for every worker
   * registered there; a failure is logged and changes nothing. Does nothing when off.
   */
  void poll(ServerHost host, String baseUrl) {
    if (!config.enabled() || host == null) return;
    List<Long> workers = workersAt(host, baseUrl);
    if (workers.isEmpty()) return;
    List<String> adapters;
    try {
      adapters = adapters(baseUrl);
    } catch (RuntimeException e) {
      Gateway.LOG.log(
          Level.FINE, () -> "engine " + baseUrl + ": GET /v1/models failed: " + e.getMessage());
      return;
    }
    for (long w : workers) {
      if (!residency.tracked(w)) residency.track(w, config.maxLoras());
      residency.replace(w, adapters);
    }
  }

  /**
   * Called once a request for {@code adapter} was routed to {@code workerId} at {@code baseUrl},
   * before it is sent: loads the adapter there first when configured to and it is not resident,
   * then records it as used there.
   */
  void beforeSend(String adapter, String baseUrl, long workerId) {
    if (!config.enabled() || adapter == null) return;
    if (config.loadFirst() && !residency.isResident(workerId, adapter)) {
      try {
        load(baseUrl, adapter);
      } catch (RuntimeException e) {
        Gateway.LOG.warning(
            "engine "
                + baseUrl
                + ": loading LoRA adapter '"
                + adapter
                + "' failed ("
                + e.getMessage()
                + "); the request is sent all the same");
      }
    }
    residency.loaded(workerId, adapter);
  }

  /** {@code POST /v1/load_lora_adapter}; 2xx or "already loaded" (400) returns normally. */
  private void load(String baseUrl, String adapter) {
    byte[] body = loadBody(adapter, config.path(adapter));
    HttpClientRequest rq =
        client
            .post()
            .uri(baseUrl + "/v1/load_lora_adapter")
            .header(HeaderNames.CONTENT_TYPE, "application/json");
    if (engineApiKey != null) rq.header(HeaderNames.AUTHORIZATION, "Bearer " + engineApiKey);
    try (HttpClientResponse r = rq.submit(body)) {
      int code = r.status().code();
      String text = text(r.inputStream());
      if (code / 100 == 2) {
        Gateway.LOG.fine(() -> "engine " + baseUrl + ": loaded LoRA adapter '" + adapter + "'");
        return;
      }
      if (code == 400 && text.contains("already been loaded")) return;
      throw new IllegalStateException("POST /v1/load_lora_adapter answered " + code + ": " + text);
    }
  }

  private static byte[] loadBody(String name, String path) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = Json.FACTORY.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("lora_name", name);
      g.writeStringField("lora_path", path);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** {@code GET /v1/models}: the ids of the cards that have a parent (vLLM's LoRA cards). */
  private List<String> adapters(String baseUrl) {
    HttpClientRequest rq = client.get().uri(baseUrl + "/v1/models");
    if (engineApiKey != null) rq.header(HeaderNames.AUTHORIZATION, "Bearer " + engineApiKey);
    try (HttpClientResponse r = rq.request()) {
      if (r.status().code() != 200) {
        throw new IllegalStateException("answered " + r.status().code());
      }
      return parseAdapters(r.inputStream());
    }
  }

  /** The {@code id} of every {@code data[]} entry whose {@code parent} is a string. */
  static List<String> parseAdapters(InputStream in) {
    List<String> out = new ArrayList<>();
    try (JsonParser p = Json.FACTORY.createParser(in)) {
      if (p.nextToken() != JsonToken.START_OBJECT) throw new IllegalStateException("not an object");
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String f = p.currentName();
        JsonToken t = p.nextToken();
        if (!"data".equals(f) || t != JsonToken.START_ARRAY) {
          p.skipChildren();
          continue;
        }
        while (p.nextToken() == JsonToken.START_OBJECT) {
          String id = null;
          boolean child = false;
          while (p.nextToken() == JsonToken.FIELD_NAME) {
            String k = p.currentName();
            JsonToken v = p.nextToken();
            if ("id".equals(k) && v == JsonToken.VALUE_STRING) id = p.getText();
            else if ("parent".equals(k) && v == JsonToken.VALUE_STRING) child = true;
            else p.skipChildren();
          }
          if (id != null && child) out.add(id);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  private static String text(InputStream in) {
    try {
      return new String(in.readNBytes(4096), StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  private static List<Long> workersAt(ServerHost host, String baseUrl) {
    List<Long> out = new ArrayList<>();
    for (RouterModel m : host.models()) {
      for (RouterModel.Rank r : m.ranks()) {
        long w = r.worker().workerId();
        if (baseUrl.equals(r.baseUrl()) && !out.contains(w)) out.add(w);
      }
    }
    return out;
  }
}
