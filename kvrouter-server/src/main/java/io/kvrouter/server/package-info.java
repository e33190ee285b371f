/**
 * The router service ({@code kvrouter serve}): {@link io.kvrouter.server.KvRouterServer}'s
 * lifecycle, engines registered per model and their indexes, event ingestion over HTTP, ZMQ and
 * NATS, replica links, sequence sync, warm start from a peer, and the metrics. The HTTP edge is in
 * {@code io.kvrouter.server.http}; docs/service.md describes the service.
 */
package io.kvrouter.server;
