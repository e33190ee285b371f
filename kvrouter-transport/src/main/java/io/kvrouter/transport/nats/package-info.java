/**
 * The NATS JetStream event bus between router replicas: {@link
 * io.kvrouter.transport.nats.NatsEventPublisher} publishes router events, {@link
 * io.kvrouter.transport.nats.NatsReplica} applies them to a replica's index and keeps the snapshots
 * that let a replica start without the whole history, {@link io.kvrouter.transport.nats.NatsLog}
 * follows a subject, and {@link io.kvrouter.transport.nats.NatsSequenceSync} carries {@code
 * SequenceSync}'s in-flight load between replicas.
 */
@NullMarked
package io.kvrouter.transport.nats;

import org.jspecify.annotations.NullMarked;
