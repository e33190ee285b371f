/**
 * What the transports share: the one check of token ids from the wire ({@link
 * io.kvrouter.transport.TokenIds}) and counters with one writer and any number of readers ({@link
 * io.kvrouter.transport.SingleWriterCounters}). The transports are in the sub-packages: {@code
 * json}, {@code kvevents}, {@code nats} and {@code zmq}.
 */
@NullMarked
package io.kvrouter.transport;

import org.jspecify.annotations.NullMarked;
