/**
 * vLLM's and SGLang's KV event batches as they come off the wire (msgpack): {@link
 * io.kvrouter.transport.kvevents.KvEventDecoder} reads a batch into {@link
 * io.kvrouter.transport.kvevents.EngineEvent}s, and {@link
 * io.kvrouter.transport.kvevents.EngineEventConverter} turns them into router events, each with its
 * storage tier.
 */
@NullMarked
package io.kvrouter.transport.kvevents;

import org.jspecify.annotations.NullMarked;
