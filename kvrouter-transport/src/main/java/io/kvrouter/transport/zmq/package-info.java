/**
 * ZMQ ingestion of engines' KV events: {@link io.kvrouter.transport.zmq.ZmqEventSubscriber}
 * subscribes to each engine ({@link io.kvrouter.transport.zmq.EngineSpec}), notices gaps by
 * sequence number, replays what it missed over the engine's replay socket and hands the batches to
 * an {@link io.kvrouter.transport.zmq.IngestSink}.
 */
@NullMarked
package io.kvrouter.transport.zmq;

import org.jspecify.annotations.NullMarked;
