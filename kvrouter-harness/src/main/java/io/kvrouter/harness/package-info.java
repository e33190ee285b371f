/**
 * Benchmark harnesses and load tools: {@link io.kvrouter.harness.TraceBench} (trace replay stress
 * against each index kind), {@link io.kvrouter.harness.FleetBench} (a live fleet of mock engines
 * behind gateways, the trace replayed through them, the router's index checked against every
 * engine's cache), {@link io.kvrouter.harness.ChatFleetBench} ({@code bench fleet --engine-kind
 * llama-cpp}: real llama.cpp servers behind a gateway, a multi-turn chat workload, TTFT and hit
 * rate per policy), {@link io.kvrouter.harness.GatewayBench} (the gateway's overhead) and {@link
 * io.kvrouter.harness.ServeLoad} (a running server under events and queries). Each takes an
 * immutable {@code Settings} record, built from its flags by its command in kvrouter-cli ({@code
 * kvrouter bench trace|fleet|gateway|serve-load}), and writes to the PrintWriters it is given; this
 * package does not depend on picocli. Besides these five and {@link
 * io.kvrouter.harness.TraceWriteCpu} (a main class, run with java -cp), everything here is
 * package-private.
 */
package io.kvrouter.harness;
