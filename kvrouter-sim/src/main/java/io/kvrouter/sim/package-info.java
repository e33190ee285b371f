/**
 * Simulated fleets: {@link io.kvrouter.sim.FleetSimulation} and {@link
 * io.kvrouter.sim.PdSimulation} replay a trace against simulated engines under each routing {@link
 * io.kvrouter.sim.Policy} and compare hit rates, latencies and load ({@link
 * io.kvrouter.sim.SimulationResult}). The reports are in {@code io.kvrouter.sim.report}, trace
 * reading in {@code io.kvrouter.sim.trace}.
 */
package io.kvrouter.sim;
