package io.kvrouter.discovery;

import java.time.Instant;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A snapshot of a {@link KubernetesDiscovery}: whether it follows the API server, since when it
 * does not, and what it skipped. While disconnected the engines last known stay registered.
 *
 * @param source what is watched ({@link DiscoveryConfig#describe()})
 * @param selector the label selector in force (the InferencePool's once read), or null while an
 *     InferencePool is unknown (not found, not readable, invalid)
 * @param connected whether every watch the discovery needs is open: the pods' (and the
 *     InferencePool's)
 * @param lastSync when the pods were last listed in full (null before the first list)
 * @param disconnectedSince when the discovery last lost (or failed to make) its watches, null while
 *     connected
 * @param lastError the last error (API server unreachable, a refused request, an InferencePool not
 *     found, an engine the sink refused), or null; kept after recovery, see {@code lastErrorAt}
 * @param lastErrorAt when {@code lastError} happened, or null
 * @param engines engines added and not removed
 * @param draining engines removed whose removal has not completed yet
 * @param skippedPods the pods currently skipped, {@code namespace/pod} to why (invalid annotations
 *     or ports)
 * @param invalidPods times a pod was found invalid (a pod counts again when its reason changes)
 * @param addFailures {@link EngineSink#add} calls that threw
 * @param lists full lists of the pods done
 */
public record DiscoveryStatus(
    String source,
    @Nullable String selector,
    boolean connected,
    @Nullable Instant lastSync,
    @Nullable Instant disconnectedSince,
    @Nullable String lastError,
    @Nullable Instant lastErrorAt,
    int engines,
    int draining,
    Map<String, String> skippedPods,
    long invalidPods,
    long addFailures,
    long lists) {

  /** Copies {@code skippedPods}. */
  public DiscoveryStatus {
    skippedPods = Map.copyOf(skippedPods);
  }
}
