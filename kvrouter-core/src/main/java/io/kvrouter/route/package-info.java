/**
 * Routing (DESIGN.md §6): {@link io.kvrouter.route.KvRouter} picks a worker for a prompt from the
 * index's overlap and each rank's load (a {@link io.kvrouter.route.WorkerSelector} over the
 * candidates' costs), tracks the requests in flight, predicts caches in approximate mode and shares
 * its load with peer replicas through {@link io.kvrouter.route.SequenceSync}; {@link
 * io.kvrouter.route.PairRouter} routes prefill and decode in a disaggregated fleet. {@link
 * io.kvrouter.route.RoutingSettings} is the one settings value the server, the simulator and the
 * commands share.
 */
@NullMarked
package io.kvrouter.route;

import org.jspecify.annotations.NullMarked;
