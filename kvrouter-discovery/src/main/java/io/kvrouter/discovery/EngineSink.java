package io.kvrouter.discovery;

import java.util.concurrent.CompletionStage;

/**
 * Where a {@link KubernetesDiscovery} puts the engines it finds: the consumer registers each one as
 * {@code POST /register} would and drains, then unregisters, the ones that go.
 *
 * <p>Both methods are called on the discovery's own thread, one call at a time, never for the same
 * {@link DiscoveredEngine#id} twice without the other in between: {@code add}, then later {@code
 * remove}, then (once the removal's stage completed) perhaps {@code add} again. An engine whose
 * {@code add} threw is not registered: it is offered again after a delay (doubling from the
 * config's {@code retryInitial} up to {@code retryMax}) for as long as its pod stays Ready.
 */
public interface EngineSink {
  /**
   * Registers {@code engine}. May block (a ZMQ connection being made), which delays the discovery's
   * other work by as long.
   *
   * @throws Exception when the engine cannot be registered (counted in {@link
   *     DiscoveryStatus#addFailures()}, reported as {@link DiscoveryStatus#lastError()}, retried)
   */
  void add(DiscoveredEngine engine) throws Exception;

  /**
   * Starts taking {@code engine} out: stop routing new requests to it, let the requests in flight
   * finish (or not: the consumer decides), unregister it. Should return at once; the stage
   * completes when the engine is unregistered. Until it completes, an engine with the same id is
   * not added again; a stage that completes exceptionally counts as completed.
   */
  CompletionStage<Void> remove(DiscoveredEngine engine, RemovalReason reason);
}
