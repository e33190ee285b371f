package io.kvrouter.mockengine;

import java.util.PriorityQueue;

/**
 * A discrete-event loop over simulated time: actions scheduled at a time run in time order, ties in
 * the order they were scheduled. Nothing sleeps; one thread runs everything.
 *
 * <pre>
 * Implementation notes
 *
 * A binary heap of (time, sequence, action). The sequence number makes the order total, so a run
 * is a pure function of its inputs and seed. now() is the time of the action running (or of the
 * last one run); scheduling in the past is a bug and throws.
 * </pre>
 */
public final class EventLoop {
  private record Item(long time, long seq, Runnable action) {}

  private final PriorityQueue<Item> queue =
      new PriorityQueue<>(
          (a, b) -> a.time != b.time ? Long.compare(a.time, b.time) : Long.compare(a.seq, b.seq));
  private long now;
  private long seq;
  private long executed;

  /** The current simulated time in nanoseconds. */
  public long now() {
    return now;
  }

  /** Runs {@code action} at simulated time {@code time} (≥ now). */
  public void at(long time, Runnable action) {
    if (time < now) {
      throw new IllegalArgumentException("cannot schedule at " + time + " ns, before now " + now);
    }
    queue.add(new Item(time, seq++, action));
  }

  /** Runs {@code action} {@code delay} nanoseconds from now. */
  public void after(long delay, Runnable action) {
    at(now + delay, action);
  }

  /** Runs scheduled actions in order until none is left. */
  public void run() {
    Item it;
    while ((it = queue.poll()) != null) {
      now = it.time;
      executed++;
      it.action.run();
    }
  }

  /** Actions run so far. */
  public long executed() {
    return executed;
  }
}
