/**
 * The mock engine: an engine model (timing, scheduler, host tier, {@link
 * io.kvrouter.mockengine.EventLoop}) behind vLLM's OpenAI-compatible HTTP API ({@link
 * io.kvrouter.mockengine.MockEngineServer}), publishing KV events over ZMQ as a real engine does
 * ({@link io.kvrouter.mockengine.KvEventsConfig}). The gateway's tests and the benchmarks run it in
 * place of an engine.
 */
package io.kvrouter.mockengine;
