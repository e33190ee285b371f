package io.kvrouter.transport;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Counters, one slot per constant of an enum, each written by one thread at a time and read by any:
 * the storage behind the transports' statistics records ({@code IngestStats} of the ZMQ subscriber,
 * {@code NatsReplicaStats} of the NATS replica). Transport-internal; public only because both
 * packages use it.
 *
 * <pre>
 * Implementation notes
 *
 * One AtomicLongArray slot per constant, by ordinal. A slot has a single writer at a time (the
 * owner says which thread: e.g. the subscriber's thread, or a replica's snapshot thread for its
 * snapshot slots), so an increment is a plain read and a release store, without a
 * read-modify-write; readers use acquire loads, so a reader sees a value at least as new as
 * anything the writer published before it. values() reads slot by slot: a reader may see one
 * slot newer than another, never a torn or decreasing value.
 * </pre>
 *
 * @param <E> the enum naming the slots
 */
public final class SingleWriterCounters<E extends Enum<E>> {
  private final AtomicLongArray slots;

  /** Zeroed counters, one per constant of {@code type}. */
  public SingleWriterCounters(Class<E> type) {
    this.slots = new AtomicLongArray(type.getEnumConstants().length);
  }

  /** Adds one; returns the new value. Only the slot's writing thread. */
  public long inc(E c) {
    return add(c, 1);
  }

  /** Adds {@code n}; returns the new value. Only the slot's writing thread. */
  public long add(E c, long n) {
    int i = c.ordinal();
    long v = slots.getPlain(i) + n;
    slots.setRelease(i, v);
    return v;
  }

  /** The slot's current value; any thread. */
  public long get(E c) {
    return slots.getAcquire(c.ordinal());
  }

  /** Every slot's value, by ordinal; any thread. */
  public long[] values() {
    long[] v = new long[slots.length()];
    for (int i = 0; i < v.length; i++) v[i] = slots.getAcquire(i);
    return v;
  }

  /** Whether the {@code n}-th occurrence of a kind is logged: the first ten, then every 1000th. */
  public static boolean shouldLog(long n) {
    return n <= 10 || n % 1000 == 0;
  }
}
