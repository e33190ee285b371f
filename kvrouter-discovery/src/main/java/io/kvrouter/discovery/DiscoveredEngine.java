package io.kvrouter.discovery;

import io.kvrouter.route.EngineRole;
import io.kvrouter.transport.kvevents.ClearScope;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One data-parallel rank of an engine found in a Ready pod: what {@code POST /register} needs,
 * resolved from the pod's annotations, its named ports and the {@link DiscoveryConfig}'s defaults
 * (docs/deploy.md). Two engines with the same {@link #id} and other fields are two registrations:
 * the old one is removed (drained) before the new one is added.
 *
 * @param id {@code namespace/pod/rank}: stable for the pod's life, unique among the engines a
 *     discovery reports
 * @param pod {@code namespace/pod}
 * @param podUid the pod's {@code metadata.uid}, or null when it has none
 * @param instanceId the router's instance id: derived from the pod's uid (the same on every rank of
 *     the pod and on every gateway replica that discovers it; a new pod under the same name gets
 *     another one), in 1 .. 2^53-1 so that JSON tools read it exactly
 * @param dpRank the data-parallel rank
 * @param baseUrl {@code http://podIP:port} of the engine's OpenAI API (no trailing slash)
 * @param model the model name the engine serves ({@code kvrouter.io/model}, else the default)
 * @param blockSize tokens per KV block ({@code kvrouter.io/block-size}, else the default)
 * @param eventsEndpoint {@code tcp://podIP:port} of the rank's KV events (port {@code kv-events}
 *     plus the rank, as vLLM offsets it), or null when the pod names no {@code kv-events} port
 * @param replayEndpoint {@code tcp://podIP:port} of the rank's replay socket (port {@code
 *     kv-replay} plus the rank), or null
 * @param topic the ZMQ topic ({@code kvrouter.io/topic}), or null for any
 * @param role prefill, decode or both ({@code kvrouter.io/role}, else the default)
 * @param clearScope what the engine's {@code AllBlocksCleared} empties ({@code
 *     kvrouter.io/all-blocks-cleared}, else {@link ClearScope#DEVICE})
 */
public record DiscoveredEngine(
    String id,
    String pod,
    @Nullable String podUid,
    long instanceId,
    int dpRank,
    String baseUrl,
    String model,
    int blockSize,
    @Nullable String eventsEndpoint,
    @Nullable String replayEndpoint,
    @Nullable String topic,
    EngineRole role,
    ClearScope clearScope) {

  /** Checks the fields that are never null or out of range. */
  public DiscoveredEngine {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(pod, "pod");
    Objects.requireNonNull(baseUrl, "baseUrl");
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(role, "role");
    Objects.requireNonNull(clearScope, "clearScope");
    if (blockSize < 1) throw new IllegalArgumentException("blockSize " + blockSize + " < 1");
    if (dpRank < 0) throw new IllegalArgumentException("dpRank " + dpRank + " < 0");
    if (replayEndpoint != null && eventsEndpoint == null) {
      throw new IllegalArgumentException("replayEndpoint without eventsEndpoint");
    }
  }
}
