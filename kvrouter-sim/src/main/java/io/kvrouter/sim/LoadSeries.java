package io.kvrouter.sim;

import java.util.List;

/**
 * Requests in flight (waiting or running) on each rank, sampled over simulated time.
 *
 * @param ranks the rank names, e.g. {@code w3} or {@code w3.1} with dp ranks
 * @param timesSec sample times in simulated seconds
 * @param inFlight {@code inFlight[s][r]}: requests on rank r at sample s
 */
public record LoadSeries(List<String> ranks, double[] timesSec, int[][] inFlight) {}
