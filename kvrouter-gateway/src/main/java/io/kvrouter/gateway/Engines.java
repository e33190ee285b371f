package io.kvrouter.gateway;

import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost;
import io.kvrouter.tokenize.EngineTokenizer;
import java.net.URI;
import java.util.Collection;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What the gateway keeps per engine (per base URL): its state (health, circuit breaker) and the
 * tokenizers that delegate to its {@code /tokenize}, made on first sight and dropped by {@link
 * #prune} once the engine is no longer registered.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: states maps a base URL to its EngineState; tokenizers maps base URL + NUL + model
 * name to the EngineTokenizer of that engine and model (NUL cannot occur in either). Both are
 * ConcurrentHashMaps: request threads add to them (engine(), tokenizer()), the health checker's
 * thread reads the states and prunes both at every round. An entry a request made for an engine
 * that was just unregistered lives until the next round's prune.
 * </pre>
 */
final class Engines {
  private final GatewayConfig config;
  private final ConcurrentHashMap<String, EngineState> states = new ConcurrentHashMap<>();
  private final Map<String, EngineTokenizer> tokenizers = new ConcurrentHashMap<>();

  Engines(GatewayConfig config) {
    this.config = config;
  }

  /** The state of a base URL, or null when none was made yet (tests). */
  EngineState get(String baseUrl) {
    return states.get(baseUrl);
  }

  /** The engine state of a base URL (made on first sight). */
  EngineState engine(String baseUrl) {
    EngineState s = states.get(baseUrl);
    if (s != null) return s;
    return states.computeIfAbsent(
        baseUrl, u -> new EngineState(u, config.breakerFailures(), config.breakerOpen().toNanos()));
  }

  /** An engine of {@code m} that may be used now, or null. */
  String anyUsable(RouterModel m) {
    if (m == null) return null;
    long now = System.nanoTime();
    for (RouterModel.Rank r : m.ranks()) {
      if (r.baseUrl() != null && engine(r.baseUrl()).usable(now)) return r.baseUrl();
    }
    return null;
  }

  /** The engine-delegated tokenizer of an engine (one per base URL and model name). */
  EngineTokenizer tokenizer(String baseUrl, String model) {
    return tokenizers.computeIfAbsent(
        baseUrl + "\u0000" + model,
        k -> new EngineTokenizer(URI.create(baseUrl), model, config.engineTimeout()));
  }

  /** The engine states. */
  Collection<EngineState> states() {
    return states.values();
  }

  /** Engine tokenizers kept (tests). */
  int tokenizerCount() {
    return tokenizers.size();
  }

  /**
   * Drops what the gateway keeps per engine for engines no longer registered: their EngineState,
   * engine tokenizers, prediction windows and metric series (a model's, when its last engine left).
   * Called at every health round, so an engine unregistered (or a fleet whose engines come and go
   * under new ids) leaves nothing behind after one --health-interval-ms; a request in flight to it
   * may make an entry again, which the next round drops.
   *
   * @param predictions the prediction windows, or null before the routes are built
   * @param metrics the gateway's metrics, or null before the routes are built
   * @return the registered base URLs
   */
  Set<String> prune(ServerHost host, PredictionCheck predictions, GatewayMetrics metrics) {
    Set<String> urls = new HashSet<>();
    Set<String> modelUrls = new HashSet<>();
    Set<String> modelEngines = new HashSet<>();
    Set<String> models = new HashSet<>(config.models().keySet());
    for (RouterModel m : host.models()) {
      models.add(m.modelName());
      for (RouterModel.Rank r : m.ranks()) {
        modelEngines.add(m.modelName() + "\u0000" + Long.toUnsignedString(r.worker().workerId()));
        if (r.baseUrl() != null) {
          urls.add(r.baseUrl());
          modelUrls.add(m.modelName() + "\u0000" + r.baseUrl());
        }
      }
    }
    states.keySet().retainAll(urls);
    tokenizers.keySet().removeIf(k -> !urls.contains(k.substring(0, k.indexOf('\u0000'))));
    if (predictions != null) predictions.retain(modelUrls, urls);
    if (metrics != null) {
      metrics.retain(
          (model, engine) ->
              engine.equals("none")
                  ? models.contains(model)
                  : modelEngines.contains(model + "\u0000" + engine));
    }
    return urls;
  }
}
