package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.KvSource;
import java.util.List;

/**
 * One index of a running {@link KvRouterServer} as an extension ({@link ServerExtension}, the
 * gateway) sees it: its router, its block size and its registered ranks with their engines' HTTP
 * base URLs. Thread-safe; valid until {@link #closed()} (the last rank unregistered: a later
 * registration makes a new one).
 */
public interface RouterModel {
  /**
   * A registered rank: its worker, the engine's base URL (or null), its block size, its role in a
   * disaggregated fleet and how the router knows what it caches.
   */
  record Rank(
      Worker worker, String baseUrl, int engineBlockSize, EngineRole role, KvSource kvSource) {
    /** A rank fed by KV events. */
    public Rank(Worker worker, String baseUrl, int engineBlockSize, EngineRole role) {
      this(worker, baseUrl, engineBlockSize, role, KvSource.EVENTS);
    }

    /** A rank of role {@code both}, fed by KV events. */
    public Rank(Worker worker, String baseUrl, int engineBlockSize) {
      this(worker, baseUrl, engineBlockSize, EngineRole.BOTH);
    }
  }

  String modelName();

  String routingGroup();

  /** The index's block size (fixed by its first registration). */
  int blockSize();

  /** The router: route, markPrefillCompleted and free requests here. */
  KvRouter router();

  /** The base URL registered for {@code worker}, or null (not registered, or without one). */
  String baseUrl(Worker worker);

  /**
   * Whether another registered rank of this model has {@code worker}'s base URL: one data-parallel
   * engine serving several ranks behind one HTTP server (vLLM's internal load balancer), so a
   * request must name the rank it is for.
   */
  boolean sharesBaseUrl(Worker worker);

  /** The registered ranks, in worker order (a new list on each call). */
  List<Rank> ranks();

  /** The prediction counters of {@code worker}'s rank shown in {@code /workers}. */
  PredictionAccuracy accuracy(Worker worker);

  /**
   * The state of {@code worker}'s KV events listener: {@code "connecting"} until its first
   * connection, then {@code "connected"} or {@code "disconnected"} (ZMQ reconnecting); null when
   * the rank has no ZMQ endpoint or is not registered.
   */
  String listenerState(Worker worker);

  /**
   * Offers a prompt about to be routed to {@code GET /dashboard}'s sample of recent prompts (its
   * hottest shared prefixes). Cheap enough for every request: no lock, no allocation; most prompts
   * are not kept. Prompts with a LoRA name or a cache salt are not sampled.
   */
  default void samplePrompt(int[] tokens, String loraName, String cacheSalt) {}

  /** Whether the index was dropped (its last rank unregistered). */
  boolean closed();
}
