package io.kvrouter.transport.zmq;

import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * An engine's replay service as a {@link Source} uses it: ask for every batch from a sequence
 * number on, then read the answers one by one until the end marker. {@link ReplayClient} is the ZMQ
 * one; tests script others.
 */
interface Replay {
  /**
   * One answer: a batch, the end marker, or a reply of the wrong shape ({@code problem} says what
   * was wrong; null otherwise). {@code payload} is null only in a reply of the wrong shape.
   */
  record Reply(long seq, byte @Nullable [] payload, @Nullable String problem) {
    static final Reply END = new Reply(-1, new byte[0], null);

    boolean isEnd() {
      return problem == null && seq == -1;
    }

    boolean isBad() {
      return problem != null;
    }
  }

  /** Where the answers come from, for log messages. */
  String endpoint();

  /** Asks for every batch from {@code start} on; false when the request could not be queued. */
  boolean request(long start);

  /**
   * The next answer, or {@code null} when none came within {@code timeoutMs} or {@code running}
   * turned false.
   */
  @Nullable Reply next(long timeoutMs, BooleanSupplier running);

  /** Forgets the current request: answers still on their way must never be read. */
  void reset();
}
