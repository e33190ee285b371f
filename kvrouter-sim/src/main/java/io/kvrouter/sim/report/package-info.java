/**
 * The reports of a simulation: text, JSON and HTML for a fleet's policies, and the disaggregation
 * comparison ({@link io.kvrouter.sim.report.PdReport}).
 */
package io.kvrouter.sim.report;
