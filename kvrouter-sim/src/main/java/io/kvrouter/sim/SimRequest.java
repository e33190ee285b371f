package io.kvrouter.sim;

import io.kvrouter.event.Worker;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceTokens;
import org.jspecify.annotations.Nullable;

/**
 * One trace request on its way through a simulated fleet, with what happened to it. Its prompt
 * tokens are made when first asked for (at arrival, to route it) and kept until {@link
 * #dropTokens()} (when it finishes or is rejected), so the router, the engine's admission, which
 * may be tried again and again while the request waits, and the approx correction share one array:
 * only requests in flight hold tokens.
 */
public final class SimRequest {
  final long id;
  final String routerId;
  public final TraceRequest trace;
  final long arrival;

  int routedOverlapTokens; // what the router expected the chosen rank to hold
  Worker routedTo; // the chosen rank
  int cachedTokens; // what the rank's cache held at admission
  int admissionPredictedTokens = -1; // what the router said that rank held at admission (hybrid)
  int hostTokens; // of those, what its host tier held (loaded, not recomputed)
  long admitted = -1;
  long firstToken = -1;
  long finished = -1;
  boolean rejected;
  boolean storedBlocks; // its admission stored new blocks (MockEngine.abort evicts them)
  long laneStart; // its prefill's start and end on its rank's prefill lane (MockEngine)
  long laneEnd;
  int laneGen; // a prefill end scheduled under another value is void
  int adapter = -1; // the LoRA adapter it names (LoraSimulation), -1: the base model
  private int @Nullable [] tokens; // null before arrival and after the end

  public SimRequest(long id, TraceRequest trace, long arrival) {
    this.id = id;
    this.routerId = Long.toString(id);
    this.trace = trace;
    this.arrival = arrival;
  }

  /** The prompt's tokens (TraceTokens.tokens), made once and kept until {@link #dropTokens()}. */
  int[] tokens() {
    if (tokens == null) {
      tokens = TraceTokens.tokens(trace);
      if (adapter >= 0) {
        // an engine keys its cached blocks by adapter (vLLM: the LoRA is part of each block's
        // hash), so no block is shared across adapters: the prompt's ids are remapped per adapter
        final int salt = (adapter + 1) * 0x9E3779B1;
        for (int i = 0; i < tokens.length; i++) tokens[i] ^= salt;
      }
    }
    return tokens;
  }

  /** Lets the tokens go (the request is done with). */
  void dropTokens() {
    tokens = null;
  }

  /** Time to first token in nanoseconds; only after the prefill ended. */
  public long ttftNanos() {
    return firstToken - arrival;
  }
}
