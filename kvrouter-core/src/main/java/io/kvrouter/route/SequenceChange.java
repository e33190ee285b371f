package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.Objects;

/**
 * One change a router replica tells the others ({@link SequenceSync}): of its in-flight bookkeeping
 * (a request routed to a rank with its blocks and prefill tokens, its prefill completed, or the
 * request released: freed, expired, or dropped with its rank), numbered in the replica's change
 * sequence; or, in approximate mode, of its cache model (a {@link Prediction}: blocks predicted on
 * a rank, or an engine's cached-token report), numbered in a sequence of its own.
 */
public sealed interface SequenceChange {

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

  /**
   * A change of approximate mode's cache model, numbered {@code number} (1, 2, ... per incarnation;
   * 0 in a snapshot) apart from the bookkeeping changes: it concerns the engines' caches, not the
   * replica's requests, so it outlives the replica that sent it.
   */
  sealed interface Prediction extends SequenceChange {
    long number();

    Worker worker();

    /** The prompt's local block hashes from the root (not copied, do not change them). */
    long[] localHashes();
  }

  /**
   * {@code worker} now caches the chain of {@code localHashes} (a routed request's full blocks),
   * touched {@code ageMillis} ago (0 when live; a snapshot's chains carry their age).
   */
  record Predicted(long number, Worker worker, long[] localHashes, long ageMillis)
      implements Prediction {
    public Predicted {
      Objects.requireNonNull(worker, "worker");
      Objects.requireNonNull(localHashes, "localHashes");
      if (number < 0 || ageMillis < 0) {
        throw new IllegalArgumentException("number and ageMillis must be >= 0");
      }
    }
  }

  /**
   * {@code worker}'s engine reported {@code cachedBlocks} leading blocks of a prompt cached at
   * admission where the decision predicted {@code predictedBlocks} ({@link
   * KvRouter#observeCachedTokens}); {@code localHashes} are the prompt's first {@code cachedBlocks}
   * local hashes.
   */
  record Corrected(
      long number, Worker worker, long[] localHashes, int predictedBlocks, int cachedBlocks)
      implements Prediction {
    public Corrected {
      Objects.requireNonNull(worker, "worker");
      Objects.requireNonNull(localHashes, "localHashes");
      if (number < 0 || predictedBlocks < 0 || cachedBlocks != localHashes.length) {
        throw new IllegalArgumentException(
            "number, predictedBlocks must be >= 0 and cachedBlocks the hash count");
      }
    }
  }
}
