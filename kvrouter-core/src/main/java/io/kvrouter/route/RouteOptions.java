package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.HashSet;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Per-request routing options.
 *
 * @param loraName LoRA adapter the request uses; salts the block hashes (DESIGN.md §2), so only
 *     blocks cached for the same adapter match. {@code null} or empty: none
 * @param namespace cache namespace; salts the block hashes like {@code loraName}. {@code null} or
 *     empty: none
 * @param allowedWorkerIds worker ids (every dp rank of each) the request may go to; {@code null}
 *     means any registered worker. An empty set allows none (the decision is {@link
 *     RouteDecision.NoWorkers})
 * @param affinity the worker rank the request's session is bound to (docs/gateway.md, "Sessions"),
 *     which the {@code session} scorer ({@link Scorers#SESSION}) prefers; {@code null}: none
 */
public record RouteOptions(
    @Nullable String loraName,
    @Nullable String namespace,
    @Nullable Set<Long> allowedWorkerIds,
    @Nullable Worker affinity) {
  private static final RouteOptions DEFAULTS = new RouteOptions(null, null, null, null);

  /** Options without a session affinity. */
  public RouteOptions(
      @Nullable String loraName, @Nullable String namespace, @Nullable Set<Long> allowedWorkerIds) {
    this(loraName, namespace, allowedWorkerIds, null);
  }

  public RouteOptions {
    loraName = loraName == null || loraName.isEmpty() ? null : loraName;
    namespace = namespace == null || namespace.isEmpty() ? null : namespace;
    allowedWorkerIds = allowedWorkerIds == null ? null : Set.copyOf(allowedWorkerIds);
  }

  /** No salt, any worker. */
  public static RouteOptions defaults() {
    return DEFAULTS;
  }

  /** These options with a LoRA adapter name. */
  public RouteOptions withLora(String loraName) {
    return new RouteOptions(loraName, namespace, allowedWorkerIds, affinity);
  }

  /** These options with a cache namespace. */
  public RouteOptions withNamespace(String namespace) {
    return new RouteOptions(loraName, namespace, allowedWorkerIds, affinity);
  }

  /** These options restricted to the given worker ids (all their dp ranks). */
  public RouteOptions withAllowedWorkers(long... workerIds) {
    Set<Long> ids = new HashSet<>();
    for (long id : workerIds) ids.add(id);
    return new RouteOptions(loraName, namespace, ids, affinity);
  }

  /** These options with the rank the request's session is bound to ({@code null}: none). */
  public RouteOptions withAffinity(@Nullable Worker affinity) {
    return new RouteOptions(loraName, namespace, allowedWorkerIds, affinity);
  }

  /** Whether {@code workerId} may receive the request. */
  public boolean allows(long workerId) {
    return allowedWorkerIds == null || allowedWorkerIds.contains(workerId);
  }

  boolean hasSalt() {
    return loraName != null || namespace != null;
  }
}
