package io.kvrouter.route;

import io.kvrouter.event.Worker;

/**
 * The load a {@link KvRouter} tracks for one worker rank: what its requests in flight hold.
 *
 * @param worker the worker rank
 * @param activeBlocks distinct KV blocks held by its requests in flight (a block shared by several
 *     requests counts once)
 * @param activePrefillTokens prefill tokens of requests not yet marked prefill-complete
 * @param requests requests in flight
 */
public record WorkerLoad(Worker worker, int activeBlocks, long activePrefillTokens, int requests) {
  /** Whether nothing is in flight. */
  public boolean isIdle() {
    return activeBlocks == 0 && activePrefillTokens == 0 && requests == 0;
  }
}
