package io.kvrouter.server;

import io.kvrouter.event.Worker;

/**
 * One registered worker rank of one index, as {@code POST /register} gave it.
 *
 * @param worker the instance id and dp rank
 * @param endpoint the ZMQ address its KV events are published on, or null
 * @param replayEndpoint the address that replays missed events, or null
 * @param kvBlocks KV blocks the rank can hold (for the busy fraction), 0 when unknown
 */
record Registration(Worker worker, String endpoint, String replayEndpoint, long kvBlocks) {

  /**
   * How this rank's events reach the index: {@code "http"} when it has no endpoint (a publisher
   * posts them to {@code /events}); {@code "not_connected"} when an endpoint is stored but this
   * build has no ZMQ ingestion to connect to it yet.
   */
  String ingestion() {
    return endpoint == null ? "http" : "not_connected";
  }
}
