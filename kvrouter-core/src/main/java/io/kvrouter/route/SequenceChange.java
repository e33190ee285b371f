package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.Objects;

/**
 * One change of a router's in-flight bookkeeping, as one replica tells the others ({@link
 * SequenceSync}): a request routed to a rank with its blocks and prefill tokens, its prefill
 * completed, or the request released (freed, expired, or dropped with its rank).
 */
public sealed interface SequenceChange {
  /** The request's id on the replica that routed it. */
  String requestId();

  /**
   * A request routed to {@code worker}, holding the blocks {@code seqHashes} (§2 sequence hashes
   * from the root; not copied, do not change them) and charged {@code prefillTokens}.
   */
  record Routed(String requestId, Worker worker, long[] seqHashes, long prefillTokens)
      implements SequenceChange {
    public Routed {
      Objects.requireNonNull(requestId, "requestId");
      Objects.requireNonNull(worker, "worker");
      Objects.requireNonNull(seqHashes, "seqHashes");
      if (prefillTokens < 0) {
        throw new IllegalArgumentException("prefillTokens must be >= 0, got " + prefillTokens);
      }
    }
  }

  /** The request's prefill is done: its prefill tokens are no longer charged. */
  record PrefillCompleted(String requestId) implements SequenceChange {
    public PrefillCompleted {
      Objects.requireNonNull(requestId, "requestId");
    }
  }

  /**
   * The request left: freed ({@code expired} false, also when dropped with its rank) or expired.
   */
  record Released(String requestId, boolean expired) implements SequenceChange {
    public Released {
      Objects.requireNonNull(requestId, "requestId");
    }
  }
}
