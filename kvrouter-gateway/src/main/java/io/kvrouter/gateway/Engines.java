package io.kvrouter.gateway;

import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost;
import io.kvrouter.tokenize.EngineApi;
import io.kvrouter.tokenize.EngineDialect;
import io.kvrouter.tokenize.EngineTokenizer;
import java.net.URI;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.logging.Level;

/**
 * What the gateway keeps per engine (per base URL): its state (health, circuit breaker), what its
 * API says of itself (dialect, context length, KV capacity: {@link EngineApi}) and the tokenizers
 * that delegate to it, made on first sight and dropped by {@link #prune} once the engine is no
 * longer registered.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: states maps a base URL to its EngineState; apis a base URL to its EngineApi once
 * a probe answered; probing a base URL to the probe running now (one at a time per URL: learn()
 * puts its future with putIfAbsent before it starts the probe's virtual thread, which removes it
 * when done, so a failed probe is tried again by the next learn()); tokenizers maps base URL +
 * NUL + model name to the EngineTokenizer of that engine and model (NUL cannot occur in either).
 * All are ConcurrentHashMaps: request threads add to them (engine(), tokenizer(), learn()), the
 * health checker's thread reads the states, learns engines not known yet and prunes them all at
 * every round. An entry made for an engine that was just unregistered lives until the next
 * round's prune.
 *
 * Learning an engine (learn): at its registration (the server's registered hook, and
 * synchronously for a static --engine), at each health round until a probe answers, and by the
 * first request that needs its dialect. A probe that answers sets the KV capacity of every rank
 * at that URL whose registration gave none (KvRouter.setKvBlocks, in the index's blocks).
 *
 * Served names (servedNames): a probe that answers also checks the names the engine serves
 * (GET /v1/models) against the model each rank at that URL was registered for. An engine of
 * vLLM's or SGLang's API that does not serve the registered name would answer every request with
 * 404, so its ranks are unregistered (on the probe's thread, after the registry's lock is
 * released), a warning names both names and --served-model-name, and refusals keeps the message
 * per model name for the 503 a request for that model then gets (dropped when an engine of the
 * model registers and passes the check). The check runs when the engine is learnt: at once when it
 * answers at registration, else at the first health round it answers.
 * </pre>
 */
final class Engines {
  private final GatewayConfig config;
  private final ConcurrentHashMap<String, EngineState> states = new ConcurrentHashMap<>();
  private final Map<String, EngineTokenizer> tokenizers = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, EngineApi> apis = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, CompletableFuture<EngineApi>> probing =
      new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, String> refusals = new ConcurrentHashMap<>();

  Engines(GatewayConfig config) {
    this.config = config;
  }

  /** Told the path of each probe answer refused for its size (the gateway counts them). */
  private volatile Consumer<String> answerTooLarge = path -> {};

