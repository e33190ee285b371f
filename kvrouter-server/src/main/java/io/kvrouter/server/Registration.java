package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.transport.kvevents.ClearScope;

/**
 * One registered worker rank of one index, as {@code POST /register} gave it.
 *
 * @param worker the instance id and dp rank
 * @param endpoint the ZMQ address its KV events are published on, or null
 * @param replayEndpoint the address that replays missed events, or null
 * @param topic the ZMQ topic its engine publishes with ({@code ""}: any), or null without endpoint
 * @param engineBlockSize tokens per block of the rank's events: the index's block size, or with an
 *     endpoint a multiple of it (the engine's blocks are split into router blocks)
 * @param capacityBlocks KV blocks of {@code engineBlockSize} tokens the rank can hold (for the busy
 *     fraction), 0 when unknown; given at registration, not what it holds now
 * @param listener the ZMQ subscriber that feeds this rank's events into the index, or null when its
 *     events come through {@code POST /events}
 * @param baseUrl the engine's OpenAI HTTP base URL ({@code http://host:port}, no trailing slash)
 *     that the gateway forwards to, or null (the rank is then never forwarded to)
 * @param role prefill, decode or both (docs/routing.md, Disaggregated serving)
 * @param clearScope the tiers the engine's {@code AllBlocksCleared} empties (with an endpoint)
 * @param kvSource how the router knows what the rank caches: its events, or its own predictions
 *     (decided at registration: Registry.kvSource)
 */
record Registration(
    Worker worker,
    String endpoint,
    String replayEndpoint,
    String topic,
    int engineBlockSize,
    long capacityBlocks,
    ZmqListener listener,
    String baseUrl,
    EngineRole role,
    ClearScope clearScope,
    KvSource kvSource) {

  /**
   * This registration as the {@code POST /register} request that makes it, for {@code key} with
   * index block size {@code blockSize} (a request for the same rank with other fields is another
   * registration; a field added to both records must be passed on here).
   */
  Requests.Register request(ModelKey key, int blockSize) {
    return new Requests.Register(
        key,
        blockSize,
        worker,
        endpoint,
        replayEndpoint,
        topic,
        engineBlockSize,
        capacityBlocks,
        baseUrl,
        role,
        clearScope,
        kvSource);
  }

  /**
   * How this rank's events reach the index: {@code "none"} for a rank tracked by predictions;
   * {@code "http"} when it has no endpoint (a publisher posts them to {@code /events}); else the
   * state of its ZMQ subscriber ({@code "connecting"}, {@code "connected"}, {@code
   * "disconnected"}). The answers report {@code "nats"} instead when the index follows a NATS
   * subject.
   */
  String ingestion() {
    if (kvSource == KvSource.PREDICTED) return "none";
    return listener == null ? "http" : listener.state();
  }
}
