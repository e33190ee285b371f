package io.kvrouter.sim;

import io.kvrouter.event.Worker;
import io.kvrouter.sim.trace.TraceRequest;

/** One trace request on its way through a simulated fleet, with what happened to it. */
public final class SimRequest {
  final long id;
  final String routerId;
  public final TraceRequest trace;
  final long arrival;

  int routedOverlapTokens; // what the router expected the chosen rank to hold
  Worker routedTo; // the chosen rank
  int cachedTokens; // what the rank's cache held at admission
  int hostTokens; // of those, what its host tier held (loaded, not recomputed)
  long admitted = -1;
  long firstToken = -1;
  long finished = -1;
  boolean rejected;

  public SimRequest(long id, TraceRequest trace, long arrival) {
    this.id = id;
    this.routerId = Long.toString(id);
    this.trace = trace;
    this.arrival = arrival;
  }

  /** Time to first token in nanoseconds; only after the prefill ended. */
  public long ttftNanos() {
    return firstToken - arrival;
  }
}
