/**
 * Request traces in the Mooncake JSONL format: {@link io.kvrouter.sim.trace.TraceReader} reads them
 * (plain or gzip) into {@link io.kvrouter.sim.trace.TraceRequest}s, {@link
 * io.kvrouter.sim.trace.TraceTokens} and {@link io.kvrouter.sim.trace.TracePrompts} turn their hash
 * ids into tokens and prompts, and {@link io.kvrouter.sim.trace.TraceFormatException} names a bad
 * line.
 */
package io.kvrouter.sim.trace;