  void onAnswerTooLarge(Consumer<String> c) {
    answerTooLarge = c;
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
        k ->
            new EngineTokenizer(
                URI.create(baseUrl),
                model,
                config.engineTimeout(),
                config.engineApiKey(),
                apis.get(baseUrl)));
  }

  /** What the engine at {@code baseUrl} says of itself, or null when no probe answered yet. */
  EngineApi api(String baseUrl) {
    return apis.get(baseUrl);
  }

  /**
   * Learns the engine at {@code baseUrl} (see the implementation notes): the future of its probe,
   * completed with its API, or with null when it could not be reached (tried again later).
   */
  CompletableFuture<EngineApi> learn(String baseUrl, ServerHost host) {
    EngineApi known = apis.get(baseUrl);
    if (known != null) return CompletableFuture.completedFuture(known);
    CompletableFuture<EngineApi> mine = new CompletableFuture<>();
    CompletableFuture<EngineApi> running = probing.putIfAbsent(baseUrl, mine);
    if (running != null) return running;
    Thread.ofVirtual()
        .name("kvrouter-engine-probe")
        .start(
            () -> {
              EngineApi a = null;
              try {
                a = EngineApi.probe(URI.create(baseUrl), probeTimeout(), config.engineApiKey());
                Gateway.LOG.info("engine " + baseUrl + ": " + a.describe());
                if (host != null && !servedNames(host, baseUrl, a)) {
                  a = null; // unregistered: learnt again should it register once more
                } else {
                  apis.put(baseUrl, a);
                  if (host != null) capacity(host, baseUrl, a, null);
                }
              } catch (EngineTokenizer.AnswerTooLargeException e) {
                answerTooLarge.accept(e.path());
                Gateway.LOG.warning("engine " + baseUrl + " not probed: " + e.getMessage());
              } catch (RuntimeException e) {
                Gateway.LOG.log(
                    Level.FINE, () -> "engine " + baseUrl + " not probed yet: " + e.getMessage());
              } finally {
                probing.remove(baseUrl, mine);
                mine.complete(a);
              }
            });
    return mine;
  }

  /**
   * Checks the names the engine at {@code baseUrl} serves against the models its ranks were
   * registered for, unregistering the ranks of a model it does not serve (see the class notes).
   *
   * @return whether every rank at that URL passed
   */
  private boolean servedNames(ServerHost host, String baseUrl, EngineApi a) {
    boolean ok = true;
    for (RouterModel m : host.models()) {
      boolean here = false;
      for (RouterModel.Rank r : m.ranks()) here |= baseUrl.equals(r.baseUrl());
      if (!here) continue;
      if (!a.refusesModelName(m.modelName())) {
        refusals.remove(m.modelName());
        continue;
      }
      ok = false;
      String why = servedNameMismatch(baseUrl, m.modelName(), a);
      refusals.put(m.modelName(), why);
      Gateway.LOG.warning(why);
      for (RouterModel.Rank r : m.ranks()) {
        if (!baseUrl.equals(r.baseUrl())) continue;
        try {
          host.unregister(
              m.modelName(), m.routingGroup(), r.worker().workerId(), r.worker().dpRank());
        } catch (ServerHost.HttpError e) {
          // unregistered meanwhile
        }
      }
    }
    return ok;
  }

  /** The message of an engine that does not serve the model it was registered for. */
  static String servedNameMismatch(String baseUrl, String model, EngineApi a) {
    return "engine "
        + baseUrl
        + " was registered for model '"
        + model
        + "' but serves "
        + (a.servedModels().size() == 1
            ? "'" + a.servedModels().get(0) + "'"
            : "only " + a.servedModels())
        + " (GET /v1/models), so it would answer every request 404: it was unregistered. Start it"
        + " with --served-model-name "
        + model
        + " (vLLM's default served name is the model path), or register it under the name it"
        + " serves";
  }

  /**
   * Why the last engine registered for {@code model} was taken out (it did not serve that name), or
   * null.
   */
  String refusal(String model) {
    return refusals.get(model);
  }

  /** A probe's timeout: the engine timeout, at most 10 s (it asks a few small questions). */
  private Duration probeTimeout() {
    Duration ten = Duration.ofSeconds(10);
    return config.engineTimeout().compareTo(ten) < 0 ? config.engineTimeout() : ten;
  }

  /**
   * Sets the KV capacity the engine at {@code baseUrl} reports on its ranks (only {@code only},
   * when not null) whose registration gave none.
   */
  void capacity(ServerHost host, String baseUrl, EngineApi a, RouterModel.Rank only) {
    for (RouterModel m : host.models()) {
      long blocks = a.kvBlocks(m.blockSize());
      if (blocks <= 0) continue;
      for (RouterModel.Rank r : m.ranks()) {
        if (!baseUrl.equals(r.baseUrl()) || (only != null && !only.equals(r))) continue;
        if (m.router().kvBlocks(r.worker()) == 0) m.router().setKvBlocks(r.worker(), blocks);
      }
    }
  }

  /**
   * The dialect of {@code m}'s engines: the first one known among its ranks; null when none is
   * known yet.
   */
  EngineDialect dialect(RouterModel m) {
    for (RouterModel.Rank r : m.ranks()) {
      EngineApi a = r.baseUrl() == null ? null : apis.get(r.baseUrl());
      if (a != null) return a.dialect();
    }
    return null;
  }

  /**
   * The longest context any engine of {@code model} takes, as the engines report it (the smallest
   * of theirs, so that a request that fits fits anywhere); -1 when none reported one.
   */
  long maxModelLen(ServerHost host, String model) {
    long min = -1;
    for (RouterModel m : host.models()) {
      if (!m.modelName().equals(model)) continue;
      for (RouterModel.Rank r : m.ranks()) {
        EngineApi a = r.baseUrl() == null ? null : apis.get(r.baseUrl());
        if (a != null && a.maxModelLen() > 0 && (min < 0 || a.maxModelLen() < min)) {
          min = a.maxModelLen();
        }
      }
    }
    return min;
  }

  /**
   * The longest context an engine of {@code m} takes (the largest of theirs: a prompt longer than
   * it fits none of them); -1 when {@code m} has no engine with a base URL, or one of them has not
   * said its context yet (it might take a longer prompt).
   */
  long largestModelLen(RouterModel m) {
    if (m == null) return -1;
    long max = -1;
    for (RouterModel.Rank r : m.ranks()) {
      if (r.baseUrl() == null) continue;
      EngineApi a = apis.get(r.baseUrl());
      if (a == null || a.maxModelLen() <= 0) return -1;
      max = Math.max(max, a.maxModelLen());
    }
    return max;
  }

  /**
   * The tokens the engine at {@code baseUrl} caches in whole units of (its cache's granule: 1 for
   * llama.cpp), or {@code engineBlockSize} when it does not say.
   */
  int granule(String baseUrl, int engineBlockSize) {
    EngineApi a = apis.get(baseUrl);
    return a != null && a.cacheGranule() > 0 ? a.cacheGranule() : engineBlockSize;
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
    apis.keySet().retainAll(urls);
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
