/**
 * JSON codecs: router events as the HTTP and NATS paths carry them ({@link
 * io.kvrouter.transport.json.RouterEventJson}), token-id arrays and unsigned 64-bit numbers, each
 * refusing bad input with a precise {@link io.kvrouter.transport.json.EventDecodeException}.
 */
@NullMarked
package io.kvrouter.transport.json;

import org.jspecify.annotations.NullMarked;
