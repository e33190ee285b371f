/**
 * Engines discovered from Kubernetes: the Ready pods a label selector or an InferencePool ({@code
 * inference.networking.k8s.io/v1}) selects in one namespace, each described by its {@code
 * kvrouter.io/*} annotations and named container ports (docs/deploy.md), handed to an {@link
 * io.kvrouter.discovery.EngineSink} as they come and go.
 *
 * <p>The public API: {@link io.kvrouter.discovery.KubernetesDiscovery} (start, status, close),
 * {@link io.kvrouter.discovery.DiscoveryConfig}, {@link io.kvrouter.discovery.EngineSink}, {@link
 * io.kvrouter.discovery.DiscoveredEngine}, {@link io.kvrouter.discovery.RemovalReason} and {@link
 * io.kvrouter.discovery.DiscoveryStatus}. Everything else is package-private.
 */
@NullMarked
package io.kvrouter.discovery;

import org.jspecify.annotations.NullMarked;
